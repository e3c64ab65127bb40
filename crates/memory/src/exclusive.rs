//! `ExclusivePool`: one slice per page, for requests up to `max_slice`.
//!
//! **Buys:** no fragmentation inside pages and no page-size bound below
//! `max_buffer_size`, which suits the large reservations a sliced page
//! cannot hold. A request takes a page of its size rounded up to the
//! alignment. Freed pages are kept, indexed by `(size, page)` in a
//! `BTreeSet`, and a later request reuses the smallest kept page that is
//! large enough and at most [`REUSE_SLACK_NUM`]/[`REUSE_SLACK_DEN`] (2)
//! times its own rounded size (one `O(log n)` range query): a reused page
//! wastes at most half of itself, reported as `bytes_padding`. Outside that
//! window a new page of the request's rounded size is allocated, so a small
//! request never pins a page more than twice its size.
//!
//! Why 2x and not tighter: kept pages are only given back by cleanup, so a
//! kept page that no request fits is pure overhead until then. Measured on
//! the mixed-size trace (see `compute_testkit::trace`) with its 32-64 MiB
//! sizes in exclusive pages, a 9/8 window ended with peak reserved at ~2.6x
//! peak live (freed pages of slightly wrong sizes pile up), the 2x window at
//! ~1.5x; that is also why the default configuration keeps those sizes in
//! sliced pages (see [`crate::default_pools`]).
//!
//! **Doesn't:** give kept pages back on its own (only `cleanup` does,
//! because the caller tracks pages by id and must hear which ones went),
//! split a kept page, or serve two reservations from one page. So it has
//! no bound of its own between cleanups: requests that keep growing (each
//! one larger than every kept page) add a page each, and the freed smaller
//! ones wait for cleanup, or for a request they fit. A capped pool reports
//! this in its out-of-memory reason ("... pages with nothing live, which
//! memory_cleanup gives back").

use std::collections::BTreeSet;

use compute_runtime::{
    ComputeStorage, PoolKind, PoolReport, ServerError, StorageHandle, StorageId,
};

use crate::pool::{Usage, new_page, whole_page_bytes};

/// A kept page of `p` bytes serves a request needing `n` bytes when
/// `n <= p <= n * 2`.
pub const REUSE_SLACK_NUM: u64 = 2;
/// See [`REUSE_SLACK_NUM`].
pub const REUSE_SLACK_DEN: u64 = 1;

/// One slice per page, with freed pages kept for near-size reuse.
#[derive(Debug)]
pub(crate) struct ExclusivePool {
    name: String,
    max_slice: u64,
    align: u64,
    max_buffer_size: u64,
    max_reserved: Option<u64>,
    /// Kept pages with nothing live, as `(size, page)`.
    kept: BTreeSet<(u64, StorageId)>,
    kept_bytes: u64,
    usage: Usage,
}

impl ExclusivePool {
    /// A pool serving requests up to `max_slice` bytes
    /// (`max_slice <= max_buffer_size`).
    pub fn new(
        name: String,
        max_slice: u64,
        align: u64,
        max_buffer_size: u64,
        max_reserved: Option<u64>,
    ) -> Self {
        Self {
            name,
            max_slice,
            align: align.max(1),
            max_buffer_size,
            max_reserved,
            kept: BTreeSet::new(),
            kept_bytes: 0,
            usage: Usage::default(),
        }
    }

    /// Whether a request of `size` bytes is this pool's to serve.
    pub fn fits(&self, size: u64) -> bool {
        size <= self.max_slice
    }

    /// Largest request served.
    pub fn max_slice(&self) -> u64 {
        self.max_slice
    }

