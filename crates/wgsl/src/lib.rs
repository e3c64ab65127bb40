//! # compute-wgsl
//!
//! Compiler backends for the wgpu server. A backend turns a
//! [`compute_runtime::CubeKernel`] into a [`CompiledKernel`]: WGSL text that
//! naga has parsed and validated, its entry point, workgroup size and binding
//! layout. The server turns that into a pipeline; the backend never sees the
//! server, only the kernel, the [`WgpuCompilationOptions`] and the device's
//! [`DeviceCaps`].
//!
//! **Owns:** the [`WgpuCompiler`] trait, the IR backend ([`IrCompiler`]:
//! `compute_ir` kernels to WGSL), the pass-through backend
//! ([`WgslPassthrough`], for callers who hand WGSL source) and naga
//! validation with diagnostics a person can read.
//!
//! **Leaves to the server:** shader modules, pipelines, caching, dispatch.
//! A third party adds a backend by implementing [`WgpuCompiler`] for its own
//! kernel type; nothing here or in the server changes.

mod compiler;
pub mod ir;
mod passthrough;
mod reflect;
mod validate;

pub use compiler::{
    BindingAccess, BoundsChecks, CompiledKernel, DeviceCaps, KernelLayout, WgpuCompilationOptions,
    WgpuCompiler,
};
pub use ir::IrCompiler;
pub use passthrough::{WgslKernel, WgslPassthrough};
pub use reflect::{ModuleInterface, StorageInterface, module_interface};
pub use validate::{validate_wgsl, writable_storage};
