//! Host transfers: `write` through the queue, `read` through imported host
//! memory or mapped staging buffers.
//!
//! A write's copy lands before the next submit of any stream, so the
//! scheduler first submits every stream with pending work on the page
//! ([`prepare_host_write`]). Small writes are appended to the upload arena,
//! writes of a megabyte or more filled on several threads into a block of
//! imported host memory where the device has it (`pinned.rs`), else into a
//! mapped upload buffer; either way a copy moves them into place
//! (`upload.rs`). Reads copy into a `MAP_READ` buffer
//! on the stream's encoder, submit, and map; the returned [`Bytes`] *are* the
//! mapped range (no host copy), and when the caller drops them the staging
//! buffer is unmapped and reused (`readback.rs`). Where the device imports
//! host memory, reads copy into a pooled block of it instead: the `Bytes`
//! are the block, handed out once the copy's submission has completed,
//! nothing mapped (`pinned.rs`).
//!
//! wgpu moves bytes in 4-byte units. A read of an unaligned range copies the
//! enclosing aligned range and slices it. A write must start on a 4-byte
//! boundary and end on one, or at the end of its slice (whose padding up to
//! the next boundary belongs to it); anything else is refused rather than
//! clobbering a neighbour's bytes.
//!
//! [`prepare_host_write`]: compute_stream::SchedulerMultiStream::prepare_host_write

use compute_runtime::{Bytes, CopyDescriptor, DynFut, ServerError, StorageHandle, StreamId};
use compute_stream::Access;
use compute_wgsl::WgpuCompiler;

use crate::device::faults::DeviceFaults;
use crate::device::faults::scoped;
use crate::device::map::MapRead;
use crate::memory::pinned::{PinnedBlock, PinnedPool, PinnedRange};
use crate::memory::readback::{MappedRange, ReadbackPool};
use crate::memory::upload::{self, CopyTarget, MIN_UPLOAD, Upload};
use crate::server::WgpuServer;

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

fn check_descriptor(descriptor: &CopyDescriptor) -> Result<u64, ServerError> {
    if !descriptor.is_contiguous() {
        return Err(ServerError::unsupported(
            "strided transfer",
            "only row-major contiguous copy descriptors are transferred",
        ));
    }
    let bytes = descriptor
        .size_bytes()
        .ok_or(ServerError::InvalidArgument {
            reason: "copy descriptor size overflows u64".into(),
        })?;
    if bytes != descriptor.binding.size {
        return Err(ServerError::SizeMismatch {
            expected: descriptor.binding.size,
            actual: bytes,
        });
    }
    Ok(bytes)
}

/// Where a write that passed its checks goes.
pub(crate) struct CheckedWrite {
    target: StorageHandle,
    buffer: wgpu::Buffer,
    size: u64,
}

/// Checks a write of `len` bytes where `descriptor` says, touching
/// nothing: the descriptor, the data's length, the range, the alignment. `None`: there is
/// nothing to move (zero bytes).
pub(crate) fn check_write<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    descriptor: &CopyDescriptor,
    len: u64,
) -> Result<Option<CheckedWrite>, ServerError> {
    let size = check_descriptor(descriptor)?;
    if len != size {
        return Err(ServerError::SizeMismatch {
            expected: size,
            actual: len,
        });
    }
    let target = server.resolve(&descriptor.binding)?;
    if size == 0 {
        return Ok(None);
    }
    let slice_end = server
        .memory
        .manager()
        .size_of(descriptor.binding.memory_id())
        .unwrap_or(0);
    let ends_slice = descriptor.binding.end() == Some(slice_end);
    if target.offset % ALIGN != 0 || (size % ALIGN != 0 && !ends_slice) {
        return Err(ServerError::InvalidArgument {
            reason: format!(
                "a write must start on a 4-byte boundary and end on one or at the end of its \
                 slice (offset {}, size {size})",
                descriptor.binding.offset
            ),
        });
    }
    let buffer = server.memory.page_buffer(target.id)?;
    Ok(Some(CheckedWrite {
        target,
        buffer,
        size,
    }))
}

