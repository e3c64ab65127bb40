//! The launch path: layout, write set, validation, pipeline, bind group,
//! dispatch.
//!
//! Order matters for the trust model. The kernel's layout (known without
//! compiling) names the write set first; everything after runs inside the
//! write scope, so any failure (foreign kernel, bad arguments, compile error,
//! a dispatch over the device's limits) poisons exactly the buffers the
//! kernel would have written and is reported by the stream's next
//! flush/sync. Every check wgpu would make at encode time is made here
//! first: an invalid command inside an encoder would invalidate the whole
//! batch, taking other launches' work with it.

use std::borrow::Cow;
use std::sync::Arc;

use compute_runtime::{
    BufferBinding, CubeCount, CubeKernel, KernelArguments, LogCategory, LogLevel, ServerError,
    StorageHandle, StreamId,
};
use compute_stream::{Access, WriteScoped};
use compute_wgsl::{BindingAccess, KernelLayout, WgpuCompiler};

use crate::WgpuServer;
use crate::device::faults::scoped;
use crate::launch::bind::{BindKey, Range};
use crate::launch::pipeline::CachedPipeline;

/// Launches `kernel` now (or records it, on a capturing stream). No launch
/// mode: a `LaunchMode::Queue` launch reaches here only on a cache hit with
/// nothing held (where it is the same as `Execute`), from `compile_queued`,
/// or inside a capture, where compilation happens at record time and
/// nothing would be gained by deferring it.
pub(crate) fn launch<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    kernel: &dyn CubeKernel,
    count: CubeCount,
    args: KernelArguments,
    stream: StreamId,
) {
    if let Err(e) = server.enter() {
        server.streams.defer_error(stream, &Arc::new(e));
        return;
    }
    // A cache hit knows the layout; a miss asks the compiler, which can
    // tell it without compiling.
    let cached = server
        .kernels
        .pipelines
        .get(kernel.id(), &server.kernels.options)
        .cloned();
    let layout = match &cached {
        Some(p) => Ok(Cow::Borrowed(&p.layout)),
        None => server.kernels.compiler.layout(kernel).map(Cow::Owned),
    };
    // The write set: read-write bindings by the layout; every buffer when
    // the layout itself cannot be had (nothing is known to be read-only).
    let writes: Vec<BufferBinding> = match &layout {
        Ok(l) => args
            .buffers
            .iter()
            .enumerate()
            .filter(|(i, _)| l.bindings.get(*i) != Some(&BindingAccess::ReadOnly))
            .map(|(_, b)| b.clone())
            .collect(),
        Err(_) => args.buffers.clone(),
    };
    if server.is_capturing(stream) {
        // Recorded, not run: nothing is written now, so nothing is settled;
        // a failure spoils the capture instead (`end_capture` reports it).
        let resolved =
            layout.and_then(|l| resolve_launch(server, kernel, cached.clone(), &l, count, &args));
        let reads: Vec<BufferBinding> = args.buffers.clone();
        if let Some(capture) = server.capturing(stream) {
            match resolved {
                Ok(r) => capture.record(r, &reads, &writes),
                Err(e) => capture.fail(e),
            }
        }
        return;
    }
    let _ = server.scoped(stream, &writes, |s| {
        let layout = layout?;
        let resolved = resolve_launch(s, kernel, cached.clone(), &layout, count, &args)?;
        dispatch(s, stream, &resolved);
        Ok(())
    });
}

fn check_counts(
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

/// A launch with everything resolved: what `dispatch` encodes, and what a
/// graph capture records (replay re-encodes it without the launch path).
///
/// `pub` only because it is the server's `WriteScoped::Capture` command
/// type; it is not exported, and its fields are private.
#[derive(Debug)]
pub struct ResolvedLaunch {
    pipeline: Arc<CachedPipeline>,
    bind_group: wgpu::BindGroup,
    bind_id: u64,
    count: ResolvedCount,
    pages: Vec<(StorageHandle, Access)>,
}

#[derive(Debug)]
enum ResolvedCount {
    Static(u32, u32, u32),
    Indirect(wgpu::Buffer, u64),
}

impl std::fmt::Display for ResolvedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResolvedCount::Static(x, y, z) => write!(f, "({x}, {y}, {z})"),
            ResolvedCount::Indirect(_, offset) => write!(f, "indirect@{offset}"),
        }
    }
}

