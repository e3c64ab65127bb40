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
//! [`Server`]: compute_runtime::Server
//! [`WgpuCompiler`]: compute_wgsl::WgpuCompiler

mod backend;
mod collective;
mod device;
mod graph;
mod launch;
mod memory;
mod options;
mod server;
mod timing;

pub use backend::{ScheduledWgpuBackend, WgpuStream};
pub use device::adapter;
pub use graph::WgpuGraph;
pub use memory::storage::{WgpuResource, WgpuStorage};
pub use options::{TASKS_MAX_ENV, WgpuServerOptions};
pub use server::{DEFAULT_TASKS_MAX, WgpuServer};
pub use timing::timeline::{Timeline, TimelineEvent};

pub use compute_wgsl::{
    BindingAccess, BoundsChecks, IrCompiler, WgpuCompilationOptions, WgpuCompiler, WgslKernel,
    WgslPassthrough,
};
pub use wgpu::Backend;

/// The device's registry of recorded graphs, as [`WgpuServer::new`] takes
/// it: `compute_graph`'s registry of this server's [`WgpuGraph`]s. Clone it
/// to share graphs between servers of one device.
pub type DeviceCaptures = compute_graph::DeviceCaptures<WgpuGraph>;
