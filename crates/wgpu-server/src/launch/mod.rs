//! The launch path: from a `launch` call to a dispatch in a stream's
//! encoder.
//!
//! - `path`: layout -> write set -> checks -> pipeline -> bind group ->
//!   dispatch; [`path::ResolvedLaunch`] is what a launch resolves to and
//!   what a graph records;
//! - `pipeline`: compiled pipelines by kernel id and options;
//! - `bind`: bind groups by resolved ranges and scalars;
//! - `queued`: `LaunchMode::Queue` launches held until `compile_queued`.

pub(crate) mod bind;
pub mod path;
pub(crate) mod pipeline;
pub(crate) mod queued;

use compute_wgsl::{WgpuCompilationOptions, WgpuCompiler};

/// What turns kernels into dispatches: the compiler, its options, and the
/// caches in front of it.
#[derive(Debug)]
pub(crate) struct Kernels<C: WgpuCompiler> {
    pub compiler: C,
    pub options: WgpuCompilationOptions,
    pub pipelines: pipeline::PipelineCache,
    pub bind_groups: bind::BindGroupCache,
    /// Queued launches waiting for `compile_queued`, in order.
    pub held: Vec<queued::HeldLaunch>,
}
