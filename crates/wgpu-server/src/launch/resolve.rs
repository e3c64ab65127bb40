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
    BufferBinding, CubeCount, CubeKernel, KernelArguments, ManagedMemoryHandle, MemoryId,
    ServerError, StorageHandle,
};
use compute_stream::Access;
use compute_wgsl::{BindingAccess, KernelLayout, WgpuCompiler};

use crate::WgpuServer;
use crate::device::faults::scoped;
use crate::launch::bind::{BindKey, Range};
use crate::launch::pipeline::CachedPipeline;

/// Bytes of an indirect dispatch's arguments.
pub(crate) const INDIRECT_BYTES: u64 = 12;

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

fn invalid(reason: String) -> ServerError {
    ServerError::InvalidArgument { reason }
}

pub(crate) fn resolve_launch<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    kernel: &dyn CubeKernel,
    cached: Option<Arc<CachedPipeline>>,
    layout: &KernelLayout,
    count: CubeCount,
    args: &KernelArguments,
) -> Result<ResolvedLaunch, ServerError> {
    check_arguments(kernel, layout, args)?;
    check_counts(&s.gpu.caps.limits, layout, &count)?;
    let pipeline = match cached {
        Some(p) => p,
        None => s.kernels.pipelines.get_or_compile(
            &mut s.kernels.compiler,
            kernel,
            &s.kernels.options,
            &s.gpu.caps,
            &s.gpu.device,
            &s.logger,
        )?,
    };
    let ranges = resolve_bindings(s, &pipeline, args)?;
    check_scalars(&pipeline, args)?;

    // Bind group: cached when the ranges and scalars repeat.
    let key = BindKey::new(pipeline.id, &ranges, &args.scalars);
    let cached = key.and_then(|k| s.kernels.bind_groups.get(&k).cloned());
    let (bind_group, bind_id) = match cached {
        Some(c) => (c.group, c.id),
        None => {
            let group = create_bind_group(s, &pipeline.bind_group_layout, &ranges, &args.scalars)?;
            match key {
                Some(k) => {
                    let c = s.kernels.bind_groups.insert(k, group);
                    (c.group, c.id)
                }
                None => (group, s.kernels.bind_groups.next_id()),
            }
        }
    };

    let mut pages: Vec<(StorageHandle, Access)> = ranges
        .iter()
        .zip(&layout.bindings)
        .map(|(&(id, offset, size), a)| {
            let access = match a {
                BindingAccess::ReadOnly => Access::Read,
                BindingAccess::ReadWrite => Access::Write,
            };
            (StorageHandle { id, offset, size }, access)
        })
        .collect();
    let mut reads: Vec<MemoryId> = args.buffers.iter().map(BufferBinding::memory_id).collect();
    let writes: Vec<MemoryId> = args
        .buffers
        .iter()
        .zip(&layout.bindings)
        .filter(|(_, a)| **a == BindingAccess::ReadWrite)
        .map(|(b, _)| b.memory_id())
        .collect();
    let count = match count {
        CubeCount::Static(x, y, z) => ResolvedCount::Static(x, y, z),
        CubeCount::Dynamic(b) => {
            reads.push(b.memory_id());
            resolve_indirect(s, &b, &ranges, &mut pages)?
        }
    };
    Ok(ResolvedLaunch {
        pipeline,
        bind_group,
        bind_id,
        count,
        pages,
        reads,
        writes,
    })
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
            "kernel `{}` {} scalars, the launch passes {} bytes of them",
            kernel.name(),
            if layout.scalars { "takes" } else { "takes no" },
            args.scalars.len()
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

/// Each binding resolved to its page range, checked against the device
/// and the module.
pub(crate) fn resolve_bindings<C: WgpuCompiler>(
    s: &WgpuServer<C>,
    pipeline: &CachedPipeline,
    args: &KernelArguments,
) -> Result<Vec<Range>, ServerError> {
    let limits = &s.gpu.caps.limits;
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max_binding = limits.max_storage_buffer_binding_size;
    let mut ranges: Vec<Range> = Vec::with_capacity(args.buffers.len());
    for (i, b) in args.buffers.iter().enumerate() {
        let h = s.resolve(b)?;
        if h.offset % align != 0 {
            return Err(invalid(format!(
                "binding of {} starts at byte {} of its page, not a multiple of \
                 min_storage_buffer_offset_alignment ({align})",
                b.memory_id(),
                h.offset
            )));
        }
        if b.size == 0 {
            return Err(invalid(format!("binding of {} is empty", b.memory_id())));
        }
        // Bindings are sized in 4-byte units; the slice's padding covers
        // the round-up.
        let size = b.size.next_multiple_of(4);
        if size > max_binding {
            return Err(ServerError::LimitExceeded {
                limit: "max_storage_buffer_binding_size",
                requested: size,
                max: max_binding,
            });
        }
        let min = pipeline.sizes.storage.get(i).copied().unwrap_or(0);
        if size < min {
            return Err(ServerError::BindingTooSmall {
                kernel: pipeline.name.clone(),
                binding: i as u32,
                size: b.size,
                min,
            });
        }
        ranges.push((h.id, h.offset, size));
    }
    Ok(ranges)
}

/// The indirect count: read in place, or copied to a scratch slice when
/// its page is also bound as storage by this dispatch.
fn resolve_indirect<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    binding: &BufferBinding,
    ranges: &[Range],
    pages: &mut Vec<(StorageHandle, Access)>,
) -> Result<ResolvedCount, ServerError> {
    let h = s.resolve(binding)?;
    if h.offset % 4 != 0 || binding.size < INDIRECT_BYTES {
        return Err(invalid(
            "an indirect count needs 12 bytes at a 4-byte aligned offset".into(),
        ));
    }
    let src = StorageHandle {
        id: h.id,
        offset: h.offset,
        size: INDIRECT_BYTES,
    };
    pages.push((src, Access::Read));
    let buffer = page_buffer(s, h.id)?;
    if !ranges.iter().any(|(page, _, _)| *page == h.id) {
        return Ok(ResolvedCount::Indirect {
            buffer,
            offset: h.offset,
        });
    }
    let (scratch_binding, scratch) = s.scratch(INDIRECT_BYTES)?;
    pages.push((scratch, Access::Write));
    Ok(ResolvedCount::Copied {
        src: buffer,
        src_offset: h.offset,
        scratch: page_buffer(s, scratch.id)?,
        scratch_offset: scratch.offset,
        _scratch: scratch_binding,
    })
}

