//! `LaunchMode::Queue`: launches whose compilation waits for
//! `compile_queued`.
//!
//! A queued launch that misses the pipeline cache is held, with its
//! arguments, instead of compiling inside the launch. `compile_queued`
//! compiles every held kernel, then encodes the held launches in the order
//! they were made, so a measurement started after it times its kernels and
//! nothing else. Order is structural: any other server call first does the
//! same (`WgpuServer::enter`), so a held launch is always encoded before any
//! operation issued after it, on any stream. Once a launch is held, later
//! queued launches are held too (even on a cache hit), for the same reason.

use compute_runtime::{CubeCount, CubeKernel, KernelArguments, StreamId};

/// A launch waiting for `compile_queued`.
pub(crate) struct HeldLaunch {
    pub kernel: Box<dyn CubeKernel>,
    pub count: CubeCount,
    pub args: KernelArguments,
    pub stream: StreamId,
}

impl std::fmt::Debug for HeldLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLaunch")
            .field("kernel", &self.kernel.name())
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}
