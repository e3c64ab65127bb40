//! # wgpu-server
//!
//! `WgpuServer<C>`: the compute runtime's [`Server`] on one wgpu device,
//! generic over the compiler backend `C` ([`WgpuCompiler`]).
//!
//! **Owns:** the wiring. It picks and opens the adapter ([`adapter`]), turns
//! pages into wgpu buffers ([`WgpuStorage`]), turns compiled kernels into
//! cached pipelines and bind groups, encodes launches and copies into the
//! streams' command encoders ([`ScheduledWgpuBackend`]), and waits on the GPU
//! with one poller thread per device.
//!
//! **Leaves to the layers below:** pooling (`compute-memory`), stream
//! ordering and trust (`compute-stream`), kernel compilation
//! (`compute-wgsl`), the capture state machine (`compute-graph`). Each of
//! those is tested without a GPU; what is tested here is that the wiring
//! holds on a real device.
//!
//! **Start here:** [`prelude`] has what a program needs, and
//! [`WgpuServerOptions::client`] opens the default adapter as a
//! [`DefaultClient`]: typed buffers, checked launches of IR and WGSL
//! kernels, streams, profiling, graphs, memory reports, collectives.
//!
//! ```
//! use wgpu_server::prelude::*;
//!
//! let client = WgpuServerOptions::new().client()?;
//! let x = client.create_from_slice(&[1.0f32, 2.0, 3.0])?;
//! assert_eq!(client.read_vec::<f32>(&x)?, [1.0, 2.0, 3.0]);
//! # Ok::<(), ServerError>(())
//! ```
//!
//! The crates underneath are re-exported whole ([`runtime`], [`ir`],
//! [`wgsl`]), so a runtime built on this server needs this one dependency.
//!
//! [`Server`]: compute_runtime::Server
//! [`WgpuCompiler`]: compute_wgsl::WgpuCompiler

mod collective;
mod device;
mod graph;
mod launch;
mod memory;
pub mod prelude;
mod server;
mod stream;
mod timing;
mod transfer;

pub use compute_ir as ir;
pub use compute_runtime as runtime;
pub use compute_wgsl as wgsl;

pub use collective::transport::CollectiveTransport;
pub use device::adapter;
pub use graph::{DeviceCaptures, WgpuGraph};
pub use launch::resolve::ResolvedLaunch;
pub use memory::storage::{WgpuResource, WgpuStorage};
pub use server::options::{
    DefaultClient, DefaultServer, HOST_MEMORY_ENV, TASKS_MAX_ENV, WgpuServerOptions,
};
pub use server::{DEFAULT_TASKS_MAX, WgpuServer};
pub use stream::{ScheduledWgpuBackend, WgpuStream};
pub use timing::timeline::{DEFAULT_TIMELINE_CAPACITY, Timeline, TimelineEvent};
pub use transfer::chunks::{MAX_READ_CHUNKS, ReadChunk, ReadChunks};

pub use compute_wgsl::{
    BindingAccess, BoundsChecks, DefaultCompiler, IrCompiler, LoopBounding, WgpuCompilationOptions,
    WgpuCompiler, WgslKernel, WgslPassthrough,
};
pub use wgpu::Backend;

/// Parts exposed for tests and the bench's raw baselines (feature
/// `testing`): not part of the stable API.
#[cfg(feature = "testing")]
pub mod testing {
    /// Device memory that devices of one GPU share (opaque fds): what
    /// collectives between ranks of one GPU move their data through
    /// (`collective/shared.rs`).
    pub use crate::device::shared_memory::{
        Exported as SharedDeviceMemory, export as export_device_memory,
    };
    /// A block of host memory imported into a device, as reads land in
    /// (`PinnedBlock::standalone`): for raw loops that copy into the same
    /// kind of memory the server does.
    pub use crate::memory::pinned::PinnedBlock as ImportedHostBlock;

    /// Whether the communicator of `device_ids` that `server` joined
    /// moves its group calls' data on the devices (`Some(true)`), through
    /// host staging (`Some(false)`), or is not an in-process one it joined
    /// (`None`): the group's settled path, `Some(false)` while a rank has
    /// not joined (its calls until then go through host staging).
    pub fn collective_on_device<C: compute_wgsl::WgpuCompiler>(
        server: &crate::WgpuServer<C>,
        device_ids: &[compute_runtime::DeviceId],
    ) -> Option<bool> {
        server
            .collective_on_device_for(device_ids)
            .map(|(on, _)| on)
    }

    /// How many group calls `server` has posted on the devices in the
    /// communicator of `device_ids` (the others went through host
    /// staging); `None` as for [`collective_on_device`].
    pub fn collective_device_calls<C: compute_wgsl::WgpuCompiler>(
        server: &crate::WgpuServer<C>,
        device_ids: &[compute_runtime::DeviceId],
    ) -> Option<u64> {
        server.collective_device_calls_for(device_ids)
    }

    /// Whether that communicator's group multiplies floats on the devices
    /// (every rank's device keeps denormals, by the probe at `comm_init`);
    /// `None` as for [`collective_on_device`].
    pub fn collective_float_products_on_device<C: compute_wgsl::WgpuCompiler>(
        server: &crate::WgpuServer<C>,
        device_ids: &[compute_runtime::DeviceId],
    ) -> Option<bool> {
        server
            .collective_on_device_for(device_ids)
            .map(|(on, exact)| on && exact)
    }
}

/// The README's code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
