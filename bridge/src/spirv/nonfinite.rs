//! 32-bit float constants that are NaN or infinite. WGSL has no such
//! literal: naga's validator refuses one, and in WGSL a const-expression
//! that evaluates to one is a shader-creation error, so even
//! `bitcast<f32>(0x7fc00000u)` is refused. Each becomes a run-time value:
//! its bits in a private `u32` variable, loaded and bitcast at the start
//! of every function that uses the constant (burn's `fmod` kernel returns
//! NaN for a zero divisor this way). A constant composite built of one
//! stays, and naga refuses it, naming it.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, StorageClass, Word};

use super::{Globals, fresh, inst};

/// See the module documentation.
pub fn nonfinite_constants(m: &mut Module) {
    let f32_types: HashSet<Word> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeFloat && i.operands == [Operand::LiteralBit32(32)])
        .filter_map(|i| i.result_id)
        .collect();
    // (constant, its f32 type, its bits)
    let targets: Vec<(Word, Word, u32)> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match (i.result_id, i.result_type, i.operands.first()) {
            (Some(id), Some(ty), Some(Operand::LiteralBit32(bits)))
                if f32_types.contains(&ty) && !f32::from_bits(*bits).is_finite() =>
            {
                Some((id, ty, *bits))
            }
            _ => None,
        })
        .collect();
    if targets.is_empty() {
        return;
    }
    let mut g = Globals::new(m);
    let u32_ty = g.u32_ty(m);
    let ptr = private_pointer(&mut g, m, u32_ty);
    // (constant, its type, the variable holding its bits)
    let mut held = Vec::with_capacity(targets.len());
    let mut variables = Vec::with_capacity(targets.len());
    for (id, ty, bits) in targets {
        let init = g.constant(m, u32_ty, u32_ty, bits);
        let var = fresh(m);
        variables.push(Instruction::new(
            Op::Variable,
            Some(ptr),
            Some(var),
            vec![
                Operand::StorageClass(StorageClass::Private),
                Operand::IdRef(init),
            ],
        ));
        held.push((id, ty, var));
    }
    let mut functions = std::mem::take(&mut m.functions);
    for f in &mut functions {
        let uses: HashSet<Word> = f
            .blocks
            .iter()
            .flat_map(|b| &b.instructions)
            .flat_map(|i| &i.operands)
            .filter_map(|o| match o {
                Operand::IdRef(x) => Some(*x),
                _ => None,
            })
            .collect();
        let mut values: HashMap<Word, Word> = HashMap::new();
        let mut prologue = Vec::new();
        for (id, ty, var) in held.iter().filter(|(id, _, _)| uses.contains(id)) {
            let (bits, value) = (fresh(m), fresh(m));
            prologue.push(inst(Op::Load, u32_ty, bits, &[*var]));
            prologue.push(inst(Op::Bitcast, *ty, value, &[bits]));
            values.insert(*id, value);
        }
        if values.is_empty() {
            continue;
        }
        for b in &mut f.blocks {
            for i in &mut b.instructions {
                for o in &mut i.operands {
                    if let Operand::IdRef(x) = o
                        && let Some(v) = values.get(x)
                    {
                        *x = *v;
                    }
                }
            }
        }
        // After the entry block's variables, which must come first.
        if let Some(entry) = f.blocks.first_mut() {
            let at = entry
                .instructions
                .iter()
                .take_while(|i| i.class.opcode == Op::Variable)
                .count();
            entry.instructions.splice(at..at, prologue);
        }
    }
    m.functions = functions;
    // The constants themselves go (naga refuses even an unused one), but
    // where another global (a constant composite) still names one.
    let named: HashSet<Word> = m
        .types_global_values
        .iter()
        .flat_map(|i| &i.operands)
        .filter_map(|o| match o {
            Operand::IdRef(x) => Some(*x),
            _ => None,
        })
        .collect();
    let gone: HashSet<Word> = held
        .iter()
        .map(|(id, _, _)| *id)
        .filter(|id| !named.contains(id))
        .collect();
    m.types_global_values
        .retain(|i| !i.result_id.is_some_and(|id| gone.contains(&id)));
    g.finish(m);
    // After the pointer type and the bits they start with.
    m.types_global_values.extend(variables);
}

/// `ptr<private, u32>`, the module's own when it has one.
fn private_pointer(g: &mut Globals, m: &mut Module, u32_ty: Word) -> Word {
    let operands = vec![
        Operand::StorageClass(StorageClass::Private),
        Operand::IdRef(u32_ty),
    ];
    let existing = m
        .types_global_values
        .iter()
        .chain(&g.new)
        .find(|t| t.class.opcode == Op::TypePointer && t.operands == operands)
        .and_then(|t| t.result_id);
    if let Some(p) = existing {
        return p;
    }
    let id = fresh(m);
    let t = Instruction::new(Op::TypePointer, None, Some(id), operands);
    g.types.insert(id, t.clone());
    g.new.push(t);
    id
}
