//! `WgpuServerOptions`: how a server is built, one named setting at a time.
//!
//! The seed's `WgpuServer::new` takes ten positional arguments; a caller
//! who wants the defaults but one setting should not have to spell the
//! other nine. Every setting here has a default a server can run with:
//!
//! ```no_run
//! use compute_runtime::{DeviceId, MemoryConfiguration, TimingMethod};
//! use wgpu_server::{WgpuServer, WgpuServerOptions, WgslPassthrough};
//!
//! let server: WgpuServer<WgslPassthrough> = WgpuServerOptions::new()
//!     .device_id(DeviceId(1))
//!     .adapter(0) // a second device on the first adapter
//!     .memory(MemoryConfiguration::ExclusivePages)
//!     .timing(TimingMethod::System)
//!     .open()?;
//! # Ok::<(), compute_runtime::ServerError>(())
//! ```

use std::sync::Arc;

use compute_runtime::client::ComputeClient;
use compute_runtime::{DeviceId, MemoryConfiguration, ServerError, ServerLogger, TimingMethod};
use compute_wgsl::{DefaultCompiler, WgpuCompilationOptions};

use crate::collective::transport::CollectiveTransport;
use crate::graph::DeviceCaptures;
use crate::server::DEFAULT_TASKS_MAX;
use crate::server::WgpuServer;

/// The environment variable that overrides the default `tasks_max`.
pub const TASKS_MAX_ENV: &str = "WGPU_SERVER_TASKS_MAX";

/// The environment variable that picks the host transfers' memory where
/// the device can import host memory: `mapped` (mapped staging buffers
/// both ways), `imported` (imported host memory both ways); unset or
/// anything else, the default: reads into imported memory, writes from
/// mapped staging, which an H100 measured faster for writes (24.4 GB/s
/// against 16.7 imported, `transfer.write_64mib_gbps`, one call at
/// 8bd284b) while reads measured alike (chunked 34.5 imported, 32.0
/// mapped).
pub const HOST_MEMORY_ENV: &str = "WGPU_SERVER_HOST_MEMORY";

/// How to build a [`WgpuServer`](crate::WgpuServer); see the module doc.
#[derive(Clone, Debug, Default)]
pub struct WgpuServerOptions {
    pub(crate) device_id: DeviceId,
    pub(crate) adapter: Option<usize>,
    pub(crate) memory: MemoryConfiguration,
    pub(crate) compilation: WgpuCompilationOptions,
    pub(crate) tasks_max: Option<usize>,
    pub(crate) timing: Option<TimingMethod>,
    pub(crate) logger: Option<Arc<ServerLogger>>,
    pub(crate) captures: Option<DeviceCaptures>,
    pub(crate) transport: Option<CollectiveTransport>,
    pub(crate) collective_timeout: Option<std::time::Duration>,
    pub(crate) collective_chunk_bytes: Option<usize>,
    /// Whether `open` leaves cooperative matrices off even on an adapter
    /// that has them.
    pub(crate) without_matrices: bool,
    /// Whether host transfers stay on mapped staging buffers even where
    /// the device can import host memory.
    pub(crate) mapped_host_transfers: Option<bool>,
    /// The adapter's cooperative-matrix configurations, for kernels.
    pub(crate) matrix_configurations: Option<Vec<wgpu::wgt::CooperativeMatrixProperties>>,
}

impl WgpuServerOptions {
    /// Every setting at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// The device this server is (default `DeviceId(0)`). It names the
    /// server in collectives, and picks the adapter unless
    /// [`adapter`](Self::adapter) is set.
    pub fn device_id(mut self, id: DeviceId) -> Self {
        self.device_id = id;
        self
    }

    /// Opens the device on the `index`-th adapter of the ranking (see
    /// [`crate::adapter`]) whatever the device id: several servers with
    /// different device ids on one adapter stand for several GPUs.
    pub fn adapter(mut self, index: usize) -> Self {
        self.adapter = Some(index);
        self
    }

    /// The memory configuration (default: pools derived from the device).
    pub fn memory(mut self, config: MemoryConfiguration) -> Self {
        self.memory = config;
        self
    }

    /// Compilation options (part of the pipeline cache key).
    pub fn compilation(mut self, options: WgpuCompilationOptions) -> Self {
        self.compilation = options;
        self
    }

