//! Host memory the device copies into directly: page-aligned host
//! allocations imported into the device (`device/host_import.rs`), pooled
//! by size class as `readback.rs` pools mapped staging buffers.
//!
//! A block is in one hand at a time: the pool's (idle), a copy's (in
//! flight: the device writes it and nothing on the host touches its bytes),
//! or a read's `Bytes` (the host reads it and no copy targets it). A read
//! takes it from the pool, hands it to its `Bytes` once the submission that
//! copied into it has completed ([`PinnedRange::landed`]), and the last
//! clone of those `Bytes` gives it back. The host allocation itself is
//! freed once both the block and the device (the buffer's release) have
//! let go of it: `Bytes` may outlive their server, and a device that is
//! lost or destroyed, which releases its buffers at once, never frees
//! bytes a read still holds.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use compute_runtime::ServerError;

use crate::device::host_import::HostImport;
use crate::memory::readback::ReadbackPool;

/// Bytes of blocks the pool keeps at most.
pub const MAX_POOLED_BYTES: u64 = 256 << 20;

/// Zeroed, aligned host bytes, freed when the last owner drops: the block
/// that reads them and the buffer's release (the device's hold) each own
/// one reference. The device may let go first (a lost or destroyed device
/// releases its buffers while `Bytes` still read the block) or last (a
/// block dropped while wgpu still has the buffer in flight).
#[derive(Debug)]
struct HostAlloc {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: plain bytes; who reads or writes them when is the ownership rule
// of this module (one hand at a time).
unsafe impl Send for HostAlloc {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    fn new(layout: Layout) -> Option<Self> {
        // SAFETY: callers pass a nonzero size. Zeroed: the device may be
        // asked to copy out bytes no copy has written yet (wgpu believes
        // the buffer initialized).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(raw).map(|ptr| HostAlloc { ptr, layout })
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the last owner frees.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A host allocation the device copies into and out of.
#[derive(Debug)]
pub struct PinnedBlock {
    buffer: wgpu::Buffer,
    alloc: Arc<HostAlloc>,
}

impl PinnedBlock {
    /// A zeroed block of `len` bytes (a nonzero multiple of the import
    /// alignment), imported into `device`.
    fn new(import: &HostImport, device: &wgpu::Device, len: u64) -> Result<Self, ServerError> {
        let oom = |reason: &str| ServerError::OutOfMemory {
            size: len,
            reason: format!("imported host memory: {reason}"),
        };
        let size = usize::try_from(len).map_err(|_| oom("larger than the address space"))?;
        let align = usize::try_from(import.alignment()).map_err(|_| oom("alignment"))?;
        let layout = Layout::from_size_align(size, align).map_err(|_| oom("layout"))?;
        let alloc =
            Arc::new(HostAlloc::new(layout).ok_or_else(|| oom("the host allocation failed"))?);
        let held = Arc::clone(&alloc);
        let release = Box::new(move || drop(held));
        // SAFETY: the pointer is aligned to the import alignment, `len` a
        // multiple of it, and the bytes live until `release` drops the
        // device's reference (and the block's is gone too).
        let buffer = unsafe { import.import(device, alloc.ptr, len, release)? };
        Ok(PinnedBlock { buffer, alloc })
    }

    /// A block of `len` bytes (rounded up to the alignment) of `device`,
    /// outside any pool; `None` where the device does not import host
    /// memory.
    #[cfg(feature = "testing")]
    pub fn standalone(device: &wgpu::Device, len: u64) -> Option<Result<Self, ServerError>> {
        let import = HostImport::of(device)?;
        let len = len.max(1).next_multiple_of(import.alignment());
        Some(Self::new(&import, device, len))
    }

    /// The block's bytes, for a caller that knows no copy into it is in
    /// flight.
    ///
    /// # Safety
    ///
    /// No copy into the block is in flight.
    #[cfg(feature = "testing")]
    pub unsafe fn bytes_after_copies(&self) -> &[u8] {
        // SAFETY: the caller's promise.
        unsafe { self.bytes() }
    }

    /// Writes `data` at the start of the block, zeros up to the next word
    /// (a write's padding), on the host-copy threads. `&mut`: the block is
    /// this caller's alone, so no copy out of it is in flight.
    pub fn fill(&mut self, data: &[u8]) {
        let a = &self.alloc;
        // SAFETY: the allocation is live while the block holds it, and the
        // block is borrowed exclusively: no copy reads it now (a block in
        // flight is held by its copy, not lent out).
        let all = unsafe { std::slice::from_raw_parts_mut(a.ptr.as_ptr(), a.layout.size()) };
        let end = data.len().next_multiple_of(4);
        compute_runtime::hostcopy::copy_parallel(&mut all[..data.len()], data);
        if let Some(pad) = all.get_mut(data.len()..end.min(all.len())) {
            pad.fill(0);
        }
    }

