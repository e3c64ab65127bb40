//! The bind group cache: one bind group per (layout, resolved ranges).
//!
//! Launches that repeat their bindings (the common case: the same tensors,
//! kernel after kernel) reuse one bind group instead of creating one per
//! dispatch. The key is a fixed-size array, so a lookup allocates nothing.
//! Scalars are part of the key (up to [`MAX_SCALAR_BYTES`]): a cached group
//! owns its uniform buffer, so a loop relaunching a kernel with the same
//! sizes creates nothing. Kernels with more than [`MAX_CACHED`] bindings or
//! larger scalar blocks are not cached. Entries naming a page
//! are dropped when the page is given back, so the cache never keeps a freed
//! buffer alive; the cache is also cleared when it grows past
//! [`MAX_ENTRIES`], which bounds memory for workloads that never repeat.

use compute_runtime::StorageId;
use hashbrown::HashMap;

/// Largest binding count a cached bind group can have.
pub const MAX_CACHED: usize = 8;
/// Largest scalar block that is part of a cache key.
pub const MAX_SCALAR_BYTES: usize = 32;
/// Entries kept before the cache is cleared.
pub const MAX_ENTRIES: usize = 4096;

/// A resolved binding: page, offset, size.
pub type Range = (StorageId, u64, u64);

/// Cache key: a pipeline's layout identity and its resolved ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindKey {
    layout: u64,
    len: u8,
    ranges: [Range; MAX_CACHED],
    scalar_len: u8,
    scalars: [u8; MAX_SCALAR_BYTES],
}

impl BindKey {
    /// The key of `ranges` and `scalars` under `layout`, or `None` when
    /// too large to cache.
    pub fn new(layout: u64, ranges: &[Range], scalars: &[u8]) -> Option<Self> {
        if ranges.len() > MAX_CACHED || scalars.len() > MAX_SCALAR_BYTES {
            return None;
        }
        let mut key = BindKey {
            layout,
            len: ranges.len() as u8,
            ranges: [(StorageId(0), 0, 0); MAX_CACHED],
            scalar_len: scalars.len() as u8,
            scalars: [0; MAX_SCALAR_BYTES],
        };
        key.ranges[..ranges.len()].copy_from_slice(ranges);
        key.scalars[..scalars.len()].copy_from_slice(scalars);
        Some(key)
    }

    fn uses(&self, page: StorageId) -> bool {
        self.ranges[..usize::from(self.len)]
            .iter()
            .any(|r| r.0 == page)
    }
}

/// A cached bind group and its identity (for skipping repeated sets).
#[derive(Debug, Clone)]
pub struct CachedBindGroup {
    /// Process-unique identity.
    pub id: u64,
    /// The bind group.
    pub group: wgpu::BindGroup,
}

/// Bind groups of one device.
#[derive(Debug, Default)]
pub struct BindGroupCache {
    groups: HashMap<BindKey, CachedBindGroup>,
    next: u64,
}

impl BindGroupCache {
    /// The cached group of `key`.
    pub fn get(&self, key: &BindKey) -> Option<&CachedBindGroup> {
        self.groups.get(key)
    }

    /// A fresh identity for an uncached group.
    pub fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Caches `group` under `key`.
    pub fn insert(&mut self, key: BindKey, group: wgpu::BindGroup) -> CachedBindGroup {
        if self.groups.len() >= MAX_ENTRIES {
            self.groups.clear();
        }
        let cached = CachedBindGroup {
            id: self.next_id(),
            group,
        };
        self.groups.insert(key, cached.clone());
        cached
    }

    /// Drops every group naming `page`.
    pub fn forget_page(&mut self, page: StorageId) {
        self.groups.retain(|k, _| !k.uses(page));
    }
}
