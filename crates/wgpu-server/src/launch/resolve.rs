//! Resolving a launch: every check wgpu would make at encode time, made
//! before anything is encoded, and every lookup made once.
//!
//! What a launch resolves to, [`ResolvedLaunch`], is what `dispatch`
//! encodes and what a graph records: replay re-encodes it without any of
//! this. The checks: argument counts against the layout, workgroup size and
//! counts against the device's limits, each binding inside its slice, at an
//! aligned offset, within the binding size limit and at least the module's
//! minimum binding size, the scalar block at least the module's uniform
//! size, and an indirect count of 12 aligned bytes. An indirect count on a
//! page the dispatch also binds as storage would be a usage conflict in one
//! dispatch (wgpu tracks usage per buffer): its 12 bytes are copied to a
//! scratch slice at dispatch, on a page of its own (neither the count's
//! page, which a copy cannot target, nor a bound one).

use std::sync::Arc;

use compute_runtime::{
    BufferBinding, CubeCount, CubeKernel, KernelArguments, MemoryId, ServerError, StorageHandle,
};
use compute_stream::Access;
use compute_wgsl::KernelLayout;

use crate::launch::pipeline::CachedPipeline;

/// A launch with everything resolved: what `dispatch` encodes, and what a
/// graph capture records (replay re-encodes it without the launch path).
///
/// `pub` only because it is the server's `WriteScoped::Capture` command
/// type; it is not exported, and its fields are private to the crate.
#[derive(Debug)]
pub struct ResolvedLaunch {
    pub(crate) pipeline: Arc<CachedPipeline>,
    pub(crate) bind_group: wgpu::BindGroup,
    pub(crate) bind_id: u64,
    pub(crate) count: ResolvedCount,
    /// Every byte range the dispatch (and its indirect copy) touches, for
    /// the scheduler.
    pub(crate) pages: Vec<(StorageHandle, Access)>,
    /// Every slice it reads (its bindings and its indirect count): poison
    /// follows data, so each is checked at dispatch.
    pub(crate) reads: Vec<MemoryId>,
    /// The slices it writes, for the batch's record of what it wrote.
    pub(crate) writes: Vec<MemoryId>,
}

/// How many workgroups.
#[derive(Debug)]
pub(crate) enum ResolvedCount {
    Static(u32, u32, u32),
    /// Read by the GPU from `buffer` at `offset`.
    Indirect {
        buffer: wgpu::Buffer,
        offset: u64,
    },
    /// Read from `src`, copied to `scratch` first (see the module doc). The
    /// binding keeps the scratch slice allocated as long as the launch (or
    /// the graph holding it) lives.
    Copied {
        src: wgpu::Buffer,
        src_offset: u64,
        scratch: wgpu::Buffer,
        scratch_offset: u64,
        _scratch: BufferBinding,
    },
}

impl std::fmt::Display for ResolvedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResolvedCount::Static(x, y, z) => write!(f, "({x}, {y}, {z})"),
            ResolvedCount::Indirect { offset, .. } => write!(f, "indirect@{offset}"),
            ResolvedCount::Copied { src_offset, .. } => write!(f, "indirect@{src_offset}"),
        }
    }
}

impl ResolvedLaunch {
    /// The kernel's name.
    pub(crate) fn name(&self) -> &str {
        &self.pipeline.name
    }
}

pub(crate) fn invalid(reason: String) -> ServerError {
    ServerError::InvalidArgument { reason }
}

pub(crate) fn check_counts(
    limits: &wgpu::Limits,
    layout: &KernelLayout,
    count: &CubeCount,
) -> Result<(), ServerError> {
    let [x, y, z] = layout.workgroup_size;
    for (size, max, name) in [
        (
            x,
            limits.max_compute_workgroup_size_x,
            "max_compute_workgroup_size_x",
        ),
        (
            y,
            limits.max_compute_workgroup_size_y,
            "max_compute_workgroup_size_y",
        ),
        (
            z,
            limits.max_compute_workgroup_size_z,
            "max_compute_workgroup_size_z",
        ),
    ] {
        if size > max {
            return Err(ServerError::LimitExceeded {
                limit: name,
                requested: u64::from(size),
                max: u64::from(max),
            });
        }
    }
    let invocations = layout.invocations();
    let max = u64::from(limits.max_compute_invocations_per_workgroup);
    if invocations > max {
        return Err(ServerError::LimitExceeded {
            limit: "max_compute_invocations_per_workgroup",
            requested: invocations,
            max,
        });
    }
    if let CubeCount::Static(x, y, z) = count {
        let max = limits.max_compute_workgroups_per_dimension;
        if let Some(over) = [x, y, z].into_iter().find(|d| **d > max) {
            return Err(ServerError::LimitExceeded {
                limit: "max_compute_workgroups_per_dimension",
                requested: u64::from(*over),
                max: u64::from(max),
            });
        }
    }
    Ok(())
}

/// The launch passes as many buffers as the kernel declares, and scalars
/// exactly when it takes them.
pub(crate) fn check_arguments(
    kernel: &dyn CubeKernel,
    layout: &KernelLayout,
    args: &KernelArguments,
) -> Result<(), ServerError> {
    if args.buffers.len() != layout.bindings.len() {
        return Err(invalid(format!(
            "kernel `{}` declares {} buffers, the launch passes {}",
            kernel.name(),
            layout.bindings.len(),
            args.buffers.len()
        )));
    }
    if layout.scalars == args.scalars.is_empty() {
        return Err(invalid(format!(
            "kernel `{}` {} scalars, the launch passes {} bytes of them{}",
            kernel.name(),
            if layout.scalars { "takes" } else { "takes no" },
            args.scalars.len(),
            if layout.scalars {
                " (pack them with `Kernel::args` / `Kernel::pack_scalars`, or \
                 `KernelArguments::with_scalars`)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

/// The scalar block is at least the module's uniform block.
pub(crate) fn check_scalars(
    pipeline: &CachedPipeline,
    args: &KernelArguments,
) -> Result<(), ServerError> {
    let needed = pipeline.sizes.uniform;
    if (args.scalars.len() as u64) < needed {
        return Err(ServerError::BindingTooSmall {
            kernel: pipeline.name.clone(),
            binding: args.buffers.len() as u32,
            size: args.scalars.len() as u64,
            min: needed,
        });
    }
    Ok(())
}
