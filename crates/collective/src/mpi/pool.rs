//! Output buffers a transport reuses.
//!
//! A fresh buffer of tens of MiB costs a page fault per 4 KiB page the
//! first time MPI writes it, which is as long as the `MPI_Allreduce` itself
//! (measured: 64 MiB over 3 processes, 120 ms into a touched buffer, 240 ms
//! into a fresh one). The transport's results are `Bytes` over pooled
//! vectors: once the server has applied a result and dropped it, its vector
//! comes back for the next call of a similar size.

use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

/// Results smaller than this are plain vectors.
const MIN_POOLED: usize = 64 << 10;
/// The most the pool keeps, in buffers and in bytes.
const KEEP_COUNT: usize = 8;
const KEEP_BYTES: usize = 1 << 30;

/// Vectors given back by dropped results.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl Pool {
    /// A vector of `len` bytes (contents unspecified: the caller overwrites
    /// every byte), reused when one of between `len` and `2 len` bytes of
    /// capacity is free.
    pub fn take(&self, len: usize) -> Vec<u8> {
        if len >= MIN_POOLED {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= len && v.capacity() / 2 <= len)
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
            if let Some(i) = best {
                let mut v = free.swap_remove(i);
                v.resize(len, 0);
                return v;
            }
        }
        vec![0u8; len]
    }

    /// `v` as `Bytes` that give the vector back when the last clone drops.
    pub fn bytes(self: &Arc<Self>, v: Vec<u8>) -> Bytes {
        if v.len() < MIN_POOLED {
            return Bytes::from(v);
        }
        Bytes::from_owner(Pooled {
            v,
            pool: Arc::downgrade(self),
        })
    }

    fn give(&self, v: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = free.iter().map(Vec::capacity).sum();
        if free.len() < KEEP_COUNT && held + v.capacity() <= KEEP_BYTES {
            free.push(v);
        }
    }
}

struct Pooled {
    v: Vec<u8>,
    pool: Weak<Pool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.v
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.give(std::mem::take(&mut self.v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_results_come_back() {
        let pool = Arc::new(Pool::default());
        let v = pool.take(1 << 20);
        let ptr = v.as_ptr();
        let b = pool.bytes(v);
        let c = b.clone();
        drop(b);
        assert!(pool.free.lock().expect("lock").is_empty(), "a clone lives");
        drop(c);
        let again = pool.take((1 << 20) - 8);
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(again.len(), (1 << 20) - 8);
        // Too small to pool: plain.
        assert_eq!(pool.take(16).len(), 16);
    }
}
