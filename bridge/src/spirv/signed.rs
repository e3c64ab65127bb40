//! Signedness carried by opcode made signedness carried by type (see the
//! module documentation).

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

use super::{Globals, fresh, id_operand, inst, type_map};

/// GLSL.std.450 instructions with signed semantics, and which of their
/// operands are signed (all of them here).
const GLSL_SIGNED: &[u32] = &[
    5,  // SAbs
    7,  // SSign
    39, // SMin
    42, // SMax
    45, // SClamp
    74, // FindSMsb
];

/// Signed integer operations on unsigned-typed values: their operands are
/// bitcast to the signed type of the same shape, the operation computes
/// in it, and its result is bitcast back.
pub fn signed_ops(m: &mut Module) {
    let types = type_map(m);
    let glsl: HashSet<Word> = m
        .ext_inst_imports
        .iter()
        .filter(|i| matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s == "GLSL.std.450"))
        .filter_map(|i| i.result_id)
        .collect();
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    // unsigned int (or vector of) -> its signed twin, created on demand.
    let mut signed: HashMap<Word, Word> = HashMap::new();
    for t in types.values() {
        if t.class.opcode == Op::TypeInt
            && let [Operand::LiteralBit32(w), Operand::LiteralBit32(1)] = t.operands.as_slice()
        {
            // An existing signed type of this width: its unsigned twin maps to it.
            if let Some(u) = types.values().find(|u| {
                u.class.opcode == Op::TypeInt
                    && u.operands == [Operand::LiteralBit32(*w), Operand::LiteralBit32(0)]
            }) {
                signed.insert(u.result_id.unwrap_or(0), t.result_id.unwrap_or(0));
            }
        }
    }
    let mut new_types: Vec<Instruction> = Vec::new();
    let is_unsigned = |t: Word| -> bool {
        let Some(i) = types.get(&t) else { return false };
        match i.class.opcode {
            Op::TypeInt => i.operands.get(1) == Some(&Operand::LiteralBit32(0)),
            Op::TypeVector => id_operand(i, 0).is_some_and(|c| {
                types.get(&c).is_some_and(|c| {
                    c.class.opcode == Op::TypeInt
                        && c.operands.get(1) == Some(&Operand::LiteralBit32(0))
                })
            }),
            _ => false,
        }
    };
    let mut header = m.header.clone();
    let mut next_id = || {
        let h = header.get_or_insert_with(|| rspirv::dr::ModuleHeader::new(1));
        let id = h.bound;
        h.bound += 1;
        id
    };
    let mut twin =
        |t: Word, new_types: &mut Vec<Instruction>, next_id: &mut dyn FnMut() -> Word| -> Word {
            fn go(
                t: Word,
                types: &HashMap<Word, Instruction>,
                signed: &mut HashMap<Word, Word>,
                new_types: &mut Vec<Instruction>,
                next_id: &mut dyn FnMut() -> Word,
            ) -> Word {
                if let Some(s) = signed.get(&t) {
                    return *s;
                }
                let i = &types[&t];
                let id = next_id();
                let inst = match i.class.opcode {
                    Op::TypeInt => Instruction::new(
                        Op::TypeInt,
                        None,
                        Some(id),
                        vec![i.operands[0].clone(), Operand::LiteralBit32(1)],
                    ),
                    _ => {
                        let c = go(
                            id_operand(i, 0).unwrap_or(0),
                            types,
                            signed,
                            new_types,
                            next_id,
                        );
                        Instruction::new(
                            Op::TypeVector,
                            None,
                            Some(id),
                            vec![Operand::IdRef(c), i.operands[1].clone()],
                        )
                    }
                };
                new_types.push(inst);
                signed.insert(t, id);
                id
            }
            go(t, &types, &mut signed, new_types, next_id)
        };
    for f in &mut m.functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for mut inst in b.instructions.drain(..) {
                let op = inst.class.opcode;
                // Which operands are signed values, and whether the result is.
                let (signed_operands, signed_result): (Vec<usize>, bool) = match op {
                    // naga casts the operands to the result's type: an
                    // unsigned result would divide unsigned. (`OpSMod` is
                    // gone by now: [`signed_mod`].)
                    Op::SDiv | Op::SRem | Op::SMod => (vec![0, 1], true),
                    Op::SNegate => (vec![0], true),
                    // naga reads the shift's kind from its base.
                    Op::ShiftRightArithmetic => (vec![0], true),
                    // naga converts from the operand's kind...
                    Op::ConvertSToF => (vec![0], false),
                    // ...and to the result's: `u32(-1.5)` would be 0.
                    Op::ConvertFToS => (vec![], true),
                    // naga's Min/Max take their kind from the value.
                    Op::GroupNonUniformSMin | Op::GroupNonUniformSMax => (vec![2], true),
                    // naga reads these as signed, but mistypes the casts
                    // it adds for vectors.
                    Op::SLessThan
                    | Op::SLessThanEqual
                    | Op::SGreaterThan
                    | Op::SGreaterThanEqual => (vec![0, 1], false),
                    Op::SConvert => (vec![0], true),
                    Op::BitFieldSExtract => (vec![0], true),
                    Op::ExtInst
                        if id_operand(&inst, 0).is_some_and(|s| glsl.contains(&s))
                            && matches!(inst.operands.get(1), Some(Operand::LiteralExtInstInteger(n)) if GLSL_SIGNED.contains(n)) =>
                    {
                        ((2..inst.operands.len()).collect(), true)
                    }
                    _ => (vec![], false),
                };
                let result_unsigned = inst.result_type.is_some_and(is_unsigned);
                for k in signed_operands {
                    let Some(v) = id_operand(&inst, k) else {
                        continue;
                    };
                    let Some(t) = type_of.get(&v).copied().filter(|t| is_unsigned(*t)) else {
                        continue;
                    };
                    let s = twin(t, &mut new_types, &mut next_id);
                    let cast = next_id();
                    out.push(Instruction::new(
                        Op::Bitcast,
                        Some(s),
                        Some(cast),
                        vec![Operand::IdRef(v)],
                    ));
                    inst.operands[k] = Operand::IdRef(cast);
                }
                if signed_result && result_unsigned {
                    let t = inst.result_type.unwrap_or(0);
                    let s = twin(t, &mut new_types, &mut next_id);
                    let result = inst.result_id.unwrap_or(0);
                    let inner = next_id();
                    inst.result_type = Some(s);
                    inst.result_id = Some(inner);
                    out.push(inst);
                    out.push(Instruction::new(
                        Op::Bitcast,
                        Some(t),
                        Some(result),
                        vec![Operand::IdRef(inner)],
                    ));
                } else {
                    out.push(inst);
                }
            }
            b.instructions = out;
        }
    }
    m.header = header;
    // After the last existing scalar or vector type (a new vector may use
    // an existing signed scalar), scalars before the vectors using them.
    let at = m
        .types_global_values
        .iter()
        .rposition(|i| {
            matches!(
                i.class.opcode,
                Op::TypeInt | Op::TypeFloat | Op::TypeBool | Op::TypeVector
            )
        })
        .map_or(0, |p| p + 1);
    for (k, t) in new_types.into_iter().enumerate() {
        m.types_global_values.insert(at + k, t);
    }
}

