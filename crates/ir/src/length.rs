//! Declared buffer lengths: how many elements a kernel needs in a buffer, as
//! an expression of its scalar arguments, checked when a launch's arguments
//! are made ([`Kernel::args`](crate::Kernel::args), and
//! `WgslKernel::args`), before anything is enqueued.
//!
//! A buffer shorter than the kernel's `n` is not out of bounds for the GPU
//! when the kernel guards each access with `i < n`: it reads and writes
//! past the data the caller meant, into padding or a neighbour's bytes
//! under `Unchecked`, or into clamped elements under wgpu's checks. Only
//! the caller knows the relation between `n` and the buffer; a declared
//! length states it once, next to the kernel, and the launch that breaks it
//! is refused with the binding, both lengths and the slice. Nothing runs on
//! the GPU for it.

use std::ops;

use compute_runtime::{KernelArguments, ServerError};

use crate::Lit;

/// A length in elements of a buffer: scalar arguments and integer
/// constants under `+`, `-`, `*`, `/` (rounding down), `min` and `max`.
///
/// ```
/// use compute_ir::{Len, Lit};
///
/// let rows_times_cols = Len::arg(0) * Len::arg(1);
/// assert_eq!(rows_times_cols.eval(&[Lit::U32(3), Lit::U32(5)]), Ok(15));
/// assert_eq!((Len::arg(0) + 4).eval(&[Lit::U32(3)]), Ok(7));
/// assert!((Len::arg(0) - 4).eval(&[Lit::U32(3)]).is_err(), "negative");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Len {
    /// A constant.
    Const(u64),
    /// Scalar argument `i` (an `i32`, `u32`; an `f32` is refused).
    Arg(u32),
    /// A sum.
    Add(Box<Len>, Box<Len>),
    /// A difference (negative is an error at the call).
    Sub(Box<Len>, Box<Len>),
    /// A product.
    Mul(Box<Len>, Box<Len>),
    /// A quotient, rounded down (by zero is an error at the call).
    Div(Box<Len>, Box<Len>),
    /// The smaller.
    Min(Box<Len>, Box<Len>),
    /// The larger.
    Max(Box<Len>, Box<Len>),
}

impl Len {
    /// Scalar argument `i`.
    pub const fn arg(i: u32) -> Self {
        Len::Arg(i)
    }

    /// The smaller of two lengths.
    pub fn min(self, other: impl Into<Len>) -> Self {
        Len::Min(Box::new(self), Box::new(other.into()))
    }

    /// The larger of two lengths.
    pub fn max(self, other: impl Into<Len>) -> Self {
        Len::Max(Box::new(self), Box::new(other.into()))
    }

    /// The length under `scalars`, or why it has none (an argument that is
    /// missing or not an integer, a negative difference, a division by
    /// zero, an overflow).
    pub fn eval(&self, scalars: &[Lit]) -> Result<u64, String> {
        let two = |a: &Len, b: &Len| Ok::<_, String>((a.eval(scalars)?, b.eval(scalars)?));
        match self {
            Len::Const(c) => Ok(*c),
            Len::Arg(i) => match scalars.get(*i as usize) {
                Some(Lit::U32(v)) => Ok(u64::from(*v)),
                Some(Lit::U64(v)) => Ok(*v),
                Some(Lit::I32(v)) => u64::try_from(*v).map_err(|_| format!("argument {i} is {v}")),
                Some(Lit::I64(v)) => u64::try_from(*v).map_err(|_| format!("argument {i} is {v}")),
                Some(other) => Err(format!(
                    "argument {i} is {}, not an integer",
                    other.scalar()
                )),
                None => Err(format!("argument {i} is not passed")),
            },
            Len::Add(a, b) => {
                let (a, b) = two(a, b)?;
                a.checked_add(b).ok_or_else(|| "the sum overflows".into())
            }
            Len::Sub(a, b) => {
                let (a, b) = two(a, b)?;
                a.checked_sub(b)
                    .ok_or_else(|| format!("{a} - {b} is negative"))
            }
            Len::Mul(a, b) => {
                let (a, b) = two(a, b)?;
                a.checked_mul(b)
                    .ok_or_else(|| "the product overflows".into())
            }
            Len::Div(a, b) => {
                let (a, b) = two(a, b)?;
                a.checked_div(b).ok_or_else(|| format!("{a} / 0"))
            }
            Len::Min(a, b) => two(a, b).map(|(a, b)| a.min(b)),
            Len::Max(a, b) => two(a, b).map(|(a, b)| a.max(b)),
        }
    }
}

/// A constant (one `From` for integers, so `Len::arg(0) + 4` infers the
/// literal's type; a larger constant is `Len::Const`).
impl From<u32> for Len {
    fn from(c: u32) -> Self {
        Len::Const(u64::from(c))
    }
}

macro_rules! len_op {
    ($($trait:ident $method:ident $variant:ident),*) => {$(
        impl<T: Into<Len>> ops::$trait<T> for Len {
            type Output = Len;
            fn $method(self, rhs: T) -> Len {
                Len::$variant(Box::new(self), Box::new(rhs.into()))
            }
        }
    )*};
}
len_op!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div);

/// A buffer's declared length: binding `binding` holds at least `len`
/// elements of `elem_bytes` bytes each.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeclaredLen {
    /// The buffer's `@binding`.
    pub binding: u32,
    /// Bytes of one element (a vector's, for a buffer of vectors).
    pub elem_bytes: u64,
    /// The least number of elements.
    pub len: Len,
}

/// Checks each declared length against `args`' buffers under `scalars`.
pub fn check_lengths(
    kernel: &str,
    declared: &[DeclaredLen],
    args: &KernelArguments,
    scalars: &[Lit],
) -> Result<(), ServerError> {
    for d in declared {
        let Some(buffer) = args.buffers.get(d.binding as usize) else {
            continue; // The server refuses a missing buffer with its count.
        };
        let expected = d.len.eval(scalars).map_err(|why| ServerError::InvalidArgument {
            reason: format!(
                "kernel `{kernel}`: the declared length of binding {} cannot be worked out: {why}",
                d.binding
            ),
        })?;
        let actual = buffer.size / d.elem_bytes.max(1);
        if actual < expected {
            return Err(ServerError::BindingLength {
                kernel: kernel.to_string(),
                binding: d.binding,
                memory: buffer.memory_id(),
                expected,
                actual,
            });
        }
    }
    Ok(())
}
