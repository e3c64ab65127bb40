//! What naga reads wrongly or not at all, in what it reads (see the module
//! documentation).

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

use super::{Globals, fresh, id_operand, inst};

/// See the module documentation.
pub fn polyfills(m: &mut Module) {
    let mut g = Globals::new(m);
    let printf: HashSet<Word> = m
        .ext_inst_imports
        .iter()
        .filter(|i| matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s.starts_with("NonSemantic.DebugPrintf")))
        .filter_map(|i| i.result_id)
        .collect();
    m.ext_inst_imports
        .retain(|i| !i.result_id.is_some_and(|id| printf.contains(&id)));
    m.extensions.retain(|i| {
        !matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s == "SPV_KHR_non_semantic_info")
    });
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    let constants64: HashMap<Word, u64> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match (i.result_id, i.operands.first()) {
            (Some(id), Some(Operand::LiteralBit64(v))) => Some((id, *v)),
            _ => None,
        })
        .collect();
    // Vectors built of 64-bit constants only, by their components.
    let vectors64: HashMap<Word, Vec<u64>> = m
        .all_inst_iter()
        .filter(|i| {
            matches!(
                i.class.opcode,
                Op::CompositeConstruct | Op::ConstantComposite
            )
        })
        .filter_map(|i| {
            let parts: Option<Vec<u64>> = i
                .operands
                .iter()
                .map(|o| match o {
                    Operand::IdRef(c) => constants64.get(c).copied(),
                    _ => None,
                })
                .collect();
            Some((i.result_id?, parts?))
        })
        .collect();
    let mut functions = std::mem::take(&mut m.functions);
    for f in &mut functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for i in b.instructions.drain(..) {
                let op = i.class.opcode;
                let ty = i.result_type.unwrap_or(0);
                let id = i.result_id.unwrap_or(0);
                let args: Vec<Word> = i
                    .operands
                    .iter()
                    .filter_map(|o| match o {
                        Operand::IdRef(x) => Some(*x),
                        _ => None,
                    })
                    .collect();
                let vector = g.shape(ty).is_some_and(|(_, n)| n > 1);
                match op {
                    Op::ExtInst if args.first().is_some_and(|s| printf.contains(s)) => {}
                    // naga's front end emits a function-level undef twice
                    // when a phi reads it; at module level it is a constant.
                    Op::Undef => g.new.push(i),
                    Op::LogicalAnd if vector => {
                        out.push(inst(Op::Select, ty, id, &[args[0], args[1], args[0]]));
                    }
                    Op::LogicalOr if vector => {
                        out.push(inst(Op::Select, ty, id, &[args[0], args[0], args[1]]));
                    }
                    Op::IsNan | Op::IsInf
                        if type_of
                            .get(&args[0])
                            .and_then(|t| g.width(*t))
                            .is_some_and(|w| w == 32 || w == 16) =>
                    {
                        let (_, n) = g.shape(ty).unwrap_or((0, 1));
                        let u = g.u32_ty(m);
                        let uv = g.vec_of(m, u, n);
                        // A 16-bit float widens exactly (NaN and infinity
                        // included): WGSL has no 16-bit integer to test.
                        let mut x = args[0];
                        if type_of.get(&x).and_then(|t| g.width(*t)) == Some(16) {
                            let f = g.f32_ty(m);
                            let fv = g.vec_of(m, f, n);
                            let wide = fresh(m);
                            out.push(inst(Op::FConvert, fv, wide, &[x]));
                            x = wide;
                        }
                        let bits = fresh(m);
                        out.push(inst(Op::Bitcast, uv, bits, &[x]));
                        let mask = g.constant(m, u, uv, 0x7fff_ffff);
                        let abs = fresh(m);
                        out.push(inst(Op::BitwiseAnd, uv, abs, &[bits, mask]));
                        let inf = g.constant(m, u, uv, 0x7f80_0000);
                        let cmp = if op == Op::IsNan {
                            Op::UGreaterThan
                        } else {
                            Op::IEqual
                        };
                        out.push(inst(cmp, ty, id, &[abs, inf]));
                    }
                    // WGSL shifts by a u32 amount, 64-bit values too.
                    Op::ShiftLeftLogical | Op::ShiftRightLogical | Op::ShiftRightArithmetic
                        if type_of.get(&args[1]).and_then(|t| g.width(*t)) == Some(64) =>
                    {
                        let n = type_of
                            .get(&args[1])
                            .and_then(|t| g.shape(*t))
                            .map_or(1, |(_, n)| n);
                        let u = g.u32_ty(m);
                        let uv = g.vec_of(m, u, n);
                        // A constant amount as a u32 constant: naga's
                        // constant evaluator refuses `u32(63lu)`.
                        let amount = match (constants64.get(&args[1]), vectors64.get(&args[1])) {
                            (Some(v), _) if n == 1 => g.constant(m, u, u, *v as u32),
                            (_, Some(parts)) => {
                                let parts: Vec<Word> = parts
                                    .iter()
                                    .map(|v| g.constant(m, u, u, *v as u32))
                                    .collect();
                                let amount = fresh(m);
                                out.push(inst(Op::CompositeConstruct, uv, amount, &parts));
                                amount
                            }
                            _ => {
                                let amount = fresh(m);
                                out.push(inst(Op::UConvert, uv, amount, &[args[1]]));
                                amount
                            }
                        };
                        let mut i = i;
                        i.operands[1] = Operand::IdRef(amount);
                        out.push(i);
                    }
                    Op::UMulExtended | Op::SMulExtended => {
                        // The result struct {lo, hi} of the operands' type,
                        // 32-bit unsigned-typed operands only (cubecl-spirv's;
                        // anything else stays, and the allowlist refuses it).
                        let shape = type_of.get(&args[0]).and_then(|vt| {
                            let (s, n) = g.shape(*vt)?;
                            let t = g.types.get(&s)?;
                            (t.class.opcode == Op::TypeInt
                                && t.operands
                                    == [Operand::LiteralBit32(32), Operand::LiteralBit32(0)]
                                && type_of.get(&args[1]) == Some(vt))
                            .then_some((*vt, s, n))
                        });
                        let Some((vt, s, n)) = shape else {
                            out.push(i);
                            continue;
                        };
                        let (a, b) = (args[0], args[1]);
                        let (lo, hi) = mul_extended(&mut g, m, &mut out, vt, s, a, b);
                        let hi = if op == Op::SMulExtended {
                            signed_high(&mut g, m, &mut out, (vt, s, n), a, b, hi)
                        } else {
                            hi
                        };
                        out.push(inst(Op::CompositeConstruct, ty, id, &[lo, hi]));
                    }
                    _ => out.push(i),
                }
            }
            b.instructions = out;
        }
    }
    m.functions = functions;
    g.finish(m);
}

