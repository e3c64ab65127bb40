//! Large host writes through mapped `MAP_WRITE` buffers (or blocks of
//! imported host memory, [`Upload::Pinned`], where the device has them),
//! filled on several threads.
//!
//! `queue.write_buffer` copies the caller's bytes into wgpu's staging on one
//! thread (3-4 GB/s on the H200 machine) before the GPU copies them again.
//! Stores into a mapped `MAP_WRITE` buffer run at 11-14 GB/s on one thread
//! and 25-28 GB/s on four or more there, so a write of at least
//! [`MIN_UPLOAD`] bytes is copied by several threads straight into a mapped
//! upload buffer from this pool, and a `copy_buffer_to_buffer` moves it into
//! place. The copies go into a command buffer of their own ([`HostCopies`])
//! that is submitted before the next submit of anything, exactly when a
//! `write_buffer` would land: a large write is ordered like a small one.
//! Once submitted, each buffer is mapped again; its map callback (run when
//! the copy has executed) returns it here, so a steady loop of writes
//! creates no buffers.
//!
//! Small writes do not go through `write_buffer` either: on some H200
//! instances its per-call staging allocation took 3.5 ms a call after the
//! large writes (`transfer.roundtrip_4kib_us`). They are appended to one
//! mapped upload buffer of the pool, the arena, each with its copy into
//! place, until the next submit seals the arena (unmapped, submitted,
//! mapped again and returned to the pool once the copies ran): a loop of
//! small writes takes no new memory and waits for no GPU work.

use std::sync::{Arc, Mutex};

use compute_runtime::{ServerError, hostcopy};

use crate::device::faults::scoped;
use crate::memory::pinned::{PinnedBlock, PinnedPool};

/// Writes of at least this many bytes take the mapped path.
pub const MIN_UPLOAD: u64 = 1 << 20;

/// Bytes of idle upload buffers kept at most.
pub const MAX_POOLED_BYTES: u64 = 128 << 20;

/// Mapped upload buffers; clones share the pool.
#[derive(Clone, Debug, Default)]
pub(crate) struct UploadPool {
    /// Mapped and ready, with their total size.
    ready: Arc<Mutex<(Vec<wgpu::Buffer>, u64)>>,
}

impl UploadPool {
    /// A mapped buffer of at least `size` bytes: a pooled one of the size
    /// class, else a new one.
    pub fn take(&self, device: &wgpu::Device, size: u64) -> Result<wgpu::Buffer, ServerError> {
        let class = super::readback::ReadbackPool::class(size, device.limits().max_buffer_size);
        {
            let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = ready.0.iter().position(|b| b.size() == class) {
                let b = ready.0.swap_remove(i);
                ready.1 -= b.size();
                return Ok(b);
            }
        }
        scoped(device, || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("upload"),
                size: class,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            })
        })
        .map_err(|e| ServerError::OutOfMemory {
            size: class,
            reason: format!("upload buffer: {e}"),
        })
    }

    /// After the copy out of `buffer` was submitted: maps it again; the map
    /// callback, run once the copy has executed, returns it to the pool.
    pub fn recycle(&self, buffer: wgpu::Buffer) {
        let pool = self.clone();
        let mapped = buffer.clone();
        buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            if r.is_err() {
                return;
            }
            let mut ready = pool.ready.lock().unwrap_or_else(|e| e.into_inner());
            if ready.1 + mapped.size() <= MAX_POOLED_BYTES {
                ready.1 += mapped.size();
                ready.0.push(mapped);
            }
        });
    }
}

/// A mapped range's start, handed to the copy threads.
#[derive(Clone, Copy)]
struct Dst(std::ptr::NonNull<u8>);

// SAFETY: each thread writes its own disjoint chunk of the mapped range
// behind the pointer, which outlives the threads (`fill`'s scope).
unsafe impl Send for Dst {}
// SAFETY: as above; the pool's scope shares the wrapper, each task writes
// only its own chunk.
unsafe impl Sync for Dst {}

