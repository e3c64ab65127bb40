//! # cubecl-wgpu (this project's)
//!
//! A drop-in for the crate `cubecl-wgpu` 0.12.0-pre.1: the name, version
//! and public surface cubecl and burn use, over this project's wgpu server
//! (the runtime of `cubecl-bridge`: kernels through cubecl-spirv and naga,
//! the server's memory pools, stream ordering and trust rules). A program
//! swaps it in with one line of its `Cargo.toml`:
//!
//! ```toml
//! [patch.crates-io]
//! cubecl-wgpu = { path = "path/to/this/repository/bridge/cubecl-wgpu" }
//! ```
//!
//! and everything that reached wgpu through cubecl (burn's `Wgpu` backend,
//! `cubecl::Device::wgpu`, cubecl's own tests) runs on this server
//! (docs/burn.md).
//!
//! What this crate owns: the names ([`WgpuRuntime`], the setup functions,
//! [`RuntimeOptions`], the [`graphics`] APIs), how a `WgpuDevice` selects
//! an adapter (the bridge's `device` module) and how a setup becomes a
//! registered server. What it leaves to the bridge: everything a server
//! does.

mod graphics;
mod runtime;
mod setup;

pub use cubecl_bridge::{BridgeServer as WgpuServer, BridgeStorage as WgpuStorage};
pub use cubecl_runtime::device::{WgpuBackend, WgpuDevice, WgpuDeviceKind};
pub use cubecl_runtime::memory_management::MemoryConfiguration;
pub use graphics::{AutoGraphicsApi, Dx12, GraphicsApi, Metal, OpenGl, Vulkan, WebGpu};
pub use runtime::{AutoCompiler, WgpuCompiler, WgpuRuntime};
pub use setup::{
    RuntimeOptions, TASKS_ENV, WgpuInitError, WgpuSetup, init_device, init_device_with_api,
    init_setup, init_setup_async, try_init_device, try_init_device_with_api, try_init_setup,
    try_init_setup_async,
};
/// The exact wgpu this runtime's handles belong to.
pub use wgpu;
/// The buffer and byte range behind a binding (`get_resource`).
pub use wgpu_server::WgpuResource;

/// The wgpu backend a pinned selection stands for (`None` for `Auto`).
fn graphics_backend(backend: WgpuBackend) -> Option<wgpu::Backend> {
    match backend {
        WgpuBackend::Auto => None,
        WgpuBackend::Vulkan => Some(wgpu::Backend::Vulkan),
        WgpuBackend::Metal => Some(wgpu::Backend::Metal),
        WgpuBackend::Dx12 => Some(wgpu::Backend::Dx12),
        WgpuBackend::Gl => Some(wgpu::Backend::Gl),
        WgpuBackend::WebGpu => Some(wgpu::Backend::BrowserWebGpu),
    }
}
