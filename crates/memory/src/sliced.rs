//! `SlicedPool`: pages of `page_size` bytes, each holding many slices.
//!
//! **Buys:** few device buffers for many small reservations, and reserve /
//! free in O(log n) of the free ranges. Free ranges live in two indexes: a
//! global `BTreeSet` ordered by `(length, page, offset)`, so best fit is the
//! first entry at or after `(needed, 0, 0)` (smallest range that fits; among
//! equal lengths the oldest page, then the lowest offset, which packs slices
//! into the pages that already exist), and a per-page `BTreeMap` by offset,
//! so a freed slice finds its neighbours and coalesces with them at once.
//! Coalescing happens on free only; reserve just splits the range it takes
//! (the slice from its start, the rest stays free), so a page whose slices
//! are all freed is again one free range covering the page.
//!
//! Every slice starts on the pool's alignment: a slice takes its size
//! rounded up to the alignment, and every free range starts on it because
//! pages start at 0 and ranges are split at multiples of it. The rounding is
//! reported as `bytes_padding`. A page's usable length is `page_size`
//! rounded down to the alignment (the tail, if any, is reserved but never
//! used).
//!
//! Freed slices first go to a small cache by size (at most
//! `RECENT_PER_SIZE` per size, `RECENT_MAX` in all), where a reserve of
//! the same rounded size takes them back in O(1): the reserve / free loop of
//! a program that allocates the same shapes step after step never touches
//! the indexes. Cached slices are free (not live, not in use), just not
//! coalesced yet; they all return to the indexes, and coalesce, at the first
//! reserve of another size (so best fit chooses among every free byte, as
//! without a cache) and at `cleanup` (so a page with nothing live is one
//! range again before it is given back); a slice freed while the cache is
//! full coalesces at once.
//!
//! **Doesn't:** move live slices (no compaction), so a page with one small
//! live slice stays reserved; and it never gives a page back on its own: a
//! page with nothing live is kept for reuse until `cleanup`,
//! because the caller tracks pages by id and must hear which ones went.

use std::collections::{BTreeMap, BTreeSet};

use compute_runtime::{
    ComputeStorage, PoolKind, PoolReport, ServerError, StorageHandle, StorageId,
};
use hashbrown::HashMap;

use crate::pool::{Usage, cap_reached, round_down, round_up};

/// Freed slices of one size the cache keeps.
pub(crate) const RECENT_PER_SIZE: usize = 16;
/// Freed slices the cache keeps in all.
pub(crate) const RECENT_MAX: usize = 256;

#[derive(Debug)]
struct Page {
    /// Live slices on the page.
    live: u64,
    /// Free ranges by offset: offset -> length.
    free: BTreeMap<u64, u64>,
}

/// Many slices per page, best fit, coalescing on free.
#[derive(Debug)]
pub(crate) struct SlicedPool {
    name: String,
    page_size: u64,
    max_slice: u64,
    /// `page_size` rounded down to `align`.
    usable: u64,
    align: u64,
    max_reserved: Option<u64>,
    pages: HashMap<StorageId, Page>,
    /// Every free range of every page, as `(length, page, offset)`.
    by_size: BTreeSet<(u64, StorageId, u64)>,
    /// Pages with nothing live.
    empty_pages: u64,
    usage: Usage,
    /// Freed slices not yet back in the indexes, by size: `(page, offset)`.
    recent: HashMap<u64, Vec<(StorageId, u64)>>,
    /// Slices in `recent`.
    recent_len: usize,
}

impl SlicedPool {
    /// A pool of `page_size`-byte pages serving slices up to `max_slice`
    /// bytes, starting on `align`. The caller has checked that a
    /// `max_slice` request, rounded, fits a page.
    pub fn new(
        name: String,
        page_size: u64,
        max_slice: u64,
        align: u64,
        max_reserved: Option<u64>,
    ) -> Self {
        let align = align.max(1);
        Self {
            name,
            page_size,
            max_slice,
            usable: round_down(page_size, align),
            align,
            max_reserved,
            pages: HashMap::new(),
            by_size: BTreeSet::new(),
            empty_pages: 0,
            usage: Usage::default(),
            recent: HashMap::new(),
            recent_len: 0,
        }
    }