fn page_buffer<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    page: compute_runtime::StorageId,
) -> Result<wgpu::Buffer, ServerError> {
    s.memory
        .manager
        .storage()
        .buffer(page)
        .cloned()
        .ok_or_else(|| invalid(format!("page {page} is gone")))
}

impl<C: WgpuCompiler> WgpuServer<C> {
    /// A slice of `size` bytes the server itself uses (an indirect count's
    /// copy): freed when the returned binding is dropped, like a caller's.
    ///
    /// It comes from the persistent pool, where every slice has a page of
    /// its own: a sliced page could be the very page the count is copied
    /// from (a copy whose source and destination are one buffer is invalid,
    /// and would take the whole batch down) or one the dispatch binds. A
    /// freed scratch page is kept under its size and serves the next one.
    pub(crate) fn scratch(
        &mut self,
        size: u64,
    ) -> Result<(BufferBinding, StorageHandle), ServerError> {
        let handle = ManagedMemoryHandle::new();
        let id = handle.id();
        self.memory
            .manager
            .bind_in(id, size, compute_runtime::MemoryAllocationMode::Persistent)?;
        if let Err(e) = handle.attach_release(&self.memory.releases) {
            self.memory.manager.release(id);
            return Err(e);
        }
        let binding = handle.binding(size);
        let page = self.resolve(&binding)?;
        Ok((binding, page))
    }
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

fn create_bind_group<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    layout: &wgpu::BindGroupLayout,
    ranges: &[Range],
    scalars: &[u8],
) -> Result<wgpu::BindGroup, ServerError> {
    let mut buffers = Vec::with_capacity(ranges.len());
    for (page, _, _) in ranges {
        let buffer = s.memory.manager.storage().buffer(*page).cloned().ok_or(
            ServerError::InvalidArgument {
                reason: format!("page {page} is gone"),
            },
        )?;
        buffers.push(buffer);
    }
    let device = s.gpu.device.clone();
    scoped(&device, || {
        let uniform = (!scalars.is_empty()).then(|| {
            let size = (scalars.len() as u64).next_multiple_of(16);
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("scalars"),
                size,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut padded = scalars.to_vec();
            padded.resize(size as usize, 0);
            s.gpu.queue.write_buffer(&buffer, 0, &padded);
            buffer
        });
        let mut entries: Vec<wgpu::BindGroupEntry> = ranges
            .iter()
            .zip(&buffers)
            .enumerate()
            .map(|(i, ((_, offset, size), buffer))| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset: *offset,
                    size: wgpu::BufferSize::new(*size),
                }),
            })
            .collect();
        if let Some(u) = &uniform {
            entries.push(wgpu::BindGroupEntry {
                binding: ranges.len() as u32,
                resource: u.as_entire_binding(),
            });
        }
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
            entries: &entries,
        })
    })
}
