//! [`Pod`]: the element types a client moves between typed host slices and
//! device bytes, little-endian as on every device wgpu drives.
//!
//! The trait is sealed: its implementations are exactly the plain numeric
//! types every bit pattern of which is a valid value (`f32`, `f64`, `i32`,
//! `u32`, `i64`, `u64`, `u8`, and `u16` / `i16`, which also carry f16 and
//! bf16 as bits). That is what makes reading any bytes back as a `Vec<T>`
//! sound, and why no dependency (`bytemuck`) is needed.

use crate::{DType, ServerError};

mod sealed {
    pub trait Sealed {}
}

/// A plain-old-data element type: any bytes of its size are a value.
///
/// ```
/// use compute_runtime::{Pod, pod};
///
/// let bytes = pod::to_bytes(&[1.5f32, -2.0]);
/// assert_eq!(bytes.len(), 2 * f32::SIZE);
/// assert_eq!(pod::from_bytes::<f32>(&bytes)?, [1.5, -2.0]);
/// // f16 and bf16 travel as their bits:
/// let half_one: u16 = 0x3c00;
/// assert_eq!(pod::from_bytes::<u16>(&pod::to_bytes(&[half_one]))?, [0x3c00]);
/// # Ok::<(), compute_runtime::ServerError>(())
/// ```
pub trait Pod: sealed::Sealed + Copy + Send + Sync + std::fmt::Debug + 'static {
    /// Bytes per element.
    const SIZE: usize;
    /// The type's name, for errors (`"f32"`).
    const NAME: &'static str;
    /// The collective element type with this layout, where there is one
    /// (`u16` is `None`: it may hold f16 or bf16 bits; say which in the
    /// [`crate::Reduction`]).
    const DTYPE: Option<DType>;
    /// Writes the value's little-endian bytes to `out` (`SIZE` bytes long).
    fn write_le(self, out: &mut [u8]);
    /// The value of `SIZE` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! pod {
    ($($t:ty => $dtype:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Pod for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            const NAME: &'static str = stringify!($t);
            const DTYPE: Option<DType> = $dtype;
            #[inline]
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}

pod! {
    f32 => Some(DType::F32),
    f64 => Some(DType::F64),
    i32 => Some(DType::I32),
    u32 => Some(DType::U32),
    i64 => Some(DType::I64),
    u64 => Some(DType::U64),
    u8 => None,
    u16 => None,
    i16 => None,
}

/// `values` as little-endian bytes.
pub fn to_bytes<T: Pod>(values: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * T::SIZE];
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(T::SIZE)) {
        v.write_le(chunk);
    }
    out
}

/// Little-endian `bytes` as values; a length that is not a whole number of
/// elements is [`ServerError::InvalidArgument`].
pub fn from_bytes<T: Pod>(bytes: &[u8]) -> Result<Vec<T>, ServerError> {
    if !bytes.len().is_multiple_of(T::SIZE) {
        return Err(ServerError::InvalidArgument {
            reason: format!(
                "{} bytes are not a whole number of {} ({} bytes each)",
                bytes.len(),
                T::NAME,
                T::SIZE
            ),
        });
    }
    Ok(bytes.chunks_exact(T::SIZE).map(T::read_le).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_keep_every_bit() {
        let f = [0.0f32, -0.0, f32::from_bits(0x7fc0_1234), f32::MAX];
        let back = from_bytes::<f32>(&to_bytes(&f)).expect("whole");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&f));
        assert_eq!(to_bytes(&[1u32]), [1, 0, 0, 0]);
        assert_eq!(from_bytes::<i64>(&to_bytes(&[-1i64])).expect("whole"), [-1]);
        assert_eq!(from_bytes::<u8>(&[7, 8]).expect("whole"), [7, 8]);
        assert!(from_bytes::<u32>(&[0; 6]).is_err());
        assert_eq!(<f64 as Pod>::DTYPE, Some(DType::F64));
    }
}
