//! Indices read from a buffer into a function's own array, clamped where
//! they index it.
//!
//! cubecl's fused reductions (`reduce_kernel_broadcasted`,
//! `reduce_kernel_fused`) copy a tensor's shape into a rank-sized private
//! array and index it by a value the launch's metadata holds (the reduce
//! axis): `shape[info[k]]`. No proof can bound a value read from a buffer,
//! so the server's index proof (`wgpu-server/src/launch/indices.rs`) failed
//! on that one access, and the whole module kept wgpu's loop counter and
//! index clamps (11 of the 178 modules burn's bench compiles: its layer
//! norms and softmaxes; docs/burn.md). Every kernel of the bridge is
//! compiled `Checked` (docs/cubecl.md): an index past an array's end is
//! clamped to its last element, silently, by wgpu. This pass makes that
//! same clamp explicit on exactly those accesses, `UMin(index, len - 1)`,
//! so the result is the one wgpu's clamp gives, and the proof bounds the
//! access and can prove the rest of the module.
//!
//! Only an index that is itself a load through a buffer pointer is
//! clamped, into an array, vector or matrix reached through a `Function`
//! or `Private` pointer. Indices computed from thread ids and loop counters
//! are left alone: the proof bounds those, and clamps in unrolled register
//! tiles are what made NVIDIA's compiler take 22 s (docs/burn.md).

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, StorageClass, Word};

use super::{Globals, fresh, id_operand};

/// GLSL.std.450's `UMin`.
const UMIN: u32 = 38;

/// See the module documentation.
pub fn clamp_loaded_indices(m: &mut Module) {
    let mut g = Globals::new(m);
    let pointers: HashMap<Word, (StorageClass, Word)> = g
        .types
        .values()
        .filter(|t| t.class.opcode == Op::TypePointer)
        .filter_map(
            |t| match (t.result_id, t.operands.first(), id_operand(t, 1)) {
                (Some(id), Some(Operand::StorageClass(c)), Some(pointee)) => {
                    Some((id, (*c, pointee)))
                }
                _ => None,
            },
        )
        .collect();
    let typed = |i: &Instruction| i.result_id.zip(i.result_type);
    let mut type_of: HashMap<Word, Word> = m.types_global_values.iter().filter_map(typed).collect();
    type_of.extend(
        m.functions
            .iter()
            .flat_map(|f| f.all_inst_iter())
            .filter_map(typed),
    );
    let class_of = |id: Word| type_of.get(&id).and_then(|t| pointers.get(t)).map(|p| p.0);
    let from_buffer: HashSet<Word> = (m.functions.iter().flat_map(|f| f.all_inst_iter()))
        .filter(|i| i.class.opcode == Op::Load)
        .filter(|i| id_operand(i, 0).and_then(class_of).is_some_and(is_buffer))
        .filter_map(|i| i.result_id)
        .collect();
    if from_buffer.is_empty() {
        return;
    }
    let mut glsl = None;
    for f in 0..m.functions.len() {
        for b in 0..m.functions[f].blocks.len() {
            let mut k = 0;
            while k < m.functions[f].blocks[b].instructions.len() {
                let inst = &m.functions[f].blocks[b].instructions[k];
                let clamps = to_clamp(inst, &g, &pointers, &type_of, &class_of, &from_buffer);
                let mut added = Vec::new();
                for (n, index, ty, len) in clamps {
                    let import = *glsl.get_or_insert_with(|| glsl_import(m));
                    let last = g.constant(m, ty, ty, len - 1);
                    let clamped = fresh(m);
                    added.push(Instruction::new(
                        Op::ExtInst,
                        Some(ty),
                        Some(clamped),
                        vec![
                            Operand::IdRef(import),
                            Operand::LiteralExtInstInteger(UMIN),
                            Operand::IdRef(index),
                            Operand::IdRef(last),
                        ],
                    ));
                    m.functions[f].blocks[b].instructions[k].operands[n] = Operand::IdRef(clamped);
                }
                let n = added.len();
                m.functions[f].blocks[b].instructions.splice(k..k, added);
                k += n + 1;
            }
        }
    }
    g.finish(m);
}