    /// A page for `size` bytes: a kept one within the reuse window, else a
    /// new one.
    pub fn reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<StorageHandle, ServerError> {
        let need = whole_page_bytes(size, self.align, self.max_buffer_size);
        let limit = need.saturating_mul(REUSE_SLACK_NUM) / REUSE_SLACK_DEN;
        let kept = self
            .kept
            .range((need, StorageId(0))..)
            .next()
            .copied()
            .filter(|&(bytes, _)| bytes <= limit);
        let page = match kept {
            Some((bytes, id)) => {
                self.kept.remove(&(bytes, id));
                self.kept_bytes -= bytes;
                StorageHandle {
                    id,
                    offset: 0,
                    size: bytes,
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

    /// Frees a page this pool handed out for `requested` bytes; it is kept.
    pub fn free(&mut self, page: StorageHandle, requested: u64) {
        self.usage.slice_removed(requested, page.size);
        self.kept.insert((page.size, page.id));
        self.kept_bytes += page.size;
    }

    /// Gives every kept page back to `storage`, appending their ids to
    /// `gone`.
    pub fn cleanup<S: ComputeStorage>(&mut self, storage: &mut S, gone: &mut Vec<StorageId>) {
        for (bytes, id) in std::mem::take(&mut self.kept) {
            storage.dealloc(id);
            self.usage.page_removed(bytes);
            gone.push(id);
        }
        self.kept_bytes = 0;
    }

    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    pub fn report(&self) -> PoolReport {
        self.usage.report(PoolKind::Exclusive {
            max_slice: self.max_slice,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BytesStorage;

    fn pool(cap: Option<u64>) -> (ExclusivePool, BytesStorage) {
        (
            ExclusivePool::new("test exclusive".into(), 1 << 20, 256, 1 << 30, cap),
            BytesStorage::new(256),
        )
    }

    #[test]
    fn each_request_gets_its_own_rounded_page() {
        let (mut p, mut s) = pool(None);
        let a = p.reserve(&mut s, 1000).expect("a");
        let b = p.reserve(&mut s, 1000).expect("b");
        assert_ne!(a.id, b.id);
        assert_eq!((a.offset, a.size), (0, 1024));
        let r = p.report();
        assert_eq!(
            (r.pages, r.bytes_reserved, r.bytes_in_use, r.bytes_padding),
            (2, 2048, 2000, 48)
        );
    }

    #[test]
    fn kept_pages_are_reused_within_twice_the_request() {
        let (mut p, mut s) = pool(None);
        let a = p.reserve(&mut s, 8192).expect("a");
        p.free(a, 8192);
        // 3840 * 2 = 7680 < 8192: outside the window, a new page.
        let b = p.reserve(&mut s, 3840).expect("b");
        assert_ne!(b.id, a.id);
        // 4000 rounds to 4096, and 4096 * 2 = 8192: the kept page serves it.
        let c = p.reserve(&mut s, 4000).expect("c");
        assert_eq!((c.id, c.size), (a.id, 8192));
        // Padding: 8192 - 4000 for c; b (3840, already aligned) has none.
        assert_eq!(p.report().bytes_padding, 8192 - 4000);
        assert_eq!(p.report().pages, 2);
    }

    #[test]
    fn best_fit_among_kept_pages() {
        let (mut p, mut s) = pool(None);
        let big = p.reserve(&mut s, 9000).expect("big");
        let small = p.reserve(&mut s, 8500).expect("small");
        p.free(big, 9000);
        p.free(small, 8500);
        let c = p.reserve(&mut s, 8400).expect("c");
        assert_eq!(c.id, small.id);
    }

    #[test]
    fn growing_requests_add_pages_until_cleanup() {
        let (mut p, mut s) = pool(None);
        // 4096, 4352, ..., each freed before the next, larger request.
        let mut last = None;
        for i in 0..8u64 {
            let size = 4096 + 256 * i;
            let h = p.reserve(&mut s, size).expect("grow");
            p.free(h, size);
            last = Some(h);
        }
        // Every request was larger than every kept page: 8 pages.
        assert_eq!(p.report().pages, 8);
        // A request the kept pages fit reuses the best fit (4096 for 3000).
        let h = p.reserve(&mut s, 3000).expect("reuse");
        assert_eq!(h.size, 4096);
        let mut gone = Vec::new();
        p.cleanup(&mut s, &mut gone);
        assert_eq!(gone.len(), 7);
        assert!(last.is_some_and(|l| gone.contains(&l.id)));
        assert_eq!(p.report().bytes_reserved, 4096);
    }

    #[test]
    fn cleanup_returns_kept_pages_and_the_cap_says_so() {
        let (mut p, mut s) = pool(Some(4096));
        let a = p.reserve(&mut s, 4096).expect("a");
        p.free(a, 4096);
        let err = p.reserve(&mut s, 256).expect_err("cap");
        let ServerError::OutOfMemory { reason, .. } = err else {
            panic!("expected out of memory");
        };
        assert!(reason.contains("test exclusive") && reason.contains("memory_cleanup"));
        let mut gone = Vec::new();
        p.cleanup(&mut s, &mut gone);
        assert_eq!(gone, vec![a.id]);
        assert_eq!(s.allocated(), 0);
        assert!(p.reserve(&mut s, 256).is_ok());
    }
}
