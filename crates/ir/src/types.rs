//! The value types of the IR: four (five with f16) scalars and vectors of
//! 2 to 4 of them, and the literals that inhabit them.

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
}

impl Scalar {
    /// Bytes per element in a host buffer (`bool` has no host layout: 4).
    pub const fn size(self) -> usize {
        match self {
            Scalar::F16 => 2,
            _ => 4,
        }
    }

    /// `i32` or `u32`.
    pub const fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32)
    }

    /// `f32` or `f16`.
    pub const fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F16)
    }

    /// Integer or float.
    pub const fn is_numeric(self) -> bool {
        self.is_int() || self.is_float()
    }

    /// Numeric and signed (`i32`, floats).
    pub const fn is_signed(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::F32 | Scalar::F16)
    }

    /// The WGSL spelling.
    pub const fn wgsl(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::F32 => "f32",
            Scalar::F16 => "f16",
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

/// A scalar constant. Floats are kept as bits so the IR hashes and compares
/// exactly (`-0.0` and NaN payloads included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lit {
    /// A `bool`.
    Bool(bool),
    /// An `i32`.
    I32(i32),
    /// A `u32`.
    U32(u32),
    /// An `f32`, as bits.
    F32(u32),
    /// An `f16`, as bits.
    F16(u16),
}

impl Lit {
    /// An `f32` literal.
    pub fn f32(v: f32) -> Self {
        Lit::F32(v.to_bits())
    }

    /// The literal's type.
    pub const fn scalar(self) -> Scalar {
        match self {
            Lit::Bool(_) => Scalar::Bool,
            Lit::I32(_) => Scalar::I32,
            Lit::U32(_) => Scalar::U32,
            Lit::F32(_) => Scalar::F32,
            Lit::F16(_) => Scalar::F16,
        }
    }

    /// The literal as the 32 bits the interpreter keeps per lane.
    pub const fn bits(self) -> u32 {
        match self {
            Lit::Bool(b) => b as u32,
            Lit::I32(v) => v as u32,
            Lit::U32(v) | Lit::F32(v) => v,
            Lit::F16(v) => v as u32,
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
        Lit::f32(v)
    }
}
