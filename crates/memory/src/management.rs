//! `MemoryManagement`: managed ids to slices of storage pages, through
//! pools routed by size.
//!
//! **Routing.** The pools of the configuration are kept in routing order.
//! In [`MemoryAllocationMode::Auto`] a reservation goes to the first sliced
//! or exclusive pool whose `max_slice` fits it. In
//! [`MemoryAllocationMode::Persistent`] every reservation goes to the
//! persistent pool (reuse by size class, see [`crate::persistent`]); a slice
//! is freed back to the pool that served it, whatever the mode is then.
//!
//! **Configurations.**
//! - [`MemoryConfiguration::Default`], from [`MemoryDeviceProperties`]
//!   (see [`default_pools`] for the rule and the measurements behind it);
//!   with wgpu's default limits (128 MiB bindings, 256-byte alignment):
//!   1. sliced, 32 MiB pages, slices up to 2 MiB;
//!   2. sliced, 128 MiB pages, slices up to 64 MiB;
//!   3. exclusive, slices up to `max_buffer_size`.
//! - [`MemoryConfiguration::ExclusivePages`]: one exclusive pool, max slice
//!   `max_buffer_size`.
//! - [`MemoryConfiguration::Custom`]: the pools as given, each with its
//!   `max_reserved` cap. At most one [`PoolKind::Persistent`] entry, which
//!   then is the persistent pool, in its place; and at least one sliced or
//!   exclusive pool, else nothing could be served in `Auto` mode.
//!
//! Without a persistent entry, an uncapped persistent pool is appended
//! after the configured ones. [`MemoryManagement::report`] lists it, last,
//! while the mode is `Persistent` or while it still holds pages; a
//! configured persistent entry is always listed, in its place.
//!
//! **Cleanup.** [`MemoryManagement::cleanup`] gives back every page with
//! nothing live: empty sliced pages, kept exclusive pages, and, outside
//! persistent mode only, kept persistent pages. Nothing else ever gives a
//! page back, so the ids cleanup returns are every page that went.
//!
//! **Slices.** The alignment is the least common multiple of the storage's
//! alignment, the device's `alignment` and 4 (copies move multiples of 4
//! bytes). A slice's [`StorageHandle`] covers the slice as reserved: the
//! request rounded up to the alignment (or the whole kept page reused for
//! it); [`MemoryManagement::size_of`] gives the bytes asked for, and the
//! difference is the pool's `bytes_padding`.

use compute_runtime::{
    ComputeStorage, MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryId,
    MemoryPoolOptions, PoolKind, PoolReport, ServerError, StorageHandle, StorageId,
    StreamMemoryReport,
};
use hashbrown::HashMap;
use hashbrown::hash_map::Entry;

use crate::defaults::default_pools;
use crate::exclusive::ExclusivePool;
use crate::persistent::PersistentPool;
use crate::pool::{Usage, fmt_bytes, round_down, round_up};
use crate::sliced::SlicedPool;

#[derive(Debug)]
enum Pool {
    Sliced(SlicedPool),
    Exclusive(ExclusivePool),
    Persistent(PersistentPool),
}

impl Pool {
    /// Whether the pool serves `size` bytes in `Auto` mode.
    fn routes(&self, size: u64) -> bool {
        match self {
            Pool::Sliced(p) => p.fits(size),
            Pool::Exclusive(p) => p.fits(size),
            Pool::Persistent(_) => false,
        }
    }

    fn max_slice(&self) -> Option<u64> {
        match self {
            Pool::Sliced(p) => Some(p.max_slice()),
            Pool::Exclusive(p) => Some(p.max_slice()),
            Pool::Persistent(_) => None,
        }
    }

    fn reserve<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        size: u64,
    ) -> Result<StorageHandle, ServerError> {
        match self {
            Pool::Sliced(p) => p.reserve(storage, size),
            Pool::Exclusive(p) => p.reserve(storage, size),
            Pool::Persistent(p) => p.reserve(storage, size),
        }
    }

    fn free(&mut self, slice: StorageHandle, requested: u64) {
        match self {
            Pool::Sliced(p) => p.free(slice, requested),
            Pool::Exclusive(p) => p.free(slice, requested),
            Pool::Persistent(p) => p.free(slice, requested),
        }
    }

    fn cleanup<S: ComputeStorage>(&mut self, storage: &mut S, gone: &mut Vec<StorageId>) {
        match self {
            Pool::Sliced(p) => p.cleanup(storage, gone),
            Pool::Exclusive(p) => p.cleanup(storage, gone),
            Pool::Persistent(p) => p.cleanup(storage, gone),
        }
    }

    fn usage(&self) -> &Usage {
        match self {
            Pool::Sliced(p) => p.usage(),
            Pool::Exclusive(p) => p.usage(),
            Pool::Persistent(p) => p.usage(),
        }
    }

    fn report(&self) -> PoolReport {
        match self {
            Pool::Sliced(p) => p.report(),
            Pool::Exclusive(p) => p.report(),
            Pool::Persistent(p) => p.report(),
        }
    }
}

