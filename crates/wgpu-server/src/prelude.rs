//! What a program on the server needs, in one import:
//! `use wgpu_server::prelude::*;`.
//!
//! - opening a device: [`WgpuServerOptions`], [`DefaultClient`] (a
//!   [`ComputeClient`] of a [`DefaultServer`]), [`DeviceId`], [`StreamId`];
//! - buffers: [`Handle`], [`Pod`], [`Bytes`];
//! - kernels: the IR builder ([`KernelBuilder`], [`Kernel`], and every type
//!   its methods take or give: [`Val`], [`Var`], [`Operand`], [`Scalar`],
//!   [`Type`], [`Lit`], the arrays [`Buf`], [`AtomicBuf`], [`Shared`],
//!   [`AtomicShared`], [`Local`] and their traits [`ArrayLike`],
//!   [`AtomicLike`], [`BufferLike`], cooperative matrices [`Matrix`],
//!   [`MatrixRole`], [`Layout`]), WGSL kernels ([`WgslKernel`],
//!   [`BindingAccess`], [`BoundsChecks`]), and launching them
//!   ([`CubeCount`], [`KernelArguments`]);
//! - collectives: [`Communicator`] (from [`ComputeClient::communicator`]),
//!   [`Reduction`], [`ReduceOp`], [`DType`], [`ComputeWait`];
//! - errors: [`ServerError`] (and the [`KernelArray`] an out-of-bounds
//!   access names), [`ProfileError`], [`IrError`];
//! - the server traits, for calls the client does not wrap ([`Server`],
//!   [`ServerCommunication`], reached through [`ComputeClient::server`]).
//!
//! ```
//! use wgpu_server::prelude::*;
//!
//! let client: DefaultClient = WgpuServerOptions::new().client()?;
//! let ones = client.create_from_slice(&[1u32; 8])?;
//! assert_eq!(client.read_vec::<u32>(&ones)?.iter().sum::<u32>(), 8);
//! # Ok::<(), ServerError>(())
//! ```

pub use compute_ir::{
    ArrayLike, AtomicBuf, AtomicLike, AtomicShared, Buf, BufferLike, IrError, Kernel,
    KernelBuilder, Layout, Lit, Local, Matrix, MatrixRole, Operand, Scalar, Shared, Type, Val, Var,
};
pub use compute_runtime::client::{Communicator, ComputeClient};
pub use compute_runtime::{
    AccessChecks, Bytes, ComputeWait, CubeCount, CubeKernel, DType, DeviceId, GraphId, Grid,
    Handle, KernelArguments, KernelArray, LaunchMode, MemoryAllocationMode, MemoryConfiguration,
    Pod, ProfileError, ReduceOp, Reduction, Server, ServerCommunication, ServerError, StreamId,
    StreamMemoryReport, TimingMethod,
};
pub use compute_wgsl::{
    BindingAccess, BoundsChecks, DefaultCompiler, IrCompiler, LoopBounding, WgpuCompilationOptions,
    WgslKernel, WgslPassthrough,
};

pub use crate::{DefaultClient, DefaultServer, WgpuServer, WgpuServerOptions};
