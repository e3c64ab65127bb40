//! Resolving a launch on the server: every check and lookup, once (the
//! launch path's `resolve`), and the scratch slices an indirect count is
//! copied to. What a launch resolves to is
//! [`ResolvedLaunch`](crate::launch::resolve::ResolvedLaunch).

use std::sync::Arc;

use compute_runtime::{
    BufferBinding, CubeCount, CubeKernel, KernelArguments, ManagedMemoryHandle, MemoryId,
    ServerError, StorageHandle,
};
use compute_stream::Access;
use compute_wgsl::{BindingAccess, KernelLayout, WgpuCompiler};

use crate::device::faults::scoped;
use crate::launch::bind::{BindKey, Range};
use crate::launch::pipeline::CachedPipeline;
use crate::launch::resolve::{
    ResolvedCount, ResolvedLaunch, check_arguments, check_counts, check_scalars, invalid,
};
use crate::server::WgpuServer;
use crate::stream::audit::INDIRECT_BYTES;

pub(crate) fn resolve_launch<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
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
            .pipeline(kernel, s.gpu.caps(), s.gpu.device(), &s.logger)?,
    };
    let ranges = resolve_bindings(s, &pipeline, args)?;
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

/// Each binding resolved to its page range, checked against the device
/// and the module.
pub(crate) fn resolve_bindings<C: WgpuCompiler>(
    s: &WgpuServer<C>,
    pipeline: &CachedPipeline,
    args: &KernelArguments,
) -> Result<Vec<Range>, ServerError> {
    let limits = &s.gpu.caps().limits;
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
        let declared = pipeline.sizes.elems.get(i).copied().flatten();
        // A typed slice holds its type; an untyped one the client follows
        // holds what it was last written as, which only a binding that
        // writes it may change.
        let read_only = pipeline.layout.bindings.get(i) == Some(&BindingAccess::ReadOnly);
        let holds = b
            .memory
            .elem()
            .or_else(|| read_only.then(|| b.memory.written_as()).flatten());
        if let (Some(declared), Some(holds)) = (declared, holds)
            && declared != holds
        {
            return Err(ServerError::BindingType {
                kernel: pipeline.name.clone(),
                binding: i as u32,
                memory: b.memory_id(),
                declared,
                holds,
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
    check_overlap(pipeline, args, &ranges)?;
    Ok(ranges)
}

/// No two bindings share bytes where one of them is written.
fn check_overlap(
    pipeline: &CachedPipeline,
    args: &KernelArguments,
    ranges: &[Range],
) -> Result<(), ServerError> {
    let writes = |i: usize| pipeline.layout.bindings.get(i) == Some(&BindingAccess::ReadWrite);
    for (j, &(page_j, at_j, size_j)) in ranges.iter().enumerate() {
        for (i, &(page_i, at_i, size_i)) in ranges[..j].iter().enumerate() {
            let shared = page_i == page_j && at_i < at_j + size_j && at_j < at_i + size_i;
            if shared && (writes(i) || writes(j)) {
                return Err(ServerError::BindingsOverlap {
                    kernel: pipeline.name.clone(),
                    first: i as u32,
                    first_memory: args.buffers[i].memory_id(),
                    second: j as u32,
                    second_memory: args.buffers[j].memory_id(),
                    written: if writes(j) { j as u32 } else { i as u32 },
                });
            }
        }
    }
    Ok(())
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
    let buffer = s.memory.page_buffer(h.id)?;
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
        scratch: s.memory.page_buffer(scratch.id)?,
        scratch_offset: scratch.offset,
        _scratch: scratch_binding,
    })
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
        self.memory.manager_mut().bind_in(
            id,
            size,
            compute_runtime::MemoryAllocationMode::Persistent,
        )?;
        if let Err(e) = handle.attach_release(self.memory.releases()) {
            self.memory.manager_mut().release(id);
            return Err(e);
        }
        let binding = handle.binding(size);
        let page = self.resolve(&binding)?;
        Ok((binding, page))
    }
}

fn create_bind_group<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
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
