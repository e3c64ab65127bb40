//! The device: choosing and opening an adapter, waiting on it, and hearing
//! about its faults.
//!
//! - [`adapter`]: which adapter `DeviceId(n)` is, and opening it;
//! - `pool`: devices kept for the life of the process, leased to servers;
//! - `poller`: the device's one waiter thread;
//! - `wait`: how a future waits for a submission (inline first, then the
//!   poller);
//! - `map`: mapping the server's own `MAP_READ` buffers, and what a failed
//!   map means;
//! - `stamps`: timestamp pairs, what every timing feature is made of;
//! - `faults`: device loss and uncaptured errors, and the error scopes every
//!   fallible wgpu call runs in;
//! - `vulkan`: a device's own Vulkan handles, and a buffer made by hand
//!   handed to wgpu;
//! - `robustness`: whether the driver bounds buffer accesses itself;
//! - `host_import`: host memory the device copies into and out of
//!   directly (`VK_EXT_external_memory_host`);
//! - `shared_memory`: device memory that devices of one GPU share (opaque
//!   fds, `VK_KHR_external_memory_fd`).
//!
//! Building a server on a device (`try_init`, `new`, the options' `build`)
//! is `server/assemble.rs`'s.

pub mod adapter;
pub(crate) mod faults;
pub(crate) mod host_import;
pub(crate) mod map;
pub(crate) mod poller;
pub(crate) mod pool;
pub(crate) mod robustness;
// Built and tested, not used by a collective yet: compiled for the tests.
pub(crate) mod shared_memory;
pub(crate) mod stamps;
#[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
pub(crate) mod vulkan;
pub(crate) mod wait;

use std::sync::Arc;

use compute_wgsl::DeviceCaps;

/// The device a server runs on and what waits on it.
#[derive(Debug)]
pub(crate) struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// Limits and features, as compilers see them.
    caps: DeviceCaps,
    backend: wgpu::Backend,
    /// Device loss and uncaptured errors, recorded by wgpu's callbacks.
    faults: Arc<faults::DeviceFaults>,
    /// The device's one waiter thread.
    poller: poller::DevicePoller,
    /// How futures wait for submissions (inline first, then the poller).
    waiter: wait::Waiter,
}

impl Gpu {
    pub fn new(
        (device, queue): (wgpu::Device, wgpu::Queue),
        backend: wgpu::Backend,
        faults: Arc<faults::DeviceFaults>,
        poller: poller::DevicePoller,
        waiter: wait::Waiter,
        cooperative_matrices: Vec<wgpu::wgt::CooperativeMatrixProperties>,
    ) -> Self {
        let caps = DeviceCaps::of(device.limits(), device.features())
            .with_cooperative_matrices(cooperative_matrices)
            .with_driver_bounded_buffers(robustness::driver_bounds_buffers(&device));
        Gpu {
            device,
            queue,
            caps,
            backend,
            faults,
            poller,
            waiter,
        }
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    pub fn caps(&self) -> &DeviceCaps {
        &self.caps
    }

    pub fn backend(&self) -> wgpu::Backend {
        self.backend
    }

    pub fn faults(&self) -> &Arc<faults::DeviceFaults> {
        &self.faults
    }

    pub fn poller(&self) -> &poller::DevicePoller {
        &self.poller
    }

    pub fn waiter(&self) -> &wait::Waiter {
        &self.waiter
    }
}