/// Checks and writes `data` where `descriptor` says, inside the caller's
/// write scope: a refusal fails the scope, poisoning the target (for writes
/// whose target must not keep stale bytes, a collective's result).
pub(crate) fn write<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    descriptor: &CopyDescriptor,
    data: &Bytes,
    stream: StreamId,
) -> Result<(), ServerError> {
    match check_write(server, descriptor, data.len() as u64)? {
        Some(checked) => write_checked(server, checked, descriptor, data, stream),
        None => Ok(()),
    }
}

/// Writes `data` where `descriptor` says, once [`check_write`] passed it.
/// Runs inside the caller's write scope.
pub(crate) fn write_checked<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    checked: CheckedWrite,
    descriptor: &CopyDescriptor,
    data: &Bytes,
    stream: StreamId,
) -> Result<(), ServerError> {
    let CheckedWrite {
        target,
        buffer,
        size,
    } = checked;
    // A queue write lands before the next submit of anything: behind work
    // held back by a collective (this stream's, or another stream's pending
    // use of the range) it would have to wait for the other ranks, and would
    // land before that work. It is encoded on the stream instead, after
    // (and, for another stream's work, held behind) that work.
    let (_, ws) = server.streams.encoder(stream);
    let held = ws.has_hold();
    let padded = StorageHandle {
        size: size.next_multiple_of(ALIGN),
        ..target
    };
    if held || !server.streams.try_prepare_host_write(&[padded]) {
        return write_on_stream(server, stream, target, &buffer, descriptor, data);
    }
    if size >= MIN_UPLOAD {
        return upload(server, target, memory_of(descriptor), &buffer, data, stream);
    }
    // The tail up to the next word is this slice's padding (zeros).
    let to = CopyTarget {
        buffer: &buffer,
        offset: target.offset,
        len: size.next_multiple_of(ALIGN),
        stream,
        memory: memory_of(descriptor),
    };
    server
        .streams
        .backend_mut()
        .host_copy_small(data, to)
        .map_err(|e| {
            server
                .gpu
                .faults()
                .lost_during("writing to the upload arena", e)
        })
}

fn memory_of(descriptor: &CopyDescriptor) -> compute_runtime::MemoryId {
    descriptor.binding.memory_id()
}

/// A large write: filled into a mapped upload buffer on several threads,
/// its copy into place submitted before the next submit of anything (see
/// `upload.rs`).
fn upload<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    target: StorageHandle,
    memory: compute_runtime::MemoryId,
    buffer: &wgpu::Buffer,
    data: &[u8],
    stream: StreamId,
) -> Result<(), ServerError> {
    let len = (data.len() as u64).next_multiple_of(ALIGN);
    let staging = match server.memory.pinned() {
        Some(pool) => {
            let max = server.gpu.caps().limits.max_buffer_size;
            let mut block = pool.take(len, max)?;
            block.fill(data);
            Upload::Pinned(block, pool.clone())
        }
        None => {
            let buffer = server
                .memory
                .upload()
                .take(server.gpu.device(), data.len() as u64)?;
            upload::fill(&buffer, data).map_err(|e| {
                server
                    .gpu
                    .faults()
                    .lost_during("filling an upload buffer", e)
            })?;
            Upload::Mapped(buffer)
        }
    };
    // The range's pending users were submitted by the caller.
    server.streams.backend_mut().host_copy(
        staging,
        CopyTarget {
            buffer,
            offset: target.offset,
            len,
            stream,
            memory,
        },
    );
    Ok(())
}

/// A checked write on a held `stream`: a copy from a mapped-at-creation
/// staging buffer, encoded on the stream (the padding up to the next word
/// is the slice's, as in the queue path).
fn write_on_stream<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    stream: StreamId,
    target: StorageHandle,
    buffer: &wgpu::Buffer,
    descriptor: &CopyDescriptor,
    data: &Bytes,
) -> Result<(), ServerError> {
    server.streams.prepare(stream, &[(target, Access::Write)]);
    let padded = (data.len() as u64).next_multiple_of(ALIGN);
    let device = server.gpu.device().clone();
    let staging = scoped(&device, || {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("write staging"),
            size: padded,
            usage: wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        })
    })?;
    staging
        .get_mapped_range_mut(..)
        .map_err(|e| server.gpu.faults().lost_during("viewing write staging", e))?
        .slice(..data.len())
        .copy_from_slice(data);
    staging.unmap();
    let (_, ws) = server.streams.encoder(stream);
    ws.batch().encoder_for_copy(&device).copy_buffer_to_buffer(
        &staging,
        0,
        buffer,
        target.offset,
        padded,
    );
    ws.batch().wrote(&[descriptor.binding.memory_id()]);
    server.streams.task_done(stream);
    Ok(())
}

