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
use compute_wgsl::WgpuCompiler;

use crate::WgpuServer;

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

/// Compiles every held kernel, then encodes the held launches in order.
pub(crate) fn compile_and_encode<C: WgpuCompiler>(s: &mut WgpuServer<C>) {
    if s.kernels.held.is_empty() {
        return;
    }
    let held = std::mem::take(&mut s.kernels.held);
    for h in &held {
        // Failures are not reported here: the launch below fails the same
        // way inside its write scope, which poisons and defers it.
        let _ = s.kernels.pipelines.get_or_compile(
            &mut s.kernels.compiler,
            h.kernel.as_ref(),
            &s.kernels.options,
            &s.gpu.caps,
            &s.gpu.device,
            &s.logger,
        );
    }
    for h in held {
        crate::launch::path::launch(s, h.kernel.as_ref(), h.count, h.args, h.stream);
    }
}