/// The 64-bit product of unsigned 32-bit `a` and `b` (lanes of type
/// `vt`, components of type `s`) as its low and high words, from 16-bit
/// halves.
fn mul_extended(
    g: &mut Globals,
    m: &mut Module,
    out: &mut Vec<Instruction>,
    vt: Word,
    s: Word,
    a: Word,
    b: Word,
) -> (Word, Word) {
    let lo16 = g.constant(m, s, vt, 0xffff);
    let sh = g.constant(m, s, vt, 16);
    let mut emit = |op: Op, x: Word, y: Word, out: &mut Vec<Instruction>| {
        let r = fresh(m);
        out.push(inst(op, vt, r, &[x, y]));
        r
    };
    let al = emit(Op::BitwiseAnd, a, lo16, out);
    let ah = emit(Op::ShiftRightLogical, a, sh, out);
    let bl = emit(Op::BitwiseAnd, b, lo16, out);
    let bh = emit(Op::ShiftRightLogical, b, sh, out);
    let ll = emit(Op::IMul, al, bl, out);
    let lh = emit(Op::IMul, al, bh, out);
    let hl = emit(Op::IMul, ah, bl, out);
    let hh = emit(Op::IMul, ah, bh, out);
    let ll_h = emit(Op::ShiftRightLogical, ll, sh, out);
    let lh_l = emit(Op::BitwiseAnd, lh, lo16, out);
    let hl_l = emit(Op::BitwiseAnd, hl, lo16, out);
    let mid = emit(Op::IAdd, ll_h, lh_l, out);
    let mid = emit(Op::IAdd, mid, hl_l, out);
    let lh_h = emit(Op::ShiftRightLogical, lh, sh, out);
    let hl_h = emit(Op::ShiftRightLogical, hl, sh, out);
    let mid_h = emit(Op::ShiftRightLogical, mid, sh, out);
    let hi = emit(Op::IAdd, hh, lh_h, out);
    let hi = emit(Op::IAdd, hi, hl_h, out);
    let hi = emit(Op::IAdd, hi, mid_h, out);
    let lo = emit(Op::IMul, a, b, out);
    (lo, hi)
}

