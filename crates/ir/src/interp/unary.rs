//! One lane of a unary operation, by WGSL's rules: the oracle's arithmetic.
//!
//! Every match is exhaustive: an operation added to [`UnOp`] does not
//! compile here until its meaning on each type is written down. The
//! operations the type check refuses on a type are listed in one arm per
//! type, which returns the operand unchanged (never reached).

use super::value::{from_f, to_f};
use crate::Scalar;
use crate::ir::UnOp;

/// One lane of a unary operation.
pub fn unary_lane(op: UnOp, s: Scalar, a: u64) -> u64 {
    match s {
        Scalar::Bool => u64::from(if op == UnOp::Not { a == 0 } else { a != 0 }),
        Scalar::I32 => u64::from(int32(op, a as u32, true)),
        Scalar::U32 => u64::from(int32(op, a as u32, false)),
        Scalar::I64 => int64(op, a, true),
        Scalar::U64 => int64(op, a, false),
        Scalar::F64 => float64(op, f64::from_bits(a)).to_bits(),
        Scalar::F32 | Scalar::F16 => from_f(s, float32(op, to_f(s, a))),
    }
}

fn int32(op: UnOp, x: u32, signed: bool) -> u32 {
    let i = x as i32;
    match op {
        UnOp::Neg => i.wrapping_neg() as u32,
        UnOp::BitNot => !x,
        UnOp::Abs if signed => i.wrapping_abs() as u32,
        UnOp::Abs => x,
        UnOp::Sign => i.signum() as u32,
        UnOp::CountOneBits => x.count_ones(),
        UnOp::CountLeadingZeros => x.leading_zeros(),
        UnOp::CountTrailingZeros => x.trailing_zeros(),
        UnOp::ReverseBits => x.reverse_bits(),
        UnOp::Not
        | UnOp::Exp
        | UnOp::Log
        | UnOp::Sqrt
        | UnOp::InverseSqrt
        | UnOp::Tanh
        | UnOp::Sin
        | UnOp::Cos
        | UnOp::Floor
        | UnOp::Ceil
        | UnOp::Exp2
        | UnOp::Log2
        | UnOp::Trunc
        | UnOp::Round
        | UnOp::Fract => x,
    }
}

fn int64(op: UnOp, x: u64, signed: bool) -> u64 {
    let i = x as i64;
    match op {
        UnOp::Neg => i.wrapping_neg() as u64,
        UnOp::BitNot => !x,
        UnOp::Abs if signed => i.wrapping_abs() as u64,
        UnOp::Abs => x,
        UnOp::Not
        | UnOp::Sign
        | UnOp::CountOneBits
        | UnOp::CountLeadingZeros
        | UnOp::CountTrailingZeros
        | UnOp::ReverseBits
        | UnOp::Exp
        | UnOp::Log
        | UnOp::Sqrt
        | UnOp::InverseSqrt
        | UnOp::Tanh
        | UnOp::Sin
        | UnOp::Cos
        | UnOp::Floor
        | UnOp::Ceil
        | UnOp::Exp2
        | UnOp::Log2
        | UnOp::Trunc
        | UnOp::Round
        | UnOp::Fract => x,
    }
}

/// The float operations, written once for `f32` and `f64`.
macro_rules! float_lane {
    ($name:ident, $t:ty) => {
        fn $name(op: UnOp, x: $t) -> $t {
            match op {
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
                UnOp::Exp2 => x.exp2(),
                UnOp::Log2 => x.log2(),
                UnOp::Trunc => x.trunc(),
                UnOp::Round => x.round_ties_even(),
                UnOp::Fract => x - x.floor(),
                // WGSL: 1 above zero, -1 below, 0 at either zero (Rust's
                // `signum` answers 1 for +0); NaN stays NaN.
                UnOp::Sign if x > 0.0 => 1.0,
                UnOp::Sign if x < 0.0 => -1.0,
                UnOp::Sign if x == 0.0 => 0.0,
                UnOp::Sign => x,
                UnOp::Not
                | UnOp::BitNot
                | UnOp::CountOneBits
                | UnOp::CountLeadingZeros
                | UnOp::CountTrailingZeros
                | UnOp::ReverseBits => x,
            }
        }
    };
}

float_lane!(float32, f32);
float_lane!(float64, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_counts_follow_wgsl_at_zero_and_on_signed_values() {
        assert_eq!(int32(UnOp::CountLeadingZeros, 0, false), 32);
        assert_eq!(int32(UnOp::CountTrailingZeros, 0, true), 32);
        assert_eq!(int32(UnOp::CountOneBits, u32::MAX, true), 32);
        assert_eq!(int32(UnOp::ReverseBits, 1, false), 1 << 31);
        assert_eq!(int32(UnOp::Sign, (-7i32) as u32, true), (-1i32) as u32);
    }

    #[test]
    fn rounding_is_to_even_and_sign_of_zero_is_zero() {
        assert_eq!(float32(UnOp::Round, 2.5), 2.0);
        assert_eq!(float32(UnOp::Round, -3.5), -4.0);
        assert_eq!(float32(UnOp::Trunc, -1.7), -1.0);
        assert_eq!(float32(UnOp::Fract, -1.25), 0.75);
        assert_eq!(float64(UnOp::Sign, -0.0), 0.0);
        assert_eq!(float64(UnOp::Sign, 0.0), 0.0);
    }
}
