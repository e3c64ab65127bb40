//! Host buffers as the interpreter (and a GPU) sees them: little-endian bytes.

/// `f32`s to bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
/// `u32`s to bytes.
pub fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
/// `i32`s to bytes.
pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn words(b: &[u8]) -> impl Iterator<Item = [u8; 4]> + '_ {
    b.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]])
}

/// Bytes to `f32`s (a trailing partial element is ignored).
pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    words(b).map(f32::from_le_bytes).collect()
}
/// Bytes to `u32`s.
pub fn bytes_u32(b: &[u8]) -> Vec<u32> {
    words(b).map(u32::from_le_bytes).collect()
}
/// Bytes to `i32`s.
pub fn bytes_i32(b: &[u8]) -> Vec<i32> {
    words(b).map(i32::from_le_bytes).collect()
}

fn dwords(b: &[u8]) -> impl Iterator<Item = [u8; 8]> + '_ {
    b.chunks_exact(8).map(|c| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        w
    })
}

/// `f64`s to bytes.
pub fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
/// `u64`s to bytes.
pub fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
/// `i64`s to bytes.
pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
/// Bytes to `f64`s (a trailing partial element is ignored).
pub fn bytes_f64(b: &[u8]) -> Vec<f64> {
    dwords(b).map(f64::from_le_bytes).collect()
}
/// Bytes to `u64`s.
pub fn bytes_u64(b: &[u8]) -> Vec<u64> {
    dwords(b).map(u64::from_le_bytes).collect()
}
/// Bytes to `i64`s.
pub fn bytes_i64(b: &[u8]) -> Vec<i64> {
    dwords(b).map(i64::from_le_bytes).collect()
}
