//! Values and the WGSL meaning of every pure operation, lane by lane.
//!
//! A lane is kept as 32 bits: bool as 0/1, i32 as its two's complement, f32
//! as its bits, f16 as its bits in the low half. Float operations run in
//! f32 (f16: in f32, rounded back to f16 after each operation).

use super::f16;
use crate::ir::{BinOp, UnOp};
use crate::{Scalar, Type};

/// A value: a type and up to four lanes of bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    /// The type.
    pub ty: Type,
    /// Lane bits; lanes past `ty.lanes` are zero.
    pub lanes: [u32; 4],
}

impl Value {
    /// A scalar value.
    pub const fn scalar(s: Scalar, bits: u32) -> Self {
        Value {
            ty: Type::scalar(s),
            lanes: [bits, 0, 0, 0],
        }
    }

    /// The zero of a type.
    pub const fn zero(ty: Type) -> Self {
        Value { ty, lanes: [0; 4] }
    }

    /// Lane 0.
    pub const fn bits(self) -> u32 {
        self.lanes[0]
    }

    fn map(self, ty: Type, f: impl Fn(u32) -> u32) -> Value {
        let mut out = Value::zero(ty);
        for i in 0..usize::from(self.ty.lanes) {
            out.lanes[i] = f(self.lanes[i]);
        }
        out
    }
}

fn to_f(s: Scalar, b: u32) -> f32 {
    match s {
        Scalar::F16 => f16::to_f32(b as u16),
        _ => f32::from_bits(b),
    }
}

fn from_f(s: Scalar, f: f32) -> u32 {
    match s {
        Scalar::F16 => u32::from(f16::from_f32(f)),
        _ => f.to_bits(),
    }
}

/// One lane of a unary operation.
pub fn unary_lane(op: UnOp, s: Scalar, a: u32) -> u32 {
    match s {
        Scalar::Bool => match op {
            UnOp::Not => u32::from(a == 0),
            _ => a,
        },
        Scalar::I32 => {
            let x = a as i32;
            (match op {
                UnOp::Neg => x.wrapping_neg(),
                UnOp::BitNot => !x,
                UnOp::Abs => x.wrapping_abs(),
                _ => x,
            }) as u32
        }
        Scalar::U32 => match op {
            UnOp::BitNot => !a,
            _ => a,
        },
        Scalar::F32 | Scalar::F16 => {
            let x = to_f(s, a);
            let r = match op {
                UnOp::Neg => -x,
                UnOp::Abs => x.abs(),
                UnOp::Exp => x.exp(),
                UnOp::Log => x.ln(),
                UnOp::Sqrt => x.sqrt(),
                UnOp::InverseSqrt => 1.0 / x.sqrt(),
                UnOp::Tanh => x.tanh(),
                UnOp::Sin => x.sin(),
                UnOp::Cos => x.cos(),
                UnOp::Floor => x.floor(),
                UnOp::Ceil => x.ceil(),
                UnOp::Not | UnOp::BitNot => x,
            };
            from_f(s, r)
        }
    }
}

/// One lane of a binary operation on operands of scalar type `s`.
pub fn binary_lane(op: BinOp, s: Scalar, a: u32, b: u32) -> u32 {
    let cmp = |o: std::cmp::Ordering| -> u32 {
        use std::cmp::Ordering::*;
        u32::from(match op {
            BinOp::Eq => o == Equal,
            BinOp::Ne => o != Equal,
            BinOp::Lt => o == Less,
            BinOp::Le => o != Greater,
            BinOp::Gt => o == Greater,
            BinOp::Ge => o != Less,
            _ => false,
        })
    };
    match s {
        Scalar::Bool => match op {
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor | BinOp::Ne => a ^ b,
            BinOp::Eq => u32::from(a == b),
            _ => 0,
        },
        Scalar::I32 => {
            let (x, y) = (a as i32, b as i32);
            if op.is_comparison() {
                return cmp(x.cmp(&y));
            }
            (match op {
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                // WGSL: x / 0 == x, and MIN / -1 == MIN.
                BinOp::Div => {
                    if y == 0 || (x == i32::MIN && y == -1) {
                        x
                    } else {
                        x / y
                    }
                }
                // WGSL: x % 0 == 0, and MIN % -1 == 0; otherwise truncated.
                BinOp::Rem => {
                    if y == 0 || (x == i32::MIN && y == -1) {
                        0
                    } else {
                        x % y
                    }
                }
                BinOp::And => x & y,
                BinOp::Or => x | y,
                BinOp::Xor => x ^ y,
                BinOp::Shl => x.wrapping_shl(b & 31),
                BinOp::Shr => x.wrapping_shr(b & 31),
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                _ => 0,
            }) as u32
        }
        Scalar::U32 => {
            if op.is_comparison() {
                return cmp(a.cmp(&b));
            }
            match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => a.checked_div(b).unwrap_or(a),
                BinOp::Rem => a.checked_rem(b).unwrap_or(0),
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                BinOp::Shl => a.wrapping_shl(b & 31),
                BinOp::Shr => a.wrapping_shr(b & 31),
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                _ => 0,
            }
        }
        Scalar::F32 | Scalar::F16 => {
            let (x, y) = (to_f(s, a), to_f(s, b));
            if op.is_comparison() {
                return match x.partial_cmp(&y) {
                    Some(o) => cmp(o),
                    None => u32::from(op == BinOp::Ne),
                };
            }
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                // WGSL: x - y * trunc(x / y).
                BinOp::Rem => x - y * (x / y).trunc(),
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                BinOp::Pow => x.powf(y),
                _ => 0.0,
            };
            from_f(s, r)
        }
    }
}

