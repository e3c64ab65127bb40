//! `PersistentPool`: exact-size reuse for [`MemoryAllocationMode::Persistent`].
//!
//! **Buys:** a steady-state loop or a graph warm-up that frees and
//! reserves the same sizes again allocates nothing after its first pass:
//! every reservation gets a page of its own (its size rounded up to the
//! alignment), and a freed page is kept under that exact size and handed to
//! the next request of the same rounded size. Nothing is ever given back
//! while the manager is in persistent mode, not even by cleanup, so a
//! capture window that follows a warm-up cannot trigger a device
//! allocation.
//!
//! **Doesn't:** serve a request from a page of another size (a loop whose
//! sizes drift keeps one page per size it has seen), or give pages back on
//! its own. Once the manager is back in [`MemoryAllocationMode::Auto`],
//! cleanup gives back the kept pages; live ones stay until freed.
//!
//! [`MemoryAllocationMode::Persistent`]: compute_runtime::MemoryAllocationMode::Persistent
//! [`MemoryAllocationMode::Auto`]: compute_runtime::MemoryAllocationMode::Auto

use compute_runtime::{
    ComputeStorage, PoolKind, PoolReport, ServerError, StorageHandle, StorageId,
};
use hashbrown::HashMap;

use crate::pool::{Usage, new_page, whole_page_bytes};

/// Exact-size page reuse.
#[derive(Debug)]
pub(crate) struct PersistentPool {
    name: String,
    align: u64,
    max_buffer_size: u64,
    max_reserved: Option<u64>,
    /// Kept pages by size.
    kept: HashMap<u64, Vec<StorageId>>,
    kept_bytes: u64,
    usage: Usage,
}

impl PersistentPool {
    pub fn new(name: String, align: u64, max_buffer_size: u64, max_reserved: Option<u64>) -> Self {
        Self {
            name,
            align: align.max(1),
            max_buffer_size,
            max_reserved,
            kept: HashMap::new(),
            kept_bytes: 0,
            usage: Usage::default(),
        }
    }

    /// A page for `size` bytes: a kept one of exactly the rounded size, else
    /// a new one.
    pub fn reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<StorageHandle, ServerError> {
        let need = whole_page_bytes(size, self.align, self.max_buffer_size);
        let page = match self.kept.get_mut(&need).and_then(Vec::pop) {
            Some(id) => {
                self.kept_bytes -= need;
                StorageHandle {
                    id,
                    offset: 0,
                    size: need,
                }
            }
            None => new_page(
                storage,
                &mut self.usage,
                &self.name,
                size,
                need,
                self.max_reserved,
                self.kept_bytes,
            )?,
        };
        self.usage.slice_added(size, page.size);
        Ok(page)
    }

    /// Frees a page handed out for `requested` bytes; it is kept under its
    /// size.
    pub fn free(&mut self, page: StorageHandle, requested: u64) {
        self.usage.slice_removed(requested, page.size);
        self.kept.entry(page.size).or_default().push(page.id);
        self.kept_bytes += page.size;
    }

    /// Gives every kept page back to `storage`, appending their ids to
    /// `gone`. The manager calls it only outside persistent mode.
    pub fn cleanup<S: ComputeStorage>(&mut self, storage: &mut S, gone: &mut Vec<StorageId>) {
        let mut kept: Vec<(u64, StorageId)> = self
            .kept
            .drain()
            .flat_map(|(size, ids)| ids.into_iter().map(move |id| (size, id)))
            .collect();
        kept.sort_unstable_by_key(|&(_, id)| id);
        for (size, id) in kept {
            storage.dealloc(id);
            self.usage.page_removed(size);
            gone.push(id);
        }
        self.kept_bytes = 0;
    }

    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    pub fn report(&self) -> PoolReport {
        self.usage.report(PoolKind::Persistent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BytesStorage;

    #[test]
    fn only_the_exact_rounded_size_is_reused() {
        let mut p = PersistentPool::new("persistent".into(), 256, 1 << 30, None);
        let mut s = BytesStorage::new(256);
        let a = p.reserve(&mut s, 1000).expect("a");
        p.free(a, 1000);
        // 1024 rounded: same page.
        let b = p.reserve(&mut s, 1024).expect("b");
        assert_eq!(b.id, a.id);
        p.free(b, 1024);
        // 1025 rounds to 1280: another page, the 1024 one stays kept.
        let c = p.reserve(&mut s, 1025).expect("c");
        assert_ne!(c.id, a.id);
        let r = p.report();
        assert_eq!((r.pages, r.bytes_reserved, r.allocations), (2, 2304, 1));
        let mut gone = Vec::new();
        p.cleanup(&mut s, &mut gone);
        assert_eq!(gone, vec![a.id]);
        assert_eq!(p.report().bytes_reserved, 1280);
    }

    #[test]
    fn the_cap_counts_kept_pages() {
        let mut p = PersistentPool::new("persistent".into(), 256, 1 << 30, Some(1024));
        let mut s = BytesStorage::new(256);
        let a = p.reserve(&mut s, 1024).expect("a");
        p.free(a, 1024);
        assert!(matches!(
            p.reserve(&mut s, 512),
            Err(ServerError::OutOfMemory { .. })
        ));
        assert_eq!(p.reserve(&mut s, 1000).expect("exact reuse").id, a.id);
    }
}
