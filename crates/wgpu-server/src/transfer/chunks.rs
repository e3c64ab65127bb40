//! `read_chunks`: a read handed out in chunks as their copies land, so the
//! caller's use of the first bytes overlaps the copy of the rest.
//!
//! `read` hands out one `Bytes` once the whole copy has run: a caller that
//! sums or parses 64 MiB waits for the copy, then works, one after the
//! other. Here each chunk is copied into its own pooled staging (a
//! `MAP_READ` buffer or a block of imported host memory, as `read`'s) and
//! submitted on its own, every copy queued before the call returns, so
//! the GPU finishes them one by one while the caller works on the chunks
//! already out. Each chunk is its staging itself, as `read`'s bytes
//! are: no host copy, and the staging goes back to its pool when the chunk
//! is dropped.
//!
//! Checks and ordering are `read`'s: the descriptor is checked whole before
//! anything is encoded, the copies come after the work that writes the
//! bytes, and each chunk is checked against late verdicts once its copy
//! has run.

use std::pin::Pin;
use std::sync::Arc;

use compute_runtime::{Bytes, CopyDescriptor, ServerError, StorageHandle, StreamId};
use futures::{Stream, StreamExt};

use crate::transfer::Transfers;
use crate::transfer::read::{ReadCopy, checked_ranges, plan_copy, submit_copies};

/// Chunks one `read_chunks` may cut a read into: each is a submission of
/// its own, so a tiny chunk size on a large read is refused rather than
/// flooding the queue.
pub const MAX_READ_CHUNKS: u64 = 4096;

/// One chunk of a [`WgpuServer::read_chunks`](crate::WgpuServer::read_chunks): `bytes` are the read's bytes
/// from `offset` on.
#[derive(Clone, Debug)]
pub struct ReadChunk {
    /// Where the chunk starts, in bytes from the start of the read.
    pub offset: u64,
    /// The chunk's bytes (its staging itself).
    pub bytes: Bytes,
}

/// The chunks of a read, in order, each as soon as its copy has run.
pub type ReadChunks = Pin<Box<dyn Stream<Item = Result<ReadChunk, ServerError>> + Send>>;

/// The body of [`WgpuServer::read_chunks`](crate::WgpuServer::read_chunks),
/// once the server has checked the call's state.
pub(crate) fn read_chunks(
    t: &mut Transfers<'_>,
    descriptor: CopyDescriptor,
    chunk: u64,
    stream: StreamId,
) -> Result<ReadChunks, ServerError> {
    let memory = descriptor.binding.memory_id();
    let (target, size) = checked_ranges(t, std::slice::from_ref(&descriptor), stream)?
        .pop()
        .ok_or(ServerError::InvalidArgument {
            reason: "read_chunks: no range to read".into(),
        })?;
    let count = chunk_count(size, chunk)?;
    // Every staging buffer first: a failure to get one encodes nothing.
    let copies = (0..count)
        .map(|i| {
            let offset = i * chunk;
            let len = chunk.min(size - offset);
            let part = StorageHandle {
                offset: target.offset + offset,
                size: len,
                ..target
            };
            plan_copy(t, part, len).map(|c| (offset, c))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut pending = Vec::with_capacity(copies.len());
    for (offset, copy) in copies {
        submit_copies(t, stream, &[memory], std::slice::from_ref(&copy))?;
        let (_, s) = t.streams.encoder(stream);
        let (index, no) = s.last_submission();
        pending.push((offset, copy, index, no));
    }
    let waiter = t.gpu.waiter().clone();
    let faults = Arc::clone(t.gpu.faults());
    let late = Arc::clone(t.streams.trust().late());
    let pool = t.memory.readback().clone();
    let chunks = pending.into_iter().map(move |(offset, copy, index, no)| {
        let (waiter, faults, late, pool) = (
            waiter.clone(),
            Arc::clone(&faults),
            Arc::clone(&late),
            pool.clone(),
        );
        let landing = ReadCopy::landing(copy);
        async move {
            waiter.wait(index, no).await?;
            late.check(memory)?;
            Ok(ReadChunk {
                offset,
                bytes: landing.bytes(&faults, &pool).await?,
            })
        }
    });
    Ok(Box::pin(ended_by_error(
        futures::stream::iter(chunks).then(|f| f),
    )))
}

/// How many chunks of `chunk` bytes a `size`-byte read takes.
fn chunk_count(size: u64, chunk: u64) -> Result<u64, ServerError> {
    if chunk == 0 {
        return Err(ServerError::InvalidArgument {
            reason: "read_chunks: the chunk size is 0".into(),
        });
    }
    let count = size.div_ceil(chunk);
    if count > MAX_READ_CHUNKS {
        return Err(ServerError::InvalidArgument {
            reason: format!(
                "read_chunks: {size} bytes in chunks of {chunk} is {count} chunks, over {MAX_READ_CHUNKS}"
            ),
        });
    }
    Ok(count)
}

/// The stream up to and including its first error.
fn ended_by_error<T: Send, E: Send>(
    s: impl Stream<Item = Result<T, E>> + Send,
) -> impl Stream<Item = Result<T, E>> + Send {
    s.scan(false, |failed, item| {
        let out = (!*failed).then(|| {
            *failed = item.is_err();
            item
        });
        futures::future::ready(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_counts_round_up_and_refuse_zero_and_floods() {
        assert_eq!(chunk_count(0, 8).ok(), Some(0));
        assert_eq!(chunk_count(8, 8).ok(), Some(1));
        assert_eq!(chunk_count(9, 8).ok(), Some(2));
        assert!(matches!(
            chunk_count(8, 0),
            Err(ServerError::InvalidArgument { .. })
        ));
        assert_eq!(chunk_count(MAX_READ_CHUNKS, 1).ok(), Some(MAX_READ_CHUNKS));
        assert!(chunk_count(MAX_READ_CHUNKS + 1, 1).is_err());
    }

    #[test]
    fn a_stream_ends_after_its_first_error() {
        let items = vec![Ok(1), Err("bad"), Ok(3)];
        let got: Vec<_> = futures::executor::block_on_stream(Box::pin(ended_by_error(
            futures::stream::iter(items),
        )))
        .collect();
        assert_eq!(got, vec![Ok(1), Err("bad")]);
    }
}
