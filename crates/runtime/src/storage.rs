//! The storage seam: where a memory manager gets its pages.
//!
//! A [`ComputeStorage`] allocates whole pages and resolves a
//! [`StorageHandle`] (a page plus a byte range) to the backend's resource.
//! It lives here, not in `compute-memory`, because
//! [`crate::ServerStorage`] names it.

use crate::{ServerError, StorageId};

/// A byte range of one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StorageHandle {
    /// The page.
    pub id: StorageId,
    /// First byte of the range inside the page.
    pub offset: u64,
    /// Length of the range.
    pub size: u64,
}

/// Backing storage for a memory manager.
pub trait ComputeStorage: Send {
    /// What a resolved handle gives access to (a buffer range, for wgpu).
    type Resource: Send;

    /// Offset alignment every slice start must honour.
    fn alignment(&self) -> u64;

    /// Allocates a page of exactly `size` bytes.
    fn alloc(&mut self, size: u64) -> Result<StorageHandle, ServerError>;

    /// Frees a page. Work already submitted that uses it may still run; the
    /// storage must keep it alive for that work (wgpu does).
    fn dealloc(&mut self, id: StorageId);

    /// The resource a handle names, or `None` for an unknown page.
    fn get(&mut self, handle: &StorageHandle) -> Option<Self::Resource>;
}

/// A storage resource handed out of the server, with the handle it resolves.
#[derive(Debug)]
pub struct ManagedResource<R> {
    /// The resource.
    pub resource: R,
    /// Where it lives.
    pub handle: StorageHandle,
}
