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
