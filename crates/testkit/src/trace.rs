//! The documented mixed-size allocation trace behind the
//! `memory.peak_reserved_over_peak_live` benchmark.
//!
//! **The trace** ([`run_trace`]): `ops` operations from an [`Rng`] made by
//! [`Rng::new`]`(seed)`, over a working set of about `working_set` handles.
//! Each operation is a reserve or a free:
//! - with `L` handles live, it reserves with probability
//!   `1 - L / (2 * working_set)` (so `L` hovers around `working_set`; the
//!   draw is `below_u64(2 * working_set) >= L`), and otherwise frees a live
//!   handle chosen uniformly at random;
//! - a reserve draws its size log-uniformly in
//!   [`TRACE_MIN_SIZE`, `TRACE_MAX_SIZE`] (256 B .. 64 MiB: `exp` of a
//!   uniform draw between the logs; median 128 KiB, mean ~5 MiB, and each
//!   octave holds twice the bytes of the one below, so the 32-64 MiB
//!   octave holds about half of all bytes);
//! - a reserve that would take the bytes live over `live_cap` frees a
//!   random live handle instead.
//!
//! The benchmark uses [`TRACE_WORKING_SET`] (256 handles, ~1.3 GiB live on
//! average, peaks near 1.7-1.9 GiB) and [`TRACE_LIVE_CAP`] (2 GiB, which it
//! rarely reaches): a model's worth of tensors churning with random
//! lifetimes, the regime where a pool either reuses what was freed or keeps
//! reserving. No cleanup runs during the trace, so bytes reserved never
//! fall and the peak is the final value.
//!
//! **The benchmark** ([`peak_trace_ratio`]) runs it for [`TRACE_OPS`]
//! operations with [`TRACE_SEED`] on a phantom [`BytesStorage`] (sizes
//! tracked, nothing allocated), [`MemoryConfiguration::Default`] and
//! [`TRACE_PROPS`] (a discrete GPU under wgpu's default limits for binding
//! size and offset alignment: 1 GiB buffers, 128 MiB bindings, 256-byte
//! alignment), and returns peak bytes reserved (all pools, at any one
//! moment) over peak bytes live (bytes asked for). No cleanup runs during
//! the trace.
//!
//! **Doesn't:** model a real workload's size distribution or lifetimes
//! (frees are uniformly random, not LIFO or phase-structured), and says
//! nothing about speed.

use compute_memory::{BytesStorage, MemoryManagement};
use compute_runtime::{
    ComputeStorage, MemoryConfiguration, MemoryDeviceProperties, MemoryId, ServerError,
    StreamMemoryReport,
};

use crate::Rng;

/// Operations of the benchmark trace.
pub const TRACE_OPS: usize = 20_000;
/// Seed of the benchmark trace.
pub const TRACE_SEED: u64 = 0x2753_eab8_6f16_9930;
/// Smallest reservation of the trace.
pub const TRACE_MIN_SIZE: u64 = 256;
/// Largest reservation of the trace.
pub const TRACE_MAX_SIZE: u64 = 64 << 20;
/// Handles live the benchmark trace hovers around.
pub const TRACE_WORKING_SET: u64 = 256;
/// Bytes live the benchmark trace stays under.
pub const TRACE_LIVE_CAP: u64 = 2 << 30;
/// The device the benchmark trace runs on.
pub const TRACE_PROPS: MemoryDeviceProperties = MemoryDeviceProperties {
    max_buffer_size: 1 << 30,
    max_binding_size: 128 << 20,
    alignment: 256,
};

/// What a trace did and the numbers it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOutcome {
    /// Reservations made.
    pub reserves: u64,
    /// Frees made.
    pub frees: u64,
    /// High-water mark of bytes live (asked for), over all pools at once.
    pub peak_live: u64,
    /// High-water mark of bytes reserved, over all pools at once.
    pub peak_reserved: u64,
    /// The report after the last operation.
    pub report: StreamMemoryReport,
}

impl TraceOutcome {
    /// Peak bytes reserved over peak bytes live.
    pub fn ratio(&self) -> f64 {
        self.peak_reserved as f64 / self.peak_live.max(1) as f64
    }
}

/// Runs the trace of the module doc on `memory`, then frees what is still
/// live (after taking the report).
pub fn run_trace<S: ComputeStorage>(
    memory: &mut MemoryManagement<S>,
    seed: u64,
    ops: usize,
    working_set: u64,
    live_cap: u64,
) -> Result<TraceOutcome, ServerError> {
    let mut rng = Rng::new(seed);
    let mut live: Vec<(MemoryId, u64)> = Vec::new();
    let mut live_bytes = 0u64;
    let mut out = TraceOutcome {
        reserves: 0,
        frees: 0,
        peak_live: 0,
        peak_reserved: 0,
        report: StreamMemoryReport::default(),
    };
    for _ in 0..ops {
        let reserve = rng.below_u64(2 * working_set.max(1)) >= live.len() as u64;
        let size = if reserve {
            rng.log_uniform(TRACE_MIN_SIZE, TRACE_MAX_SIZE)
        } else {
            0
        };
        if reserve && (live.is_empty() || live_bytes + size <= live_cap) {
            let id = MemoryId::next();
            memory.bind(id, size)?;
            live.push((id, size));
            live_bytes += size;
            out.reserves += 1;
        } else {
            let i = rng.below_u64(live.len() as u64) as usize;
            let (id, size) = live.swap_remove(i);
            memory.release(id);
            live_bytes -= size;
            out.frees += 1;
        }
        let (in_use, reserved) = memory.totals();
        out.peak_live = out.peak_live.max(in_use);
        out.peak_reserved = out.peak_reserved.max(reserved);
    }
    out.report = memory.report();
    for (id, _) in live {
        memory.release(id);
    }
    Ok(out)
}

/// The benchmark trace (module doc) for `ops` operations from `seed`, on a
/// fresh manager; the outcome, or the error that stopped it.
pub fn trace_outcome(seed: u64, ops: usize) -> Result<TraceOutcome, ServerError> {
    let storage = BytesStorage::phantom(TRACE_PROPS.alignment);
    let mut memory = MemoryManagement::new(storage, TRACE_PROPS, &MemoryConfiguration::Default)?;
    run_trace(&mut memory, seed, ops, TRACE_WORKING_SET, TRACE_LIVE_CAP)
}

/// Peak bytes reserved over peak bytes live for the benchmark trace
/// (module doc): `peak_trace_ratio(TRACE_SEED, TRACE_OPS)` is the
/// `memory.peak_reserved_over_peak_live` figure. Infinite if the trace
/// failed (it cannot on the phantom storage with uncapped pools, short of
/// a bug).
pub fn peak_trace_ratio(seed: u64, ops: usize) -> f64 {
    trace_outcome(seed, ops).map_or(f64::INFINITY, |o| o.ratio())
}
