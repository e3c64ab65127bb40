//! The value types of the IR: bool, i32, u32, f32 (plus f16, i64, u64 and
//! f64, each behind a device feature) and vectors of 2 to 4 of them, and the
//! literals that inhabit them.

use std::fmt;

/// A scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// `bool`: not host-shareable, so never a buffer element or argument.
    Bool,
    /// `i32`, two's complement, wrapping.
    I32,
    /// `u32`, wrapping.
    U32,
    /// `f32`.
    F32,
    /// `f16`: compiles only for a device with `SHADER_F16`.
    F16,
    /// `i64`, two's complement, wrapping: compiles only for a device with
    /// `SHADER_INT64`. Not a scalar argument, not atomic.
    I64,
    /// `u64`, wrapping: compiles only for a device with `SHADER_INT64`.
    U64,
    /// `f64`: compiles only for a device with `SHADER_F64`. Only the math
    /// Vulkan's GLSL.std.450 defines on 64-bit floats (no `exp`, `log`,
    /// `pow`, `sin`, `cos`, `tanh`).
    F64,
}

impl Scalar {
    /// The element type of the runtime (`None` for `bool`, which a buffer
    /// or argument cannot hold).
    pub const fn dtype(self) -> Option<compute_runtime::DType> {
        use compute_runtime::DType;
        Some(match self {
            Scalar::Bool => return None,
            Scalar::I32 => DType::I32,
            Scalar::U32 => DType::U32,
            Scalar::F32 => DType::F32,
            Scalar::F16 => DType::F16,
            Scalar::I64 => DType::I64,
            Scalar::U64 => DType::U64,
            Scalar::F64 => DType::F64,
        })
    }

    /// Bytes per element in a host buffer (`bool` has no host layout: 4).
    pub const fn size(self) -> usize {
        match self {
            Scalar::F16 => 2,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
            _ => 4,
        }
    }

    /// Bits of one value (`bool`: 32, as it is kept).
    pub const fn bits(self) -> u32 {
        8 * self.size() as u32
    }

    /// `i64`, `u64` or `f64`.
    pub const fn is_64(self) -> bool {
        matches!(self, Scalar::I64 | Scalar::U64 | Scalar::F64)
    }

    /// `i32`, `u32`, `i64` or `u64`.
    pub const fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64)
    }

    /// `f32`, `f16` or `f64`.
    pub const fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F16 | Scalar::F64)
    }

    /// Integer or float.
    pub const fn is_numeric(self) -> bool {
        self.is_int() || self.is_float()
    }

    /// Numeric and signed (`i32`, `i64`, floats).
    pub const fn is_signed(self) -> bool {
        matches!(
            self,
            Scalar::I32 | Scalar::I64 | Scalar::F32 | Scalar::F16 | Scalar::F64
        )
    }

    /// The WGSL spelling.
    pub const fn wgsl(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::F32 => "f32",
            Scalar::F16 => "f16",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::F64 => "f64",
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wgsl())
    }
}

/// A value type: a scalar, or a vector of `lanes` (2..=4) scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    /// Element type.
    pub scalar: Scalar,
    /// 1 for a scalar, 2..=4 for a vector.
    pub lanes: u8,
}

impl Type {
    /// A scalar type.
    pub const fn scalar(scalar: Scalar) -> Self {
        Type { scalar, lanes: 1 }
    }
    /// A vector type; `lanes` is checked by the validator.
    pub const fn vec(scalar: Scalar, lanes: u8) -> Self {
        Type { scalar, lanes }
    }
    /// `bool`.
    pub const BOOL: Type = Type::scalar(Scalar::Bool);
    /// `i32`.
    pub const I32: Type = Type::scalar(Scalar::I32);
    /// `u32`.
    pub const U32: Type = Type::scalar(Scalar::U32);
    /// `f32`.
    pub const F32: Type = Type::scalar(Scalar::F32);
    /// `i64`.
    pub const I64: Type = Type::scalar(Scalar::I64);
    /// `u64`.
    pub const U64: Type = Type::scalar(Scalar::U64);
    /// `f64`.
    pub const F64: Type = Type::scalar(Scalar::F64);
    /// `vec3<u32>`, the type of the id builtins.
    pub const UVEC3: Type = Type::vec(Scalar::U32, 3);

    /// Whether this is a vector.
    pub const fn is_vector(self) -> bool {
        self.lanes > 1
    }

    /// The same shape with another element type.
    pub const fn with_scalar(self, scalar: Scalar) -> Self {
        Type {
            scalar,
            lanes: self.lanes,
        }
    }
}

impl From<Scalar> for Type {
    fn from(s: Scalar) -> Self {
        Type::scalar(s)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            write!(f, "{}", self.scalar)
        } else {
            write!(f, "vec{}<{}>", self.lanes, self.scalar)
        }
    }
}