    /// Whether a request of `size` bytes is this pool's to serve.
    pub fn fits(&self, size: u64) -> bool {
        size <= self.max_slice && round_up(size, self.align).is_some_and(|n| n <= self.usable)
    }

    /// Largest request served.
    pub fn max_slice(&self) -> u64 {
        self.max_slice
    }

    /// A slice for `size` bytes (`fits(size)` holds): best fit among the
    /// free ranges, else a new page.
    pub fn reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<StorageHandle, ServerError> {
        let need = match round_up(size, self.align) {
            Some(n) if size <= self.max_slice && n <= self.usable => n,
            _ => {
                return Err(ServerError::InvalidArgument {
                    reason: format!("{} does not serve {size} bytes", self.name),
                });
            }
        };
        if let Some((id, offset)) = self.recent.get_mut(&need).and_then(Vec::pop) {
            self.recent_len -= 1;
            self.mark_live(id);
            self.usage.slice_added(size, need);
            return Ok(StorageHandle {
                id,
                offset,
                size: need,
            });
        }
        // Another size: the cache goes back first, so best fit sees every
        // free byte (the choice is the one it made without a cache).
        self.return_recent();
        let (len, id, offset) = match self.best_fit(need) {
            Some(range) => range,
            None => self.add_page(storage, size)?,
        };
        self.by_size.remove(&(len, id, offset));
        if let Some(page) = self.pages.get_mut(&id) {
            if page.live == 0 {
                self.empty_pages -= 1;
            }
            page.live += 1;
            page.free.remove(&offset);
            if len > need {
                page.free.insert(offset + need, len - need);
                self.by_size.insert((len - need, id, offset + need));
            }
        }
        self.usage.slice_added(size, need);
        Ok(StorageHandle {
            id,
            offset,
            size: need,
        })
    }

    /// The smallest free range of at least `need` bytes.
    fn best_fit(&self, need: u64) -> Option<(u64, StorageId, u64)> {
        self.by_size
            .range((need, StorageId(0), 0)..)
            .next()
            .copied()
    }

    /// One more live slice on page `id`.
    fn mark_live(&mut self, id: StorageId) {
        if let Some(page) = self.pages.get_mut(&id) {
            if page.live == 0 {
                self.empty_pages -= 1;
            }
            page.live += 1;
        }
    }

    /// Returns every cached slice to the indexes, coalescing each.
    fn return_recent(&mut self) {
        if self.recent_len == 0 {
            return;
        }
        self.recent_len = 0;
        // Taken and put back, capacity kept: the map and its lists are
        // reused by the next frees.
        let mut recent = std::mem::take(&mut self.recent);
        for (size, slices) in recent.iter_mut() {
            for (id, offset) in slices.drain(..) {
                self.coalesce(id, offset, *size);
            }
        }
        // Sizes seen once keep an empty list each: bounded here.
        if recent.len() > RECENT_MAX {
            recent.clear();
        }
        self.recent = recent;
    }

    /// Allocates a page and returns its one free range.
    fn add_page<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<(u64, StorageId, u64), ServerError> {
        if let Some(cap) = self.max_reserved
            && self.usage.bytes_reserved.saturating_add(self.page_size) > cap
        {
            return Err(cap_reached(
                &self.name,
                size,
                cap,
                &self.usage,
                self.empty_pages * self.page_size,
            ));
        }
        let page = storage.alloc(self.page_size)?;
        self.usage.page_added(self.page_size);
        self.empty_pages += 1;
        let mut free = BTreeMap::new();
        free.insert(0, self.usable);
        self.pages.insert(page.id, Page { live: 0, free });
        self.by_size.insert((self.usable, page.id, 0));
        Ok((self.usable, page.id, 0))
    }

