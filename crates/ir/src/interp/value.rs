//! Values and the WGSL meaning of every pure operation, lane by lane.
//!
//! A lane is kept as 64 bits: bool as 0/1, i32 as its two's complement in
//! the low half (the high half zero), u32 and f32 bits likewise, f16 as its
//! bits in the low 16, i64/u64/f64 as all 64. Float operations run in f32
//! for f32 and f16 (f16: rounded back to f16 after each operation), in f64
//! for f64.

use super::{bits, f16};
use crate::ir::{BinOp, UnOp};
use crate::{Scalar, Type};

/// A value: a type and up to four lanes of bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    /// The type.
    pub ty: Type,
    /// Lane bits (see the module docs); lanes past `ty.lanes` are zero.
    pub lanes: [u64; 4],
}

impl Value {
    /// A scalar value.
    pub const fn scalar(s: Scalar, bits: u64) -> Self {
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
    pub const fn bits(self) -> u64 {
        self.lanes[0]
    }

    fn map(self, ty: Type, f: impl Fn(u64) -> u64) -> Value {
        let mut out = Value::zero(ty);
        for i in 0..usize::from(self.ty.lanes) {
            out.lanes[i] = f(self.lanes[i]);
        }
        out
    }
}

/// f32 or f16 bits as f32.
pub(super) fn to_f(s: Scalar, b: u64) -> f32 {
    match s {
        Scalar::F16 => f16::to_f32(b as u16),
        _ => f32::from_bits(b as u32),
    }
}

pub(super) fn from_f(s: Scalar, f: f32) -> u64 {
    match s {
        Scalar::F16 => u64::from(f16::from_f32(f)),
        _ => u64::from(f.to_bits()),
    }
}

/// Any float's bits as f64 (exact).
fn to_f64(s: Scalar, b: u64) -> f64 {
    match s {
        Scalar::F64 => f64::from_bits(b),
        _ => f64::from(to_f(s, b)),
    }
}

/// An f64 as `s`'s bits, rounding to nearest even once.
fn from_f64(s: Scalar, f: f64) -> u64 {
    match s {
        Scalar::F64 => f.to_bits(),
        Scalar::F16 => u64::from(f16::from_f64(f)),
        _ => u64::from((f as f32).to_bits()),
    }
}

pub use super::unary::unary_lane;

fn compare(op: BinOp, o: Option<std::cmp::Ordering>) -> u64 {
    use std::cmp::Ordering::*;
    let Some(o) = o else {
        // NaN: only `!=` holds.
        return u64::from(op == BinOp::Ne);
    };
    u64::from(match op {
        BinOp::Eq => o == Equal,
        BinOp::Ne => o != Equal,
        BinOp::Lt => o == Less,
        BinOp::Le => o != Greater,
        BinOp::Gt => o == Greater,
        BinOp::Ge => o != Less,
        // Not comparisons: the callers only pass comparisons.
        BinOp::Add
        | BinOp::Sub
        | BinOp::Mul
        | BinOp::Div
        | BinOp::Rem
        | BinOp::And
        | BinOp::Or
        | BinOp::Xor
        | BinOp::Shl
        | BinOp::Shr
        | BinOp::Min
        | BinOp::Max
        | BinOp::Pow
        | BinOp::Atan2 => false,
    })
}

macro_rules! int_binary {
    ($op:expr, $a:expr, $b:expr, $t:ty, $shift_mask:expr) => {{
        let (x, y): ($t, $t) = ($a, $b);
        if $op.is_comparison() {
            return compare($op, Some(x.cmp(&y)));
        }
        match $op {
            BinOp::Add => x.wrapping_add(y),
            BinOp::Sub => x.wrapping_sub(y),
            BinOp::Mul => x.wrapping_mul(y),
            // WGSL: x / 0 == x, and MIN / -1 == MIN (checked_div is None
            // exactly then).
            BinOp::Div => x.checked_div(y).unwrap_or(x),
            // WGSL: x % 0 == 0, and MIN % -1 == 0; otherwise truncated.
            BinOp::Rem => x.checked_rem(y).unwrap_or(0),
            BinOp::And => x & y,
            BinOp::Or => x | y,
            BinOp::Xor => x ^ y,
            BinOp::Shl => x.wrapping_shl((y as u32) & $shift_mask),
            BinOp::Shr => x.wrapping_shr((y as u32) & $shift_mask),
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            // Comparisons returned above; float-only operations are refused
            // on integers by the type check.
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::Pow
            | BinOp::Atan2 => 0,
        }
    }};
}

/// A non-comparison binary operation on two floats of one type (f64, or
/// f32 for f32 and f16), WGSL's meaning.
macro_rules! float_binary {
    ($op:expr, $x:expr, $y:expr) => {{
        let (x, y) = ($x, $y);
        match $op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            // WGSL: x - y * trunc(x / y).
            BinOp::Rem => x - y * (x / y).trunc(),
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            BinOp::Pow => x.powf(y),
            BinOp::Atan2 => x.atan2(y),
            // Comparisons are the caller's; bit operations are refused on
            // floats by the type check.
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::And
            | BinOp::Or
            | BinOp::Xor
            | BinOp::Shl
            | BinOp::Shr => 0.0,
        }
    }};
}