    /// How long a collective call waits at each step (for this rank's
    /// input, for the other ranks, for the data) before it fails with
    /// [`ServerError::CollectiveTimeout`] on every rank. Default: the
    /// environment's `COMPUTE_COLLECTIVE_TIMEOUT_MS`, else 60 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(50), DeviceId(51)];
    /// let c = WgpuServerOptions::new()
    ///     .device_id(devices[0])
    ///     .adapter(0)
    ///     .collective_timeout(Duration::from_millis(200))
    ///     .client()?;
    /// let comm = c.communicator(&devices)?;
    /// let x = c.create_from_slice(&[1u32; 4])?;
    /// comm.all_reduce(&x, ReduceOp::Sum)?; // rank 1 never joins...
    /// let err = c.read_vec::<u32>(&x).unwrap_err(); // ...so the read fails after 200 ms
    /// assert!(matches!(err.root_cause(), ServerError::CollectiveTimeout { .. }), "{err}");
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn collective_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.collective_timeout = Some(timeout);
        self
    }

    /// Bytes of each block one step of a collective moves: a call larger
    /// than this is pipelined in steps (copied down, combined and copied up
    /// step by step, a few steps of host memory at a time). Default: the
    /// environment's `COMPUTE_COLLECTIVE_CHUNK_BYTES`, else 4 MiB. The
    /// server that forms a communicator decides for every rank of it
    /// (across processes, rank 0's); rounded down to a multiple of 8.
    pub fn collective_chunk_bytes(mut self, bytes: usize) -> Self {
        self.collective_chunk_bytes = Some(bytes);
        self
    }

    /// The bounds-check policy of kernels without one of their own
    /// (default [`BoundsChecks::Checked`](compute_wgsl::BoundsChecks)).
    /// `BoundsChecks::Reported` makes an IR kernel's out-of-bounds access
    /// an error of its launch, [`ServerError::OutOfBoundsAccess`], instead
    /// of a silent clamp:
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().bounds_checks(BoundsChecks::Reported).client()?;
    /// // y[i] = x[i] over 8 invocations, with x 4 elements long.
    /// let k = KernelBuilder::new("copy8", [8, 1, 1]);
    /// let (x, y) = (k.input(Scalar::U32), k.output(Scalar::U32));
    /// let i = k.x(k.global_id());
    /// k.store(y, i, k.load(x, i));
    /// let copy8 = k.build()?;
    /// let (x, y) = (client.create_from_slice(&[1u32; 4])?, client.empty(32)?);
    /// client.launch(copy8, CubeCount::x(1), KernelArguments::handles([&x, &y]))?;
    /// let err = client.read_vec::<u32>(&y).unwrap_err();
    /// assert!(matches!(
    ///     err.root_cause(),
    ///     ServerError::OutOfBoundsAccess { array: KernelArray::Binding(0), len: 4, count: 4, .. }
    /// ), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bounds_checks(mut self, checks: compute_wgsl::BoundsChecks) -> Self {
        self.compilation.bounds_checks = checks;
        self
    }

    /// Which checked modules keep wgpu's loop counter and index clamps
    /// (default [`LoopBounding::Unproven`](compute_wgsl::LoopBounding::Unproven):
    /// dropped from a module whose every loop the server proves ends and
    /// whose every index outside a buffer it proves in range, which lets
    /// the driver unroll its loops; `Every` keeps them everywhere, as wgpu
    /// does).
    pub fn loop_bounding(mut self, bounding: compute_wgsl::LoopBounding) -> Self {
        self.compilation.loop_bounding = bounding;
        self
    }

    /// Tasks a stream encodes before it submits (default
    /// `WGPU_SERVER_TASKS_MAX`, else 128).
    pub fn tasks_max(mut self, tasks: usize) -> Self {
        self.tasks_max = Some(tasks);
        self
    }

    /// How profile windows are timed (default: `Device` when the device has
    /// timestamp queries, else `System`).
    pub fn timing(mut self, method: TimingMethod) -> Self {
        self.timing = Some(method);
        self
    }

    /// The logger (default: from `COMPUTE_LOG`).
    pub fn logger(mut self, logger: Arc<ServerLogger>) -> Self {
        self.logger = Some(logger);
        self
    }

    /// The graph registry to record into (default: a new one). Share one
    /// between servers of the same device only.
    pub fn captures(mut self, captures: DeviceCaptures) -> Self {
        self.captures = Some(captures);
        self
    }

    /// Whether [`open`](Self::open) asks an adapter that has them for
    /// cooperative matrices (`EXPERIMENTAL_COOPERATIVE_MATRIX`, an
    /// experimental wgpu feature; default yes). Without them an IR kernel
    /// with matrices is `Unsupported { what: "cooperative matrices" }`.
    pub fn cooperative_matrices(mut self, enabled: bool) -> Self {
        self.without_matrices = !enabled;
        self
    }

    /// Whether host transfers go through host memory imported into the
    /// device where the device can import it (`VK_EXT_external_memory_host`;
    /// see [`HostTransfers`](compute_runtime::HostTransfers)): `true`, reads
    /// and writes; `false`, neither (mapped staging buffers). Default
    /// ([`HOST_MEMORY_ENV`] unset): reads imported, writes from mapped
    /// staging (faster on an H100). A device given to
    /// [`build`](Self::build) imports only if its opener enabled the
    /// extension. [`ServerUtilities::host_transfers`](compute_runtime::ServerUtilities)
    /// says which path a server took.
    pub fn imported_host_memory(mut self, enabled: bool) -> Self {
        self.mapped_host_transfers = Some(!enabled);
        self
    }

    /// The cooperative-matrix configurations of the adapter of a device
    /// given to [`build`](Self::build) (`Adapter::cooperative_matrix_properties`):
    /// a device does not know them, and kernels are checked against them.
    /// [`open`](Self::open) asks the adapter itself.
    pub fn cooperative_matrix_configurations(
        mut self,
        configurations: Vec<wgpu::wgt::CooperativeMatrixProperties>,
    ) -> Self {
        self.matrix_configurations = Some(configurations);
        self
    }

    /// The transport `comm_init` joins communicators through (default: from
    /// [`CollectiveTransport::ENV`], else in-process).
    pub fn transport(mut self, transport: CollectiveTransport) -> Self {
        self.transport = Some(transport);
        self
    }

    /// Opens the adapter these options name and wraps the new server in a
    /// client bound to [`StreamId::DEFAULT`](compute_runtime::StreamId):
    /// IR and WGSL kernels ([`DefaultCompiler`]). For another compiler,
    /// `ComputeClient::new(id, options.open::<C>()?)`.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new()
    ///     .memory(MemoryConfiguration::ExclusivePages)
    ///     .client()?;
    /// assert_eq!(client.device(), DeviceId(0));
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn client(self) -> Result<DefaultClient, ServerError> {
        let device = self.device_id;
        Ok(ComputeClient::new(device, self.open::<DefaultCompiler>()?))
    }

    /// Whether reads, and whether writes, may use imported host memory:
    /// as set, else from the environment, else reads only.
    pub(crate) fn effective_import_host(&self) -> (bool, bool) {
        match self.mapped_host_transfers {
            Some(mapped) => (!mapped, !mapped),
            None => match std::env::var(HOST_MEMORY_ENV) {
                Ok(v) if v.trim().eq_ignore_ascii_case("mapped") => (false, false),
                Ok(v) if v.trim().eq_ignore_ascii_case("imported") => (true, true),
                _ => (true, false),
            },
        }
    }

    /// `tasks_max` as set, else from the environment, else the default.
    pub(crate) fn effective_tasks_max(&self) -> usize {
        self.tasks_max
            .or_else(|| {
                std::env::var(TASKS_MAX_ENV)
                    .ok()
                    .and_then(|v| v.parse().ok())
            })
            .filter(|v: &usize| *v > 0)
            .unwrap_or(DEFAULT_TASKS_MAX)
    }
}

/// The server most programs want: IR kernels ([`ir::Kernel`](crate::ir::Kernel))
/// and WGSL kernels ([`WgslKernel`](crate::WgslKernel)) on one device,
/// through [`DefaultCompiler`].
pub type DefaultServer = WgpuServer<DefaultCompiler>;

/// A client of a [`DefaultServer`]: what [`WgpuServerOptions::client`]
/// opens.
pub type DefaultClient = compute_runtime::client::ComputeClient<DefaultServer>;
