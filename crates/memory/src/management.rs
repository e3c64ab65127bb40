//! `MemoryManagement`: managed ids to slices of storage pages.
//!
//! First version: every reservation gets an exclusive page, rounded up to the
//! storage alignment, and freed pages are kept for exact-size reuse until
//! `cleanup`. The pooled version (sliced pages, exclusive pages, persistent
//! mode) replaces the internals behind the same API.

use compute_runtime::{
    ComputeStorage, MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryId,
    PoolKind, PoolReport, ServerError, StorageHandle, StorageId, StreamMemoryReport,
};
use hashbrown::HashMap;

#[derive(Debug, Clone, Copy)]
struct Slice {
    handle: StorageHandle,
    /// Bytes the caller asked for (`handle.size` is the rounded size).
    requested: u64,
}

/// Slices of device memory for managed handles.
#[derive(Debug)]
pub struct MemoryManagement<S: ComputeStorage> {
    storage: S,
    props: MemoryDeviceProperties,
    mode: MemoryAllocationMode,
    live: HashMap<MemoryId, Slice>,
    free: HashMap<u64, Vec<StorageHandle>>,
    stats: PoolReport,
}

impl<S: ComputeStorage> MemoryManagement<S> {
    /// A manager over `storage`; the configuration is checked against the
    /// device first.
    pub fn new(
        storage: S,
        props: MemoryDeviceProperties,
        config: &MemoryConfiguration,
    ) -> Result<Self, ServerError> {
        config.validate(&props)?;
        Ok(Self {
            storage,
            props,
            mode: MemoryAllocationMode::Auto,
            live: HashMap::new(),
            free: HashMap::new(),
            stats: PoolReport {
                kind: PoolKind::Exclusive {
                    max_slice: props.max_buffer_size,
                },
                allocations: 0,
                bytes_in_use: 0,
                bytes_reserved: 0,
                bytes_padding: 0,
                pages: 0,
                peak_bytes_in_use: 0,
                peak_bytes_reserved: 0,
                peak_pages: 0,
            },
        })
    }

    /// The storage, for resolving handles.
    pub fn storage(&mut self) -> &mut S {
        &mut self.storage
    }

    /// Reserves `size` bytes for `memory`.
    pub fn bind(&mut self, memory: MemoryId, size: u64) -> Result<StorageHandle, ServerError> {
        if self.live.contains_key(&memory) {
            return Err(ServerError::AlreadyInitialized { memory });
        }
        if size == 0 {
            return Err(ServerError::InvalidArgument {
                reason: "cannot reserve zero bytes".into(),
            });
        }
        if size > self.props.max_buffer_size {
            return Err(ServerError::LimitExceeded {
                limit: "max_buffer_size",
                requested: size,
                max: self.props.max_buffer_size,
            });
        }
        let align = self.storage.alignment().max(4);
        let rounded = size
            .div_ceil(align)
            .saturating_mul(align)
            .min(self.props.max_buffer_size);
        let rounded = rounded.max(size);
        let handle = match self.free.get_mut(&rounded).and_then(Vec::pop) {
            Some(h) => h,
            None => {
                let h = self.storage.alloc(rounded)?;
                self.stats.pages += 1;
                self.stats.bytes_reserved += rounded;
                h
            }
        };
        self.live.insert(
            memory,
            Slice {
                handle,
                requested: size,
            },
        );
        self.stats.allocations += 1;
        self.stats.bytes_in_use += size;
        self.stats.bytes_padding += rounded - size;
        self.update_peaks();
        Ok(handle)
    }

    fn update_peaks(&mut self) {
        let s = &mut self.stats;
        s.peak_bytes_in_use = s.peak_bytes_in_use.max(s.bytes_in_use);
        s.peak_bytes_reserved = s.peak_bytes_reserved.max(s.bytes_reserved);
        s.peak_pages = s.peak_pages.max(s.pages);
    }

    /// Where `memory` lives.
    pub fn get(&self, memory: MemoryId) -> Option<StorageHandle> {
        self.live.get(&memory).map(|s| s.handle)
    }

    /// Bytes `memory` was reserved with (as asked, not rounded).
    pub fn size_of(&self, memory: MemoryId) -> Option<u64> {
        self.live.get(&memory).map(|s| s.requested)
    }

    /// Frees `memory`'s slice for reuse. Unknown ids are ignored (a handle
    /// whose bind failed still reports its drop).
    pub fn release(&mut self, memory: MemoryId) {
        if let Some(slice) = self.live.remove(&memory) {
            self.stats.allocations -= 1;
            self.stats.bytes_in_use -= slice.requested;
            self.stats.bytes_padding -= slice.handle.size - slice.requested;
            self.free
                .entry(slice.handle.size)
                .or_default()
                .push(slice.handle);
        }
    }

    /// Gives every page with nothing live back to the storage, returning
    /// their ids.
    pub fn cleanup(&mut self) -> Vec<StorageId> {
        let mut gone = Vec::new();
        for (_, pages) in self.free.drain() {
            for h in pages {
                self.storage.dealloc(h.id);
                self.stats.pages -= 1;
                self.stats.bytes_reserved -= h.size;
                gone.push(h.id);
            }
        }
        gone
    }

    /// Sets the allocation mode.
    pub fn set_mode(&mut self, mode: MemoryAllocationMode) {
        self.mode = mode;
    }

    /// The allocation mode.
    pub fn mode(&self) -> MemoryAllocationMode {
        self.mode
    }

    /// Every pool, in routing order.
    pub fn report(&self) -> StreamMemoryReport {
        StreamMemoryReport {
            pools: vec![self.stats.clone()],
        }
    }
}
