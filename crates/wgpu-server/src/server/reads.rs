//! `read_chunks` on the server (not a seed method): the call's state
//! checked here, the read itself `transfer/chunks.rs`'s.

use compute_runtime::{CopyDescriptor, ServerError, StreamId};
use compute_wgsl::WgpuCompiler;

use crate::server::WgpuServer;
use crate::transfer::chunks::{self, ReadChunks};

impl<C: WgpuCompiler> WgpuServer<C> {
    /// Reads `descriptor`'s bytes in chunks of `chunk` bytes (the last one
    /// shorter), each handed out as soon as its copy has run: the caller's
    /// use of a chunk overlaps the copies of the next ones.
    ///
    /// Refused as `read` refuses (bad descriptor, untrusted bytes, inside a
    /// capture), and with [`ServerError::InvalidArgument`] for a `chunk` of
    /// 0 or one that would cut the read into more than
    /// [`MAX_READ_CHUNKS`](crate::MAX_READ_CHUNKS). A 0-byte read yields no
    /// chunk. A chunk whose bytes turn out untrusted once its copy has run
    /// (a late verdict) is an `Err`, and the stream ends there.
    pub fn read_chunks(
        &mut self,
        descriptor: CopyDescriptor,
        chunk: u64,
        stream: StreamId,
    ) -> Result<ReadChunks, ServerError> {
        self.enter()?;
        self.capture_state(stream)
            .allow_host_wait(stream, "read_chunks")?;
        chunks::read_chunks(&mut self.transfers(), descriptor, chunk, stream)
    }
}
