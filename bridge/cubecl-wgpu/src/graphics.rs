//! The graphics APIs a device may be pinned to, as types: what the
//! `init_*` functions take to say which API a setup comes up on.

use crate::{WgpuBackend, WgpuDevice};

/// A graphics API wgpu drives. `backend_for` is the selection a device
/// gets under it: a named API pins its own backend; [`AutoGraphicsApi`]
/// keeps the device's (`Auto` when the device pins none).
pub trait GraphicsApi: Send + Sync + core::fmt::Debug + Default + Clone + 'static {
    /// The wgpu backend of this API.
    fn backend() -> wgpu::Backend;

    /// The selection for `device` under this API.
    fn backend_for(_device: &WgpuDevice) -> WgpuBackend {
        selection(Self::backend())
    }
}

/// `backend` as a device's backend selection (`Noop`, which no device
/// selects, as `Auto`).
fn selection(backend: wgpu::Backend) -> WgpuBackend {
    match backend {
        wgpu::Backend::Vulkan => WgpuBackend::Vulkan,
        wgpu::Backend::Metal => WgpuBackend::Metal,
        wgpu::Backend::Dx12 => WgpuBackend::Dx12,
        wgpu::Backend::Gl => WgpuBackend::Gl,
        wgpu::Backend::BrowserWebGpu => WgpuBackend::WebGpu,
        wgpu::Backend::Noop => WgpuBackend::Auto,
    }
}

macro_rules! api {
    ($(#[$doc:meta])* $name:ident => $backend:ident) => {
        $(#[$doc])*
        #[derive(Default, Debug, Clone)]
        pub struct $name;

        impl GraphicsApi for $name {
            fn backend() -> wgpu::Backend {
                wgpu::Backend::$backend
            }
        }
    };
}

api!(
    /// Vulkan.
    Vulkan => Vulkan
);
api!(
    /// Metal.
    Metal => Metal
);
api!(
    /// OpenGL (and GLES).
    OpenGl => Gl
);
api!(
    /// DirectX 12.
    Dx12 => Dx12
);
api!(
    /// WebGPU, in a browser.
    WebGpu => BrowserWebGpu
);

/// Whatever API the device pins, else the one the server ranks first here.
#[derive(Default, Debug, Clone)]
pub struct AutoGraphicsApi;

impl GraphicsApi for AutoGraphicsApi {
    /// The backend of the adapter the server ranks first (Vulkan where no
    /// adapter answers: the error is then the setup's own).
    fn backend() -> wgpu::Backend {
        wgpu_server::adapter::adapters()
            .first()
            .map_or(wgpu::Backend::Vulkan, |a| a.get_info().backend)
    }

    fn backend_for(device: &WgpuDevice) -> WgpuBackend {
        device.backend
    }
}
