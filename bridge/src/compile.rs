//! cubecl kernels as WGSL kernels of this server, through SPIR-V.
//!
//! cubecl-spirv's public `SpirvCompiler` turns a cubecl kernel into SPIR-V
//! and says what the kernel does with each buffer (`BufferIOAttr`). Its
//! buffers are device addresses, which the bridge rewrites into descriptor
//! bindings (`spirv/`), with the workarounds for what naga misreads, and
//! checks every instruction left against an allowlist of what naga's
//! front end reads right (`spirv/allow.rs`: anything else fails the
//! compilation); naga's SPIR-V front end reads the result, every
//! buffer the kernel never writes is declared read-only on the module's
//! globals (so a launch that fails poisons only what it would have
//! written), and naga's WGSL back end writes the text the server gets.
//!
//! The interface the server is told (binding count and access, workgroup
//! size) is read back from the final text with naga, through the server's
//! own `module_interface`, so it cannot disagree with the module: the
//! server checks it again before any pipeline exists.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cubecl_core::WgpuCompilationOptions;
use cubecl_ir::DeviceProperties;
use cubecl_ir::attributes::BufferIOAttr;
use cubecl_runtime::compiler::{CompilationError, Compiler};
use cubecl_runtime::id::KernelId;
use cubecl_runtime::kernel::{CubeKernel, define_kernel};
use cubecl_runtime::server::{LaunchError, ServerError};
use cubecl_server::validation::{validate_cube_dim, validate_shared_memory, validate_units};
use cubecl_spirv::{SpirvCompiler, SpirvKernel};
use rspirv::binary::{Assemble, Disassemble};
use wgpu_server::WgslKernel;
use wgpu_server::runtime::ServerError as Inner;
use wgpu_server::wgsl::{module_interface, validate_wgsl};

/// A cubecl kernel compiled for this server.
#[derive(Debug)]
pub struct Compiled {
    /// The server's kernel: WGSL text and its checked interface.
    pub kernel: WgslKernel,
    /// What the kernel does with each of its buffers (`None` for
    /// hand-written WGSL, which says nothing: every buffer is then both
    /// read and written, cubecl's conservative reading).
    pub io: Option<Vec<BufferIOAttr>>,
    /// The storage bindings the module declares, cubecl's metadata included.
    pub bindings: usize,
    /// The smallest binding the metadata struct accepts, when the module
    /// declares one (the binding after the kernel's own buffers).
    pub info_min: Option<u64>,
}

/// Compiled kernels by cubecl's kernel id (which covers the cube size,
/// the execution mode and the metadata layout).
#[derive(Debug, Default)]
pub struct Kernels {
    cache: HashMap<KernelId, Arc<Compiled>>,
    options: WgpuCompilationOptions,
}

impl Kernels {
    /// Kernels compiled with `options`.
    pub fn new(options: WgpuCompilationOptions) -> Self {
        Self {
            cache: HashMap::new(),
            options,
        }
    }

    /// `kernel`, compiled once. A failure is not cached: a later launch
    /// tries again and fails the same way, as its own failure.
    pub fn get(
        &mut self,
        kernel: &dyn CubeKernel,
        props: &DeviceProperties,
    ) -> Result<Arc<Compiled>, Inner> {
        let id = kernel.id();
        if let Some(compiled) = self.cache.get(&id) {
            return Ok(compiled.clone());
        }
        let compiled = Arc::new(compile(kernel, props, &self.options)?);
        self.cache.insert(id, compiled.clone());
        Ok(compiled)
    }
}

/// cubecl's error as this server's, kept whole for the reads that will
/// report it (see [`crate::errors::keep`]).
fn from_cubecl(kernel: &str, error: impl Into<LaunchError>) -> Inner {
    crate::errors::keep(kernel, ServerError::Launch(error.into()))
}