/// Storage classes of buffers (before and after `descriptors`).
fn is_buffer(c: StorageClass) -> bool {
    matches!(
        c,
        StorageClass::StorageBuffer
            | StorageClass::Uniform
            | StorageClass::PushConstant
            | StorageClass::PhysicalStorageBuffer
    )
}

/// The indices of access chain `inst` to clamp: (operand, index, its
/// 32-bit unsigned type, the length it indexes).
fn to_clamp(
    inst: &Instruction,
    g: &Globals,
    pointers: &HashMap<Word, (StorageClass, Word)>,
    type_of: &HashMap<Word, Word>,
    class_of: &dyn Fn(Word) -> Option<StorageClass>,
    from_buffer: &HashSet<Word>,
) -> Vec<(usize, Word, Word, u32)> {
    let mut out = Vec::new();
    if !matches!(inst.class.opcode, Op::AccessChain | Op::InBoundsAccessChain) {
        return out;
    }
    let Some(base) = id_operand(inst, 0) else {
        return out;
    };
    if !matches!(
        class_of(base),
        Some(StorageClass::Function | StorageClass::Private)
    ) {
        return out;
    }
    let Some(mut current) = type_of
        .get(&base)
        .and_then(|p| pointers.get(p))
        .map(|p| p.1)
    else {
        return out;
    };
    for n in 1..inst.operands.len() {
        let Some(index) = id_operand(inst, n) else {
            return out;
        };
        let Some(t) = g.types.get(&current) else {
            return out;
        };
        let (element, len) = match t.class.opcode {
            Op::TypeArray => (
                id_operand(t, 0),
                id_operand(t, 1).and_then(|c| literal(g, c)),
            ),
            Op::TypeVector | Op::TypeMatrix => (id_operand(t, 0), literal_operand(t, 1)),
            Op::TypeStruct => {
                let member = literal(g, index).and_then(|i| id_operand(t, i as usize));
                (member, None)
            }
            _ => return out,
        };
        let ty = type_of.get(&index).copied();
        if let (Some(len), Some(ty)) = (len, ty)
            && len > 0
            && from_buffer.contains(&index)
            && is_u32(g, ty)
        {
            out.push((n, index, ty, len));
        }
        match element {
            Some(e) => current = e,
            None => return out,
        }
    }
    out
}

/// The value of a 32-bit integer constant.
fn literal(g: &Globals, constant: Word) -> Option<u32> {
    g.types
        .get(&constant)
        .filter(|c| c.class.opcode == Op::Constant)
        .and_then(|c| literal_operand(c, 0))
}

fn literal_operand(i: &Instruction, n: usize) -> Option<u32> {
    match i.operands.get(n) {
        Some(Operand::LiteralBit32(v)) => Some(*v),
        _ => None,
    }
}

fn is_u32(g: &Globals, ty: Word) -> bool {
    g.types.get(&ty).is_some_and(|t| {
        t.class.opcode == Op::TypeInt
            && t.operands == [Operand::LiteralBit32(32), Operand::LiteralBit32(0)]
    })
}

/// The module's GLSL.std.450 import (a new one when it has none).
fn glsl_import(m: &mut Module) -> Word {
    let existing = m
        .ext_inst_imports
        .iter()
        .find_map(|i| match i.operands.first() {
            Some(Operand::LiteralString(s)) if s == "GLSL.std.450" => i.result_id,
            _ => None,
        });
    existing.unwrap_or_else(|| {
        let id = fresh(m);
        m.ext_inst_imports.push(Instruction::new(
            Op::ExtInstImport,
            None,
            Some(id),
            vec![Operand::LiteralString("GLSL.std.450".into())],
        ));
        id
    })
}
