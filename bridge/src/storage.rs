//! `ServerStorage`: the buffer behind a cubecl binding, as this server
//! resolves it (a wgpu buffer and a byte range of it).

use cubecl_environment::stream::StreamId;
use cubecl_runtime::server::{BufferBinding, IoError, ServerError, ServerStorage};
use cubecl_runtime::storage::{ComputeStorage, ManagedResource, StorageHandle, StorageId};
use wgpu_server::WgpuResource;
use wgpu_server::runtime::ServerStorage as _;

use crate::errors::to_cubecl;
use crate::memory::stream;
use crate::server::BridgeServer;

/// The storage type cubecl's `ServerStorage` names. The server owns its
/// pages; the bridge allocates through the server's calls, never through
/// this, so every allocation path here refuses.
#[derive(Debug, Default)]
pub struct BridgeStorage;

fn not_here() -> IoError {
    IoError::UnsupportedIoOperation {
        backtrace: cubecl_environment::backtrace::BackTrace::capture(),
    }
}

impl ComputeStorage for BridgeStorage {
    type Resource = WgpuResource;

    fn alignment(&self) -> usize {
        4
    }

    fn get(&mut self, _handle: &StorageHandle) -> Result<WgpuResource, IoError> {
        Err(not_here())
    }

    fn alloc(&mut self, _size: u64) -> Result<StorageHandle, IoError> {
        Err(not_here())
    }

    fn dealloc(&mut self, _id: StorageId) {}

    fn flush(&mut self) {}

    fn bytes_allocated(&self) -> u64 {
        0
    }
}

impl ServerStorage for BridgeServer {
    type Storage = BridgeStorage;

    fn get_resource(
        &mut self,
        binding: BufferBinding,
        stream_id: StreamId,
    ) -> Result<ManagedResource<WgpuResource>, ServerError> {
        let resolved = self.memory.resolve(&binding).map_err(|e| to_cubecl(&e))?;
        let resource = self
            .inner
            .get_resource(resolved.binding, stream(stream_id))
            .map_err(|e| to_cubecl(&e))?;
        Ok(ManagedResource::new(binding.memory, resource.resource))
    }
}
