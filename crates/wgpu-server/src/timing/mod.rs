//! Everything that reads GPU timestamps or host clocks.
//!
//! - `windows`: profile windows, their tokens and the timestamp-slot pool;
//! - `recording`: what a timeline holds while it records;
//! - [`timeline`]: per-launch stamps exported as a Chrome trace.
//!
//! The profile calls of `Server` over the windows are `server/profile.rs`;
//! starting and finishing a timeline `server/timeline.rs`; the GPU time of
//! submitted batches, for the `sync` log line, `stream/timing.rs`.

pub(crate) mod recording;
pub mod timeline;
pub(crate) mod windows;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// A server's timing state.
#[derive(Debug)]
pub(crate) struct Timing {
    /// Open profile windows, the slot pool, and the timeline if recording.
    profiler: windows::Profiler,
    /// GPU time the last `sync` completed, in ns (`u64::MAX`: not measured).
    last_sync_gpu_ns: Arc<AtomicU64>,
}

impl Timing {
    pub fn new(profiler: windows::Profiler) -> Self {
        Timing {
            profiler,
            last_sync_gpu_ns: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    pub fn profiler(&self) -> &windows::Profiler {
        &self.profiler
    }

    pub fn profiler_mut(&mut self) -> &mut windows::Profiler {
        &mut self.profiler
    }

    /// GPU time the last `sync` completed, in ns (`u64::MAX`: not measured).
    pub fn last_sync_gpu_ns(&self) -> &Arc<AtomicU64> {
        &self.last_sync_gpu_ns
    }
}
