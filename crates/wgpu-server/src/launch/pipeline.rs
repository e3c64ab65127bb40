//! The pipeline cache: compiled kernels by kernel id and compile options.
//!
//! A hit is one hash lookup and an `Arc` clone. A miss compiles through the
//! backend, parses the result with naga once, checks the backend's layout
//! against the module ([`ServerError::LayoutMismatch`] when they disagree)
//! and reads its minimum binding sizes, then creates the shader module from
//! the naga IR (wgpu does not parse it again; checked or trusted, per the
//! options) with an explicit bind group layout derived from the kernel's
//! [`KernelLayout`], and the pipeline, all inside error scopes so a kernel
//! wgpu rejects is a [`ServerError::Compilation`] carrying wgpu's (that is,
//! naga's) message. Failed compilations are not cached: a kernel fixed
//! and relaunched under the same id compiles again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use compute_runtime::{CubeKernel, KernelId, LogCategory, LogLevel, ServerError, ServerLogger};
use compute_wgsl::{
    BoundsChecks, CompiledKernel, DeviceCaps, KernelLayout, LoopBounding, WgpuCompilationOptions,
    WgpuCompiler, check_layout, make_storage_writable, module_interface, validate_wgsl_with_info,
    without_panics,
};
use hashbrown::HashMap;

use crate::device::faults::scoped;
use crate::stream::reports::report_layout;

/// A ready pipeline and what binding it needs.
#[derive(Debug)]
pub struct CachedPipeline {
    /// Process-unique identity, for skipping repeated `set_pipeline`.
    pub id: u64,
    /// The pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Layout of bind group 0.
    pub bind_group_layout: wgpu::BindGroupLayout,
    /// The kernel's interface, so a hit needs no call into the compiler.
    pub layout: KernelLayout,
    /// The smallest bindings the module accepts.
    pub sizes: BindingSizes,
    /// The kernel's name.
    pub name: String,
    /// Whether the module checks its accesses at run time (the kernel's
    /// own policy, else the options').
    pub bounds_checks: BoundsChecks,
    /// Whether wgpu bounds the module's loops with its hidden counter and
    /// clamps its indices: a checked module, unless
    /// [`LoopBounding::Unproven`] and the proofs show both add nothing
    /// (every loop counted, [`super::termination`]; every index outside a
    /// buffer in range, with the driver bounding buffers,
    /// [`super::indices`]).
    pub loops_bounded: bool,
}

/// Compiled pipelines of one device.
#[derive(Debug, Default)]
pub struct PipelineCache {
    pipelines: HashMap<(KernelId, WgpuCompilationOptions), Arc<CachedPipeline>>,
}

impl PipelineCache {
    /// The cached pipeline of `kernel`, if compiled: the launch path's hit.
    pub fn get(
        &self,
        kernel: KernelId,
        options: &WgpuCompilationOptions,
    ) -> Option<&Arc<CachedPipeline>> {
        self.pipelines.get(&(kernel, *options))
    }

    /// Number of cached pipelines.
    pub fn len(&self) -> usize {
        self.pipelines.len()
    }

    /// Number of cached pipelines that kept wgpu's loop counter.
    #[cfg(feature = "testing")]
    pub fn with_bounded_loops(&self) -> usize {
        self.pipelines.values().filter(|p| p.loops_bounded).count()
    }

