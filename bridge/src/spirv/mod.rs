//! cubecl-spirv's SPIR-V made into what naga's SPIR-V front end reads.
//!
//! cubecl-spirv (0.12) reaches every buffer through a device address: one
//! `PushConstant` (or `Uniform`) block holds a `PhysicalStorageBuffer`
//! pointer per buffer, and one more for the launch metadata when the kernel
//! has any. The entry function loads each pointer once, at its start, and
//! indexes through it. Neither naga nor WGSL has device addresses, so
//! [`descriptors`] rewrites that into descriptor bindings:
//!
//! - pointer `j` of the block becomes a `StorageBuffer` variable at
//!   `DescriptorSet 0, Binding j` (the metadata last, after the buffers,
//!   where this server binds it);
//! - the loads of the pointers are replaced by those variables, and the
//!   block, its type and its pointer types are dropped;
//! - every `PhysicalStorageBuffer` pointer type becomes a `StorageBuffer`
//!   one, the addressing model `Logical`, the capability and extension
//!   removed;
//! - memory operands of loads and stores are dropped (naga reads at most
//!   one memory-access word, and `Aligned` carries a literal).
//!
//! [`for_naga`] also works around what naga's front end and WGSL back end
//! would otherwise get wrong on cubecl-spirv's output, then checks what is
//! left against [`allow`]'s list:
//!
//! - [`shared_variables`]: cubecl-spirv's shared memory variables are
//!   declared with a pointer-to-pointer type (its implicit-layout path);
//!   they get the pointer type their uses expect.
//! - [`pad_structs`]: naga's WGSL writer drops explicit member offsets, and
//!   cubecl's metadata struct places members at 8-byte offsets; padding
//!   members make the WGSL layout the SPIR-V one.
//! - [`signed_atomics`]: naga's atomic minimum and maximum compare by the
//!   memory's type; memory an `OpAtomicSMin`/`OpAtomicSMax` reaches is
//!   retyped signed (same bytes), its accesses bitcast at the edge.
//! - [`signed_mod`]: naga reads `OpSMod` through floats; it becomes
//!   `OpSRem` and a sign correction.
//! - [`signed_ops`]: cubecl-spirv types every integer unsigned and carries
//!   signedness in the opcode (`OpSDiv`, `OpConvertFToS`, `SAbs`...), while
//!   naga's front end takes the signedness from the operand or result
//!   types: signed operations get their operands and results bitcast to
//!   signed types around them.
//! - [`polyfills`]: what naga reads but cannot express in WGSL, or does not
//!   read: vector `OpLogicalAnd`/`OpLogicalOr` (WGSL's `&&` is scalar) as
//!   `OpSelect`; `OpIsNan`/`OpIsInf` (no WGSL builtin) on 16- and 32-bit
//!   floats as bit tests; 64-bit shift amounts narrowed to u32 (naga's
//!   validator takes them, WGSL does not); 32-bit `OpUMulExtended` and
//!   `OpSMulExtended` (not in naga's front end) from 16-bit halves;
//!   `NonSemantic.DebugPrintf` dropped; function-level `OpUndef` hoisted to
//!   module level.
//! - [`byte_vectors`]: WGSL has no 8-bit integers; cubecl-spirv's minifloat
//!   lowering packs and unpacks bytes through `vec4<u8>` (bitcasts to and
//!   from `u32`, `OpUConvert` to and from `vec4<u32>`, `OpIEqual`), which
//!   become shifts and masks on `vec4<u32>` lanes.
//! - [`clamp_loaded_indices`]: an index read from a buffer into a
//!   function's own array (cubecl's fused reductions index the shape by
//!   the reduce axis from the metadata) is clamped where it is used, as
//!   wgpu's `Checked` clamp would, so the server can prove every other
//!   index of the module and drop wgpu's checks.
//! - [`copy_cross_block_operands`]: a value from another block that a
//!   subgroup instruction reads is copied into the reader's block first
//!   (naga's front end panics spilling it there).
//! - [`allow::check`]: every instruction left is one naga's front end is
//!   known to read right, with the operand types it needs; anything else
//!   fails the compilation, never a silent misreading.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

pub mod allow;
mod atomics;
mod clamps;
mod descriptors;
mod layout;
mod nonfinite;
mod operands;
mod polyfills;
mod signed;
mod special;

#[cfg(test)]
mod tests;

