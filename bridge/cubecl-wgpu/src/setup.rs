//! Setting a device up before its first use: options, a setup of wgpu
//! handles, and registering a device the caller opened.
//!
//! Without any of this a device is opened on its first client, with the
//! server's defaults. `init_setup` opens it now with [`RuntimeOptions`] and
//! hands back its wgpu handles; `init_device` registers handles the caller
//! made (sharing a wgpu device with another component) under a new
//! `WgpuDeviceKind::Existing` device.

use std::sync::atomic::{AtomicU32, Ordering};

use cubecl_bridge::BridgeServer;
use cubecl_common::device::Device as _;
use cubecl_runtime::client::Client;
use wgpu_server::WgpuServerOptions;
use wgpu_server::runtime::MemoryConfiguration as ServerMemory;

use crate::graphics::{AutoGraphicsApi, GraphicsApi};
use crate::{MemoryConfiguration, WgpuBackend, WgpuDevice, WgpuDeviceKind};

/// Why a device could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WgpuInitError {
    /// The options or the setup do not fit together.
    #[error("invalid wgpu configuration: {message}")]
    InvalidConfiguration {
        /// What does not fit.
        message: String,
    },
    /// This build cannot drive the graphics API asked for.
    #[error("graphics API {api:?} is unavailable in this build")]
    UnsupportedGraphicsApi {
        /// The API asked for.
        api: WgpuBackend,
    },
    /// No adapter answers the device.
    #[error("no adapter available for {device:?}: {message}")]
    AdapterUnavailable {
        /// The device asked for.
        device: WgpuDevice,
        /// Why.
        message: String,
    },
    /// The adapter would not give a device, or the server could not start
    /// on it.
    #[error("unable to request a wgpu device: {message}")]
    RequestDevice {
        /// The server's error.
        message: String,
    },
    /// The device is registered already (it was used, or set up, before).
    #[error("unable to register the wgpu runtime: {message}")]
    Registration {
        /// cubecl's error.
        message: String,
    },
}

/// How a device's server runs.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Tasks a stream encodes before it submits (the server's `tasks_max`).
    pub tasks_max: usize,
    /// How the server lays out device memory: `Adaptive` is the server's
    /// own pools, `ExclusivePages` a buffer per allocation.
    pub memory_config: MemoryConfiguration,
}

/// The variable upstream cubecl-wgpu reads `tasks_max` from, honoured here
/// too so a program tuned for it keeps its setting.
pub const TASKS_ENV: &str = "CUBECL_WGPU_MAX_TASKS";

impl Default for RuntimeOptions {
    /// [`try_default`](Self::try_default).
    ///
    /// # Panics
    ///
    /// When [`TASKS_ENV`] holds something other than a positive integer
    /// (as upstream's does).
    fn default() -> Self {
        match Self::try_default() {
            Ok(options) => options,
            Err(e) => panic!("invalid wgpu runtime defaults: {e}"),
        }
    }
}

impl RuntimeOptions {
    /// `tasks_max` from [`TASKS_ENV`], else the server's default (its own
    /// `WGPU_SERVER_TASKS_MAX`, else `wgpu_server::DEFAULT_TASKS_MAX`);
    /// memory as the server lays it out by default.
    pub fn try_default() -> Result<Self, WgpuInitError> {
        Self::with_tasks_max(None)
    }

    /// These options with `tasks_max`, or the default one.
    pub fn with_tasks_max(tasks_max: Option<usize>) -> Result<Self, WgpuInitError> {
        let tasks_max = match tasks_max {
            Some(n) => n,
            None => match std::env::var(TASKS_ENV) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map_err(|_| WgpuInitError::InvalidConfiguration {
                        message: format!("{TASKS_ENV} must be a positive integer, not {v:?}"),
                    })?,
                Err(std::env::VarError::NotPresent) => server_default_tasks(),
                Err(e) => {
                    return Err(WgpuInitError::InvalidConfiguration {
                        message: format!("{TASKS_ENV}: {e}"),
                    });
                }
            },
        };
        let options = Self {
            tasks_max,
            memory_config: MemoryConfiguration::default(),
        };
        options.validate()?;
        Ok(options)
    }

    fn validate(&self) -> Result<(), WgpuInitError> {
        if self.tasks_max == 0 {
            return Err(WgpuInitError::InvalidConfiguration {
                message: "tasks_max must be greater than zero".into(),
            });
        }
        Ok(())
    }

    /// The server's options these stand for.
    fn server(&self) -> WgpuServerOptions {
        let memory = match self.memory_config {
            MemoryConfiguration::ExclusivePages => ServerMemory::ExclusivePages,
            MemoryConfiguration::Adaptive => ServerMemory::Default,
        };
        WgpuServerOptions::new()
            .tasks_max(self.tasks_max)
            .memory(memory)
    }
}