/// `OpSMod` (the remainder with the divisor's sign) as `OpSRem` and a
/// correction. naga reads `OpSMod` through floats, `x - y * floor(f(x) /
/// f(y))`, which is wrong past 2^24 and at `i32::MIN`; `OpSRem` it reads
/// as WGSL's `%`, the truncated remainder (the dividend's sign), once
/// [`signed_ops`] gives it signed operands:
///
/// `r = SRem(a, b)`, and the result is `r + b` where `r != 0` and `r` and
/// `b` differ in sign (`(r ^ b) < 0`), `r` elsewhere.
pub fn signed_mod(m: &mut Module) {
    let mut g = Globals::new(m);
    let mut functions = std::mem::take(&mut m.functions);
    for f in &mut functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for i in b.instructions.drain(..) {
                let (Op::SMod, Some(ty), Some(id), Some(x), Some(y)) = (
                    i.class.opcode,
                    i.result_type,
                    i.result_id,
                    id_operand(&i, 0),
                    id_operand(&i, 1),
                ) else {
                    out.push(i);
                    continue;
                };
                let Some((scalar, n)) = g.shape(ty) else {
                    out.push(i);
                    continue;
                };
                let boolean = g.bool_ty(m);
                let bools = g.vec_of(m, boolean, n);
                let zero = g.constant(m, scalar, ty, 0);
                let mut emit = |op: Op, ty: Word, args: &[Word], out: &mut Vec<Instruction>| {
                    let r = fresh(m);
                    out.push(inst(op, ty, r, args));
                    r
                };
                let r = emit(Op::SRem, ty, &[x, y], &mut out);
                let signs = emit(Op::BitwiseXor, ty, &[r, y], &mut out);
                let differ = emit(Op::SLessThan, bools, &[signs, zero], &mut out);
                let nonzero = emit(Op::INotEqual, bools, &[r, zero], &mut out);
                let fix = emit(Op::LogicalAnd, bools, &[nonzero, differ], &mut out);
                let sum = emit(Op::IAdd, ty, &[r, y], &mut out);
                out.push(inst(Op::Select, ty, id, &[fix, sum, r]));
            }
            b.instructions = out;
        }
    }
    m.functions = functions;
    g.finish(m);
}