fn compile(
    kernel: &dyn CubeKernel,
    props: &DeviceProperties,
    options: &WgpuCompilationOptions,
) -> Result<Compiled, Inner> {
    let name = kernel.name();
    let id = kernel.id();
    let limits = |e: LaunchError| from_cubecl(name, e);
    validate_cube_dim(props, &id).map_err(limits)?;
    validate_units(props, &id).map_err(limits)?;
    let definition = define_kernel(kernel).map_err(|e| from_cubecl(name, e))?;
    // A hand-written kernel carries its WGSL: it goes to the server as is
    // (`io: None`, every buffer read and written).
    let (source, io, buffers) = match kernel.source() {
        Some(pre) if pre.lang == "wgsl" => (pre.source, None, None),
        Some(pre) => {
            let error = CompilationError::Generic {
                reason: format!(
                    "kernel `{name}` carries {} source, but this runtime expects wgsl",
                    pre.lang
                ),
                backtrace: cubecl_environment::backtrace::BackTrace::capture(),
            };
            return Err(from_cubecl(name, error));
        }
        None => {
            // The compiler's passes assert on malformed IR; a panic here
            // would be caught by cubecl's device thread and only logged,
            // leaving the launch's outputs silently unwritten. It fails
            // the launch instead.
            let mut compiler = SpirvCompiler;
            let repr = catch_unwind(AssertUnwindSafe(|| compiler.compile(definition, options)))
                .map_err(|panic| {
                    let error = CompilationError::ExpansionPanicked {
                        kernel: name.to_string(),
                        message: format!("the SPIR-V compiler panicked: {}", panic_text(&*panic)),
                        backtrace: cubecl_environment::backtrace::BackTrace::capture(),
                    };
                    from_cubecl(name, error)
                })?
                .map_err(|e| from_cubecl(name, e))?;
            validate_shared_memory(props, Some(repr.shared_size)).map_err(limits)?;
            let source = to_wgsl(name, &repr)?;
            (source, repr.io.clone(), Some(repr.bindings.len()))
        }
    };
    let module = validate_wgsl(name, &source)?;
    // naga's WGSL writer may rename the entry point; the module has one.
    let entry = module
        .entry_points
        .first()
        .map(|e| e.name.clone())
        .unwrap_or_default();
    let interface = module_interface(&module, &entry).map_err(|reason| Inner::LayoutMismatch {
        kernel: name.to_string(),
        reason,
    })?;
    let bindings = interface.storage.len();
    // The metadata is the one binding after the kernel's buffers; text
    // without a representation (hand-written WGSL) declares its own.
    let info_min = match buffers {
        Some(n) if bindings == n + 1 => interface.storage.last().map(|s| s.min_size),
        _ => None,
    };
    let access = interface.storage.iter().map(|s| s.access).collect();
    let mut kernel = WgslKernel::new(
        entry.as_str(),
        source,
        entry.as_str(),
        interface.workgroup_size,
        access,
    );
    if unchecked() {
        kernel = kernel.with_bounds_checks(wgpu_server::BoundsChecks::Unchecked);
    }
    Ok(Compiled {
        kernel,
        io,
        bindings,
        info_min,
    })
}

/// Set to a directory to have each kernel's SPIR-V (as rewritten, or as
/// compiled when the rewrite or the allowlist refuses it; text, and binaries
/// of both) and its WGSL written there, one file set per distinct module.
const DUMP_ENV: &str = "CUBECL_BRIDGE_SPIRV_DUMP";

/// Set (to anything) to compile every kernel without wgpu's run-time
/// checks (no index clamping, no loop bounding): UNSAFE, an out-of-bounds
/// access is then undefined. For measuring what the checks cost (the
/// burn training step on the H100, docs/burn.md), never a default.
const UNCHECKED_ENV: &str = "CUBECL_BRIDGE_UNSAFE_UNCHECKED";

fn unchecked() -> bool {
    static SET: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SET.get_or_init(|| std::env::var_os(UNCHECKED_ENV).is_some())
}

