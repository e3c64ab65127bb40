//! Host output buffers kept for the next call.
//!
//! A collective's output (a reduction, a gathered concatenation) is host
//! memory handed to every rank as `Bytes` and dropped once the ranks have
//! written it to their devices. Allocating it fresh each call costs more
//! than the arithmetic: above the allocator's reuse threshold every page of
//! a new buffer faults on its first write (measured: a 64 MiB f32 sum took
//! about 86 ms into a fresh buffer on lavapipe's 2-core machine, about 22 ms
//! into a reused one). So outputs come from this pool, and the `Bytes`
//! handed out give their buffer back when the last clone drops.
//!
//! What it keeps: at most [`MAX_KEPT_BYTES`], newest first; a buffer is
//! reused for a request of its exact length, so steady loops (the same
//! sizes every step) allocate nothing after their first step.

use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use bytes::Bytes;

/// Bytes of idle output buffers kept at most.
pub const MAX_KEPT_BYTES: usize = 1 << 30;

/// Outputs below this are not worth keeping.
const MIN_KEPT: usize = 1 << 20;

#[derive(Debug, Default)]
struct Kept {
    free: Vec<Vec<u8>>,
    bytes: usize,
}

/// The process's output buffers.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputPool {
    kept: Arc<Mutex<Kept>>,
}

static POOL: LazyLock<OutputPool> = LazyLock::new(OutputPool::default);

impl OutputPool {
    /// The process-wide pool.
    pub fn global() -> &'static OutputPool {
        &POOL
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of `len` bytes whose contents are unspecified (the caller
    /// overwrites all of it): a kept one of that length, else a new one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        if len >= MIN_KEPT {
            let mut kept = self.lock();
            if let Some(i) = kept.free.iter().position(|b| b.len() == len) {
                let b = kept.free.swap_remove(i);
                kept.bytes -= b.len();
                return b;
            }
        }
        vec![0u8; len]
    }

    /// An empty buffer that will hold `cap` bytes (for outputs built by
    /// appending): a kept one of that length, cleared, else a new one.
    pub fn take_empty(&self, cap: usize) -> Vec<u8> {
        let mut b = self.take(cap);
        b.clear();
        b
    }

    /// `Bytes` over `buffer` that give it back to this pool when the last
    /// clone drops.
    pub fn freeze(&self, buffer: Vec<u8>) -> Bytes {
        if buffer.len() < MIN_KEPT {
            return Bytes::from(buffer);
        }
        Bytes::from_owner(Pooled {
            buffer,
            pool: self.clone(),
        })
    }

    fn give_back(&self, buffer: Vec<u8>) {
        let mut kept = self.lock();
        while kept.bytes + buffer.len() > MAX_KEPT_BYTES && !kept.free.is_empty() {
            let oldest = kept.free.remove(0);
            kept.bytes -= oldest.len();
        }
        if kept.bytes + buffer.len() <= MAX_KEPT_BYTES {
            kept.bytes += buffer.len();
            kept.free.push(buffer);
        }
    }
}

/// An output buffer on loan to a `Bytes`.
struct Pooled {
    buffer: Vec<u8>,
    pool: OutputPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.buffer);
        self.pool.give_back(buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_output_serves_the_next_call_of_its_length() {
        let pool = OutputPool::default();
        let mut a = pool.take(MIN_KEPT);
        a[0] = 7;
        let ptr = a.as_ptr();
        let bytes = pool.freeze(a);
        let clone = bytes.clone();
        drop(bytes);
        assert!(pool.lock().free.is_empty(), "a clone still holds it");
        drop(clone);
        let again = pool.take(MIN_KEPT);
        assert_eq!(again.as_ptr(), ptr, "reused");
        assert_eq!(
            pool.take(MIN_KEPT + 4).len(),
            MIN_KEPT + 4,
            "other lengths are new"
        );
    }
}
