//! Host staging buffers: `staging(sizes)` hands out `Bytes` the caller fills
//! (`try_into_mut`, fill, `freeze`), and a `write` of them gives the
//! allocation back to this pool once the queue has copied it.
//!
//! What it buys: a steady upload loop allocates and page-faults nothing on
//! the host; the caller fills memory that is already resident. The one host
//! copy left is the write's: into a mapped upload buffer on several threads
//! for a megabyte or more, else into the upload arena (`upload.rs`).
//!
//! What it does not buy: the caller's bytes are not the GPU-visible upload
//! buffer itself. That would need `bytes::Bytes` over a mapped wgpu range
//! that the caller can fill, and neither side allows it: wgpu 30 hands out
//! mapped *write* ranges only as `WriteOnly` (no `&mut [u8]`), and a
//! `Bytes` built on a custom owner can never be turned back into `BytesMut`
//! (`is_unique` is always false for owners). See `docs/status.md`.

use bytes::{Bytes, BytesMut};

/// Buffers smaller than this are not worth keeping.
const MIN_POOLED: usize = 64 << 10;
/// Bytes of host memory the pool keeps at most.
const MAX_POOLED_BYTES: usize = 512 << 20;

/// Reusable host allocations for staging.
#[derive(Debug, Default)]
pub(crate) struct HostStaging {
    free: Vec<BytesMut>,
    pooled_bytes: usize,
    /// Allocations made because the pool had nothing fitting.
    pub allocations: u64,
}

impl HostStaging {
    /// A fillable buffer of exactly `size` bytes.
    pub fn take(&mut self, size: usize) -> Bytes {
        // Best fit among kept buffers that are large enough.
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() >= size)
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut b = self.free.swap_remove(i);
                self.pooled_bytes -= b.len();
                b.truncate(size);
                b.freeze()
            }
            None => {
                self.allocations += 1;
                BytesMut::zeroed(size).freeze()
            }
        }
    }

    /// Takes back a written buffer when the caller no longer shares it.
    pub fn give_back(&mut self, data: Bytes) {
        if data.len() < MIN_POOLED || self.pooled_bytes + data.len() > MAX_POOLED_BYTES {
            return;
        }
        if let Ok(mut b) = data.try_into_mut() {
            // Restore the full length truncated by `take` (the tail was
            // initialized when the buffer was first zeroed).
            let cap = b.capacity();
            b.resize(cap, 0);
            self.pooled_bytes += b.len();
            self.free.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_buffers_are_reused_without_allocating() {
        let mut p = HostStaging::default();
        let b = p.take(1 << 20);
        assert_eq!(b.len(), 1 << 20);
        let mut m = b.try_into_mut().expect("unique");
        m[0] = 7;
        p.give_back(m.freeze());
        let again = p.take(1 << 19);
        assert_eq!(again.len(), 1 << 19);
        assert_eq!(p.allocations, 1, "served from the pool");
        // A shared buffer is not taken back.
        let shared = p.take(1 << 20);
        let clone = shared.clone();
        p.give_back(shared);
        assert!(p.free.is_empty());
        drop(clone);
    }
}