    /// Frees a slice this pool handed out for a request of `requested`
    /// bytes, coalescing it with the free ranges on either side.
    pub fn free(&mut self, slice: StorageHandle, requested: u64) {
        let Some(page) = self.pages.get_mut(&slice.id) else {
            return;
        };
        self.usage.slice_removed(requested, slice.size);
        page.live -= 1;
        if page.live == 0 {
            self.empty_pages += 1;
        }
        if self.recent_len < RECENT_MAX {
            let same = self.recent.entry(slice.size).or_default();
            if same.len() < RECENT_PER_SIZE {
                same.push((slice.id, slice.offset));
                self.recent_len += 1;
                return;
            }
        }
        self.coalesce(slice.id, slice.offset, slice.size);
    }

    /// Puts the free range `offset..offset + size` of page `id` back in the
    /// indexes, merged with the free ranges on either side.
    fn coalesce(&mut self, id: StorageId, offset: u64, size: u64) {
        let Some(page) = self.pages.get_mut(&id) else {
            return;
        };
        let mut start = offset;
        let mut len = size;
        let end = start + len;
        if let Some(next_len) = page.free.remove(&end) {
            self.by_size.remove(&(next_len, id, end));
            len += next_len;
        }
        if let Some((&prev, &prev_len)) = page.free.range(..start).next_back()
            && prev + prev_len == start
        {
            page.free.remove(&prev);
            self.by_size.remove(&(prev_len, id, prev));
            start = prev;
            len += prev_len;
        }
        page.free.insert(start, len);
        self.by_size.insert((len, id, start));
    }

    /// Gives every page with nothing live back to `storage`, appending
    /// their ids to `gone`.
    pub fn cleanup<S: ComputeStorage>(&mut self, storage: &mut S, gone: &mut Vec<StorageId>) {
        // A page with nothing live is one free range again only once its
        // cached slices are back.
        self.return_recent();
        if self.empty_pages == 0 {
            return;
        }
        let mut empty: Vec<StorageId> = self
            .pages
            .iter()
            .filter(|(_, p)| p.live == 0)
            .map(|(id, _)| *id)
            .collect();
        empty.sort_unstable();
        for id in empty {
            if let Some(page) = self.pages.remove(&id) {
                for (offset, len) in page.free {
                    self.by_size.remove(&(len, id, offset));
                }
                storage.dealloc(id);
                self.usage.page_removed(self.page_size);
                gone.push(id);
            }
        }
        self.empty_pages = 0;
    }

    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    pub fn report(&self) -> PoolReport {
        self.usage.report(PoolKind::Sliced {
            page_size: self.page_size,
            max_slice: self.max_slice,
        })
    }

