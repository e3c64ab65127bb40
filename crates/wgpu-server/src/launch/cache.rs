//! The resolved-launch cache: a launch that repeats (same kernel, same
//! bindings, same scalars, same static count) skips resolution entirely.
//!
//! Resolution checks a launch against the kernel and the device and looks
//! up its pipeline and bind group; for the same kernel id, compile options,
//! byte ranges of the same live slices, scalars and workgroup count, every
//! one of those answers is the same again: slice ids are never reused, and a
//! slice's place in its page is fixed while it lives (a launch's arguments
//! hold its handles). So the [`ResolvedLaunch`] is kept and the next such
//! launch only orders, checks trust and encodes, the same work a replay
//! does per launch. Trust is not cached: it is checked at every dispatch.
//!
//! Entries naming a page that is given back are dropped (`forget_page`),
//! and the cache is cleared past [`MAX_ENTRIES`]; a workload that never
//! repeats pays one hash lookup per launch. Indirect launches are not
//! cached (their count may need a scratch slice of their own).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use compute_runtime::{CubeCount, KernelArguments, KernelId, MemoryId, StorageId};
use compute_wgsl::WgpuCompilationOptions;
use hashbrown::HashMap;

use crate::launch::resolve::ResolvedLaunch;

/// Bindings a cached launch may have.
pub const MAX_BINDINGS: usize = 8;
/// Scalar bytes a cached launch may have.
pub const MAX_SCALARS: usize = 32;
/// Entries kept before the cache is cleared.
pub const MAX_ENTRIES: usize = 4096;

/// What makes two launches resolve the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchKey {
    kernel: KernelId,
    options: WgpuCompilationOptions,
    count: [u32; 3],
    len: u8,
    bindings: [(MemoryId, u64, u64); MAX_BINDINGS],
    scalar_len: u8,
    scalars: [u8; MAX_SCALARS],
}

impl LaunchKey {
    /// The key of a launch, or `None` when it is not cached (indirect, too
    /// many bindings, too many scalar bytes).
    pub fn new(
        kernel: KernelId,
        options: WgpuCompilationOptions,
        count: &CubeCount,
        args: &KernelArguments,
    ) -> Option<Self> {
        let CubeCount::Static(x, y, z) = *count else {
            return None;
        };
        if args.buffers.len() > MAX_BINDINGS || args.scalars.len() > MAX_SCALARS {
            return None;
        }
        let mut key = LaunchKey {
            kernel,
            options,
            count: [x, y, z],
            len: args.buffers.len() as u8,
            bindings: [(MemoryId(0), 0, 0); MAX_BINDINGS],
            scalar_len: args.scalars.len() as u8,
            scalars: [0; MAX_SCALARS],
        };
        for (slot, b) in key.bindings.iter_mut().zip(&args.buffers) {
            *slot = (b.memory_id(), b.offset, b.size);
        }
        key.scalars[..args.scalars.len()].copy_from_slice(&args.scalars);
        Some(key)
    }
}

/// Hashes the bindings and scalar bytes in use only: the unused tail is
/// zeros in every key (so keys equal under the derived `Eq` hash equal),
/// and hashing all of it was a sixth of a launch's instructions.
impl Hash for LaunchKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.kernel.hash(h);
        self.options.hash(h);
        self.count.hash(h);
        self.bindings[..usize::from(self.len)].hash(h);
        self.scalars[..usize::from(self.scalar_len)].hash(h);
    }
}

/// Resolved launches of one server.
#[derive(Debug, Default)]
pub(crate) struct LaunchCache {
    entries: HashMap<LaunchKey, Arc<ResolvedLaunch>>,
}

impl LaunchCache {
    pub fn get(&self, key: &LaunchKey) -> Option<&Arc<ResolvedLaunch>> {
        self.entries.get(key)
    }

    pub fn insert(&mut self, key: LaunchKey, launch: Arc<ResolvedLaunch>) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        self.entries.insert(key, launch);
    }

    /// Drops every entry that uses `page`.
    pub fn forget_page(&mut self, page: StorageId) {
        self.entries
            .retain(|_, l| !l.pages.iter().any(|(r, _)| r.id == page));
    }
}
