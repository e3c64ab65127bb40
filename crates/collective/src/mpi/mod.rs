//! Collectives across processes: [`MpiTransport`] and the process's MPI
//! (feature `mpi`; OpenMPI on Debian: `libopenmpi-dev`). `docs/mpi.md` says
//! how to run it, on one host and on two.
//!
//! - **Ranks.** One rank per process; a device id names its process by
//!   [`MpiLayout`]'s rule,
//!   `DeviceId = world_rank * devices_per_process + local_index`
//!   ([`local_device`] gives a process its ids).
//! - **Transport.** Each communicator is an MPI communicator of the ranks'
//!   processes (`MPI_Comm_create_group`, ranks in list order) with its own
//!   worker thread making blocking MPI calls: the descriptors first (an
//!   `MPI_Allgather` of an 80-byte header per rank, `MPI_Sendrecv` for a
//!   message), then MPI's own collective for the data (`MPI_Allreduce`,
//!   `MPI_Allgather`, `MPI_Reduce_scatter_block`, `MPI_Bcast`,
//!   `MPI_Alltoall`, `MPI_Send`/`MPI_Recv`). Reductions: MPI's built-in
//!   operations where they give exactly the crate's results, user
//!   operations over [`crate::reduce::combine`] elsewhere (`ops.rs` has the
//!   table).
//! - **Failures.** MPI is started with `MPI_ERRORS_RETURN`, so a failed MPI
//!   call is an error, not an abort of the job. A blocking call that never
//!   returns (a peer died or never calls) is given up at the step's
//!   deadline ([`CommConfig::timeout`](crate::CommConfig)): the call fails
//!   with [`ServerError::CollectiveTimeout`], its transport and the
//!   process's MPI are broken (later calls fail at once), [`finalize`]
//!   refuses, and the process exits without `MPI_Finalize`
//!   (`std::process::exit`). Under `mpirun`'s defaults the job is torn
//!   down as soon as one process exits without finalizing; see
//!   `docs/mpi.md` for the settings under which the survivors report the
//!   error themselves.

mod collectives;
mod exchange;
mod ops;
mod pool;
mod transport;
mod worker;
mod world;

use std::time::Duration;

use compute_runtime::{DeviceId, ServerError};

pub use transport::MpiTransport;

use crate::communicator::CommConfig;
use crate::layout::MpiLayout;

/// This process's place in the MPI job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldInfo {
    /// `MPI_COMM_WORLD` rank of this process.
    pub rank: usize,
    /// Processes in the job.
    pub size: usize,
    /// Which process owns which device.
    pub layout: MpiLayout,
}

/// Starts the process's MPI if it is not yet (`MPI_Init_thread` with
/// `MPI_THREAD_MULTIPLE`, `MPI_ERRORS_RETURN` on `MPI_COMM_WORLD`, the
/// devices-per-process check), within `timeout`: `MPI_Init` waits for
/// every process of the job. A failure is permanent for the process.
/// When MPI was already initialized (by the program, through rsmpi), it is
/// used as it is, provided it gives `MPI_THREAD_MULTIPLE`, and left for its
/// owner to finalize.
pub fn init(timeout: Duration) -> Result<WorldInfo, ServerError> {
    let w = world::world(timeout)?;
    Ok(WorldInfo {
        rank: w.rank,
        size: w.size,
        layout: w.layout,
    })
}

/// The id of this process's `local`-th device
/// (`world_rank * devices_per_process + local`); starts MPI if needed,
/// within the default [`CommConfig`] timeout.
pub fn local_device(local: usize) -> Result<DeviceId, ServerError> {
    let info = init(CommConfig::from_env().timeout)?;
    info.layout
        .device(info.rank, local)
        .ok_or_else(|| ServerError::InvalidArgument {
            reason: format!(
                "local device {local}: each process drives {} devices ({})",
                info.layout.devices_per_process,
                MpiLayout::DEVICES_PER_PROCESS_ENV
            ),
        })
}

/// `MPI_Barrier` over every process of the job, within `timeout`.
pub fn barrier(timeout: Duration) -> Result<(), ServerError> {
    world::world(timeout)?.barrier(timeout)
}

/// Every process's `bytes`, in world rank order, within `timeout` (for
/// tests and benchmarks: comparing what each process saw, gathering
/// timings).
pub fn gather(bytes: Vec<u8>, timeout: Duration) -> Result<Vec<Vec<u8>>, ServerError> {
    world::world(timeout)?.gather(bytes, timeout)
}

/// Why this process's MPI cannot be trusted any more (an MPI call timed
/// out or failed), if it cannot. `None` also before MPI starts.
pub fn broken() -> Option<String> {
    match world::started() {
        Some(Ok(w)) => w.broken(),
        Some(Err(e)) => Some(e.to_string()),
        None => None,
    }
}

/// Ends the process's MPI: waits (within `timeout`) for every
/// communicator's worker to free its communicator — drop the servers and
/// communicators first — then `MPI_Finalize` on the thread that started
/// MPI. Refuses when MPI is [`broken`]: a peer may be gone and
/// `MPI_Finalize` would wait for it; the process should then exit without
/// it (`std::process::exit`). Nothing to do when MPI never started.
pub fn finalize(timeout: Duration) -> Result<(), ServerError> {
    match world::started() {
        None => Ok(()),
        Some(Err(e)) => Err(e.clone()),
        Some(Ok(w)) => w.finalize(timeout),
    }
}