/// cubecl-spirv's kernel as WGSL: the device addresses rewritten into
/// bindings ([`crate::spirv::descriptors`]) and every instruction checked
/// against the allowlist ([`crate::spirv::allow`]), parsed by naga's SPIR-V
/// front end, every buffer the kernel never writes (and the metadata) declared
/// read-only on the module's globals, validated, written as WGSL.
fn to_wgsl(name: &str, repr: &SpirvKernel) -> Result<String, Inner> {
    let fail = |stage: &str, e: String| Inner::Compilation {
        kernel: name.to_string(),
        diagnostic: format!("{stage}: {e}"),
    };
    let dump = std::env::var_os(DUMP_ENV).map(std::path::PathBuf::from);
    // One file set per distinct module: a kernel name covers many
    // variants (element types, vector sizes, cube sizes).
    let variant = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        repr.assembled_module.hash(&mut h);
        h.finish()
    };
    let file = |ext: &str| {
        let safe: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(120)
            .collect();
        dump.as_ref()
            .map(|d| d.join(format!("{safe}-{variant:016x}.{ext}")))
    };
    let original = repr
        .module
        .as_deref()
        .cloned()
        .or_else(|| rspirv::dr::load_words(&repr.assembled_module).ok())
        .ok_or_else(|| fail("spirv", "no module".into()))?;
    // The rewrite ends with the allowlist: what is left is read right by
    // naga's front end, or the kernel does not compile.
    let rewritten = match crate::spirv::for_naga(&original) {
        Ok(m) => m,
        Err(e) => {
            if let Some(f) = file("orig.spvasm") {
                let _ = std::fs::write(f, original.disassemble());
            }
            return Err(Inner::Compilation {
                kernel: name.to_string(),
                diagnostic: e,
            });
        }
    };
    if let Some(f) = file("spvasm") {
        let _ = std::fs::write(f, rewritten.disassemble());
    }
    let words = rewritten.assemble();
    // The binaries too, for `examples/compile_probe.rs` to hand the driver
    // cubecl's own SPIR-V (before and after the rewrite) beside naga's.
    if let (Some(spv), Some(orig)) = (file("spv"), file("orig.spv")) {
        let before = original.assemble();
        for (f, module) in [(spv, &words), (orig, &before)] {
            let bytes: Vec<u8> = module.iter().flat_map(|w| w.to_le_bytes()).collect();
            let _ = std::fs::write(f, bytes);
        }
    }
    let options = naga::front::spv::Options {
        adjust_coordinate_space: false,
        strict_capabilities: false,
        block_ctx_dump_prefix: None,
    };
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        naga::front::spv::Frontend::new(words.iter().copied(), &options).parse()
    }))
    .map_err(|p| fail("naga spv-in panicked", panic_text(&*p)))?;
    let mut module = parsed.map_err(|e| fail("naga spv-in", error_chain(&e)))?;
    let buffers = repr.bindings.len();
    for (_, var) in module.global_variables.iter_mut() {
        let (Some(binding), naga::AddressSpace::Storage { access }) =
            (&var.binding, &mut var.space)
        else {
            continue;
        };
        let index = binding.binding as usize;
        let writable = match repr.io.as_deref() {
            Some(io) if index < buffers => io.get(index).is_none_or(|a| a.is_writable()),
            None if index < buffers => true,
            _ => false, // the metadata
        };
        *access = if writable {
            naga::StorageAccess::LOAD | naga::StorageAccess::STORE
        } else {
            naga::StorageAccess::LOAD
        };
    }
    let info = catch_unwind(AssertUnwindSafe(|| {
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .map_err(|e| error_chain(&e))
    }))
    .map_err(|p| fail("naga validation panicked", panic_text(&*p)))?
    .map_err(|e| fail("naga validation of the SPIR-V module", e))?;
    let wgsl = catch_unwind(AssertUnwindSafe(|| {
        naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
    }))
    .map_err(|p| fail("naga wgsl-out panicked", panic_text(&*p)))?
    .map_err(|e| fail("naga wgsl-out", error_chain(&e)))?;
    if let Some(f) = file("wgsl") {
        let _ = std::fs::write(f, &wgsl);
    }
    Ok(wgsl)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}
