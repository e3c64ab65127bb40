//! Bytes on the device and on the host: pages as wgpu buffers
//! ([`storage`]), host staging for uploads (`staging`), pooled `MAP_READ`
//! buffers for reads (`readback`), host memory imported into the device
//! where reads land when the device can import it (`pinned`), and the
//! upload arena and buffers writes are copied from (`upload`). The
//! transfers themselves are `transfer/`'s.
//!
//! Pooling (which slice of which page) is `compute-memory`'s; this module
//! only turns its pages into buffers and moves bytes in and out of them.

pub(crate) mod pinned;
pub(crate) mod readback;
pub(crate) mod staging;
pub mod storage;
pub(crate) mod upload;

use std::sync::Arc;

use compute_memory::MemoryManagement;
use compute_runtime::{
    BufferBinding, InternalFault, ManagedMemoryHandle, MemoryId, ReleaseQueue, ServerError,
    StorageHandle, StorageId,
};

/// A server's memory: the pooled manager, the queue dropped handles report
/// to, and the host-side staging pools.
#[derive(Debug)]
pub(crate) struct Memory {
    manager: MemoryManagement<storage::WgpuStorage>,
    /// Ids of dropped handles, freed at the next call.
    releases: Arc<ReleaseQueue>,
    /// Scratch for draining `releases` without allocating.
    released: Vec<MemoryId>,
    staging: staging::HostStaging,
    readback: readback::ReadbackPool,
    /// Where reads land when the device imports host memory.
    pinned: Option<pinned::PinnedPool>,
    /// Whether large writes are filled into `pinned` too.
    pinned_writes: bool,
    upload: upload::UploadPool,
}

impl Memory {
    pub fn new(
        manager: MemoryManagement<storage::WgpuStorage>,
        upload: upload::UploadPool,
        pinned: Option<pinned::PinnedPool>,
        pinned_writes: bool,
    ) -> Self {
        Memory {
            pinned_writes,
            manager,
            releases: ReleaseQueue::new(),
            released: Vec::new(),
            staging: Default::default(),
            readback: Default::default(),
            pinned,
            upload,
        }
    }

    /// The pools.
    pub fn manager(&self) -> &MemoryManagement<storage::WgpuStorage> {
        &self.manager
    }

    pub fn manager_mut(&mut self) -> &mut MemoryManagement<storage::WgpuStorage> {
        &mut self.manager
    }

    /// The buffer of page `page`. A live slice's page always has one: a
    /// missing one is the server's fault, not the caller's.
    pub fn page_buffer(&self, page: StorageId) -> Result<wgpu::Buffer, ServerError> {
        self.manager
            .storage_ref()
            .buffer(page)
            .cloned()
            .ok_or(ServerError::Internal {
                fault: InternalFault::PageGone { page },
            })
    }

    /// Resolves a binding to its page range, checking it lies inside its
    /// slice: an unknown handle is `UnknownHandle`, a range past the
    /// slice's capacity `OutOfBounds`.
    pub fn resolve(&self, binding: &BufferBinding) -> Result<StorageHandle, ServerError> {
        let memory = binding.memory_id();
        let slice = self
            .manager()
            .get(memory)
            .ok_or(ServerError::UnknownHandle { memory })?;
        let capacity = self.manager().size_of(memory).unwrap_or(slice.size);
        match binding.end() {
            Some(end) if end <= capacity => Ok(StorageHandle {
                id: slice.id,
                offset: slice.offset + binding.offset,
                size: binding.size,
            }),
            _ => Err(ServerError::OutOfBounds {
                memory,
                offset: binding.offset,
                size: binding.size,
                capacity,
            }),
        }
    }

    /// A slice of `size` bytes the server itself uses (an indirect count's
    /// copy): freed when the returned binding is dropped, like a caller's.
    ///
    /// It comes from the persistent pool, where every slice has a page of
    /// its own: a sliced page could be the very page the count is copied
    /// from (a copy whose source and destination are one buffer is invalid,
    /// and would take the whole batch down) or one the dispatch binds. A
    /// freed scratch page is kept under its size and serves the next one.
    pub(crate) fn scratch(
        &mut self,
        size: u64,
    ) -> Result<(BufferBinding, StorageHandle), ServerError> {
        let handle = ManagedMemoryHandle::new();
        let id = handle.id();
        self.manager_mut()
            .bind_in(id, size, compute_runtime::MemoryAllocationMode::Persistent)?;
        if let Err(e) = handle.attach_release(self.releases()) {
            self.manager_mut().release(id);
            return Err(e);
        }
        let binding = handle.binding(size);
        let page = self.resolve(&binding)?;
        Ok((binding, page))
    }

    /// Where dropped handles report their ids.
    pub fn releases(&self) -> &Arc<ReleaseQueue> {
        &self.releases
    }

    /// Frees the slices of handles dropped since the last call, after
    /// `forget` (the trust registry) saw their ids; returns them for the log.
    pub fn free_released(
        &mut self,
        forget: impl FnOnce(&ReleaseQueue, &mut Vec<MemoryId>),
    ) -> &[MemoryId] {
        self.released.clear();
        forget(&self.releases, &mut self.released);
        for id in &self.released {
            self.manager.release(*id);
        }
        &self.released
    }

    #[cfg(feature = "testing")]
    pub fn staging(&self) -> &staging::HostStaging {
        &self.staging
    }

    pub fn staging_mut(&mut self) -> &mut staging::HostStaging {
        &mut self.staging
    }

    pub fn readback(&self) -> &readback::ReadbackPool {
        &self.readback
    }

    /// The imported host blocks reads land in, where the device has them.
    pub fn pinned(&self) -> Option<&pinned::PinnedPool> {
        self.pinned.as_ref()
    }

    /// The imported host blocks large writes are filled into, where the
    /// device has them and writes were asked to use them
    /// (`WGPU_SERVER_HOST_MEMORY=imported`; mapped staging otherwise).
    pub fn pinned_for_writes(&self) -> Option<&pinned::PinnedPool> {
        self.pinned.as_ref().filter(|_| self.pinned_writes)
    }

    pub fn upload(&self) -> &upload::UploadPool {
        &self.upload
    }
}
