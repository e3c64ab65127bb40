//! [`Operand`]: what a builder method takes where it takes a value.

use super::Val;
use crate::{Lit, Scalar, Type};

/// A value, or a Rust literal that becomes a constant of the type of the
/// value it meets: `k.add(x, 1.0)` adds an `f32` 1 to an `f32` `x` (an `f16`
/// one to an `f16` `x`), `k.lt(i, 4)` compares a `u32` `i` with a `u32` 4,
/// and an index is a `u32`. A literal whose value the type cannot hold
/// (`-1` for a `u32`, `0.5` for an integer) keeps its own Rust type, and
/// the type check then says what did not fit.
pub trait Operand: Copy {
    /// The value, when it is one.
    fn as_val(self) -> Option<Val>;
    /// The constant, typed like `like` where it fits.
    fn literal(self, like: Option<Type>) -> Lit;
}

impl Operand for Val {
    fn as_val(self) -> Option<Val> {
        Some(self)
    }
    fn literal(self, _: Option<Type>) -> Lit {
        // Never asked: `as_val` answered.
        Lit::U32(0)
    }
}

/// The scalar of `like`, when it is a scalar type.
fn scalar_of(like: Option<Type>) -> Option<Scalar> {
    like.filter(|t| t.lanes == 1).map(|t| t.scalar)
}

/// An integer literal as a constant of `like`'s type, if it holds it.
fn int(v: i128, like: Option<Type>) -> Option<Lit> {
    Some(match scalar_of(like)? {
        Scalar::I32 => Lit::I32(i32::try_from(v).ok()?),
        Scalar::U32 => Lit::U32(u32::try_from(v).ok()?),
        Scalar::I64 => Lit::I64(i64::try_from(v).ok()?),
        Scalar::U64 => Lit::U64(u64::try_from(v).ok()?),
        Scalar::F32 => Lit::F32(v as f32),
        Scalar::F16 => Lit::f16(v as f32),
        Scalar::F64 => Lit::F64(v as f64),
        Scalar::Bool => return None,
    })
}

/// A float literal as a constant of `like`'s (float) type.
fn float(v: f64, like: Option<Type>) -> Option<Lit> {
    Some(match scalar_of(like)? {
        Scalar::F32 => Lit::F32(v as f32),
        Scalar::F16 => Lit::f16(v as f32),
        Scalar::F64 => Lit::F64(v),
        Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::Bool => return None,
    })
}

macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl Operand for $t {
            fn as_val(self) -> Option<Val> {
                None
            }
            fn literal(self, like: Option<Type>) -> Lit {
                int(i128::from(self), like).unwrap_or_else(|| Lit::from(self))
            }
        }
    )*};
}
int_operand!(i32, u32, i64, u64);

macro_rules! float_operand {
    ($($t:ty),*) => {$(
        impl Operand for $t {
            fn as_val(self) -> Option<Val> {
                None
            }
            fn literal(self, like: Option<Type>) -> Lit {
                float(f64::from(self), like).unwrap_or_else(|| Lit::from(self))
            }
        }
    )*};
}
float_operand!(f32, f64);

impl Operand for bool {
    fn as_val(self) -> Option<Val> {
        None
    }
    fn literal(self, _: Option<Type>) -> Lit {
        Lit::Bool(self)
    }
}

impl Operand for Lit {
    fn as_val(self) -> Option<Val> {
        None
    }
    fn literal(self, _: Option<Type>) -> Lit {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_take_the_type_they_meet_when_they_fit() {
        assert_eq!(4.literal(Some(Type::U32)), Lit::U32(4));
        assert_eq!(4.literal(Some(Type::F32)), Lit::F32(4.0));
        assert_eq!((-1).literal(Some(Type::U32)), Lit::I32(-1), "does not fit");
        assert_eq!(0.5.literal(Some(Type::I32)), Lit::F64(0.5), "does not fit");
        assert_eq!(0.5.literal(Some(Type::F32)), Lit::F32(0.5));
        assert_eq!(2.literal(None), Lit::I32(2));
    }
}
