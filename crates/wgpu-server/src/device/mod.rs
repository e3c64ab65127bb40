//! The device: choosing and opening an adapter, building a server on it,
//! waiting on it, and hearing about its faults.
//!
//! - [`adapter`]: which adapter `DeviceId(n)` is, and opening it;
//! - `init`: `try_init`, `new`, and the options builder's `build`: the one
//!   place the layers are wired together;
//! - `poller`: the device's one waiter thread;
//! - `faults`: device loss and uncaptured errors, and the error scopes every
//!   fallible wgpu call runs in.

pub mod adapter;
pub(crate) mod faults;
pub(crate) mod poller;
pub(crate) mod stamps;
pub(crate) mod wait;

use std::sync::Arc;

use compute_wgsl::DeviceCaps;

/// The device a server runs on and what waits on it.
#[derive(Debug)]
pub(crate) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// Limits and features, as compilers see them.
    pub caps: DeviceCaps,
    pub backend: wgpu::Backend,
    /// Device loss and uncaptured errors, recorded by wgpu's callbacks.
    pub faults: Arc<faults::DeviceFaults>,
    /// The device's one waiter thread.
    pub poller: poller::DevicePoller,
    /// How futures wait for submissions (inline first, then the poller).
    pub waiter: wait::Waiter,
}
