//! Resolving a launch: from a kernel and its arguments to a
//! [`ResolvedLaunch`] (what `server/dispatch.rs` encodes and a graph
//! records), on [`LaunchParts`], the parts a launch borrows from the
//! server. The checks are `resolve.rs`'s and `bindings.rs`'s; here they
//! run in order, and the lookups (pipeline, bind group, the indirect
//! count's scratch) are made once.

use std::sync::Arc;

use compute_runtime::{
    BufferBinding, CubeCount, CubeKernel, KernelArguments, MemoryId, ServerError, ServerLogger,
    StorageHandle,
};
use compute_stream::Access;
use compute_wgsl::{BindingAccess, KernelLayout, WgpuCompiler};

use crate::device::Gpu;
use crate::device::faults::scoped;
use crate::launch::Kernels;
use crate::launch::bind::{BindKey, Range};
use crate::launch::bindings::{indirect_source, resolve_bindings};
use crate::launch::pipeline::CachedPipeline;
use crate::launch::resolve::{
    ResolvedCount, ResolvedLaunch, check_arguments, check_counts, check_scalars,
};
use crate::memory::Memory;
use crate::stream::audit::INDIRECT_BYTES;

/// The parts a launch's resolution borrows from the server: the device,
/// memory (bindings, the indirect count's scratch) and the kernels
/// (pipelines, bind groups). The streams are not among them: resolution
/// orders and encodes nothing.
pub(crate) struct LaunchParts<'a, C: WgpuCompiler> {
    pub gpu: &'a Gpu,
    pub memory: &'a mut Memory,
    pub kernels: &'a mut Kernels<C>,
    pub logger: &'a ServerLogger,
}

pub(crate) fn resolve_launch<C: WgpuCompiler>(
    s: &mut LaunchParts<'_, C>,
    kernel: &dyn CubeKernel,
    cached: Option<Arc<CachedPipeline>>,
    layout: &KernelLayout,
    count: CubeCount,
    args: &KernelArguments,
) -> Result<ResolvedLaunch, ServerError> {
    check_arguments(kernel, layout, args)?;
    check_counts(&s.gpu.caps().limits, layout, &count)?;
    let pipeline = match cached {
        Some(p) => p,
        None => s
            .kernels
            .pipeline(kernel, s.gpu.caps(), s.gpu.device(), s.logger)?,
    };
    let ranges = resolve_bindings(&s.gpu.caps().limits, s.memory, &pipeline, args)?;
    check_scalars(&pipeline, args)?;

    // Bind group: cached when the ranges and scalars repeat.
    let key = BindKey::new(pipeline.id, &ranges, &args.scalars);
    let cached = key.and_then(|k| s.kernels.bind_groups().get(&k).cloned());
    let (bind_group, bind_id) = match cached {
        Some(c) => (c.group, c.id),
        None => {
            let group = create_bind_group(s, &pipeline.bind_group_layout, &ranges, &args.scalars)?;
            match key {
                Some(k) => {
                    let c = s.kernels.bind_groups().insert(k, group);
                    (c.group, c.id)
                }
                None => (group, s.kernels.bind_groups().next_id()),
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
    for (i, b) in args.buffers.iter().enumerate() {
        if let (Some(BindingAccess::ReadWrite), Some(Some(elem))) =
            (layout.bindings.get(i), pipeline.sizes.elems.get(i))
        {
            b.memory.record_write(*elem);
        }
    }
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

/// The indirect count: read in place, or copied to a scratch slice when
/// its page is also bound as storage by this dispatch.
fn resolve_indirect<C: WgpuCompiler>(
    s: &mut LaunchParts<'_, C>,
    binding: &BufferBinding,
    ranges: &[Range],
    pages: &mut Vec<(StorageHandle, Access)>,
) -> Result<ResolvedCount, ServerError> {
    let src = indirect_source(s.memory, binding)?;
    pages.push((src, Access::Read));
    let buffer = s.memory.page_buffer(src.id)?;
    if !ranges.iter().any(|(page, _, _)| *page == src.id) {
        return Ok(ResolvedCount::Indirect {
            buffer,
            offset: src.offset,
        });
    }
    let (scratch_binding, scratch) = s.memory.scratch(INDIRECT_BYTES)?;
    pages.push((scratch, Access::Write));
    Ok(ResolvedCount::Copied {
        src: buffer,
        src_offset: src.offset,
        scratch: s.memory.page_buffer(scratch.id)?,
        scratch_offset: scratch.offset,
        _scratch: scratch_binding,
    })
}

fn create_bind_group<C: WgpuCompiler>(
    s: &mut LaunchParts<'_, C>,
    layout: &wgpu::BindGroupLayout,
    ranges: &[Range],
    scalars: &[u8],
) -> Result<wgpu::BindGroup, ServerError> {
    let mut buffers = Vec::with_capacity(ranges.len());
    for (page, _, _) in ranges {
        buffers.push(s.memory.page_buffer(*page)?);
    }
    let device = s.gpu.device().clone();
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
            s.gpu.queue().write_buffer(&buffer, 0, &padded);
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
