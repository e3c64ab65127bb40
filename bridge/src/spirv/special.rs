//! The checks of the allowlist's special entries ([`Rule::Special`]): the
//! instructions whose reading by naga depends on more than their opcode
//! and operand signedness.

use std::collections::HashMap;

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{
    AddressingModel, Decoration, ExecutionMode, ExecutionModel, MemorySemantics, Op, Scope, Word,
};

use super::allow::{
    Rule, builtin_allowed, decoration_allowed, glsl_rule, refusal, storage_allowed,
};
use super::id_operand;

/// What the checks look up: types and constants by id, every value's type,
/// the GLSL.std.450 import.
pub(super) struct Facts<'a> {
    types: HashMap<Word, &'a Instruction>,
    type_of: HashMap<Word, Word>,
    glsl: Option<Word>,
    debug_info: Option<Word>,
}

impl<'a> Facts<'a> {
    pub(super) fn new(m: &'a Module) -> Self {
        let import = |name: &str| {
            m.ext_inst_imports
                .iter()
                .find(
                    |i| matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s == name),
                )
                .and_then(|i| i.result_id)
        };
        Self {
            types: m
                .types_global_values
                .iter()
                .filter_map(|i| Some((i.result_id?, i)))
                .collect(),
            type_of: m
                .all_inst_iter()
                .filter_map(|i| Some((i.result_id?, i.result_type?)))
                .collect(),
            glsl: import("GLSL.std.450"),
            debug_info: import("NonSemantic.Shader.DebugInfo.100"),
        }
    }

    /// (scalar type instruction, component count) of type `t`.
    fn scalar(&self, t: Word) -> Option<(&'a Instruction, u32)> {
        let i = *self.types.get(&t)?;
        match (i.class.opcode, i.operands.as_slice()) {
            (Op::TypeVector, [Operand::IdRef(c), Operand::LiteralBit32(n)]) => {
                Some((*self.types.get(c)?, *n))
            }
            _ => Some((i, 1)),
        }
    }

    /// Whether type `t` is an integer (or vector of) of the signedness.
    fn int_of(&self, t: Word, signed: bool) -> bool {
        self.scalar(t).is_some_and(|(s, _)| {
            s.class.opcode == Op::TypeInt
                && s.operands.get(1) == Some(&Operand::LiteralBit32(u32::from(signed)))
        })
    }

    pub(super) fn signedness(
        &self,
        i: &Instruction,
        args: &[usize],
        result: bool,
        signed: bool,
    ) -> Result<(), String> {
        let kind = if signed { "a signed" } else { "an unsigned" };
        for &k in args {
            let t = id_operand(i, k).and_then(|v| self.type_of.get(&v).copied());
            if !t.is_some_and(|t| self.int_of(t, signed)) {
                return Err(refusal(
                    i.class.opcode,
                    &format!("operand {k} is not {kind} integer"),
                ));
            }
        }
        if result && !i.result_type.is_some_and(|t| self.int_of(t, signed)) {
            return Err(refusal(
                i.class.opcode,
                &format!("the result is not {kind} integer"),
            ));
        }
        Ok(())
    }

    fn constant(&self, id: Word) -> Option<u32> {
        let c = self.types.get(&id)?;
        match (c.class.opcode, c.operands.first()) {
            (Op::Constant, Some(Operand::LiteralBit32(v))) => Some(*v),
            _ => None,
        }
    }

    /// The type a pointer value points at.
    fn pointee(&self, p: Word) -> Option<Word> {
        id_operand(self.types.get(self.type_of.get(&p)?)?, 1)
    }
}

/// An operand as the disassembler writes it.
fn text(o: Option<&Operand>) -> String {
    match o {
        Some(Operand::LiteralString(s)) => format!("\"{s}\""),
        Some(o) => o.to_string(),
        None => "(none)".into(),
    }
}

