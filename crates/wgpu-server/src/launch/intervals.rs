//! Integer intervals for the index proof (`indices.rs`): the arithmetic,
//! in exact (`i128`) values, so that a result outside its type's range is
//! seen (the caller then assumes the value wrapped).

use naga::{BinaryOperator, Literal, MathFunction};

/// An inclusive range of integer values.
pub(crate) type Range = (i128, i128);

/// The smallest range holding both.
pub(crate) fn union(a: Range, b: Range) -> Range {
    (a.0.min(b.0), a.1.max(b.1))
}

/// What both say, where both say something.
pub(crate) fn intersect(a: Option<Range>, b: Option<Range>) -> Option<Range> {
    match (a, b) {
        (Some(a), Some(b)) => Some((a.0.max(b.0), a.1.min(b.1))),
        (a, None) => a,
        (None, b) => b,
    }
}

/// An integer literal's one value.
pub(crate) fn literal(l: Literal) -> Option<Range> {
    let v = match l {
        Literal::U32(v) => i128::from(v),
        Literal::I32(v) => i128::from(v),
        Literal::U64(v) => i128::from(v),
        Literal::I64(v) => i128::from(v),
        _ => return None,
    };
    Some((v, v))
}

/// The result's range, in exact arithmetic (the caller rejects one that
/// leaves the result type's range: the value may have wrapped).
pub(crate) fn binary(op: BinaryOperator, a: Range, b: Range) -> Option<Range> {
    let non_negative = a.0 >= 0 && b.0 >= 0;
    match op {
        BinaryOperator::Add => Some((a.0 + b.0, a.1 + b.1)),
        BinaryOperator::Subtract => Some((a.0 - b.1, a.1 - b.0)),
        // 64-bit operands: a product may pass i128.
        BinaryOperator::Multiply if non_negative => {
            Some((a.0.checked_mul(b.0)?, a.1.checked_mul(b.1)?))
        }
        BinaryOperator::Divide if non_negative && b.0 > 0 => Some((a.0 / b.1, a.1 / b.0)),
        BinaryOperator::Modulo if non_negative && b.0 > 0 => Some((0, a.1.min(b.1 - 1))),
        BinaryOperator::And if non_negative => Some((0, a.1.min(b.1))),
        BinaryOperator::InclusiveOr | BinaryOperator::ExclusiveOr if non_negative => {
            Some((0, below_power_of_two(a.1.max(b.1))))
        }
        // WGSL masks a shift amount to the width: only amounts that are
        // below 32 for any width (the caller checks the result's range).
        BinaryOperator::ShiftRight if non_negative && b.1 < 32 => Some((a.0 >> b.1, a.1 >> b.0)),
        BinaryOperator::ShiftLeft if non_negative && b.1 < 32 => Some((a.0 << b.0, a.1 << b.1)),
        _ => None,
    }
}

/// The largest `2^k - 1` at least `x` (for `x >= 0`): a bound of `x | y`
/// and `x ^ y` when both are at most `x`.
fn below_power_of_two(x: i128) -> i128 {
    let mut p = 1i128;
    while p <= x {
        p <<= 1;
    }
    p - 1
}

/// `min`, `max` and `clamp` of integers.
pub(crate) fn math(
    fun: MathFunction,
    a: Range,
    b: Option<Range>,
    c: Option<Range>,
) -> Option<Range> {
    match (fun, b, c) {
        (MathFunction::Min, Some(b), _) => Some((a.0.min(b.0), a.1.min(b.1))),
        (MathFunction::Max, Some(b), _) => Some((a.0.max(b.0), a.1.max(b.1))),
        // `clamp(x, lo, hi)` is `min(max(x, lo), hi)`.
        (MathFunction::Clamp, Some(lo), Some(hi)) => {
            Some((a.0.max(lo.0).min(hi.0), a.1.max(lo.1).min(hi.1)))
        }
        _ => None,
    }
}
