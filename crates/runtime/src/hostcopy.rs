//! Copying large host buffers on several threads.
//!
//! One thread's `memcpy` out of (or into) GPU-visible memory tops out well
//! below what the memory system moves: on the H200 machine, 6-10 GB/s out of
//! a mapped read buffer on one thread against 17-23 GB/s on eight or more,
//! 11-14 GB/s into mapped write memory against 25-28 GB/s on four or more.
//! [`copy_parallel`] splits a large copy into chunks of at least
//! [`MIN_CHUNK`] bytes over at most [`max_threads`] scoped threads; a small
//! copy stays on the calling thread, where a thread's start would cost more
//! than it saves.

/// Bytes below which a chunk is not worth a thread of its own.
pub const MIN_CHUNK: usize = 4 << 20;

/// Threads a copy may use: the machine's parallelism, at most 8 (more did
/// not move more bytes on the machines measured).
pub fn max_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

/// Copies `src` into `dst` (equal lengths; the shorter one bounds the copy)
/// on up to [`max_threads`] threads.
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    let threads = (len / MIN_CHUNK).clamp(1, max_threads());
    if threads == 1 {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = len.div_ceil(threads);
    std::thread::scope(|scope| {
        for (d, s) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            scope.spawn(move || d.copy_from_slice(s));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_small_and_large() {
        for len in [0usize, 1, 1000, 3 * MIN_CHUNK + 17] {
            let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            copy_parallel(&mut dst, &src);
            assert_eq!(dst, src, "{len}");
        }
    }
}
