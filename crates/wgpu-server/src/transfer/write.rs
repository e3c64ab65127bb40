//! Host writes: checked before anything moves, then a copy into place
//! from the upload arena (small writes), a block of imported host memory
//! or a mapped upload buffer (a megabyte or more), or, on a stream held
//! behind a collective, a copy encoded on the stream. The layout of the
//! write path and its rules are the module doc's (`transfer/mod.rs`).

use compute_runtime::{Bytes, CopyDescriptor, ServerError, StorageHandle, StreamId};
use compute_stream::Access;

use crate::device::faults::scoped;
use crate::memory::upload::{self, CopyTarget, MIN_UPLOAD, Upload};
use crate::transfer::{ALIGN, Transfers, check_descriptor};

/// Where a write that passed its checks goes.
pub(crate) struct CheckedWrite {
    target: StorageHandle,
    buffer: wgpu::Buffer,
    size: u64,
}

/// Checks a write of `len` bytes where `descriptor` says, touching
/// nothing: the descriptor, the data's length, the range, the alignment. `None`: there is
/// nothing to move (zero bytes).
pub(crate) fn check_write(
    server: &mut Transfers<'_>,
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
pub(crate) fn write(
    server: &mut Transfers<'_>,
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
pub(crate) fn write_checked(
    server: &mut Transfers<'_>,
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
fn upload(
    server: &mut Transfers<'_>,
    target: StorageHandle,
    memory: compute_runtime::MemoryId,
    buffer: &wgpu::Buffer,
    data: &[u8],
    stream: StreamId,
) -> Result<(), ServerError> {
    let len = (data.len() as u64).next_multiple_of(ALIGN);
    let max = server.gpu.caps().limits.max_buffer_size;
    let staging = match server
        .memory
        .pinned_for_writes()
        .and_then(|p| p.take_or_none(len, max))
    {
        Some((mut block, pool)) => {
            block.fill(data);
            Upload::Pinned(block, pool)
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
fn write_on_stream(
    server: &mut Transfers<'_>,
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