pub use atomics::signed_atomics;
pub use clamps::clamp_loaded_indices;
pub use descriptors::descriptors;
pub use layout::pad_structs;
pub use nonfinite::nonfinite_constants;
pub use operands::copy_cross_block_operands;
pub use polyfills::{byte_vectors, polyfills};
pub use signed::{signed_mod, signed_ops};

/// `module` as naga's SPIR-V front end reads it right: device addresses
/// replaced by descriptor bindings, the workarounds applied, and every
/// instruction left checked against [`allow::check`]'s list. An error says
/// which shape a rewrite did not expect, or which instruction the list
/// refuses.
pub fn for_naga(module: &Module) -> Result<Module, String> {
    let rewrite = |e: String| format!("rewriting the SPIR-V for naga: {e}");
    let (mut m, _) = descriptors(module).map_err(rewrite)?;
    shared_variables(&mut m);
    pad_structs(&mut m).map_err(rewrite)?;
    signed_atomics(&mut m).map_err(rewrite)?;
    signed_mod(&mut m);
    signed_ops(&mut m);
    polyfills(&mut m);
    byte_vectors(&mut m);
    nonfinite_constants(&mut m);
    clamp_loaded_indices(&mut m);
    copy_cross_block_operands(&mut m);
    allow::check(&m)?;
    Ok(m)
}

/// Fresh ids past the module's bound.
fn fresh(m: &mut Module) -> Word {
    let h = m
        .header
        .get_or_insert_with(|| rspirv::dr::ModuleHeader::new(1));
    let id = h.bound;
    h.bound += 1;
    id
}

fn type_map(m: &Module) -> HashMap<Word, Instruction> {
    m.types_global_values
        .iter()
        .filter_map(|i| i.result_id.map(|id| (id, i.clone())))
        .collect()
}

fn id_operand(i: &Instruction, n: usize) -> Option<Word> {
    match i.operands.get(n) {
        Some(Operand::IdRef(id)) => Some(*id),
        _ => None,
    }
}

/// Workgroup variables declared `ptr<Workgroup, ptr<Workgroup, T>>` get
/// the inner pointer type, which is how every use reads them; the outer
/// pointer type goes when nothing else uses it.
pub fn shared_variables(m: &mut Module) {
    let types = type_map(m);
    let mut outer = HashSet::new();
    for inst in &mut m.types_global_values {
        if inst.class.opcode != Op::Variable {
            continue;
        }
        let Some(p) = inst.result_type.and_then(|t| types.get(&t)) else {
            continue;
        };
        if p.class.opcode != Op::TypePointer {
            continue;
        }
        let Some(q) = id_operand(p, 1) else { continue };
        if types
            .get(&q)
            .is_some_and(|q| q.class.opcode == Op::TypePointer)
        {
            outer.insert(p.result_id.unwrap_or(0));
            inst.result_type = Some(q);
        }
    }
    if outer.is_empty() {
        return;
    }
    let used: HashSet<Word> = m
        .all_inst_iter()
        .flat_map(|i| {
            i.result_type
                .into_iter()
                .chain(i.operands.iter().filter_map(|o| match o {
                    Operand::IdRef(id) => Some(*id),
                    _ => None,
                }))
        })
        .collect();
    m.types_global_values.retain(|i| {
        !i.result_id
            .is_some_and(|id| outer.contains(&id) && !used.contains(&id))
    });
}

/// Builds the constants and types a polyfill needs, appended after every
/// existing global (only function bodies use them).
struct Globals {
    types: HashMap<Word, Instruction>,
    new: Vec<Instruction>,
    u32_ty: Option<Word>,
    consts: HashMap<(Word, u32), Word>,
    splats: HashMap<(Word, Word), Word>,
}

impl Globals {
    fn new(m: &Module) -> Self {
        Self {
            types: type_map(m),
            new: Vec::new(),
            u32_ty: None,
            consts: HashMap::new(),
            splats: HashMap::new(),
        }
    }

    fn u32_ty(&mut self, m: &mut Module) -> Word {
        if let Some(t) = self.u32_ty {
            return t;
        }
        let t = self.scalar(m, Op::TypeInt, &[32, 0]);
        self.u32_ty = Some(t);
        t
    }

    /// The boolean type (a new one when the module has none).
    fn bool_ty(&mut self, m: &mut Module) -> Word {
        self.scalar(m, Op::TypeBool, &[])
    }

