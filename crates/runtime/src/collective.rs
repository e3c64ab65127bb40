//! Vocabulary of the collective operations.
//!
//! A [`Reduction`] names both halves of what a reducing collective does: the
//! operation ([`ReduceOp`]) and the element type ([`DType`]) the bytes hold.
//! The server sees byte ranges, so without the element type a host
//! reduction could not know whether four bytes are an `f32` or an `i32`; a
//! client's [`Communicator`](crate::client::Communicator) takes it from a
//! typed handle instead.

use std::fmt;

/// How a reducing collective combines the ranks' values, element-wise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum over ranks (integers wrap, two's complement).
    Sum,
    /// Product over ranks (integers wrap, two's complement).
    Prod,
    /// Smallest value.
    Min,
    /// Largest value.
    Max,
    /// Sum divided by the number of ranks (integers: the exact mean,
    /// truncated toward zero).
    Mean,
}

impl ReduceOp {
    /// Every operation, in declaration order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Mean,
    ];

    /// The operation's lower-case name (`"sum"`, `"prod"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Mean => "mean",
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element type of a reduced buffer. Every type is little-endian in
/// memory, as on every device wgpu drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: the upper half of an `f32`.
    BF16,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
}

impl DType {
    /// Every element type, in declaration order.
    pub const ALL: [DType; 8] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Whether the type is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// The type's lower-case name (`"f16"`, `"bf16"`, `"f32"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a reducing collective computes: `op` over elements of type `dtype`.
/// Displayed as `op(dtype)`, e.g. `sum(f32)`.
///
/// ```
/// use compute_runtime::{DType, Pod, ReduceOp, Reduction};
///
/// let r = Reduction::mean(DType::BF16);
/// assert_eq!(r.to_string(), "mean(bf16)");
/// assert_eq!(Reduction::new(ReduceOp::Sum, DType::F32), Reduction::sum(DType::F32));
/// // The dtype of a typed buffer's elements, where the type says it:
/// assert_eq!(<f32 as Pod>::DTYPE, Some(DType::F32));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reduction {
    /// The element-wise operation.
    pub op: ReduceOp,
    /// The element type the buffers hold.
    pub dtype: DType,
}

impl Reduction {
    /// `op` over elements of type `dtype`.
    pub const fn new(op: ReduceOp, dtype: DType) -> Self {
        Reduction { op, dtype }
    }

    /// Sum of `dtype` elements.
    pub const fn sum(dtype: DType) -> Self {
        Self::new(ReduceOp::Sum, dtype)
    }

    /// Product of `dtype` elements.
    pub const fn prod(dtype: DType) -> Self {
        Self::new(ReduceOp::Prod, dtype)
    }

    /// Minimum of `dtype` elements.
    pub const fn min(dtype: DType) -> Self {
        Self::new(ReduceOp::Min, dtype)
    }

    /// Maximum of `dtype` elements.
    pub const fn max(dtype: DType) -> Self {
        Self::new(ReduceOp::Max, dtype)
    }

    /// Mean of `dtype` elements.
    pub const fn mean(dtype: DType) -> Self {
        Self::new(ReduceOp::Mean, dtype)
    }
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.op, self.dtype)
    }
}

/// What later work on the stream waits for after a collective is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ComputeWait {
    /// Later launches on the stream see the collective's result.
    #[default]
    Wait,
    /// The caller calls `sync_collective` before using the result.
    Overlap,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        let sizes: Vec<usize> = DType::ALL.iter().map(|d| d.size()).collect();
        assert_eq!(sizes, [2, 2, 4, 8, 4, 4, 8, 8]);
        assert_eq!(Reduction::sum(DType::F32).to_string(), "sum(f32)");
        assert_eq!(Reduction::mean(DType::BF16).to_string(), "mean(bf16)");
        assert_eq!(
            Reduction::new(ReduceOp::Max, DType::U64),
            Reduction::max(DType::U64)
        );
        assert!(DType::F16.is_float() && !DType::I64.is_float());
    }
}