/// The high word of the signed product from the unsigned one's `hi`: as
/// two's complement, `a` reads `a - 2^32` where its sign bit is set, so the
/// signed product is the unsigned one less `b * 2^32` (and `a * 2^32`),
/// `hi - (a < 0 ? b : 0) - (b < 0 ? a : 0)` modulo 2^32. Unsigned
/// operations only (the sign bit tested as `x > 0x7fffffff`), so nothing
/// here depends on how naga reads a signed opcode.
fn signed_high(
    g: &mut Globals,
    m: &mut Module,
    out: &mut Vec<Instruction>,
    (vt, s, n): (Word, Word, u32),
    a: Word,
    b: Word,
    hi: Word,
) -> Word {
    let max = g.constant(m, s, vt, 0x7fff_ffff);
    let zero = g.constant(m, s, vt, 0);
    let boolean = g.bool_ty(m);
    let bools = g.vec_of(m, boolean, n);
    let mut emit = |op: Op, ty: Word, args: &[Word], out: &mut Vec<Instruction>| {
        let r = fresh(m);
        out.push(inst(op, ty, r, args));
        r
    };
    let a_neg = emit(Op::UGreaterThan, bools, &[a, max], out);
    let b_neg = emit(Op::UGreaterThan, bools, &[b, max], out);
    let less_b = emit(Op::Select, vt, &[a_neg, b, zero], out);
    let less_a = emit(Op::Select, vt, &[b_neg, a, zero], out);
    let hi = emit(Op::ISub, vt, &[hi, less_b], out);
    emit(Op::ISub, vt, &[hi, less_a], out)
}