/// A live slice: where it is, what was asked, which pool holds it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    handle: StorageHandle,
    requested: u64,
    pool: usize,
}

/// Slices of device memory for managed handles.
#[derive(Debug)]
pub struct MemoryManagement<S: ComputeStorage> {
    storage: S,
    props: MemoryDeviceProperties,
    mode: MemoryAllocationMode,
    /// Routing order; includes the persistent pool.
    pools: Vec<Pool>,
    /// Index of the persistent pool in `pools`.
    persistent: usize,
    /// Whether the persistent pool was appended rather than configured.
    persistent_implicit: bool,
    live: HashMap<MemoryId, Slot>,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn lcm(a: u64, b: u64) -> Option<u64> {
    (a / gcd(a, b)).checked_mul(b)
}

fn describe(index: usize, kind: &PoolKind) -> String {
    match kind {
        PoolKind::Sliced {
            page_size,
            max_slice,
        } => format!(
            "pool {index} (sliced: {} pages, max slice {})",
            fmt_bytes(*page_size),
            fmt_bytes(*max_slice)
        ),
        PoolKind::Exclusive { max_slice } => {
            format!(
                "pool {index} (exclusive: max slice {})",
                fmt_bytes(*max_slice)
            )
        }
        PoolKind::Persistent => format!("pool {index} (persistent)"),
    }
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
        let bad = |reason: String| ServerError::InvalidConfiguration { reason };
        let align = lcm(storage.alignment().max(1), props.alignment.max(1))
            .and_then(|a| lcm(a, 4))
            .filter(|&a| a <= props.max_buffer_size)
            .ok_or_else(|| {
                bad(format!(
                    "slice alignment (storage {}, device {}) exceeds max_buffer_size {}",
                    storage.alignment(),
                    props.alignment,
                    props.max_buffer_size
                ))
            })?;
        let options = match config {
            MemoryConfiguration::Default => default_pools(&props, align),
            MemoryConfiguration::ExclusivePages => vec![MemoryPoolOptions {
                kind: PoolKind::Exclusive {
                    max_slice: props.max_buffer_size,
                },
                max_reserved: None,
            }],
            MemoryConfiguration::Custom(pools) => pools.clone(),
        };
        let mut pools = Vec::with_capacity(options.len() + 1);
        let mut persistent = None;
        for (i, opt) in options.iter().enumerate() {
            let name = describe(i, &opt.kind);
            let pool = match opt.kind {
                PoolKind::Sliced {
                    page_size,
                    max_slice,
                } => {
                    let usable = round_down(page_size, align);
                    let need = round_up(max_slice, align).unwrap_or(u64::MAX);
                    if need > usable {
                        return Err(bad(format!(
                            "{name}: a max-slice request rounded up to the alignment {align} takes {need} bytes, more than the {usable} a page holds"
                        )));
                    }
                    Pool::Sliced(SlicedPool::new(
                        name,
                        page_size,
                        max_slice,
                        align,
                        opt.max_reserved,
                    ))
                }
                PoolKind::Exclusive { max_slice } => Pool::Exclusive(ExclusivePool::new(
                    name,
                    max_slice,
                    align,
                    props.max_buffer_size,
                    opt.max_reserved,
                )),
                PoolKind::Persistent => {
                    if persistent.is_some() {
                        return Err(bad(format!(
                            "{name}: a configuration has at most one persistent pool"
                        )));
                    }
                    persistent = Some(i);
                    Pool::Persistent(PersistentPool::new(
                        name,
                        align,
                        props.max_buffer_size,
                        opt.max_reserved,
                    ))
                }
            };
            pools.push(pool);
        }
        if !pools.iter().any(|p| p.max_slice().is_some()) {
            return Err(bad(
                "a configuration needs a sliced or exclusive pool to serve Auto mode".into(),
            ));
        }
        let persistent_implicit = persistent.is_none();
        let persistent = match persistent {
            Some(i) => i,
            None => {
                let i = pools.len();
                pools.push(Pool::Persistent(PersistentPool::new(
                    describe(i, &PoolKind::Persistent),
                    align,
                    props.max_buffer_size,
                    None,
                )));
                i
            }
        };
        Ok(Self {
            storage,
            props,
            mode: MemoryAllocationMode::Auto,
            pools,
            persistent,
            persistent_implicit,
            live: HashMap::new(),
        })
    }

    /// The storage, for resolving handles.
    pub fn storage(&mut self) -> &mut S {
        &mut self.storage
    }

    /// The storage, to look pages up in.
    pub fn storage_ref(&self) -> &S {
        &self.storage
    }