fn resolve_launch<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    kernel: &dyn CubeKernel,
    cached: Option<Arc<CachedPipeline>>,
    layout: &KernelLayout,
    count: CubeCount,
    args: &KernelArguments,
) -> Result<ResolvedLaunch, ServerError> {
    if args.buffers.len() != layout.bindings.len() {
        return Err(ServerError::InvalidArgument {
            reason: format!(
                "kernel `{}` declares {} buffers, the launch passes {}",
                kernel.name(),
                layout.bindings.len(),
                args.buffers.len()
            ),
        });
    }
    if layout.scalars == args.scalars.is_empty() {
        return Err(ServerError::InvalidArgument {
            reason: format!(
                "kernel `{}` {} scalars, the launch passes {} bytes of them",
                kernel.name(),
                if layout.scalars { "takes" } else { "takes no" },
                args.scalars.len()
            ),
        });
    }
    check_counts(&s.gpu.caps.limits, layout, &count)?;

    // Resolve every binding before touching any state.
    let align = u64::from(s.gpu.caps.limits.min_storage_buffer_offset_alignment);
    let max_binding = s.gpu.caps.limits.max_storage_buffer_binding_size;
    let mut ranges: Vec<Range> = Vec::with_capacity(args.buffers.len());
    for b in &args.buffers {
        let h = s.resolve(b)?;
        if h.offset % align != 0 {
            return Err(ServerError::InvalidArgument {
                reason: format!(
                    "binding of {} starts at byte {} of its page, not a multiple of \
                     min_storage_buffer_offset_alignment ({align})",
                    b.memory_id(),
                    h.offset
                ),
            });
        }
        if b.size == 0 {
            return Err(ServerError::InvalidArgument {
                reason: format!("binding of {} is empty", b.memory_id()),
            });
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
        ranges.push((h.id, h.offset, size));
    }
    let indirect = match &count {
        CubeCount::Static(..) => None,
        CubeCount::Dynamic(b) => {
            let h = s.resolve(b)?;
            if h.offset % 4 != 0 || b.size < 12 {
                return Err(ServerError::InvalidArgument {
                    reason: "an indirect count needs 12 bytes at a 4-byte aligned offset".into(),
                });
            }
            Some(h)
        }
    };

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

    // Order against other streams, then encode.
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
    if let Some(h) = &indirect {
        pages.push((
            StorageHandle {
                id: h.id,
                offset: h.offset,
                size: 12,
            },
            Access::Read,
        ));
    }
    let count = match &indirect {
        Some(h) => ResolvedCount::Indirect(page_buffer(s, h)?, h.offset),
        None => match count {
            CubeCount::Static(x, y, z) => ResolvedCount::Static(x, y, z),
            CubeCount::Dynamic(_) => {
                return Err(ServerError::InvalidArgument {
                    reason: "indirect count could not be resolved".into(),
                });
            }
        },
    };
    Ok(ResolvedLaunch {
        pipeline,
        bind_group,
        bind_id,
        count,
        pages,
    })
}

/// Orders `launch` against other streams and encodes it on `stream`.
pub(crate) fn dispatch<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
    launch: &ResolvedLaunch,
) {
    s.streams.prepare(stream, &launch.pages);
    let device = s.gpu.device.clone();
    // An at-launch profile window (or a timeline) stamps this launch.
    let timed = s
        .timing
        .profiler
        .stamp_launch(&device, stream, &launch.pipeline.name, || {
            launch.count.to_string()
        });
    let (_, ws) = s.streams.encoder(stream);
    let pass = ws.launch_pass(
        &device,
        timed.as_ref(),
        (&launch.pipeline.pipeline, launch.pipeline.id),
        (&launch.bind_group, launch.bind_id),
    );
    match &launch.count {
        ResolvedCount::Static(x, y, z) => pass.dispatch_workgroups(*x, *y, *z),
        ResolvedCount::Indirect(buffer, offset) => {
            pass.dispatch_workgroups_indirect(buffer, *offset)
        }
    }
    if timed.is_some() {
        ws.end_pass();
    }
    s.streams.task_done(stream);
    s.logger.log(LogCategory::Launch, LogLevel::Full, || {
        format!(
            "launch `{}` {} on {stream}",
            launch.pipeline.name, launch.count
        )
    });
}

fn page_buffer<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    h: &StorageHandle,
) -> Result<wgpu::Buffer, ServerError> {
    s.memory
        .manager
        .storage()
        .buffer(h.id)
        .cloned()
        .ok_or(ServerError::InvalidArgument {
            reason: format!("page {} is gone", h.id),
        })
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