impl Dst {
    /// The address `offset` bytes in (a method, so a closure captures the
    /// whole `Send` wrapper rather than its field).
    fn at(self, offset: usize) -> *mut u8 {
        self.0.as_ptr().wrapping_add(offset)
    }
}

/// Copies `data` into the mapped `buffer` (whose first `data.len()` bytes,
/// rounded up to a word, are written; the round-up is zeros) on the
/// host-copy threads (`hostcopy::pool`), and unmaps it.
pub fn fill(buffer: &wgpu::Buffer, data: &[u8]) -> Result<(), ServerError> {
    let len = (data.len() as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    {
        let mut view =
            buffer
                .slice(0..len)
                .get_mapped_range_mut()
                .map_err(|e| ServerError::Mapping {
                    reason: format!("upload buffer: {e}"),
                })?;
        let pieces = hostcopy::pieces_for(data.len());
        match hostcopy::pool() {
            Some(pool) if pieces > 1 => {
                let out = view.slice(..);
                let (mut head, mut tail) = out.split_at(data.len());
                let chunk = data.len().div_ceil(pieces);
                let base = Dst(head.as_raw_ptr().cast::<u8>());
                pool.scope(|scope| {
                    for (i, src) in data.chunks(chunk).enumerate() {
                        let dst = base;
                        scope.spawn(move |_| {
                            // SAFETY: `head` is a mapped range of `data.len()`
                            // writable bytes, alive until the scope ends; the
                            // chunks `[i * chunk, i * chunk + src.len())` are
                            // disjoint and inside it, and nothing reads them.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    src.as_ptr(),
                                    dst.at(i * chunk),
                                    src.len(),
                                );
                            }
                        });
                    }
                });
                pad(&mut tail);
            }
            _ => write_padded(&mut view, data),
        }
    }
    buffer.unmap();
    Ok(())
}

/// `data` at the start of a mapped view at most a word longer; the rest
/// zeros (the slice's padding).
fn write_padded(view: &mut wgpu::BufferViewMut, data: &[u8]) {
    let out = view.slice(..);
    let (mut head, mut tail) = out.split_at(data.len());
    head.copy_from_slice(data);
    pad(&mut tail);
}

/// Zeros the fewer-than-a-word tail after a write.
fn pad(tail: &mut wgpu::WriteOnly<'_, [u8]>) {
    let zeros = [0u8; 4];
    let len = tail.len();
    tail.copy_from_slice(&zeros[..len]);
}

/// What a large write is copied from: a mapped upload buffer of the pool,
/// or a block of imported host memory (`pinned.rs`) where the device has
/// it. Either is filled on the host-copy threads before its copy is
/// encoded, and goes back to its pool once the copy has run (the stream
/// backend's `recycle`).
#[derive(Debug)]
pub(crate) enum Upload {
    Mapped(wgpu::Buffer),
    Pinned(PinnedBlock, PinnedPool),
}

impl Upload {
    fn buffer(&self) -> &wgpu::Buffer {
        match self {
            Upload::Mapped(b) => b,
            Upload::Pinned(b, _) => b.buffer(),
        }
    }
}

/// Where a host copy goes, and who asked.
#[derive(Debug)]
pub(crate) struct CopyTarget<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: u64,
    pub len: u64,
    pub stream: compute_runtime::StreamId,
    pub memory: compute_runtime::MemoryId,
}

/// Bytes of the upload buffer small writes share (one of the pool's size
/// classes).
pub const ARENA_BYTES: u64 = MIN_UPLOAD;

/// The mapped upload buffer small writes are appended to, and how much of
/// it they took.
#[derive(Debug)]
struct Arena {
    buffer: wgpu::Buffer,
    used: u64,
}

/// Upload copies waiting for the next submit, in the order they were made.
#[derive(Debug, Default)]
pub(crate) struct HostCopies {
    encoder: Option<wgpu::CommandEncoder>,
    /// Where the next small write goes.
    arena: Option<Arena>,
    uploads: Vec<Upload>,
    /// What each copy writes, and the stream that asked: poisoned if the
    /// queue refuses the copies.
    writes: Vec<(compute_runtime::StreamId, compute_runtime::MemoryId)>,
}