    /// The pool a reservation of `size` bytes goes to in `Auto` mode.
    fn route(&self, size: u64) -> Result<usize, ServerError> {
        if let Some(i) = self.pools.iter().position(|p| p.routes(size)) {
            return Ok(i);
        }
        let largest = self
            .pools
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.max_slice().map(|m| (m, i)))
            .max();
        let reason = match largest {
            Some((max, i)) => format!(
                "{size} bytes is larger than every pool's max slice (the largest is pool {i}'s, {max} bytes); \
                 configure an exclusive pool for it"
            ),
            None => format!("no pool serves {size} bytes"),
        };
        Err(ServerError::InvalidArgument { reason })
    }

    /// Reserves `size` bytes for `memory` under the manager's mode. The
    /// handle covers the slice as reserved (at least `size` bytes, see the
    /// module doc).
    pub fn bind(&mut self, memory: MemoryId, size: u64) -> Result<StorageHandle, ServerError> {
        self.bind_in(memory, size, self.mode)
    }

    /// [`MemoryManagement::bind`] under `mode` instead of the manager's own:
    /// how one stream (a graph being prepared or captured) allocates
    /// persistently while the others stay in `Auto`.
    pub fn bind_in(
        &mut self,
        memory: MemoryId,
        size: u64,
        mode: MemoryAllocationMode,
    ) -> Result<StorageHandle, ServerError> {
        if size == 0 {
            return Err(ServerError::InvalidArgument {
                reason: "cannot reserve zero bytes".into(),
            });
        }
        self.check_reservation(size, mode)?;
        let pool = match mode {
            MemoryAllocationMode::Persistent => self.persistent,
            MemoryAllocationMode::Auto => self.route(size)?,
        };
        let Entry::Vacant(slot) = self.live.entry(memory) else {
            return Err(ServerError::AlreadyInitialized { memory });
        };
        let Some(target) = self.pools.get_mut(pool) else {
            return Err(ServerError::InvalidArgument {
                reason: format!("no pool {pool}"),
            });
        };
        let handle = target.reserve(&mut self.storage, size)?;
        slot.insert(Slot {
            handle,
            requested: size,
            pool,
        });
        Ok(handle)
    }

    /// The largest reservation served under `mode`, and the name of the
    /// limit that sets it: the device's `max_buffer_size` in whole 4-byte
    /// words (a page of an odd size would have a tail no copy can move), and
    /// in `Auto` mode no more than the largest slice a pool serves. The one
    /// limit `initialize_memory` and `staging` share.
    pub fn max_reservation(&self, mode: MemoryAllocationMode) -> (u64, &'static str) {
        let device = self.props.max_buffer_size - self.props.max_buffer_size % 4;
        let pools = match mode {
            MemoryAllocationMode::Persistent => None,
            MemoryAllocationMode::Auto => self.pools.iter().filter_map(Pool::max_slice).max(),
        };
        match pools {
            Some(pool) if pool < device => (pool, "max_slice (the largest of the memory pools)"),
            _ => (device, "max_buffer_size"),
        }
    }

    /// `Ok` when a reservation of `size` bytes is within
    /// [`MemoryManagement::max_reservation`] under `mode`, else
    /// [`ServerError::LimitExceeded`].
    pub fn check_reservation(
        &self,
        size: u64,
        mode: MemoryAllocationMode,
    ) -> Result<(), ServerError> {
        let (max, limit) = self.max_reservation(mode);
        if size > max {
            return Err(ServerError::LimitExceeded {
                limit,
                requested: size,
                max,
            });
        }
        Ok(())
    }

    /// Where `memory` lives.
    #[inline]
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
        if let Some(slot) = self.live.remove(&memory)
            && let Some(pool) = self.pools.get_mut(slot.pool)
        {
            pool.free(slot.handle, slot.requested);
        }
    }

    /// Gives every page with nothing live back to the storage, returning
    /// their ids; in persistent mode the persistent pool keeps its pages.
    pub fn cleanup(&mut self) -> Vec<StorageId> {
        let mut gone = Vec::new();
        for (i, pool) in self.pools.iter_mut().enumerate() {
            if i == self.persistent && self.mode == MemoryAllocationMode::Persistent {
                continue;
            }
            pool.cleanup(&mut self.storage, &mut gone);
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

    /// Every pool, in routing order (see the module doc for when the
    /// persistent pool is listed).
    pub fn report(&self) -> StreamMemoryReport {
        StreamMemoryReport {
            pools: self
                .pools
                .iter()
                .enumerate()
                .filter(|(i, p)| !self.hides(*i, p))
                .map(|(_, p)| p.report())
                .collect(),
        }
    }

    fn hides(&self, index: usize, pool: &Pool) -> bool {
        index == self.persistent
            && self.persistent_implicit
            && self.mode == MemoryAllocationMode::Auto
            && pool.usage().pages == 0
    }

    /// Bytes asked for by live slices and bytes reserved, over every pool:
    /// the report's sums without building it.
    pub fn totals(&self) -> (u64, u64) {
        self.pools.iter().fold((0, 0), |(live, reserved), p| {
            let u = p.usage();
            (live + u.bytes_in_use, reserved + u.bytes_reserved)
        })
    }
}
