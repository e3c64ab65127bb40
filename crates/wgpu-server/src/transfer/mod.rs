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
//! - `write`: checking a write and moving its bytes into place;
//! - `read`: a read's copies, submission and bytes;
//! - `chunks`: a read handed out in chunks as their copies land.
//!
//! Each runs on [`Transfers`], the parts it borrows from the server: the
//! server's calls (`server/api.rs`, `server/collective.rs`) check the
//! call's state (the device, a capture window) and hand the rest here.
//!
//! [`prepare_host_write`]: compute_stream::SchedulerMultiStream::prepare_host_write

pub(crate) mod chunks;
pub(crate) mod read;
pub(crate) mod write;

use compute_runtime::{BufferBinding, CopyDescriptor, ServerError, StorageHandle};
use compute_stream::SchedulerMultiStream;

use crate::device::Gpu;
use crate::memory::Memory;
use crate::stream::ScheduledWgpuBackend;

/// wgpu moves bytes in 4-byte units.
pub(crate) const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// The parts a host transfer moves bytes through, borrowed from the server
/// for one call: the device, memory and the streams. Nothing else of the
/// server (kernels, graphs, collectives, the trust key) is reachable from
/// a transfer.
pub(crate) struct Transfers<'a> {
    pub gpu: &'a Gpu,
    pub memory: &'a mut Memory,
    pub streams: &'a mut SchedulerMultiStream<ScheduledWgpuBackend>,
}

impl Transfers<'_> {
    /// Resolves a binding to its page range (see [`Memory::resolve`]).
    pub fn resolve(&self, binding: &BufferBinding) -> Result<StorageHandle, ServerError> {
        self.memory.resolve(binding)
    }
}

pub(crate) fn check_descriptor(descriptor: &CopyDescriptor) -> Result<u64, ServerError> {
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
