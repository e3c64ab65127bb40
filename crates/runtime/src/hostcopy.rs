//! Copying large host buffers on several threads, and the pool of threads
//! that does it (and the collectives' host reductions).
//!
//! One thread's `memcpy` out of (or into) GPU-visible memory tops out well
//! below what the memory system moves: on the H200 machine, 6-10 GB/s out of
//! a mapped read buffer on one thread against 17-23 GB/s on eight or more,
//! 11-14 GB/s into mapped write memory against 25-28 GB/s on four or more.
//! [`copy_parallel`] splits a large copy into chunks of at least
//! [`MIN_CHUNK`] bytes over the threads of [`pool`], a pool of at most
//! [`max_threads`] started on first use and kept: a collective's 4 MiB
//! steps would pay more for a thread start each than they save, which is
//! why the copies used to stay on one thread below 8 MiB. A small copy
//! stays on the calling thread.

use std::sync::OnceLock;

use rayon::prelude::*;

/// Bytes below which a chunk is not worth handing to another thread.
pub const MIN_CHUNK: usize = 1 << 20;

/// Threads a copy may use: the machine's parallelism, at most 8 (more did
/// not move more bytes on the machines measured).
pub fn max_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

/// The process's host-copy threads ([`max_threads`] of them), started on
/// first use. `None` when the system refused the threads: callers then
/// copy on their own thread.
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(max_threads())
            .thread_name(|i| format!("compute-hostcopy-{i}"))
            .build()
            .map_err(|e| tracing::warn!(error = %e, "no host-copy threads; copies stay serial"))
            .ok()
    })
    .as_ref()
}

/// How many pieces a copy of `len` bytes is cut into: one per
/// [`MIN_CHUNK`], at most [`max_threads`].
pub fn pieces_for(len: usize) -> usize {
    (len / MIN_CHUNK).clamp(1, max_threads())
}

/// Copies `src` into `dst` (equal lengths; the shorter one bounds the copy)
/// on up to [`max_threads`] threads of [`pool`].
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    let pieces = pieces_for(len);
    match pool() {
        Some(pool) if pieces > 1 => {
            let chunk = len.div_ceil(pieces);
            pool.install(|| {
                dst.par_chunks_mut(chunk)
                    .zip(src.par_chunks(chunk))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            });
        }
        _ => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_small_and_large() {
        for len in [0usize, 1, 1000, 3 * MIN_CHUNK + 17, 9 * MIN_CHUNK + 5] {
            let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            copy_parallel(&mut dst, &src);
            assert_eq!(dst, src, "{len}");
        }
    }
}