    /// Free ranges of a page, by offset (tests).
    #[cfg(test)]
    fn free_ranges(&mut self, id: StorageId) -> Vec<(u64, u64)> {
        self.return_recent();
        self.pages
            .get(&id)
            .map(|p| p.free.iter().map(|(o, l)| (*o, *l)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BytesStorage;

    fn pool(cap: Option<u64>) -> (SlicedPool, BytesStorage) {
        (
            SlicedPool::new("test pool".into(), 4096, 2048, 256, cap),
            BytesStorage::new(256),
        )
    }

    #[test]
    fn slices_are_aligned_and_packed_into_one_page() {
        let (mut p, mut s) = pool(None);
        let a = p.reserve(&mut s, 100).expect("a");
        let b = p.reserve(&mut s, 300).expect("b");
        let c = p.reserve(&mut s, 256).expect("c");
        assert_eq!((a.id, a.offset, a.size), (b.id, 0, 256));
        assert_eq!((b.offset, b.size), (256, 512));
        assert_eq!((c.id, c.offset, c.size), (a.id, 768, 256));
        let r = p.report();
        assert_eq!((r.allocations, r.pages, r.bytes_reserved), (3, 1, 4096));
        assert_eq!(r.bytes_in_use, 656);
        // 256 - 100 + 512 - 300 + 0
        assert_eq!(r.bytes_padding, 368);
    }

    #[test]
    fn best_fit_takes_the_smallest_range_that_fits() {
        let (mut p, mut s) = pool(None);
        // Page: [a 512][b 256][c 1024][d 256][rest 2048]
        let a = p.reserve(&mut s, 512).expect("a");
        let _b = p.reserve(&mut s, 256).expect("b");
        let c = p.reserve(&mut s, 1024).expect("c");
        let _d = p.reserve(&mut s, 256).expect("d");
        p.free(a, 512);
        p.free(c, 1024);
        // Holes: 512 at 0, 1024 at 768, 2048 at 2048. A 600-byte request
        // (768 rounded) best-fits the 1024 hole, not the 2048 tail.
        let e = p.reserve(&mut s, 600).expect("e");
        assert_eq!((e.offset, e.size), (768, 768));
        // A 500-byte request (512 rounded) fits the 512 hole exactly.
        let f = p.reserve(&mut s, 500).expect("f");
        assert_eq!(f.offset, 0);
    }

    #[test]
    fn freeing_coalesces_both_neighbours() {
        let (mut p, mut s) = pool(None);
        let a = p.reserve(&mut s, 1024).expect("a");
        let b = p.reserve(&mut s, 1024).expect("b");
        let c = p.reserve(&mut s, 1024).expect("c");
        let page = a.id;
        assert_eq!(p.free_ranges(page), vec![(3072, 1024)]);
        p.free(a, 1024);
        p.free(c, 1024);
        assert_eq!(p.free_ranges(page), vec![(0, 1024), (2048, 2048)]);
        p.free(b, 1024);
        assert_eq!(p.free_ranges(page), vec![(0, 4096)]);
        // The whole page is one range again: a max-size slice fits at 0.
        let d = p.reserve(&mut s, 2048).expect("d");
        assert_eq!((d.id, d.offset), (page, 0));
    }

    #[test]
    fn a_full_page_opens_another_and_cleanup_gives_back_only_empty_pages() {
        let (mut p, mut s) = pool(None);
        let a = p.reserve(&mut s, 2048).expect("a");
        let b = p.reserve(&mut s, 2048).expect("b");
        let c = p.reserve(&mut s, 2048).expect("c");
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, c.id);
        assert_eq!(p.report().pages, 2);
        p.free(a, 2048);
        p.free(b, 2048);
        let mut gone = Vec::new();
        p.cleanup(&mut s, &mut gone);
        assert_eq!(gone, vec![a.id]);
        let r = p.report();
        assert_eq!((r.pages, r.bytes_reserved, r.peak_pages), (1, 4096, 2));
        assert_eq!(s.allocated(), 4096);
        // A freed page is not given back by reserve/free alone.
        p.free(c, 2048);
        assert_eq!(p.report().pages, 1);
    }

    #[test]
    fn the_cap_is_an_out_of_memory_naming_the_pool() {
        let (mut p, mut s) = pool(Some(4096));
        let a = p.reserve(&mut s, 2048).expect("a");
        let _b = p.reserve(&mut s, 2048).expect("b");
        let err = p.reserve(&mut s, 256).expect_err("cap");
        match err {
            ServerError::OutOfMemory { reason, .. } => assert!(reason.contains("test pool")),
            other => panic!("unexpected {other:?}"),
        }
        p.free(a, 2048);
        assert!(p.reserve(&mut s, 256).is_ok());
    }

    #[test]
    fn a_page_size_off_the_alignment_leaves_an_unused_tail() {
        let mut p = SlicedPool::new("odd".into(), 1000, 768, 256, None);
        let mut s = BytesStorage::new(256);
        assert!(p.fits(768));
        assert!(!p.fits(769));
        let a = p.reserve(&mut s, 700).expect("a");
        assert_eq!((a.offset, a.size), (0, 768));
        let b = p.reserve(&mut s, 1).expect("b");
        assert_ne!(a.id, b.id);
        assert_eq!(p.report().bytes_reserved, 2000);
    }
}
