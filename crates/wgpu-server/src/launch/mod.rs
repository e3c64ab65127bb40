//! The launch path: from a `launch` call to a dispatch in a stream's
//! encoder.
//!
//! - `prepare`: [`prepare::LaunchParts`], the parts a launch borrows from
//!   the server, and `resolve_launch`: a launch's checks in order and its
//!   lookups made once;
//! - `resolve`: [`resolve::ResolvedLaunch`], what a launch resolves to and
//!   what a graph records, and the checks of arguments, counts and scalars;
//! - `bindings`: the checks of the bindings and of an indirect count, the
//!   one copy a launch and the client's checked launch share;
//! - `cache`: resolved launches by kernel, bindings and scalars, so a
//!   repeated launch skips resolution;
//! - `pipeline`: compiled pipelines by kernel id and options;
//! - `bind`: bind groups by resolved ranges and scalars;
//! - `queued`: `LaunchMode::Queue` launches held until `compile_queued`;
//! - `termination`: the proof that every loop of a module ends, and
//! - `indices` (with `index_values`, `intervals` and `thread_ids`): the
//!   proof that every index outside a buffer is in range; together they
//!   spare a module wgpu's loop counter and index clamps.
//!
//! What crosses the write scope and the streams runs on the server:
//! `server/launch.rs` (layout -> write set -> in the write scope, resolve
//! -> dispatch), `server/dispatch.rs` (ordering, the inputs' trust,
//! encoding: what a launch and a replay both do), `server/validate.rs`
//! (the checks without enqueuing, for the client's checked launch).

pub(crate) mod bind;
pub(crate) mod bindings;
pub(crate) mod cache;
pub(crate) mod indices;
mod intervals;
pub(crate) mod pipeline;
pub(crate) mod prepare;
#[cfg(test)]
mod proof_tests;
pub(crate) mod queued;
pub(crate) mod resolve;
pub(crate) mod termination;
mod thread_ids;

use std::borrow::Cow;
use std::sync::Arc;

use compute_runtime::{CubeKernel, ServerError, ServerLogger, StorageId};
use compute_wgsl::{DeviceCaps, KernelLayout, WgpuCompilationOptions, WgpuCompiler};

use crate::launch::pipeline::CachedPipeline;
use crate::launch::queued::HeldLaunch;

/// What turns kernels into dispatches: the compiler, its options, and the
/// caches in front of it.
#[derive(Debug)]
pub(crate) struct Kernels<C: WgpuCompiler> {
    compiler: C,
    options: WgpuCompilationOptions,
    pipelines: pipeline::PipelineCache,
    bind_groups: bind::BindGroupCache,
    /// Queued launches waiting for `compile_queued`, in order.
    held: Vec<HeldLaunch>,
    /// Resolved launches, for launches that repeat.
    launches: cache::LaunchCache,
}

impl<C: WgpuCompiler> Kernels<C> {
    pub fn new(compiler: C, options: WgpuCompilationOptions) -> Self {
        Kernels {
            compiler,
            options,
            pipelines: Default::default(),
            bind_groups: Default::default(),
            held: Vec::new(),
            launches: Default::default(),
        }
    }

    /// The compilation options (part of every cache key).
    pub fn options(&self) -> WgpuCompilationOptions {
        self.options
    }

    /// The compiler (for reports).
    pub fn compiler(&self) -> &C {
        &self.compiler
    }

    /// `kernel`'s pipeline, if it is compiled: a launch's hit.
    pub fn cached(&self, kernel: &dyn CubeKernel) -> Option<Arc<CachedPipeline>> {
        self.pipelines.get(kernel.id(), &self.options).cloned()
    }

    /// Whether `kernel` is compiled under these options.
    pub fn is_compiled(&self, kernel: &dyn CubeKernel) -> bool {
        self.pipelines.get(kernel.id(), &self.options).is_some()
    }

    /// `kernel`'s pipeline, compiled on a miss.
    pub fn pipeline(
        &mut self,
        kernel: &dyn CubeKernel,
        caps: &DeviceCaps,
        device: &wgpu::Device,
        logger: &ServerLogger,
    ) -> Result<Arc<CachedPipeline>, ServerError> {
        self.pipelines.get_or_compile(
            &mut self.compiler,
            kernel,
            &self.options,
            caps,
            device,
            logger,
        )
    }

    /// Compiled pipelines.
    pub fn pipelines(&self) -> usize {
        self.pipelines.len()
    }

    #[cfg(feature = "testing")]
    pub fn pipelines_with_bounded_loops(&self) -> usize {
        self.pipelines.with_bounded_loops()
    }

    pub fn bind_groups(&mut self) -> &mut bind::BindGroupCache {
        &mut self.bind_groups
    }

    pub fn launches(&mut self) -> &mut cache::LaunchCache {
        &mut self.launches
    }

    /// Bind groups and resolved launches on `page` go with it.
    pub fn forget_page(&mut self, page: StorageId) {
        self.bind_groups.forget_page(page);
        self.launches.forget_page(page);
    }

    /// Holds a `LaunchMode::Queue` launch until `compile_queued`.
    pub fn hold(&mut self, launch: HeldLaunch) {
        self.held.push(launch);
    }

    /// Queued launches wait.
    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// The queued launches, in order.
    pub fn take_held(&mut self) -> Vec<HeldLaunch> {
        std::mem::take(&mut self.held)
    }

    /// Queued launches, for tests.
    #[cfg(feature = "testing")]
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// A kernel's layout: its pipeline's (`cached`, borrowed) when it is
/// compiled, else what the compiler says without compiling.
pub(crate) fn layout_of<'a, C: WgpuCompiler>(
    cached: Option<&'a Arc<CachedPipeline>>,
    compiler: &C,
    kernel: &dyn CubeKernel,
) -> Result<Cow<'a, KernelLayout>, ServerError> {
    match cached {
        Some(p) => Ok(Cow::Borrowed(&p.layout)),
        None => compiler.layout(kernel).map(Cow::Owned),
    }
}