/// One lane of a binary operation on operands of scalar type `s` (for a
/// shift, `b` is the `u32` amount).
pub fn binary_lane(op: BinOp, s: Scalar, a: u64, b: u64) -> u64 {
    match s {
        Scalar::Bool => match op {
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor | BinOp::Ne => a ^ b,
            BinOp::Eq => u64::from(a == b),
            // Refused on bool by the type check.
            BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::Div
            | BinOp::Rem
            | BinOp::Shl
            | BinOp::Shr
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::Min
            | BinOp::Max
            | BinOp::Pow
            | BinOp::Atan2 => 0,
        },
        Scalar::I32 => int_binary!(op, a as i32, b as i32, i32, 31) as u32 as u64,
        Scalar::U32 => u64::from(int_binary!(op, a as u32, b as u32, u32, 31)),
        Scalar::I64 => int_binary!(op, a as i64, b as i64, i64, 63) as u64,
        Scalar::U64 => int_binary!(op, a, b, u64, 63),
        Scalar::F64 => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            if op.is_comparison() {
                return compare(op, x.partial_cmp(&y));
            }
            float_binary!(op, x, y).to_bits()
        }
        Scalar::F32 | Scalar::F16 => {
            let (x, y) = (to_f(s, a), to_f(s, b));
            if op.is_comparison() {
                return compare(op, x.partial_cmp(&y));
            }
            from_f(s, float_binary!(op, x, y))
        }
    }
}

