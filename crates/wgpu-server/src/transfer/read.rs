//! Host reads: checked whole before anything is encoded, ordered after
//! the work that writes the bytes, copied into a pooled staging (a block of
//! imported host memory, else a `MAP_READ` buffer), handed out as the
//! staging itself once the copy has run.

use compute_runtime::{Bytes, CopyDescriptor, DynFut, ServerError, StorageHandle, StreamId};
use compute_stream::Access;

use crate::device::faults::DeviceFaults;
use crate::device::map::MapRead;
use crate::memory::pinned::{PinnedBlock, PinnedPool, PinnedRange};
use crate::memory::readback::{MappedRange, ReadbackPool};
use crate::transfer::{ALIGN, Transfers, check_descriptor};

/// One descriptor's copy into read staging: the enclosing aligned range
/// of its page, and where its bytes lie in the staging.
pub(crate) struct ReadCopy {
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
    pub(crate) fn landing(self) -> Landing {
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
pub(crate) enum Landing {
    /// Mapping asked for; the bytes at `.1..+.2` of the mapped range.
    Mapped(MapRead, usize, usize),
    /// The bytes at `.2..+.3` of the block.
    Pinned(PinnedBlock, PinnedPool, usize, usize),
}

impl Landing {
    /// The bytes, once the submission that copied them has completed
    /// (the caller waited for it).
    pub(crate) async fn bytes(
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
pub(crate) fn read(
    server: &mut Transfers<'_>,
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
pub(crate) fn checked_ranges(
    server: &mut Transfers<'_>,
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
pub(crate) fn plan_copy(
    server: &mut Transfers<'_>,
    target: StorageHandle,
    size: u64,
) -> Result<ReadCopy, ServerError> {
    let start = target.offset - target.offset % ALIGN;
    let end = (target.offset + size).next_multiple_of(ALIGN);
    let page = server.memory.page_buffer(target.id)?;
    let copy_len = (end - start).max(ALIGN).min(page.size() - start);
    let max = server.gpu.caps().limits.max_buffer_size;
    let staging = match server
        .memory
        .pinned()
        .and_then(|p| p.take_or_none(copy_len, max))
    {
        Some((block, pool)) => Staging::Pinned(block, pool),
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
pub(crate) fn submit_copies(
    server: &mut Transfers<'_>,
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
fn mapped_bytes(
    server: &mut Transfers<'_>,
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
