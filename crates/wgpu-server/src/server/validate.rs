//! [`LaunchValidation`] for the wgpu server: the checks of a launch's
//! resolution (`launch/resolve.rs`, `launch/bindings.rs`), made without
//! enqueuing anything, for the client's checked launch.
//!
//! The checks are the launch path's own (`check_arguments`, `check_counts`,
//! `resolve_bindings`, `check_scalars`), in its order: the layout (known
//! without compiling), then the pipeline (compiled on a miss, as the launch
//! that follows would), then the bindings against the device and the
//! module. The answer's [`AccessChecks`] is the pipeline's own policy, so a
//! kernel compiled `Unchecked` (by its own choice or the server's options)
//! is never called checked.

use compute_runtime::{
    AccessChecks, CubeCount, CubeKernel, KernelArguments, LaunchValidation, ServerError, StreamId,
};
use compute_wgsl::{BoundsChecks, WgpuCompiler};

use crate::launch::bindings::{indirect_source, resolve_bindings};
use crate::launch::layout_of;
use crate::launch::resolve::{check_arguments, check_counts, check_scalars};
use crate::server::WgpuServer;

// SAFETY: `Checked` is answered only for a pipeline whose module was
// created with `create_shader_module` (wgpu's run-time bounds checks), and
// every binding of the launch was resolved inside its slice.
unsafe impl<C: WgpuCompiler> LaunchValidation for WgpuServer<C> {
    fn validate_launch(
        &mut self,
        kernel: &dyn CubeKernel,
        count: &CubeCount,
        args: &KernelArguments,
        _stream_id: StreamId,
    ) -> Result<AccessChecks, ServerError> {
        self.enter()?;
        let cached = self.kernels.cached(kernel);
        let layout = layout_of(cached.as_ref(), self.kernels.compiler(), kernel)?;
        check_arguments(kernel, &layout, args)?;
        check_counts(&self.gpu.caps().limits, &layout, count)?;
        let pipeline = match cached {
            Some(p) => p,
            None => {
                self.kernels
                    .pipeline(kernel, self.gpu.caps(), self.gpu.device(), &self.logger)?
            }
        };
        resolve_bindings(&self.gpu.caps().limits, &self.memory, &pipeline, args)?;
        check_scalars(&pipeline, args)?;
        if let CubeCount::Dynamic(binding) = count {
            indirect_source(&self.memory, binding)?;
        }
        Ok(match pipeline.bounds_checks {
            BoundsChecks::Checked | BoundsChecks::Reported => AccessChecks::Checked,
            BoundsChecks::Unchecked => AccessChecks::Unchecked,
        })
    }
}
