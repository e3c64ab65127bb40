//! The launch path: from a `launch` call to a dispatch in a stream's
//! encoder.
//!
//! - `path`: layout -> write set -> (in the write scope) resolve -> dispatch;
//! - `resolve`: every check and lookup, once; [`path::ResolvedLaunch`] is
//!   what a launch resolves to and what a graph records;
//! - `dispatch`: ordering, the trust of the inputs, encoding: what a launch
//!   and a replay both do;
//! - `pipeline`: compiled pipelines by kernel id and options;
//! - `bind`: bind groups by resolved ranges and scalars;
//! - `queued`: `LaunchMode::Queue` launches held until `compile_queued`;
//! - `validate`: the checks of `resolve` without enqueuing anything, for
//!   the client's checked launch (`LaunchValidation`).

pub(crate) mod bind;
pub(crate) mod cache;
pub(crate) mod pipeline;
pub(crate) mod queued;
pub(crate) mod resolve;

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
    /// Resolved launches, for launches that repeat.
    pub launches: cache::LaunchCache,
}