    /// The pipeline of `kernel`, compiling it on a miss.
    pub fn get_or_compile<C: WgpuCompiler>(
        &mut self,
        compiler: &mut C,
        kernel: &dyn CubeKernel,
        options: &WgpuCompilationOptions,
        caps: &DeviceCaps,
        device: &wgpu::Device,
        logger: &ServerLogger,
    ) -> Result<Arc<CachedPipeline>, ServerError> {
        let key = (kernel.id(), *options);
        if let Some(p) = self.pipelines.get(&key) {
            return Ok(Arc::clone(p));
        }
        let started = std::time::Instant::now();
        let compiled = compiler.compile(kernel, options, caps)?;
        let name = compiled.name.clone();
        let as_compile_error = |e: ServerError| match e {
            ServerError::Validation { message } => ServerError::Compilation {
                kernel: name.clone(),
                diagnostic: message,
            },
            other => other,
        };
        let (module, info, sizes) = checked_module(&compiled)?;
        let bounds_checks = compiled.bounds_checks.unwrap_or(options.bounds_checks);
        // Both proofs or neither: without the counter, NVIDIA's compiler
        // unrolls, and index clamps in unrolled code took it 22 s where it
        // took 0.8 s without them (cubek's matmuls, docs/burn.md).
        let why = match bounds_checks {
            BoundsChecks::Unchecked => None,
            _ if options.loop_bounding == LoopBounding::Every => Some("asked for".to_string()),
            _ => unproven(&module, &info, caps.driver_bounds_buffers),
        };
        let loops_bounded = why.is_some();
        let checks = Checks {
            bounds: bounds_checks,
            loops_bounded,
        };
        let (pipeline, bind_group_layout) =
            create_pipeline(device, &compiled, module, &sizes, checks).map_err(as_compile_error)?;
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let cached = Arc::new(CachedPipeline {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            pipeline,
            bind_group_layout,
            layout: compiled.layout,
            sizes,
            name: compiled.name,
            bounds_checks,
            loops_bounded,
        });
        logger.log(LogCategory::Compile, LogLevel::Basic, || {
            format!(
                "compiled `{}` ({:?}) in {:?}, {:?}{}{}",
                cached.name,
                kernel.id(),
                started.elapsed(),
                cached.bounds_checks,
                match (cached.bounds_checks, cached.loops_bounded) {
                    (BoundsChecks::Unchecked, _) => String::new(),
                    (_, true) => format!(
                        ", loops bounded, indices clamped ({})",
                        why.as_deref().unwrap_or("")
                    ),
                    (_, false) => ", loops and indices proven".to_string(),
                },
                if options.bounds_checks == BoundsChecks::Reported
                    && cached.bounds_checks == BoundsChecks::Checked
                {
                    " (not Reported: the kernel cannot report, its accesses are clamped)"
                } else {
                    ""
                }
            )
        });
        self.pipelines.insert(key, Arc::clone(&cached));
        Ok(cached)
    }
}

/// What a module's bindings accept: WebGPU's minimum binding sizes, which
/// wgpu would otherwise check only at dispatch, inside an encoder, and the
/// element type each storage binding declares (checked against typed
/// slices).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BindingSizes {
    /// Per storage binding, in order.
    pub storage: Vec<u64>,
    /// Per storage binding, its array's element type where it has one.
    pub elems: Vec<Option<compute_runtime::DType>>,
    /// The uniform block's size (0 without one).
    pub uniform: u64,
}

/// Parses the compiled source with naga, checks the backend's layout
/// against the module (a layout is never believed), and makes every storage
/// binding writable (see `compute_wgsl::make_storage_writable`).
fn checked_module(
    compiled: &CompiledKernel,
) -> Result<(naga::Module, naga::valid::ModuleInfo, BindingSizes), ServerError> {
    let (mut module, info) = validate_wgsl_with_info(&compiled.name, &compiled.source)?;
    let mismatch = |reason: String| ServerError::LayoutMismatch {
        kernel: compiled.name.clone(),
        reason,
    };
    let interface = module_interface(&module, &compiled.entry_point).map_err(mismatch)?;
    check_layout(&compiled.layout, &interface).map_err(mismatch)?;
    make_storage_writable(&mut module);
    let sizes = BindingSizes {
        storage: interface.storage.iter().map(|b| b.min_size).collect(),
        elems: interface.storage.iter().map(|b| b.elem).collect(),
        uniform: interface.uniform_size.unwrap_or(0),
    };
    Ok((module, info, sizes))
}

fn bind_group_layout(
    device: &wgpu::Device,
    layout: &KernelLayout,
    sizes: &BindingSizes,
) -> wgpu::BindGroupLayout {
    let mut entries: Vec<wgpu::BindGroupLayoutEntry> = layout
        .bindings
        .iter()
        .enumerate()
        // Every storage binding is read-write (the `CompiledKernel`
        // contract): a read-only and a read-write binding of one page in one
        // dispatch would be a usage conflict.
        .map(|(i, _access)| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: sizes
                    .storage
                    .get(i)
                    .copied()
                    .and_then(wgpu::BufferSize::new),
            },
            count: None,
        })
        .collect();
    if layout.scalars {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: layout.bindings.len() as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: wgpu::BufferSize::new(sizes.uniform),
            },
            count: None,
        });
    }
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &entries,
    })
}

