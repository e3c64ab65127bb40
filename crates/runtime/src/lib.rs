//! # compute-runtime
//!
//! The contract between a compute server and the runtimes built on it: the
//! traits ([`Server`], [`ServerCommunication`], [`ServerStorage`],
//! [`DeviceService`]), the ids and handles they pass around, the descriptors
//! of copies and launches, and the one error type every server path returns.
//!
//! **Owns:** names and meanings. A [`ManagedMemoryHandle`] is the client's
//! claim on a slice of device memory; a [`BufferBinding`] is a byte range of
//! one; a [`CopyDescriptor`] describes a host transfer; a [`CubeKernel`] is
//! whatever a compiler backend knows how to turn into a pipeline.
//!
//! **Leaves to the layers below:** how memory is pooled (`compute-memory`),
//! how work is ordered across logical streams (`compute-stream`), how kernels
//! are compiled (`compute-wgsl`), and everything that names a wgpu type
//! (`wgpu-server`). This crate depends on nothing of the project's own and on
//! no GPU API, so a runtime can program against it without pulling in wgpu.
//!
//! The [`client`] module is the layer a user calls from any thread: a
//! [`client::ComputeClient`] shares one server per device, created once
//! through [`DeviceService::init`] (or wrapped by hand), and adds typed
//! buffers ([`Pod`]), buffer labels that errors show (see [`MemoryId`]),
//! launches checked at the call ([`LaunchValidation`]), and one method per
//! stream, profiling, graph, memory and collective call.

pub mod client;
mod collective;
mod collective_fault;
mod error;
mod error_cause;
mod fault;
mod handle;
pub mod hostcopy;
mod id;
mod kernel;
mod label;
mod memory;
pub mod pod;
mod profile;
mod server;
mod storage;
mod utilities;

pub use bytes::Bytes;
pub use collective::{ComputeWait, DType, ReduceOp, Reduction};
pub use collective_fault::{CollectiveFault, RankListProblem, RoundProblem};
pub use error::ServerError;
pub use fault::InternalFault;
pub use handle::{BufferBinding, CopyDescriptor, Handle, ManagedMemoryHandle, ReleaseQueue};
pub use id::{DeviceId, GraphId, KernelId, MemoryId, StorageId, StreamId};
pub use kernel::{
    AccessChecks, BoundsChecks, CubeCount, CubeKernel, Grid, KernelArguments, KernelArray,
    LaunchMode,
};
pub use memory::{
    MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryPoolOptions, PoolKind,
    PoolReport, StreamMemoryReport,
};
pub use pod::Pod;
pub use profile::{ProfileDuration, ProfileError, ProfilingToken, TimingMethod};
pub use server::{
    DeviceService, DeviceServiceStage, DynFut, LaunchValidation, Server, ServerCommunication,
    ServerStorage, ServerUtilitiesHandle,
};
pub use storage::{ComputeStorage, ManagedResource, StorageHandle};
pub use utilities::{
    AdapterSummary, HostTransfers, LogCategory, LogLevel, ServerLogger, ServerUtilities,
};
