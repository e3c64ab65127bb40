//! A storage of host byte vectors: the manager's test double, and a way to
//! run the same allocation traces without a device.
//!
//! Two flavours:
//! - [`BytesStorage::new`]: every page is a real zeroed `Vec<u8>`, so tests
//!   can write and read slices through [`BytesStorage::bytes_mut`] /
//!   [`BytesStorage::bytes`];
//! - [`BytesStorage::phantom`]: pages are sizes only, nothing is allocated,
//!   so a trace of gigabytes of reservations costs a few hash-map entries.
//!   [`BytesStorage::bytes`] answers `None` for phantom pages;
//!   [`BytesStorage::allocated`], the capacity cap and
//!   [`ComputeStorage::get`] work exactly as for real pages.

use compute_runtime::{ComputeStorage, ServerError, StorageHandle, StorageId};
use hashbrown::HashMap;

#[derive(Debug)]
struct Page {
    size: u64,
    /// The bytes; empty for a phantom page.
    bytes: Vec<u8>,
}

/// Pages as `Vec<u8>` (or sizes only, see [`BytesStorage::phantom`]), with an
/// optional cap on total bytes to force out-of-memory in tests.
#[derive(Debug, Default)]
pub struct BytesStorage {
    pages: HashMap<StorageId, Page>,
    next: u64,
    alignment: u64,
    phantom: bool,
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

    /// An empty storage that tracks page sizes without allocating their
    /// bytes: for allocation traces that only look at the manager's numbers.
    pub fn phantom(alignment: u64) -> Self {
        Self {
            phantom: true,
            ..Self::new(alignment)
        }
    }

    /// The bytes of a range, for tests; `None` for an unknown page, a range
    /// past its end, or a phantom page.
    pub fn bytes(&self, h: &StorageHandle) -> Option<&[u8]> {
        let page = self.pages.get(&h.id)?;
        let start = usize::try_from(h.offset).ok()?;
        let end = usize::try_from(h.offset.checked_add(h.size)?).ok()?;
        page.bytes.get(start..end)
    }

    /// The bytes of a range, mutable, for tests; `None` as for
    /// [`bytes`](Self::bytes).
    pub fn bytes_mut(&mut self, h: &StorageHandle) -> Option<&mut [u8]> {
        let page = self.pages.get_mut(&h.id)?;
        let start = usize::try_from(h.offset).ok()?;
        let end = usize::try_from(h.offset.checked_add(h.size)?).ok()?;
        page.bytes.get_mut(start..end)
    }

    /// Bytes allocated now.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Pages allocated now.
    pub fn page_count(&self) -> usize {
        self.pages.len()
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
        let bytes = if self.phantom {
            Vec::new()
        } else {
            // Probe that the host can hold the page (an untouched
            // reservation costs no page faults), then take it zeroed, which
            // the allocator serves lazily (calloc) instead of writing zeros.
            Vec::<u8>::new()
                .try_reserve_exact(len)
                .map_err(|e| ServerError::OutOfMemory {
                    size,
                    reason: format!("host allocation failed: {e}"),
                })?;
            vec![0; len]
        };
        self.next += 1;
        let id = StorageId(self.next);
        self.pages.insert(id, Page { size, bytes });
        self.allocated += size;
        Ok(StorageHandle {
            id,
            offset: 0,
            size,
        })
    }

    fn dealloc(&mut self, id: StorageId) {
        if let Some(p) = self.pages.remove(&id) {
            self.allocated -= p.size;
        }
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<CpuResource> {
        let page = self.pages.get(&handle.id)?;
        (handle.offset.checked_add(handle.size)? <= page.size).then_some(CpuResource(*handle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phantom_pages_count_but_hold_no_bytes() {
        let mut s = BytesStorage::phantom(256);
        let h = s.alloc(1 << 30).expect("phantom alloc of 1 GiB");
        assert_eq!(s.allocated(), 1 << 30);
        assert!(s.bytes(&h).is_none());
        assert!(s.get(&h).is_some());
        s.dealloc(h.id);
        assert_eq!(s.allocated(), 0);
        assert_eq!(s.page_count(), 0);
    }

    #[test]
    fn real_pages_are_zeroed_and_capped() {
        let mut s = BytesStorage::new(4);
        s.capacity = Some(100);
        let h = s.alloc(64).expect("within capacity");
        assert_eq!(s.bytes(&h), Some(&[0u8; 64][..]));
        assert!(matches!(s.alloc(64), Err(ServerError::OutOfMemory { .. })));
    }
}
