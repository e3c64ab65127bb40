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
//! ([`WgslPassthrough`], for callers who hand WGSL source), the
//! [`DefaultCompiler`] that takes both on one server, and naga validation
//! with diagnostics a person can read.
//!
//! **Leaves to the server:** the device, shader modules, pipelines, caching,
//! dispatch. This crate names no wgpu object: the device is described by
//! `wgpu-types`' `Limits` and `Features` (the types `wgpu` re-exports, so
//! the server passes `device.limits()` straight in), and WGSL is checked
//! with naga. **Leaves to `compute-ir`:** what an IR kernel means. The IR
//! backend translates it without evaluating any of it, so the IR's
//! interpreter stays an independent oracle for the emitted code.
//!
//! A third party adds a backend by implementing [`WgpuCompiler`] for its own
//! kernel type; nothing here or in the server changes.

mod compiler;
mod default;
pub mod ir;
mod passthrough;
mod reflect;
mod scalars;
mod validate;

pub use compiler::{
    BindingAccess, BoundsChecks, CompiledKernel, DeviceCaps, KernelLayout, LoopBounding,
    REPORT_BYTES, REPORT_GROUP, REPORT_LOCAL_BIT, REPORT_PRESENT_BIT, REPORT_SHARED_BIT,
    REPORT_VECTOR_BIT, WgpuCompilationOptions, WgpuCompiler,
};
pub use default::DefaultCompiler;
pub use ir::IrCompiler;
pub use passthrough::{WgslKernel, WgslPassthrough};
pub use reflect::{ModuleInterface, StorageInterface, check_layout, module_interface};
pub use validate::{make_storage_writable, validate_wgsl, validate_wgsl_with_info, without_panics};