/// Copies taken for submission: the command buffer, the upload buffers it
/// reads, what it writes.
#[derive(Debug)]
pub(crate) struct TakenCopies {
    pub commands: wgpu::CommandBuffer,
    pub uploads: Vec<Upload>,
    pub writes: Vec<(compute_runtime::StreamId, compute_runtime::MemoryId)>,
}

impl HostCopies {
    /// Encodes the copy of `upload`'s first bytes to `to`.
    pub fn record(&mut self, device: &wgpu::Device, upload: Upload, to: CopyTarget<'_>) {
        encoder_in(&mut self.encoder, device).copy_buffer_to_buffer(
            upload.buffer(),
            0,
            to.buffer,
            to.offset,
            to.len,
        );
        self.uploads.push(upload);
        self.writes.push((to.stream, to.memory));
    }

    /// Copies a small write's `data` into the arena (a mapped upload buffer
    /// from `pool`, shared by the small writes until the next submit; a
    /// full one is sealed and another taken) and encodes its copy to `to`:
    /// no `queue.write_buffer`, so no per-call staging allocation in wgpu
    /// (3.5 ms a call on some H200 instances, `docs/benchmarks.md`).
    /// `to.len` is `data.len()` rounded up to a word; the round-up is zeros.
    pub fn record_small(
        &mut self,
        device: &wgpu::Device,
        pool: &UploadPool,
        data: &[u8],
        to: CopyTarget<'_>,
    ) -> Result<(), ServerError> {
        if data.len() as u64 > to.len {
            return Err(ServerError::SizeMismatch {
                expected: to.len,
                actual: data.len() as u64,
            });
        }
        // A mapped view starts on MAP_ALIGNMENT (8), which is also a valid
        // copy offset.
        let start = |a: &Arena| a.used.next_multiple_of(wgpu::MAP_ALIGNMENT);
        if self
            .arena
            .as_ref()
            .is_none_or(|a| start(a) + to.len > a.buffer.size())
        {
            self.seal_arena();
            let buffer = pool.take(device, ARENA_BYTES.max(to.len))?;
            self.arena = Some(Arena { buffer, used: 0 });
        }
        let Some(arena) = self.arena.as_mut() else {
            return Ok(());
        };
        let at = start(arena);
        {
            let mut view = arena
                .buffer
                .slice(at..at + to.len)
                .get_mapped_range_mut()
                .map_err(|e| ServerError::Mapping {
                    reason: format!("upload arena: {e}"),
                })?;
            write_padded(&mut view, data);
        }
        arena.used = at + to.len;
        encoder_in(&mut self.encoder, device).copy_buffer_to_buffer(
            &arena.buffer,
            at,
            to.buffer,
            to.offset,
            to.len,
        );
        self.writes.push((to.stream, to.memory));
        Ok(())
    }

    /// Unmaps the arena (its copies are about to be submitted) and keeps it
    /// with the uploads recycled after the submit.
    fn seal_arena(&mut self) {
        if let Some(arena) = self.arena.take() {
            arena.buffer.unmap();
            self.uploads.push(Upload::Mapped(arena.buffer));
        }
    }

    /// The waiting copies, finished, if any.
    pub fn take(&mut self) -> Option<TakenCopies> {
        self.seal_arena();
        let encoder = self.encoder.take()?;
        Some(TakenCopies {
            commands: encoder.finish(),
            uploads: std::mem::take(&mut self.uploads),
            writes: std::mem::take(&mut self.writes),
        })
    }
}

/// The encoder the host copies go into, made by the first (a function of
/// the field, so the arena can be borrowed beside it).
fn encoder_in<'a>(
    slot: &'a mut Option<wgpu::CommandEncoder>,
    device: &wgpu::Device,
) -> &'a mut wgpu::CommandEncoder {
    slot.get_or_insert_with(|| {
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("host writes"),
        })
    })
}