    /// The scalar type `op` with literal operands `literals`, the module's
    /// own when it has one.
    fn scalar(&mut self, m: &mut Module, op: Op, literals: &[u32]) -> Word {
        let ops: Vec<Operand> = literals.iter().map(|v| Operand::LiteralBit32(*v)).collect();
        if let Some(t) = self
            .types
            .values()
            .find(|t| t.class.opcode == op && t.operands == ops)
        {
            return t.result_id.unwrap_or(0);
        }
        let id = fresh(m);
        let t = Instruction::new(op, None, Some(id), ops);
        self.types.insert(id, t.clone());
        self.new.push(t);
        id
    }

    /// The constant `v` of integer scalar type `scalar` (32 or 64 bits
    /// wide), splat to `ty` when `ty` is a vector of it.
    fn constant(&mut self, m: &mut Module, scalar: Word, ty: Word, v: u32) -> Word {
        let wide = self.width(scalar) == Some(64);
        let c = *self.consts.entry((scalar, v)).or_insert_with(|| {
            let id = fresh(m);
            let literal = if wide {
                Operand::LiteralBit64(u64::from(v))
            } else {
                Operand::LiteralBit32(v)
            };
            self.new.push(Instruction::new(
                Op::Constant,
                Some(scalar),
                Some(id),
                vec![literal],
            ));
            id
        });
        if ty == scalar {
            return c;
        }
        let n = self
            .types
            .get(&ty)
            .and_then(|t| match t.operands.get(1) {
                Some(Operand::LiteralBit32(n)) => Some(*n),
                _ => None,
            })
            .unwrap_or(1);
        *self.splats.entry((ty, c)).or_insert_with(|| {
            let id = fresh(m);
            self.new.push(Instruction::new(
                Op::ConstantComposite,
                Some(ty),
                Some(id),
                (0..n).map(|_| Operand::IdRef(c)).collect(),
            ));
            id
        })
    }

    /// The 32-bit float type (a new one when the module has none).
    fn f32_ty(&mut self, m: &mut Module) -> Word {
        self.scalar(m, Op::TypeFloat, &[32])
    }

    /// `scalar`, or the vector of `n` of it (a new type when the module
    /// has none).
    fn vec_of(&mut self, m: &mut Module, scalar: Word, n: u32) -> Word {
        if n <= 1 {
            return scalar;
        }
        let u = scalar;
        if let Some(t) = self.types.values().find(|t| {
            t.class.opcode == Op::TypeVector
                && t.operands == [Operand::IdRef(u), Operand::LiteralBit32(n)]
        }) {
            return t.result_id.unwrap_or(0);
        }
        let id = fresh(m);
        let t = Instruction::new(
            Op::TypeVector,
            None,
            Some(id),
            vec![Operand::IdRef(u), Operand::LiteralBit32(n)],
        );
        self.types.insert(id, t.clone());
        self.new.push(t);
        id
    }

    /// The vector of `n` u32 (a new type when the module has none).
    fn u32_vec(&mut self, m: &mut Module, n: u32) -> Word {
        let u = self.u32_ty(m);
        self.vec_of(m, u, n)
    }

    /// Bit width of the scalar (or vector component) type `ty`.
    fn width(&self, ty: Word) -> Option<u32> {
        let (s, _) = self.shape(ty)?;
        match self.types.get(&s)?.operands.first() {
            Some(Operand::LiteralBit32(w)) => Some(*w),
            _ => None,
        }
    }

    /// (scalar type, component count) of `ty`.
    fn shape(&self, ty: Word) -> Option<(Word, u32)> {
        let t = self.types.get(&ty)?;
        match t.class.opcode {
            Op::TypeVector => match (t.operands.first(), t.operands.get(1)) {
                (Some(Operand::IdRef(c)), Some(Operand::LiteralBit32(n))) => Some((*c, *n)),
                _ => None,
            },
            _ => Some((ty, 1)),
        }
    }

    fn finish(self, m: &mut Module) {
        m.types_global_values.extend(self.new);
    }
}

fn inst(op: Op, ty: Word, id: Word, args: &[Word]) -> Instruction {
    Instruction::new(
        op,
        Some(ty),
        Some(id),
        args.iter().map(|a| Operand::IdRef(*a)).collect(),
    )
}
