//! Which transport `comm_init` joins communicators through.

use compute_runtime::ServerError;

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