/// A scalar constant: `Lit::F32(1.5)`, `Lit::U32(4)`, `Lit::f16(0.5)`.
///
/// Floats hold their values (`f16`, which Rust lacks, holds its bits; build
/// one from an `f32` with [`Lit::f16`]). Equality and hashing are by bits,
/// so the IR compares and hashes exactly: `-0.0` differs from `0.0`, a NaN
/// equals the same NaN bit for bit, and NaN payloads survive.
///
/// ```
/// use compute_ir::{Lit, Scalar};
///
/// assert_eq!(Lit::F32(1.5).bits(), u64::from(1.5f32.to_bits()));
/// assert_eq!(Lit::f16(1.0), Lit::F16(0x3c00));
/// assert_eq!(Lit::from(2.0f64).scalar(), Scalar::F64);
/// // By bits: a NaN equals itself, and the two zeros differ.
/// assert_eq!(Lit::F32(f32::NAN), Lit::F32(f32::NAN));
/// assert_ne!(Lit::F32(0.0), Lit::F32(-0.0));
/// let payload = f32::from_bits(0x7fc0_0123);
/// assert_eq!(Lit::F32(payload).bits(), 0x7fc0_0123);
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Lit {
    /// A `bool`.
    Bool(bool),
    /// An `i32`.
    I32(i32),
    /// A `u32`.
    U32(u32),
    /// An `f32`.
    F32(f32),
    /// An `f16`, as its IEEE binary16 bits (see [`Lit::f16`]).
    F16(u16),
    /// An `i64`.
    I64(i64),
    /// A `u64`.
    U64(u64),
    /// An `f64`.
    F64(f64),
}

impl PartialEq for Lit {
    /// Same type and same bits.
    fn eq(&self, other: &Self) -> bool {
        self.scalar() == other.scalar() && self.bits() == other.bits()
    }
}

impl Eq for Lit {}

impl std::hash::Hash for Lit {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.scalar().hash(state);
        self.bits().hash(state);
    }
}

impl Lit {
    /// The zero (or `false`) of `scalar`.
    pub const fn zero(scalar: Scalar) -> Self {
        match scalar {
            Scalar::Bool => Lit::Bool(false),
            Scalar::I32 => Lit::I32(0),
            Scalar::U32 => Lit::U32(0),
            Scalar::F32 => Lit::F32(0.0),
            Scalar::F16 => Lit::F16(0),
            Scalar::I64 => Lit::I64(0),
            Scalar::U64 => Lit::U64(0),
            Scalar::F64 => Lit::F64(0.0),
        }
    }

    /// An `f32` literal (the same as `Lit::F32(v)`).
    pub const fn f32(v: f32) -> Self {
        Lit::F32(v)
    }

    /// An `f64` literal (the same as `Lit::F64(v)`).
    pub const fn f64(v: f64) -> Self {
        Lit::F64(v)
    }

    /// An `f16` literal: `v` rounded to the nearest binary16 (ties to even;
    /// beyond the range, infinity; a NaN stays a NaN).
    pub fn f16(v: f32) -> Self {
        Lit::F16(crate::interp::f16::from_f32(v))
    }

    /// The literal's type.
    pub const fn scalar(self) -> Scalar {
        match self {
            Lit::Bool(_) => Scalar::Bool,
            Lit::I32(_) => Scalar::I32,
            Lit::U32(_) => Scalar::U32,
            Lit::F32(_) => Scalar::F32,
            Lit::F16(_) => Scalar::F16,
            Lit::I64(_) => Scalar::I64,
            Lit::U64(_) => Scalar::U64,
            Lit::F64(_) => Scalar::F64,
        }
    }

    /// The literal as the bits the interpreter keeps per lane: zero-extended
    /// to 64 (a 32-bit `i32` is its two's complement in the low half).
    pub const fn bits(self) -> u64 {
        match self {
            Lit::Bool(b) => b as u64,
            Lit::I32(v) => v as u32 as u64,
            Lit::U32(v) => v as u64,
            Lit::F32(v) => v.to_bits() as u64,
            Lit::F16(v) => v as u64,
            Lit::I64(v) => v as u64,
            Lit::U64(v) => v,
            Lit::F64(v) => v.to_bits(),
        }
    }
}

impl From<bool> for Lit {
    fn from(v: bool) -> Self {
        Lit::Bool(v)
    }
}
impl From<i32> for Lit {
    fn from(v: i32) -> Self {
        Lit::I32(v)
    }
}
impl From<u32> for Lit {
    fn from(v: u32) -> Self {
        Lit::U32(v)
    }
}
impl From<f32> for Lit {
    fn from(v: f32) -> Self {
        Lit::F32(v)
    }
}
impl From<i64> for Lit {
    fn from(v: i64) -> Self {
        Lit::I64(v)
    }
}
impl From<u64> for Lit {
    fn from(v: u64) -> Self {
        Lit::U64(v)
    }
}
impl From<f64> for Lit {
    fn from(v: f64) -> Self {
        Lit::F64(v)
    }
}
