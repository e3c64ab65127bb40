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

use crate::server::DEFAULT_TASKS_MAX;
use crate::{DefaultClient, DeviceCaptures};

/// The environment variable that overrides the default `tasks_max`.
pub const TASKS_MAX_ENV: &str = "WGPU_SERVER_TASKS_MAX";

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
}

/// How `comm_init` joins a communicator: the ranks of one process meet in
/// memory, or the ranks are processes of an MPI job (one server per
/// process and device; see `docs/mpi.md`).
///
/// ```
/// use compute_runtime::{DeviceId, ServerCommunication, ServerError};
/// use wgpu_server::{CollectiveTransport, WgpuServer, WgpuServerOptions, WgslPassthrough};
///
/// let mut server: WgpuServer<WgslPassthrough> = WgpuServerOptions::new()
///     .transport(CollectiveTransport::Mpi)
///     .open()?;
/// // Built without its `mpi` feature, the server refuses the transport at
/// // `comm_init`, at once.
/// if !cfg!(feature = "mpi") {
///     let e = server.comm_init(vec![DeviceId(0)]).expect_err("no MPI");
///     assert!(matches!(e, ServerError::Unsupported { .. }), "{e}");
/// }
/// # Ok::<(), ServerError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveTransport {
    /// Every rank's server is in this process (the default).
    #[default]
    InProcess,
    /// One rank per process, through MPI
    /// (`compute_collective::mpi::MpiTransport`); needs the `mpi` feature
    /// of `wgpu-server`, else `comm_init` answers `Unsupported`. Device ids
    /// name processes: `DeviceId = world_rank * devices_per_process +
    /// local_index`.
    Mpi,
}

impl CollectiveTransport {
    /// The environment variable that picks the transport when the options
    /// do not: `mpi` or `in-process`.
    pub const ENV: &'static str = "COMPUTE_COLLECTIVE_TRANSPORT";

    /// The transport [`Self::ENV`] names; [`Self::InProcess`] when it is
    /// unset or empty.
    pub fn from_env() -> Result<Self, ServerError> {
        match std::env::var(Self::ENV) {
            Err(_) => Ok(CollectiveTransport::InProcess),
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "in-process" | "inprocess" | "in_process" => {
                    Ok(CollectiveTransport::InProcess)
                }
                "mpi" => Ok(CollectiveTransport::Mpi),
                other => Err(ServerError::InvalidConfiguration {
                    reason: format!("{}={other:?}: expected `mpi` or `in-process`", Self::ENV),
                }),
            },
        }
    }
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