/// The checks of [`Rule::Special`] entries.
pub(super) fn special(f: &Facts, i: &Instruction) -> Result<(), String> {
    let op = i.class.opcode;
    let refuse = |why: &str| Err(refusal(op, why));
    match op {
        // naga accepts these extensions (and refuses any other); what
        // they enable is checked instruction by instruction.
        Op::Extension => match i.operands.first() {
            Some(Operand::LiteralString(s))
                if matches!(
                    s.as_str(),
                    "SPV_KHR_vulkan_memory_model"
                        | "SPV_KHR_storage_buffer_storage_class"
                        | "SPV_EXT_shader_atomic_float_add"
                ) =>
            {
                Ok(())
            }
            o => refuse(&format!("extension {}", text(o))),
        },
        // The debug-info set naga skips whole (the SPIR-V spec lets it).
        Op::ExtInstImport => match i.operands.first() {
            Some(Operand::LiteralString(s))
                if s == "GLSL.std.450" || s == "NonSemantic.Shader.DebugInfo.100" =>
            {
                Ok(())
            }
            o => refuse(&format!("instruction set {}", text(o))),
        },
        Op::MemoryModel => match i.operands.first() {
            Some(Operand::AddressingModel(AddressingModel::Logical)) => Ok(()),
            o => refuse(&format!("addressing model {}", text(o))),
        },
        Op::EntryPoint => match i.operands.first() {
            Some(Operand::ExecutionModel(ExecutionModel::GLCompute)) => Ok(()),
            o => refuse(&format!("execution model {}", text(o))),
        },
        Op::ExecutionMode => match i.operands.get(1) {
            Some(Operand::ExecutionMode(ExecutionMode::LocalSize)) => Ok(()),
            o => refuse(&format!("execution mode {}", text(o))),
        },
        Op::Decorate | Op::MemberDecorate => {
            let at = if op == Op::Decorate { 1 } else { 2 };
            match (i.operands.get(at), i.operands.get(at + 1)) {
                (Some(Operand::Decoration(Decoration::BuiltIn)), Some(Operand::BuiltIn(b))) => {
                    if builtin_allowed(*b as u32) {
                        Ok(())
                    } else {
                        refuse(&format!("built-in {b:?}"))
                    }
                }
                (Some(Operand::Decoration(d)), _) if decoration_allowed(*d) => Ok(()),
                (d, _) => refuse(&format!("decoration {}", text(d))),
            }
        }
        // An encoding operand (bfloat16, fp8) naga would not read.
        Op::TypeFloat => match i.operands.as_slice() {
            [Operand::LiteralBit32(16 | 32 | 64)] => Ok(()),
            o => refuse(&format!(
                "float type {}",
                o.iter()
                    .map(|o| o.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
        },
        Op::TypePointer | Op::Variable => match i.operands.first() {
            Some(Operand::StorageClass(s)) if storage_allowed(*s) => Ok(()),
            o => refuse(&format!("storage class {}", text(o))),
        },
        // naga reads one literal word per case.
        Op::Switch => {
            let selector = id_operand(i, 0).and_then(|v| f.type_of.get(&v).copied());
            let width = selector
                .and_then(|t| f.scalar(t))
                .map(|(s, _)| s.operands.first());
            match width {
                Some(Some(Operand::LiteralBit32(32))) => Ok(()),
                _ => refuse("a selector other than a 32-bit integer"),
            }
        }
        // Scalars only: WGSL's `&&` and `||` are.
        Op::LogicalAnd | Op::LogicalOr => {
            let t = i.result_type.and_then(|t| f.scalar(t));
            match t {
                Some((_, 1)) => Ok(()),
                _ => refuse("on vectors"),
            }
        }
        // naga makes a bitcast `As` with no conversion, which keeps the
        // shape: same component count and width only.
        Op::Bitcast => {
            let from = id_operand(i, 0)
                .and_then(|v| f.type_of.get(&v))
                .and_then(|t| f.scalar(*t));
            let to = i.result_type.and_then(|t| f.scalar(t));
            let num = |s: &Instruction| {
                matches!(s.class.opcode, Op::TypeInt | Op::TypeFloat)
                    .then(|| s.operands.first().cloned())
                    .flatten()
            };
            match (from, to) {
                (Some((a, n)), Some((b, k))) if n == k && num(a).is_some() && num(a) == num(b) => {
                    Ok(())
                }
                _ => refuse("between types of different shapes"),
            }
        }
        // Workgroup execution scope, constant, with workgroup or buffer
        // memory semantics (naga writes `workgroupBarrier()` and
        // `storageBarrier()` from them; with neither it writes nothing).
        Op::ControlBarrier => {
            // (rspirv types these operands as scope and semantics ids)
            let id = |k: usize| match i.operands.get(k) {
                Some(Operand::IdScope(c) | Operand::IdMemorySemantics(c)) => f.constant(*c),
                _ => None,
            };
            let (exec, semantics) = (id(0), id(2));
            let memory =
                (MemorySemantics::WORKGROUP_MEMORY | MemorySemantics::UNIFORM_MEMORY).bits();
            match (exec, semantics) {
                (Some(e), Some(s)) if e == Scope::Workgroup as u32 && s & memory != 0 => Ok(()),
                _ => refuse("an execution scope other than the workgroup, or no memory"),
            }
        }
        Op::AtomicSMin | Op::AtomicSMax | Op::AtomicUMin | Op::AtomicUMax => {
            let signed = matches!(op, Op::AtomicSMin | Op::AtomicSMax);
            let pointee = id_operand(i, 0).and_then(|p| f.pointee(p));
            if pointee.is_some_and(|t| f.int_of(t, signed)) {
                Ok(())
            } else {
                refuse("on memory of the other signedness")
            }
        }
        // naga reads it as an atomic add: on 32-bit floats only (the
        // validator refuses 16-bit float atomics itself).
        Op::AtomicFAddEXT => Ok(()),
        Op::ExtInst => {
            let set = id_operand(i, 0);
            if set.is_some() && set == f.debug_info {
                return Ok(());
            }
            let Some(Operand::LiteralExtInstInteger(n)) = i.operands.get(1) else {
                return refuse("no instruction number");
            };
            if set.is_none() || set != f.glsl {
                return refuse(&format!("instruction {n} of an unknown set"));
            }
            let glsl = |why: &str| Err(refusal(op, &format!("GLSL.std.450 instruction {n}{why}")));
            match glsl_rule(*n) {
                None => glsl(""),
                Some(Rule::Signed(args, result)) => f
                    .signedness(
                        i,
                        &args[..(i.operands.len() - 2).min(args.len())],
                        result,
                        true,
                    )
                    .or_else(|e| glsl(&format!(" ({e})"))),
                Some(Rule::Unsigned(args, result)) => f
                    .signedness(
                        i,
                        &args[..(i.operands.len() - 2).min(args.len())],
                        result,
                        false,
                    )
                    .or_else(|e| glsl(&format!(" ({e})"))),
                Some(_) => Ok(()),
            }
        }
        _ => refuse(""),
    }
}
