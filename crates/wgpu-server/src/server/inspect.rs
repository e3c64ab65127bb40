//! Counters tests read to see inside the server (feature `testing`): not
//! part of the stable API.

use compute_wgsl::WgpuCompiler;

use crate::server::WgpuServer;

impl<C: WgpuCompiler> WgpuServer<C> {
    /// Failures settled by write scopes so far (each was told to
    /// `on_failure`).
    pub fn failure_count(&self) -> u64 {
        self.failures
    }

    /// Compiled pipelines in the cache.
    pub fn cached_pipelines(&self) -> usize {
        self.kernels.pipelines()
    }

    /// Compiled pipelines that kept wgpu's loop counter and index clamps
    /// (a checked module with a loop the server could not prove ends or an
    /// index it could not prove in range, or any checked module under
    /// `LoopBounding::Every`).
    pub fn pipelines_with_bounded_loops(&self) -> usize {
        self.kernels.pipelines_with_bounded_loops()
    }

    /// Whether the device's driver bounds buffer accesses itself (Vulkan's
    /// `robustBufferAccess2`), which the index proof needs.
    pub fn driver_bounds_buffers(&self) -> bool {
        self.gpu.caps().driver_bounds_buffers
    }

    /// Host allocations `staging` had to make (the rest came from its pool).
    pub fn staging_allocations(&self) -> u64 {
        self.memory.staging().allocations
    }

    /// Blocks of imported host memory reads have made (the rest came from
    /// the pool); 0 where reads use mapped staging buffers.
    pub fn imported_host_blocks(&self) -> u64 {
        self.memory.pinned().map_or(0, |p| p.created())
    }

    /// Queued launches not encoded yet.
    pub fn held_launches(&self) -> usize {
        self.kernels.held()
    }

    /// Timestamp slots ever created by profile windows (they are pooled).
    pub fn profile_slots_created(&self) -> usize {
        self.timing.profiler().slots_created()
    }

    /// Profile windows open now.
    pub fn open_profile_windows(&self) -> usize {
        self.timing.profiler().open_windows()
    }

    /// Query sets the timeline being recorded has made (each holds the
    /// stamps of 2,048 launches); 0 when none records.
    pub fn timeline_query_sets(&self) -> usize {
        self.timing
            .profiler()
            .timeline
            .as_ref()
            .map_or(0, |t| t.query_sets())
    }

    /// Graphs stored in the device's registry.
    pub fn graph_count(&self) -> usize {
        self.graphs.len()
    }
}
