//! A storage of host byte vectors: the manager's test double, and a way to
//! run the same allocation traces without a device.

use compute_runtime::{ComputeStorage, ServerError, StorageHandle, StorageId};
use hashbrown::HashMap;

/// Pages as `Vec<u8>`, with an optional cap on total bytes to force
/// out-of-memory in tests.
#[derive(Debug, Default)]
pub struct BytesStorage {
    pages: HashMap<StorageId, Vec<u8>>,
    next: u64,
    alignment: u64,
    /// Cap on bytes allocated at once; `None` is unlimited.
    pub capacity: Option<u64>,
    allocated: u64,
}

impl BytesStorage {
    /// An empty storage whose slices align to `alignment` bytes.
    pub fn new(alignment: u64) -> Self {
        Self {
            alignment: alignment.max(1),
            ..Self::default()
        }
    }

    /// The bytes of a range, for tests.
    pub fn bytes(&self, h: &StorageHandle) -> Option<&[u8]> {
        let page = self.pages.get(&h.id)?;
        let start = usize::try_from(h.offset).ok()?;
        let end = usize::try_from(h.offset.checked_add(h.size)?).ok()?;
        page.get(start..end)
    }

    /// The bytes of a range, mutable, for tests.
    pub fn bytes_mut(&mut self, h: &StorageHandle) -> Option<&mut [u8]> {
        let page = self.pages.get_mut(&h.id)?;
        let start = usize::try_from(h.offset).ok()?;
        let end = usize::try_from(h.offset.checked_add(h.size)?).ok()?;
        page.get_mut(start..end)
    }

    /// Bytes allocated now.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }
}

/// A resolved range of a [`BytesStorage`] page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuResource(pub StorageHandle);

impl ComputeStorage for BytesStorage {
    type Resource = CpuResource;

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, ServerError> {
        if let Some(cap) = self.capacity
            && self.allocated.saturating_add(size) > cap
        {
            return Err(ServerError::OutOfMemory {
                size,
                reason: format!("storage capacity {cap} bytes reached"),
            });
        }
        let len = usize::try_from(size).map_err(|_| ServerError::OutOfMemory {
            size,
            reason: "larger than the address space".into(),
        })?;
        self.next += 1;
        let id = StorageId(self.next);
        self.pages.insert(id, vec![0; len]);
        self.allocated += size;
        Ok(StorageHandle {
            id,
            offset: 0,
            size,
        })
    }

    fn dealloc(&mut self, id: StorageId) {
        if let Some(p) = self.pages.remove(&id) {
            self.allocated -= p.len() as u64;
        }
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<CpuResource> {
        let page = self.pages.get(&handle.id)?;
        (handle.offset.checked_add(handle.size)? <= page.len() as u64)
            .then_some(CpuResource(*handle))
    }
}
