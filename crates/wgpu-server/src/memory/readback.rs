//! Reusable `MAP_READ` staging buffers for `read`.
//!
//! A read copies into a staging buffer, maps it, and hands out `Bytes` that
//! *are* the mapped range. When the last clone of those `Bytes` drops, the
//! buffer is unmapped and comes back here, so a loop of reads creates no
//! buffers. Sizes are rounded up to a size class ([`ReadbackPool::class`])
//! so reads of similar sizes share buffers; the pool keeps at most
//! [`MAX_POOLED_BYTES`] and drops the rest.

use std::sync::{Arc, Mutex};

use compute_runtime::ServerError;

use crate::device::faults::scoped;

/// Bytes of staging the pool keeps at most.
pub const MAX_POOLED_BYTES: u64 = 256 << 20;

#[derive(Debug, Default)]
struct Free {
    buffers: Vec<wgpu::Buffer>,
    bytes: u64,
}

/// The pool; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadbackPool {
    free: Arc<Mutex<Free>>,
}

impl ReadbackPool {
    /// The size class of a `len`-byte read: a power of two (at least 4 KiB)
    /// up to 64 MiB, then a multiple of 64 MiB, so a large read wastes at
    /// most 64 MiB instead of doubling (a 1.1 GiB read must not ask for
    /// 2 GiB); never more than `max` (the device's `max_buffer_size`), where
    /// `len` itself is the class.
    pub fn class(len: u64, max: u64) -> u64 {
        const STEP: u64 = 64 << 20;
        let class = if len <= STEP {
            len.max(4096).next_power_of_two()
        } else {
            len.div_ceil(STEP).saturating_mul(STEP)
        };
        if class <= max { class } else { len }
    }

    /// A kept buffer of exactly `size` bytes (a size class), if any.
    pub fn take(&self, size: u64) -> Option<wgpu::Buffer> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let i = free.buffers.iter().position(|b| b.size() == size)?;
        let b = free.buffers.swap_remove(i);
        free.bytes -= b.size();
        Some(b)
    }

    /// A buffer of the size class of a `len`-byte copy (at most `max`), kept
    /// or new; a buffer the device cannot give is `OutOfMemory`.
    pub fn take_or_create(
        &self,
        device: &wgpu::Device,
        len: u64,
        max: u64,
        label: &'static str,
    ) -> Result<wgpu::Buffer, ServerError> {
        let class = Self::class(len, max);
        if let Some(b) = self.take(class) {
            return Ok(b);
        }
        scoped(device, || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: class,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
        .map_err(|e| match e {
            ServerError::Validation { message }
            | ServerError::OutOfMemory {
                reason: message, ..
            } => ServerError::OutOfMemory {
                size: len,
                reason: format!("{label}: {message}"),
            },
            other => other,
        })
    }

    /// Gives an unmapped buffer back.
    pub fn put(&self, buffer: wgpu::Buffer) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.bytes + buffer.size() <= MAX_POOLED_BYTES {
            free.bytes += buffer.size();
            free.buffers.push(buffer);
        }
    }
}

/// Where a staging buffer goes once its mapped bytes are dropped.
pub(crate) enum Back {
    /// To the pool.
    Pool(ReadbackPool),
    /// To whoever reuses it at once (a collective's next step).
    Hook(Box<dyn FnOnce(wgpu::Buffer) + Send + Sync>),
}

impl Back {
    /// Hands the (unmapped) buffer where it goes.
    pub fn give(self, buffer: wgpu::Buffer) {
        match self {
            Back::Pool(pool) => pool.put(buffer),
            Back::Hook(hook) => hook(buffer),
        }
    }
}

impl std::fmt::Debug for Back {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Back::Pool(_) => f.write_str("Back::Pool"),
            Back::Hook(_) => f.write_str("Back::Hook"),
        }
    }
}

/// Mapped bytes of a staging buffer: unmapped and returned to the pool (or
/// its hook) when dropped.
pub(crate) struct MappedRange {
    view: Option<wgpu::BufferView>,
    buffer: wgpu::Buffer,
    back: Option<Back>,
    start: usize,
    len: usize,
}

impl MappedRange {
    pub fn new(
        view: wgpu::BufferView,
        buffer: wgpu::Buffer,
        pool: ReadbackPool,
        start: usize,
        len: usize,
    ) -> Self {
        Self::returning(view, buffer, Back::Pool(pool), start, len)
    }

    /// Bytes `start..start + len` of the mapped `view`; the buffer goes to
    /// `back` once they drop.
    pub fn returning(
        view: wgpu::BufferView,
        buffer: wgpu::Buffer,
        back: Back,
        start: usize,
        len: usize,
    ) -> Self {
        Self {
            view: Some(view),
            buffer,
            back: Some(back),
            start,
            len,
        }
    }
}

impl AsRef<[u8]> for MappedRange {
    fn as_ref(&self) -> &[u8] {
        match &self.view {
            Some(v) => v.get(self.start..self.start + self.len).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl Drop for MappedRange {
    fn drop(&mut self) {
        // The view must go before the buffer can be unmapped.
        self.view = None;
        self.buffer.unmap();
        if let Some(back) = self.back.take() {
            back.give(self.buffer.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReadbackPool;

    #[test]
    fn classes_round_up_without_doubling_large_reads() {
        let max = 4 << 30;
        assert_eq!(ReadbackPool::class(1, max), 4096);
        assert_eq!(ReadbackPool::class(5000, max), 8192);
        assert_eq!(ReadbackPool::class(64 << 20, max), 64 << 20);
        assert_eq!(
            ReadbackPool::class((1 << 30) + 1, max),
            (1 << 30) + (64 << 20)
        );
        assert_eq!(
            ReadbackPool::class(3000, 2048),
            3000,
            "capped at the device's maximum"
        );
    }
}