    /// The buffer copies target.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    fn size(&self) -> u64 {
        self.alloc.layout.size() as u64
    }

    /// The block's bytes.
    ///
    /// # Safety
    ///
    /// No copy into the block is in flight.
    unsafe fn bytes(&self) -> &[u8] {
        let a = &self.alloc;
        // SAFETY: an allocation of initialized (zeroed or copied) bytes,
        // alive while the block holds it, which nothing writes while the
        // caller's promise holds.
        unsafe { std::slice::from_raw_parts(a.ptr.as_ptr(), a.layout.size()) }
    }
}

#[derive(Debug, Default)]
struct Free {
    blocks: Vec<PinnedBlock>,
    bytes: u64,
    created: u64,
}

/// The pool of one device's blocks; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct PinnedPool {
    import: Arc<HostImport>,
    device: wgpu::Device,
    free: Arc<Mutex<Free>>,
}

impl PinnedPool {
    pub fn new(import: HostImport, device: wgpu::Device) -> Self {
        PinnedPool {
            import: Arc::new(import),
            device,
            free: Arc::default(),
        }
    }

    /// The import alignment, for reports.
    pub fn alignment(&self) -> u64 {
        self.import.alignment()
    }

    /// A block for a `len`-byte copy (of `readback.rs`'s size class, at
    /// most `max` unless `len` is more, rounded up to the alignment), kept
    /// or new.
    pub fn take(&self, len: u64, max: u64) -> Result<PinnedBlock, ServerError> {
        let class = ReadbackPool::class(len, max)
            .max(1)
            .next_multiple_of(self.import.alignment());
        {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = free.blocks.iter().position(|b| b.size() == class) {
                let block = free.blocks.swap_remove(i);
                free.bytes -= class;
                return Ok(block);
            }
        }
        let block = PinnedBlock::new(&self.import, &self.device, class)?;
        self.free.lock().unwrap_or_else(|e| e.into_inner()).created += 1;
        Ok(block)
    }

    /// [`take`](Self::take), or `None` where the device refuses the import
    /// (a driver's limit on imported memory, say): the caller then uses
    /// mapped staging, as a device without imports does.
    pub fn take_or_none(&self, len: u64, max: u64) -> Option<(PinnedBlock, PinnedPool)> {
        match self.take(len, max) {
            Ok(block) => Some((block, self.clone())),
            Err(e) => {
                tracing::debug!(error = %e, len, "imported host memory refused; mapped staging instead");
                None
            }
        }
    }

    /// Takes a block back (its copies done, its bytes no longer read).
    pub fn put(&self, block: PinnedBlock) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.bytes + block.size() <= MAX_POOLED_BYTES {
            free.bytes += block.size();
            free.blocks.push(block);
        }
    }

    /// Blocks made so far (the rest of the takes came from the pool).
    #[cfg(feature = "testing")]
    pub fn created(&self) -> u64 {
        self.free.lock().map(|f| f.created).unwrap_or(0)
    }
}

/// A read's bytes in a block whose copy has landed: the block goes back to
/// its pool when they drop.
#[derive(Debug)]
pub(crate) struct PinnedRange {
    block: Option<PinnedBlock>,
    pool: PinnedPool,
    start: usize,
    len: usize,
}

impl PinnedRange {
    /// Bytes `start..start + len` of `block`.
    ///
    /// # Safety
    ///
    /// Every copy into `block` has completed.
    pub unsafe fn landed(block: PinnedBlock, pool: PinnedPool, start: usize, len: usize) -> Self {
        PinnedRange {
            block: Some(block),
            pool,
            start,
            len,
        }
    }
}

impl AsRef<[u8]> for PinnedRange {
    fn as_ref(&self) -> &[u8] {
        match &self.block {
            // SAFETY: `landed`'s promise; the range holds the block, so no
            // new copy can take it.
            Some(b) => unsafe { b.bytes() }
                .get(self.start..self.start + self.len)
                .unwrap_or(&[]),
            None => &[],
        }
    }
}

impl Drop for PinnedRange {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.put(block);
        }
    }
}
