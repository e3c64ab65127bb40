//! `PersistentPool`: page reuse by size class for
//! [`MemoryAllocationMode::Persistent`].
//!
//! **Buys:** a steady-state loop or a graph warm-up that frees and
//! reserves the same sizes again allocates nothing after its first pass:
//! every reservation gets a page of its own, of its size class (the size
//! rounded up to one of four steps per doubling, and to the alignment), and
//! a freed page is kept under its class and handed to the next request of
//! that class. Nothing is ever given back while the manager is in
//! persistent mode, not even by cleanup, so a capture window that follows a
//! warm-up cannot trigger a device allocation.
//!
//! **Why classes, not exact sizes:** a stream prepared for a capture that
//! never comes allocates persistently for as long as it runs; with
//! exact-size reuse, a loop whose sizes drift kept one page per size it had
//! seen, without bound, until `memory_cleanup`. With classes it keeps at
//! most one page per class per live allocation: four per doubling of size
//! (about 130 classes up to 4 GiB), at the cost of at most a quarter of a
//! page in padding.
//!
//! **Doesn't:** serve a request from a page of another class, or give pages
//! back on its own. Once the manager is back in
//! [`MemoryAllocationMode::Auto`], cleanup gives back the kept pages; live
//! ones stay until freed.
//!
//! [`MemoryAllocationMode::Persistent`]: compute_runtime::MemoryAllocationMode::Persistent
//! [`MemoryAllocationMode::Auto`]: compute_runtime::MemoryAllocationMode::Auto

use compute_runtime::{
    ComputeStorage, PoolKind, PoolReport, ServerError, StorageHandle, StorageId,
};
use hashbrown::HashMap;

use crate::pool::{Usage, new_page, round_up, whole_page_bytes};

/// Size classes per doubling: padding is under a quarter of a page.
const CLASSES_PER_DOUBLING: u32 = 4;

/// The page a `size`-byte request gets: its size class, a multiple of
/// `align`; the request rounded to whole words when the class would be over
/// `max_buffer_size`.
fn class_bytes(size: u64, align: u64, max_buffer_size: u64) -> u64 {
    let exact = whole_page_bytes(size, align, max_buffer_size);
    let step = match exact.checked_ilog2() {
        Some(b) if b >= CLASSES_PER_DOUBLING.ilog2() => 1u64 << (b - CLASSES_PER_DOUBLING.ilog2()),
        _ => 1,
    };
    round_up(exact, step)
        .and_then(|c| round_up(c, align))
        .filter(|c| *c <= max_buffer_size)
        .unwrap_or(exact)
}

/// Page reuse by size class.
#[derive(Debug)]
pub(crate) struct PersistentPool {
    name: String,
    align: u64,
    max_buffer_size: u64,
    max_reserved: Option<u64>,
    /// Kept pages by size (their class).
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

    /// A page for `size` bytes: a kept one of its size class, else a new
    /// one.
    pub fn reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<StorageHandle, ServerError> {
        let need = class_bytes(size, self.align, self.max_buffer_size);
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
    /// size, its class.
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
    fn only_the_same_size_class_is_reused() {
        let mut p = PersistentPool::new("persistent".into(), 256, 1 << 30, None);
        let mut s = BytesStorage::new(256);
        let a = p.reserve(&mut s, 1000).expect("a");
        p.free(a, 1000);
        // 1024 rounded: same page.
        let b = p.reserve(&mut s, 1024).expect("b");
        assert_eq!(b.id, a.id);
        p.free(b, 1024);
        // 1025 is in the 1280 class: another page, the 1024 one stays kept.
        let c = p.reserve(&mut s, 1025).expect("c");
        assert_ne!(c.id, a.id);
        let r = p.report();
        assert_eq!((r.pages, r.bytes_reserved, r.allocations), (2, 2304, 1));
        let mut gone = Vec::new();
        p.cleanup(&mut s, &mut gone);
        assert_eq!(gone, vec![a.id]);
        assert_eq!(p.report().bytes_reserved, 1280);
    }

    /// A loop of allocate / free whose sizes drift (a prepared stream that
    /// never captures) keeps a bounded number of pages: one per size class
    /// it has seen, at most four per doubling of size.
    #[test]
    fn drifting_sizes_keep_a_page_per_size_class() {
        let mut p = PersistentPool::new("persistent".into(), 4, 1 << 30, None);
        let mut s = BytesStorage::new(4);
        let mut x = 12_345u64;
        for _ in 0..5_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let size = 4 + (x >> 33) % 8_000;
            let page = p.reserve(&mut s, size).expect("reserve");
            assert!(page.size >= size && page.size - size <= size / 4 + 4);
            p.free(page, size);
        }
        let r = p.report();
        let classes = 4 * u64::from(8_004u64.ilog2() + 1);
        assert!(
            r.pages <= classes,
            "{} pages for {classes} classes",
            r.pages
        );
    }

    #[test]
    fn classes_are_four_per_doubling_aligned_and_capped() {
        let max = 1 << 30;
        let classes: Vec<u64> = [1, 4, 5, 16, 17, 20, 21, 1000, 1024, 1025, 1281]
            .iter()
            .map(|s| class_bytes(*s, 4, max))
            .collect();
        assert_eq!(classes, [4, 4, 8, 16, 20, 20, 24, 1024, 1024, 1280, 1536]);
        assert_eq!(class_bytes(1000, 256, max), 1024);
        assert_eq!(class_bytes(300, 256, max), 512, "then the alignment");
        // A class over the device's largest buffer: the request itself.
        let odd_max = max - 4;
        assert_eq!(class_bytes(odd_max - 100, 4, odd_max), odd_max - 100);
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