/// A lane-wise unary operation.
pub fn unary(op: UnOp, a: Value) -> Value {
    a.map(a.ty, |x| unary_lane(op, a.ty.scalar, x))
}

/// A lane-wise binary operation (`result` is the result type).
pub fn binary(op: BinOp, result: Type, a: Value, b: Value) -> Value {
    let mut out = Value::zero(result);
    for i in 0..usize::from(a.ty.lanes) {
        out.lanes[i] = binary_lane(op, a.ty.scalar, a.lanes[i], b.lanes[i]);
    }
    out
}

/// `fma` in f32 (fused: one rounding).
pub fn fma(a: Value, b: Value, c: Value) -> Value {
    let s = a.ty.scalar;
    let mut out = Value::zero(a.ty);
    for i in 0..usize::from(a.ty.lanes) {
        let r = to_f(s, a.lanes[i]).mul_add(to_f(s, b.lanes[i]), to_f(s, c.lanes[i]));
        out.lanes[i] = from_f(s, r);
    }
    out
}

/// Float to integer as WGSL (and naga) converts: truncate toward zero,
/// saturate to the largest float representable in the target that fits
/// (`2147483520.0` for i32, `4294967040.0` for u32), NaN to 0.
fn float_to_int(f: f32, to: Scalar) -> u32 {
    if f.is_nan() {
        return 0;
    }
    match to {
        Scalar::I32 => (f.clamp(-2_147_483_648.0, 2_147_483_520.0) as i32) as u32,
        _ => f.clamp(0.0, 4_294_967_040.0) as u32,
    }
}

/// One lane of a value conversion.
pub fn cast_lane(from: Scalar, to: Scalar, a: u32) -> u32 {
    use Scalar::*;
    match (from, to) {
        _ if from == to => a,
        (_, Bool) => u32::from(if from.is_float() {
            to_f(from, a) != 0.0
        } else {
            a != 0
        }),
        (Bool, F32 | F16) => from_f(to, a as f32),
        (Bool, _) => a,
        (I32 | U32, I32 | U32) => a,
        (I32, F32 | F16) => from_f(to, a as i32 as f32),
        (U32, F32 | F16) => from_f(to, a as f32),
        (F32 | F16, F32 | F16) => from_f(to, to_f(from, a)),
        (F32 | F16, _) => float_to_int(to_f(from, a), to),
    }
}

/// A lane-wise conversion.
pub fn cast(a: Value, to: Scalar) -> Value {
    a.map(a.ty.with_scalar(to), |x| cast_lane(a.ty.scalar, to, x))
}

/// Evaluates a pure operation (one that reads no memory, builtin, argument
/// or variable) from its operands' values; `None` for any other operation.
/// The interpreter and the WGSL emitter's constant folding both use this,
/// so a folded constant means what the interpreter computes.
pub fn eval_pure(
    op: &crate::ir::Op,
    ty: Type,
    get: impl Fn(crate::ir::ValueId) -> Value,
) -> Option<Value> {
    use crate::ir::Op;
    Some(match op {
        Op::Lit(l) => Value::scalar(l.scalar(), l.bits()),
        Op::Splat(v, n) => {
            let x = get(*v).bits();
            let mut out = Value::zero(ty);
            out.lanes[..usize::from(*n)].fill(x);
            out
        }
        Op::Compose(parts) => {
            let mut out = Value::zero(ty);
            for (i, p) in parts.iter().enumerate() {
                out.lanes[i] = get(*p).bits();
            }
            out
        }
        Op::Extract(v, lane) => Value::scalar(ty.scalar, get(*v).lanes[usize::from(*lane)]),
        Op::Unary(u, v) => unary(*u, get(*v)),
        Op::Binary(b, x, y) => binary(*b, ty, get(*x), get(*y)),
        Op::Select {
            cond,
            on_true,
            on_false,
        } => {
            let c = get(*cond);
            let (t, f) = (get(*on_true), get(*on_false));
            let mut out = Value::zero(ty);
            for i in 0..usize::from(ty.lanes) {
                let ci = if c.ty.lanes == 1 {
                    c.lanes[0]
                } else {
                    c.lanes[i]
                };
                out.lanes[i] = if ci != 0 { t.lanes[i] } else { f.lanes[i] };
            }
            out
        }
        Op::Clamp(x, lo, hi) => {
            let m = binary(BinOp::Max, ty, get(*x), get(*lo));
            binary(BinOp::Min, ty, m, get(*hi))
        }
        Op::Fma(a, b, c) => fma(get(*a), get(*b), get(*c)),
        Op::Cast(v, to) => cast(get(*v), *to),
        Op::Bitcast(v, _) => Value {
            ty,
            lanes: get(*v).lanes,
        },
        Op::Arg(_)
        | Op::Builtin(_)
        | Op::Get(_)
        | Op::Load(..)
        | Op::ArrayLength(_)
        | Op::AtomicLoad(..)
        | Op::Atomic(..) => return None,
    })
}
