//! cubecl kernels as WGSL kernels of this server.
//!
//! cubecl-wgpu's public `WgslCompiler` turns a cubecl kernel into WGSL text
//! and says what the kernel does with each buffer (`BufferIOAttr`). Its
//! text declares every buffer `read_write` (cubecl-wgpu shares pages
//! between tensors and binds everything writable); this server reads a
//! kernel's write set from the declared access, so the bridge declares
//! each buffer the kernel never writes `read` again. A launch that fails
//! then poisons only what it would have written, not its inputs. (The
//! server still binds every buffer `read_write` in the pipeline layout,
//! its invariant 7; the declaration is what it believes for trust.)
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
use cubecl_runtime::compiler::CompilationError;
use cubecl_runtime::id::KernelId;
use cubecl_runtime::kernel::{CubeKernel, define_kernel};
use cubecl_runtime::server::{LaunchError, ServerError};
use cubecl_server::kernel::CompiledKernel;
use cubecl_server::validation::{validate_cube_dim, validate_shared_memory, validate_units};
use cubecl_wgpu::WgslCompiler;
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
    // The compiler's passes assert on malformed IR; a panic here would be
    // caught by cubecl's device thread and only logged, leaving the
    // launch's outputs silently unwritten. It fails the launch instead.
    let mut compiler = WgslCompiler;
    let compiled = catch_unwind(AssertUnwindSafe(|| {
        CompiledKernel::<WgslCompiler>::compile(kernel, definition, &mut compiler, options)
    }))
    .map_err(|panic| {
        let error = CompilationError::ExpansionPanicked {
            kernel: name.to_string(),
            message: format!("the WGSL compiler panicked: {}", panic_text(&*panic)),
            backtrace: cubecl_environment::backtrace::BackTrace::capture(),
        };
        from_cubecl(name, error)
    })?
    .map_err(|e| from_cubecl(name, e))?;
    let shared = compiled.repr.as_ref().map(|repr| repr.shared_memory_size);
    validate_shared_memory(props, shared).map_err(limits)?;
    let entry = compiled.entrypoint_name.clone();
    let source = declare_access(&compiled.source, compiled.io.as_deref());
    let module = validate_wgsl(name, &source)?;
    let interface = module_interface(&module, &entry).map_err(|reason| Inner::LayoutMismatch {
        kernel: name.to_string(),
        reason,
    })?;
    let buffers = compiled.repr.as_ref().map(|repr| repr.buffers.len());
    let bindings = interface.storage.len();
    // The metadata is the one binding after the kernel's buffers; text
    // without a representation (hand-written WGSL) declares its own.
    let info_min = match buffers {
        Some(n) if bindings == n + 1 => interface.storage.last().map(|s| s.min_size),
        _ => None,
    };
    let access = interface.storage.iter().map(|s| s.access).collect();
    let kernel = WgslKernel::new(
        entry.as_str(),
        source,
        entry.as_str(),
        interface.workgroup_size,
        access,
    );
    Ok(Compiled {
        kernel,
        io: compiled.io,
        bindings,
        info_min,
    })
}

/// `source` with every buffer `io` says the kernel never writes declared
/// `read`. Only cubecl's own declarations (`@group(0) @binding(i)
/// var<storage, read_write>`, one per line) are touched.
fn declare_access(source: &str, io: Option<&[BufferIOAttr]>) -> String {
    let Some(io) = io else {
        return source.to_string();
    };
    let mut out = String::with_capacity(source.len());
    for line in source.split_inclusive('\n') {
        let read_only = line
            .strip_prefix("@group(0) @binding(")
            .and_then(|rest| rest.split_once(')'))
            .and_then(|(index, _)| index.parse::<usize>().ok())
            .and_then(|index| io.get(index))
            .is_some_and(|attr| !attr.is_writable());
        if read_only {
            out.push_str(&line.replacen("var<storage, read_write>", "var<storage, read>", 1));
        } else {
            out.push_str(line);
        }
    }
    out
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_buffers_are_declared_read() {
        let src = "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n\
                   @group(0) @binding(1) var<storage, read_write> b: array<f32>;\n\
                   @group(0) @binding(2) var<storage, read> info_var: info_st;\n";
        let io = [BufferIOAttr::ReadOnly, BufferIOAttr::WriteOnly];
        let out = declare_access(src, Some(&io));
        assert!(out.contains("@binding(0) var<storage, read> a"));
        assert!(out.contains("@binding(1) var<storage, read_write> b"));
        assert!(out.contains("@binding(2) var<storage, read> info_var"));
        assert_eq!(declare_access(src, None), src);
    }
}
