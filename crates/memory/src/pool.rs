//! What every pool shares: the usage counters behind a [`PoolReport`], the
//! alignment arithmetic, and the out-of-memory error for a pool's cap.
//!
//! Buys: one place where `bytes_in_use` / `bytes_reserved` / `bytes_padding`
//! and their high-water marks are kept, so every pool reports the same way.
//! Doesn't: decide anything about placement; that is each pool's file.

use compute_runtime::{ComputeStorage, PoolKind, PoolReport, ServerError, StorageHandle};

/// Counters of one pool. Peaks are updated on every change that can raise
/// them, so they are exact high-water marks, not samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub allocations: u64,
    pub bytes_in_use: u64,
    pub bytes_reserved: u64,
    pub bytes_padding: u64,
    pub pages: u64,
    pub peak_bytes_in_use: u64,
    pub peak_bytes_reserved: u64,
    pub peak_pages: u64,
}

impl Usage {
    /// A page of `size` bytes was reserved from the storage.
    pub fn page_added(&mut self, size: u64) {
        self.pages += 1;
        self.bytes_reserved += size;
        self.peak_pages = self.peak_pages.max(self.pages);
        self.peak_bytes_reserved = self.peak_bytes_reserved.max(self.bytes_reserved);
    }

    /// A page of `size` bytes was given back to the storage.
    pub fn page_removed(&mut self, size: u64) {
        self.pages -= 1;
        self.bytes_reserved -= size;
    }

    /// A slice of `slice` bytes went live for a request of `requested`.
    pub fn slice_added(&mut self, requested: u64, slice: u64) {
        self.allocations += 1;
        self.bytes_in_use += requested;
        self.bytes_padding += slice - requested;
        self.peak_bytes_in_use = self.peak_bytes_in_use.max(self.bytes_in_use);
    }

    /// A live slice of `slice` bytes (asked for `requested`) was freed.
    pub fn slice_removed(&mut self, requested: u64, slice: u64) {
        self.allocations -= 1;
        self.bytes_in_use -= requested;
        self.bytes_padding -= slice - requested;
    }

    pub fn report(&self, kind: PoolKind) -> PoolReport {
        PoolReport {
            kind,
            allocations: self.allocations,
            bytes_in_use: self.bytes_in_use,
            bytes_reserved: self.bytes_reserved,
            bytes_padding: self.bytes_padding,
            pages: self.pages,
            peak_bytes_in_use: self.peak_bytes_in_use,
            peak_bytes_reserved: self.peak_bytes_reserved,
            peak_pages: self.peak_pages,
        }
    }
}

/// `size` rounded up to a multiple of `align` (`align >= 1`); `None` on
/// overflow.
pub(crate) fn round_up(size: u64, align: u64) -> Option<u64> {
    size.div_ceil(align).checked_mul(align)
}

/// `size` rounded down to a multiple of `align` (`align >= 1`).
pub(crate) fn round_down(size: u64, align: u64) -> u64 {
    size / align * align
}

/// Bytes of a page that serves one request of `size` bytes by itself
/// (exclusive and persistent pools): `size` rounded up to `align`, unless
/// that would pass `max_buffer_size`, in which case `size` rounded up to 4
/// (pages start at offset 0, so their start is aligned either way). Never an
/// odd size: copies move whole 4-byte words, so the tail of an odd page
/// could not be read back. The manager refuses requests over
/// `max_buffer_size` rounded down to 4, so the round-up always fits.
pub(crate) fn whole_page_bytes(size: u64, align: u64, max_buffer_size: u64) -> u64 {
    let fits = |r: &u64| *r <= max_buffer_size;
    round_up(size, align)
        .filter(fits)
        .or_else(|| round_up(size, 4).filter(fits))
        .unwrap_or(size)
}

/// The error for a reservation that would take a pool over its
/// `max_reserved` cap.
/// A new page of `need` bytes for a `size`-byte request, unless it would take
/// the pool past its cap (`kept_bytes` is what cleanup could give back).
pub(crate) fn new_page<S: ComputeStorage>(
    storage: &mut S,
    usage: &mut Usage,
    name: &str,
    size: u64,
    need: u64,
    max_reserved: Option<u64>,
    kept_bytes: u64,
) -> Result<StorageHandle, ServerError> {
    if let Some(cap) = max_reserved
        && usage.bytes_reserved.saturating_add(need) > cap
    {
        return Err(cap_reached(name, size, cap, usage, kept_bytes));
    }
    let page = storage.alloc(need)?;
    usage.page_added(page.size);
    Ok(page)
}

pub(crate) fn cap_reached(
    name: &str,
    size: u64,
    cap: u64,
    usage: &Usage,
    free_page_bytes: u64,
) -> ServerError {
    let hint = if free_page_bytes > 0 {
        format!(
            "; {free_page_bytes} of them are pages with nothing live, which memory_cleanup gives back"
        )
    } else {
        String::new()
    };
    ServerError::OutOfMemory {
        size,
        reason: format!(
            "{name} reached its max_reserved cap of {cap} bytes ({} bytes reserved in {} pages{hint})",
            usage.bytes_reserved, usage.pages
        ),
    }
}

/// Human-readable bytes for pool names and reasons: exact, in the largest
/// binary unit that divides them.
pub(crate) fn fmt_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if b >= unit && b.is_multiple_of(unit) {
            return format!("{} {name}", b / unit);
        }
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding() {
        assert_eq!(round_up(0, 256), Some(0));
        assert_eq!(round_up(1, 256), Some(256));
        assert_eq!(round_up(256, 256), Some(256));
        assert_eq!(round_up(u64::MAX, 256), None);
        assert_eq!(round_down(1000, 256), 768);
        assert_eq!(fmt_bytes(128 << 20), "128 MiB");
        assert_eq!(fmt_bytes(1000), "1000 B");
    }

    #[test]
    fn peaks_are_high_water_marks() {
        let mut u = Usage::default();
        u.page_added(1024);
        u.slice_added(100, 256);
        u.slice_removed(100, 256);
        u.page_removed(1024);
        assert_eq!(
            (u.pages, u.bytes_reserved, u.bytes_in_use, u.bytes_padding),
            (0, 0, 0, 0)
        );
        assert_eq!(
            (u.peak_pages, u.peak_bytes_reserved, u.peak_bytes_in_use),
            (1, 1024, 100)
        );
    }
}

#[cfg(test)]
mod page_size_tests {
    use super::whole_page_bytes;

    #[test]
    fn whole_pages_are_never_odd() {
        assert_eq!(whole_page_bytes(1000, 256, 1 << 20), 1024);
        // Rounding to the alignment would pass the maximum: words instead.
        assert_eq!(whole_page_bytes(1001, 256, 1004), 1004);
        assert_eq!(
            whole_page_bytes(1003, 256, 1003),
            1003,
            "the manager refuses this"
        );
    }
}