/// One descriptor's copy into read staging: the enclosing aligned range
/// of its page, and where its bytes lie in the staging.
pub(super) struct ReadCopy {
    page: wgpu::Buffer,
    /// Start of the aligned range on the page, and its length (0 for a
    /// 0-byte read).
    start: u64,
    copy_len: u64,
    staging: Staging,
    /// The descriptor's bytes in the staging.
    offset: usize,
    len: usize,
}

/// Where a read's copy lands.
enum Staging {
    /// A pooled `MAP_READ` buffer, mapped once the copy has run.
    Mapped(wgpu::Buffer),
    /// A pooled block of imported host memory: the bytes are there once
    /// the copy has run.
    Pinned(PinnedBlock, PinnedPool),
}

impl ReadCopy {
    fn target(&self) -> &wgpu::Buffer {
        match &self.staging {
            Staging::Mapped(b) => b,
            Staging::Pinned(b, _) => b.buffer(),
        }
    }

    /// What turns into the read's bytes once its copy has run.
    pub(super) fn landing(self) -> Landing {
        let (offset, len) = (self.offset, self.len);
        match self.staging {
            Staging::Mapped(buffer) => {
                let mapped = self.copy_len.max(ALIGN);
                Landing::Mapped(MapRead::start(buffer, 0..mapped), offset, len)
            }
            Staging::Pinned(block, pool) => Landing::Pinned(block, pool, offset, len),
        }
    }
}

/// A read's staging after its copy was submitted.
pub(super) enum Landing {
    /// Mapping asked for; the bytes at `.1..+.2` of the mapped range.
    Mapped(MapRead, usize, usize),
    /// The bytes at `.2..+.3` of the block.
    Pinned(PinnedBlock, PinnedPool, usize, usize),
}

impl Landing {
    /// The bytes, once the submission that copied them has completed
    /// (the caller waited for it).
    pub(super) async fn bytes(
        self,
        faults: &DeviceFaults,
        readback: &ReadbackPool,
    ) -> Result<Bytes, ServerError> {
        match self {
            Landing::Mapped(map, offset, len) => {
                let (view, staging) = map.view(faults, "a read's staging buffer").await?;
                let range = MappedRange::new(view, staging, readback.clone(), offset, len);
                Ok(Bytes::from_owner(range))
            }
            Landing::Pinned(block, pool, offset, len) => {
                // A wait also ends when the device is lost, the copy perhaps
                // never run: the block would hold its last use's bytes. A
                // mapped read learns it from the map; this one asks.
                faults.lost()?;
                // SAFETY: the caller waited for the copy's submission.
                Ok(Bytes::from_owner(unsafe {
                    PinnedRange::landed(block, pool, offset, len)
                }))
            }
        }
    }
}

/// Encodes the copies of a read, submits the stream and returns the future
/// of the bytes.
pub(crate) fn read<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    descriptors: Vec<CopyDescriptor>,
    stream: StreamId,
) -> Result<DynFut<Result<Vec<Bytes>, ServerError>>, ServerError> {
    let memories: Vec<_> = descriptors.iter().map(|d| d.binding.memory_id()).collect();
    let ranges = checked_ranges(server, &descriptors, stream)?;
    let copies = ranges
        .iter()
        .map(|(target, size)| plan_copy(server, *target, *size))
        .collect::<Result<Vec<_>, _>>()?;
    submit_copies(server, stream, &memories, &copies)?;
    Ok(mapped_bytes(server, stream, memories, copies))
}