/// See the module documentation.
pub fn byte_vectors(m: &mut Module) {
    let mut g = Globals::new(m);
    let bytes: HashSet<Word> = g
        .types
        .values()
        .filter(|t| {
            t.class.opcode == Op::TypeInt
                && t.operands == [Operand::LiteralBit32(8), Operand::LiteralBit32(0)]
        })
        .filter_map(|t| t.result_id)
        .collect();
    if bytes.is_empty() {
        return;
    }
    let byte_vecs: HashSet<Word> = g
        .types
        .values()
        .filter(|t| {
            t.class.opcode == Op::TypeVector
                && matches!(t.operands.first(), Some(Operand::IdRef(c)) if bytes.contains(c))
                && t.operands.get(1) == Some(&Operand::LiteralBit32(4))
        })
        .filter_map(|t| t.result_id)
        .collect();
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    let u = g.u32_ty(m);
    let uv = g.u32_vec(m, 4);
    // byte vector id -> its lanes as vec4<u32>, each 0..=255
    let mut lanes: HashMap<Word, Word> = HashMap::new();
    let mut functions = std::mem::take(&mut m.functions);
    for f in &mut functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for mut i in b.instructions.drain(..) {
                let op = i.class.opcode;
                let ty = i.result_type.unwrap_or(0);
                let id = i.result_id.unwrap_or(0);
                let arg = id_operand(&i, 0).unwrap_or(0);
                let arg_ty = type_of.get(&arg).copied().unwrap_or(0);
                match op {
                    // u32 -> vec4<u8>: the four bytes, low first.
                    Op::Bitcast if byte_vecs.contains(&ty) && arg_ty == u => {
                        let x = fresh(m);
                        out.push(inst(Op::CompositeConstruct, uv, x, &[arg, arg, arg, arg]));
                        let sh = fresh(m);
                        let c: Vec<Word> = [0, 8, 16, 24]
                            .iter()
                            .map(|v| g.constant(m, u, u, *v))
                            .collect();
                        out.push(inst(Op::CompositeConstruct, uv, sh, &c));
                        let shifted = fresh(m);
                        out.push(inst(Op::ShiftRightLogical, uv, shifted, &[x, sh]));
                        let mask = g.constant(m, u, uv, 0xff);
                        let l = fresh(m);
                        out.push(inst(Op::BitwiseAnd, uv, l, &[shifted, mask]));
                        lanes.insert(id, l);
                    }
                    // vec4<u32> -> vec4<u8>: truncated lanes.
                    Op::UConvert if byte_vecs.contains(&ty) && arg_ty == uv => {
                        let mask = g.constant(m, u, uv, 0xff);
                        let l = fresh(m);
                        out.push(inst(Op::BitwiseAnd, uv, l, &[arg, mask]));
                        lanes.insert(id, l);
                    }
                    Op::UConvert if ty == uv && lanes.contains_key(&arg) => {
                        out.push(inst(Op::CopyObject, uv, id, &[lanes[&arg]]));
                    }
                    // vec4<u8> -> u32: the lanes packed, low first.
                    Op::Bitcast if ty == u && lanes.contains_key(&arg) => {
                        let l = lanes[&arg];
                        let c: Vec<Word> = [0, 8, 16, 24]
                            .iter()
                            .map(|v| g.constant(m, u, u, *v))
                            .collect();
                        let sh = fresh(m);
                        out.push(inst(Op::CompositeConstruct, uv, sh, &c));
                        let shifted = fresh(m);
                        out.push(inst(Op::ShiftLeftLogical, uv, shifted, &[l, sh]));
                        let mut acc = None;
                        for k in 0..4u32 {
                            let e = fresh(m);
                            out.push(Instruction::new(
                                Op::CompositeExtract,
                                Some(u),
                                Some(e),
                                vec![Operand::IdRef(shifted), Operand::LiteralBit32(k)],
                            ));
                            acc = Some(match acc {
                                None => e,
                                Some(a) => {
                                    let o = if k == 3 { id } else { fresh(m) };
                                    out.push(inst(Op::BitwiseOr, u, o, &[a, e]));
                                    o
                                }
                            });
                        }
                    }
                    _ => {
                        if matches!(op, Op::IEqual | Op::INotEqual) {
                            for o in &mut i.operands {
                                if let Operand::IdRef(x) = o
                                    && let Some(l) = lanes.get(x)
                                {
                                    *x = *l;
                                }
                            }
                        }
                        out.push(i);
                    }
                }
            }
            b.instructions = out;
        }
    }
    m.functions = functions;
    g.finish(m);
    // The byte types go when nothing uses them any more.
    let used: HashSet<Word> = m
        .all_inst_iter()
        .filter(|i| {
            !i.result_id
                .is_some_and(|id| bytes.contains(&id) || byte_vecs.contains(&id))
        })
        .flat_map(|i| {
            i.result_type
                .into_iter()
                .chain(i.operands.iter().filter_map(|o| match o {
                    Operand::IdRef(id) => Some(*id),
                    _ => None,
                }))
        })
        .collect();
    if byte_vecs.iter().all(|v| !used.contains(v)) {
        m.types_global_values
            .retain(|i| !i.result_id.is_some_and(|id| byte_vecs.contains(&id)));
        if bytes.iter().all(|v| !used.contains(v)) {
            m.types_global_values
                .retain(|i| !i.result_id.is_some_and(|id| bytes.contains(&id)));
        }
    }
}