/// The pipeline and bind group layout of a compiled, validated module, in
/// an error scope (what wgpu refuses is an error, never a panic).
///
/// A panic inside wgpu's shader translation is a [`ServerError::Compilation`]
/// too ([`without_panics`]: naga 30's SPIR-V writer panics on a
/// `coopStoreT` whose stride or index is an inline expression). Unwinding
/// releases wgpu's lock guards and drops what the call made so far; the
/// GPU test `a_translation_panic_is_a_compilation_error` launches a good
/// kernel on the same server afterwards.
fn create_pipeline(
    device: &wgpu::Device,
    compiled: &CompiledKernel,
    module: naga::Module,
    sizes: &BindingSizes,
    checks: Checks,
) -> Result<(wgpu::ComputePipeline, wgpu::BindGroupLayout), ServerError> {
    scoped(device, || {
        without_panics(&compiled.name, "wgpu's shader translation", || {
            build_pipeline(device, compiled, module, sizes, checks)
        })
    })?
}

/// Why `module` keeps wgpu's loop counter and index clamps: the proof that
/// failed (every loop ends, `termination.rs`; every index outside a buffer
/// is in range, `indices.rs`), or `None` where both hold. The compile log
/// line says it (`COMPUTE_LOG=compile=basic`).
fn unproven(module: &naga::Module, info: &naga::valid::ModuleInfo, robust: bool) -> Option<String> {
    if !super::termination::every_loop_counted(module) {
        return Some("a loop the termination proof cannot count".into());
    }
    super::indices::first_unbounded(module, info, robust).map(|u| format!("{u}"))
}

/// The run-time checks a module is built with.
#[derive(Clone, Copy, Debug)]
struct Checks {
    bounds: BoundsChecks,
    /// wgpu's loop counter and index clamps; off only where the proofs
    /// show they add nothing.
    loops_bounded: bool,
}

fn build_pipeline(
    device: &wgpu::Device,
    compiled: &CompiledKernel,
    module: naga::Module,
    sizes: &BindingSizes,
    checks: Checks,
) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
    let bgl = bind_group_layout(device, &compiled.layout, sizes);
    // A reporting kernel's slot is group 1 (`stream/reports.rs`).
    let report = compiled.layout.reports.then(|| report_layout(device));
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(&compiled.name),
        bind_group_layouts: &[Some(&bgl), report.as_ref()],
        immediate_size: 0,
    });
    let source = wgpu::ShaderModuleDescriptor {
        label: Some(&compiled.name),
        source: wgpu::ShaderSource::Naga(std::borrow::Cow::Owned(module)),
    };
    let module = match checks.bounds {
        BoundsChecks::Checked | BoundsChecks::Reported if checks.loops_bounded => {
            device.create_shader_module(source)
        }
        // SAFETY: every check stays but the loop counter, which guards
        // against a loop that never ends, and the bounds checks: `termination`
        // proved that every loop of this module ends, `indices` that every
        // index outside a buffer is in range, and the driver bounds buffer
        // accesses (wgpu leaves them to it on such a device anyway).
        BoundsChecks::Checked | BoundsChecks::Reported => unsafe {
            let mut runtime = wgpu::ShaderRuntimeChecks::checked();
            runtime.force_loop_bounding = false;
            runtime.bounds_checks = false;
            device.create_shader_module_trusted(source, runtime)
        },
        // SAFETY: the caller chose unchecked accesses (options or the
        // kernel's own policy); the kernel's memory safety is then the
        // caller's contract (`Server::launch` is unsafe for this reason).
        BoundsChecks::Unchecked => unsafe {
            device.create_shader_module_trusted(source, wgpu::ShaderRuntimeChecks::unchecked())
        },
    };
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&compiled.name),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some(&compiled.entry_point),
        compilation_options: Default::default(),
        cache: None,
    });
    (pipeline, bgl)
}