/// `dot(a, b)`: the lane products summed in lane order, each step rounded
/// (floats) or wrapping (integers) as the scalar's `*` and `+` are.
pub fn dot(a: Value, b: Value) -> Value {
    let s = a.ty.scalar;
    let lanes = usize::from(a.ty.lanes);
    let product = |i: usize| binary_lane(BinOp::Mul, s, a.lanes[i], b.lanes[i]);
    let sum = (1..lanes).fold(product(0), |acc, i| {
        binary_lane(BinOp::Add, s, acc, product(i))
    });
    Value::scalar(s, sum)
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

/// `fma` in f32 (f64 for f64; fused: one rounding).
pub fn fma(a: Value, b: Value, c: Value) -> Value {
    let s = a.ty.scalar;
    let mut out = Value::zero(a.ty);
    for i in 0..usize::from(a.ty.lanes) {
        out.lanes[i] = if s == Scalar::F64 {
            let f = |v: u64| f64::from_bits(v);
            f(a.lanes[i])
                .mul_add(f(b.lanes[i]), f(c.lanes[i]))
                .to_bits()
        } else {
            let r = to_f(s, a.lanes[i]).mul_add(to_f(s, b.lanes[i]), to_f(s, c.lanes[i]));
            from_f(s, r)
        };
    }
    out
}

/// Float to integer as WGSL (and naga) converts: truncate toward zero,
/// saturate to the range of values both the float type and the target hold
/// exactly (naga's `min_max_float_representable_by`: `2147483520.0` is the
/// largest f32 for i32, `2147483647.0` the largest f64), NaN to 0.
fn float_to_int(from: Scalar, bits: u64, to: Scalar) -> u64 {
    if from == Scalar::F64 {
        let f = f64::from_bits(bits);
        if f.is_nan() {
            return 0;
        }
        return match to {
            Scalar::I32 => (f.clamp(-2_147_483_648.0, 2_147_483_647.0) as i32) as u32 as u64,
            Scalar::U32 => u64::from(f.clamp(0.0, 4_294_967_295.0) as u32),
            Scalar::I64 => {
                (f.clamp(-9_223_372_036_854_775_808.0, 9_223_372_036_854_774_784.0) as i64) as u64
            }
            _ => f.clamp(0.0, 18_446_744_073_709_549_568.0) as u64,
        };
    }
    let f = to_f(from, bits);
    if f.is_nan() {
        return 0;
    }
    match to {
        Scalar::I32 => (f.clamp(-2_147_483_648.0, 2_147_483_520.0) as i32) as u32 as u64,
        Scalar::U32 => u64::from(f.clamp(0.0, 4_294_967_040.0) as u32),
        Scalar::I64 => {
            (f.clamp(-9_223_372_036_854_775_808.0, 9_223_371_487_098_961_920.0) as i64) as u64
        }
        _ => f.clamp(0.0, 18_446_742_974_197_923_840.0) as u64,
    }
}

/// An integer lane as i128 (exact, by its own signedness).
fn int_value(s: Scalar, a: u64) -> i128 {
    match s {
        Scalar::I32 => i128::from(a as i32),
        Scalar::I64 => i128::from(a as i64),
        Scalar::U32 => i128::from(a as u32),
        _ => i128::from(a),
    }
}

/// One lane of a value conversion. Integer to integer is Rust's `as`:
/// truncation to a narrower type, extension by the source's signedness to a
/// wider one. Integer to float rounds to nearest even.
pub fn cast_lane(from: Scalar, to: Scalar, a: u64) -> u64 {
    use Scalar::*;
    match (from, to) {
        _ if from == to => a,
        (_, Bool) => u64::from(if from.is_float() {
            to_f64(from, a) != 0.0
        } else {
            a != 0
        }),
        (Bool, F32 | F16 | F64) => from_f64(to, a as f64),
        (Bool, _) => a,
        (I32 | U32 | I64 | U64, I32 | U32 | I64 | U64) => {
            let v = int_value(from, a);
            match to {
                I32 | U32 => u64::from(v as u32),
                _ => v as u64,
            }
        }
        (I32 | U32 | I64 | U64, F32 | F16) => {
            // i64 -> f32 rounds once; an f16 of anything past 2^24 is
            // infinite anyway, so rounding through f32 is exact enough.
            let f = match from {
                I64 => a as i64 as f32,
                U64 => a as f32,
                _ => int_value(from, a) as f32,
            };
            from_f(to, f)
        }
        (I32 | U32, F64) => (int_value(from, a) as f64).to_bits(),
        (I64, F64) => (a as i64 as f64).to_bits(),
        (U64, F64) => (a as f64).to_bits(),
        (F32 | F16 | F64, F32 | F16 | F64) => from_f64(to, to_f64(from, a)),
        (F32 | F16 | F64, _) => float_to_int(from, a, to),
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
        Op::ExtractBits(e, offset, count) => {
            let (o, c) = (get(*offset).bits() as u32, get(*count).bits() as u32);
            get(*e).map(ty, |x| bits::extract(ty.scalar, x, o, c))
        }
        Op::InsertBits(e, newbits, offset, count) => {
            let (o, c) = (get(*offset).bits() as u32, get(*count).bits() as u32);
            let (e, n) = (get(*e), get(*newbits));
            let mut out = Value::zero(ty);
            for i in 0..usize::from(ty.lanes) {
                out.lanes[i] = bits::insert(e.lanes[i], n.lanes[i], o, c);
            }
            out
        }
        Op::Dot(a, b) => dot(get(*a), get(*b)),
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
        | Op::Atomic(..)
        | Op::CompareExchange(..)
        | Op::Index(..)
        | Op::WithLane(..)
        | Op::Subgroup(..)
        | Op::SubgroupShuffle(..) => return None,
    })
}
