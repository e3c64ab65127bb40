//! Host buffers as the interpreter (and a GPU) sees them: little-endian
//! bytes. [`to_bytes`] and [`from_bytes`] do it for any [`Element`]; the
//! named shorthands (`f32_bytes`, `bytes_f32`, ...) read better at call
//! sites.

/// A scalar that is stored little-endian in a buffer.
pub trait Element: Copy {
    /// Bytes per element.
    const SIZE: usize;
    /// Appends the element's little-endian bytes to `out`.
    fn put(self, out: &mut Vec<u8>);
    /// The element whose little-endian bytes are `b` (`b.len() == SIZE`).
    fn get(b: &[u8]) -> Self;
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let mut w = [0u8; std::mem::size_of::<$t>()];
                w.copy_from_slice(b);
                <$t>::from_le_bytes(w)
            }
        }
    )*};
}

element!(u32, i32, f32, u64, i64, f64);

/// Elements to bytes.
pub fn to_bytes<T: Element>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * T::SIZE);
    for x in v {
        x.put(&mut out);
    }
    out
}

/// Bytes to elements (a trailing partial element is ignored).
pub fn from_bytes<T: Element>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(T::SIZE).map(T::get).collect()
}

/// `f32`s to bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    to_bytes(v)
}
/// `u32`s to bytes.
pub fn u32_bytes(v: &[u32]) -> Vec<u8> {
    to_bytes(v)
}
/// `i32`s to bytes.
pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    to_bytes(v)
}
/// `f64`s to bytes.
pub fn f64_bytes(v: &[f64]) -> Vec<u8> {
    to_bytes(v)
}
/// `u64`s to bytes.
pub fn u64_bytes(v: &[u64]) -> Vec<u8> {
    to_bytes(v)
}
/// `i64`s to bytes.
pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    to_bytes(v)
}

/// Bytes to `f32`s (a trailing partial element is ignored).
pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    from_bytes(b)
}
/// Bytes to `u32`s.
pub fn bytes_u32(b: &[u8]) -> Vec<u32> {
    from_bytes(b)
}
/// Bytes to `i32`s.
pub fn bytes_i32(b: &[u8]) -> Vec<i32> {
    from_bytes(b)
}
/// Bytes to `f64`s (a trailing partial element is ignored).
pub fn bytes_f64(b: &[u8]) -> Vec<f64> {
    from_bytes(b)
}
/// Bytes to `u64`s.
pub fn bytes_u64(b: &[u8]) -> Vec<u64> {
    from_bytes(b)
}
/// Bytes to `i64`s.
pub fn bytes_i64(b: &[u8]) -> Vec<i64> {
    from_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_little_endian() {
        assert_eq!(u32_bytes(&[0x0403_0201]), vec![1, 2, 3, 4]);
        assert_eq!(bytes_u32(&[1, 2, 3, 4, 5]), vec![0x0403_0201]);
        assert_eq!(bytes_f32(&f32_bytes(&[1.5, -0.0])), vec![1.5, -0.0]);
        assert_eq!(bytes_i64(&i64_bytes(&[-3, i64::MAX])), vec![-3, i64::MAX]);
        assert_eq!(bytes_u64(&u64_bytes(&[u64::MAX])), vec![u64::MAX]);
        assert_eq!(bytes_f64(&f64_bytes(&[0.1])), vec![0.1]);
        assert_eq!(bytes_i32(&i32_bytes(&[-7])), vec![-7]);
    }
}