/// Every descriptor checked (shape, range, trust) before anything is
/// encoded, and its range ordered after the work that writes it: a bad
/// descriptor fails the whole read and leaves the stream untouched.
pub(super) fn checked_ranges<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    descriptors: &[CopyDescriptor],
    stream: StreamId,
) -> Result<Vec<(StorageHandle, u64)>, ServerError> {
    let mut ranges = Vec::with_capacity(descriptors.len());
    for d in descriptors {
        let size = check_descriptor(d)?;
        let target = server.resolve(&d.binding)?;
        server.streams.check(d.binding.memory_id())?;
        ranges.push((target, size));
    }
    let pages: Vec<_> = ranges.iter().map(|(t, _)| (*t, Access::Read)).collect();
    // Ordering may submit the writers of these bytes; a batch the queue
    // refuses poisons what it wrote, so trust is checked again after.
    server.streams.prepare(stream, &pages);
    for d in descriptors {
        server.streams.check(d.binding.memory_id())?;
    }
    Ok(ranges)
}

/// The staging of one read: wgpu copies whole words, so the enclosing
/// aligned range is copied (never past the page) and sliced.
pub(super) fn plan_copy<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    target: StorageHandle,
    size: u64,
) -> Result<ReadCopy, ServerError> {
    let start = target.offset - target.offset % ALIGN;
    let end = (target.offset + size).next_multiple_of(ALIGN);
    let page = server.memory.page_buffer(target.id)?;
    let copy_len = (end - start).max(ALIGN).min(page.size() - start);
    let max = server.gpu.caps().limits.max_buffer_size;
    let staging = match server.memory.pinned() {
        Some(pool) => Staging::Pinned(pool.take(copy_len, max)?, pool.clone()),
        None => Staging::Mapped(server.memory.readback().take_or_create(
            server.gpu.device(),
            copy_len,
            max,
            "read staging buffer",
        )?),
    };
    Ok(ReadCopy {
        page,
        start,
        copy_len,
        staging,
        offset: (target.offset - start) as usize,
        len: size as usize,
    })
}

/// Encodes the copies on `stream` and submits it. A batch the queue
/// refused (what it wrote is poisoned now, so trust is checked again) is
/// followed by the copies alone, once, rather than mapping what the
/// staging buffers held.
pub(super) fn submit_copies<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    stream: StreamId,
    memories: &[compute_runtime::MemoryId],
    copies: &[ReadCopy],
) -> Result<(), ServerError> {
    for attempt in 0..2 {
        let device = server.gpu.device().clone();
        let (_, s) = server.streams.encoder(stream);
        for c in copies.iter().filter(|c| c.copy_len > 0) {
            s.batch().encoder_for_copy(&device).copy_buffer_to_buffer(
                &c.page,
                c.start,
                c.target(),
                0,
                c.copy_len,
            );
        }
        server.streams.task_done(stream);
        server.streams.submit(stream);
        if !server.streams.encoder(stream).1.take_failed() {
            return Ok(());
        }
        for m in memories {
            server.streams.check(*m)?;
        }
        if attempt == 1 {
            server.streams.take_deferred(stream)?;
        }
    }
    Err(ServerError::BatchRejected {
        reason: "the batch of a read's copies did not run".into(),
    })
}

/// The future of the bytes: once the copies have run (late verdicts on the
/// bytes are in by then, and checked), each staging handed out as the
/// `Bytes` themselves (mapped first where it is a `MAP_READ` buffer).
fn mapped_bytes<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    stream: StreamId,
    memories: Vec<compute_runtime::MemoryId>,
    copies: Vec<ReadCopy>,
) -> DynFut<Result<Vec<Bytes>, ServerError>> {
    let reads: Vec<Landing> = copies.into_iter().map(ReadCopy::landing).collect();
    let (_, s) = server.streams.encoder(stream);
    let (index, no) = s.last_submission();
    let waiter = server.gpu.waiter().clone();
    let faults = std::sync::Arc::clone(server.gpu.faults());
    let late = std::sync::Arc::clone(server.streams.trust().late());
    let pool = server.memory.readback().clone();
    Box::pin(async move {
        waiter.wait(index, no).await?;
        for m in memories {
            late.check(m)?;
        }
        let mut out = Vec::with_capacity(reads.len());
        for landing in reads {
            out.push(landing.bytes(&faults, &pool).await?);
        }
        Ok(out)
    })
}