fn server_default_tasks() -> usize {
    std::env::var(wgpu_server::TASKS_MAX_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(wgpu_server::DEFAULT_TASKS_MAX)
}

/// A device's wgpu handles.
#[derive(Clone, Debug)]
pub struct WgpuSetup {
    /// The instance the adapter came from.
    pub instance: wgpu::Instance,
    /// The adapter.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Its graphics API.
    pub backend: wgpu::Backend,
}

/// Registers `setup` (handles the caller made) as a new device.
///
/// # Panics
///
/// Where [`try_init_device`] returns an error.
pub fn init_device(setup: WgpuSetup, options: RuntimeOptions) -> WgpuDevice {
    match try_init_device(setup, options) {
        Ok(device) => device,
        Err(e) => panic!("unable to register the wgpu setup: {e}"),
    }
}

/// [`init_device`], checking that the setup runs on `G`.
///
/// # Panics
///
/// Where [`try_init_device_with_api`] returns an error.
pub fn init_device_with_api<G: GraphicsApi>(
    setup: WgpuSetup,
    options: RuntimeOptions,
) -> WgpuDevice {
    match try_init_device_with_api::<G>(setup, options) {
        Ok(device) => device,
        Err(e) => panic!("unable to register the wgpu setup: {e}"),
    }
}

/// Opens `device` on `G` now, with `options`, and returns its handles.
///
/// # Panics
///
/// Where [`try_init_setup`] returns an error.
pub fn init_setup<G: GraphicsApi>(device: &WgpuDevice, options: RuntimeOptions) -> WgpuSetup {
    match try_init_setup::<G>(device, options) {
        Ok(setup) => setup,
        Err(e) => panic!("unable to initialize the wgpu setup: {e}"),
    }
}

/// [`init_setup`], as a future (it completes at once on native targets).
///
/// # Panics
///
/// Where [`try_init_setup`] returns an error.
pub async fn init_setup_async<G: GraphicsApi>(
    device: &WgpuDevice,
    options: RuntimeOptions,
) -> WgpuSetup {
    init_setup::<G>(device, options)
}

/// [`init_device`], returning the error.
pub fn try_init_device(
    setup: WgpuSetup,
    options: RuntimeOptions,
) -> Result<WgpuDevice, WgpuInitError> {
    try_init_device_with_api::<AutoGraphicsApi>(setup, options)
}

/// [`init_device_with_api`], returning the error: the setup must run on
/// `G`'s API (any, for [`AutoGraphicsApi`]), its adapter and device must
/// agree on the API, and the device must allow compute with at least two
/// storage buffers.
pub fn try_init_device_with_api<G: GraphicsApi>(
    setup: WgpuSetup,
    options: RuntimeOptions,
) -> Result<WgpuDevice, WgpuInitError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    options.validate()?;
    let invalid = |message: String| WgpuInitError::InvalidConfiguration { message };
    let wanted = G::backend_for(&WgpuDevice::default());
    if wanted != WgpuBackend::Auto && crate::graphics_backend(wanted) != Some(setup.backend) {
        return Err(invalid(format!(
            "the setup runs on {:?}, but {wanted:?} was asked for",
            setup.backend
        )));
    }
    if setup.backend != setup.adapter.get_info().backend
        || setup.backend != setup.device.adapter_info().backend
    {
        return Err(invalid(
            "the setup's backend, adapter and device disagree on the graphics API".into(),
        ));
    }
    let limits = setup.device.limits();
    if limits.max_compute_invocations_per_workgroup == 0
        || limits.max_storage_buffers_per_shader_stage < 2
    {
        return Err(invalid(
            "the device must allow compute and at least two storage buffers".into(),
        ));
    }
    let id = NEXT
        .try_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < u32::from(u16::MAX)).then_some(n + 1)
        })
        .map_err(|_| WgpuInitError::Registration {
            message: "every id for registered devices is taken".into(),
        })?;
    let device = WgpuDevice::new(WgpuDeviceKind::Existing(id));
    register(&device, &setup, &options)?;
    Ok(device)
}

/// [`init_setup`], returning the error.
pub fn try_init_setup<G: GraphicsApi>(
    device: &WgpuDevice,
    options: RuntimeOptions,
) -> Result<WgpuSetup, WgpuInitError> {
    options.validate()?;
    if matches!(device.kind, WgpuDeviceKind::Existing(_)) {
        return Err(WgpuInitError::InvalidConfiguration {
            message: "an Existing device names a registered setup, not an adapter".into(),
        });
    }
    let wanted = G::backend_for(device);
    if device.backend != WgpuBackend::Auto && device.backend != wanted {
        return Err(WgpuInitError::InvalidConfiguration {
            message: format!("{device:?} cannot be set up on {wanted:?}"),
        });
    }
    let selected = device.clone().on(wanted);
    let rank = cubecl_bridge::device::pick(&selected, &cubecl_bridge::device::adapters()).map_err(
        |e| WgpuInitError::AdapterUnavailable {
            device: device.clone(),
            message: e.to_string(),
        },
    )?;
    let (adapter, wgpu_device, queue) =
        wgpu_server::adapter::open(wgpu_server::runtime::DeviceId(rank as u64), false).map_err(
            |e| WgpuInitError::RequestDevice {
                message: e.to_string(),
            },
        )?;
    let backend = adapter.get_info().backend;
    let setup = WgpuSetup {
        instance: wgpu_server::adapter::instance(wgpu::Backends::from(backend)),
        adapter,
        device: wgpu_device,
        queue,
        backend,
    };
    register(device, &setup, &options)?;
    Ok(setup)
}

/// [`try_init_setup`], as a future (it completes at once on native
/// targets).
pub async fn try_init_setup_async<G: GraphicsApi>(
    device: &WgpuDevice,
    options: RuntimeOptions,
) -> Result<WgpuSetup, WgpuInitError> {
    try_init_setup::<G>(device, options)
}

/// A server on `setup` with `options`, registered as `device`'s.
fn register(
    device: &WgpuDevice,
    setup: &WgpuSetup,
    options: &RuntimeOptions,
) -> Result<(), WgpuInitError> {
    let server = BridgeServer::from_parts(
        device.to_id(),
        &setup.adapter,
        setup.device.clone(),
        setup.queue.clone(),
        options.server(),
    )
    .map_err(|e| WgpuInitError::RequestDevice {
        message: e.to_string(),
    })?;
    Client::try_init(device.to_id(), server)
        .map(|_| ())
        .map_err(|e| WgpuInitError::Registration {
            message: format!("{device:?}: {e:?}"),
        })
}
