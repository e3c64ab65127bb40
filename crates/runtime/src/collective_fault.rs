//! [`CollectiveFault`]: why a collective call was in the wrong state, as
//! values a caller can match on.

use crate::{DeviceId, StreamId};

/// What was wrong with a collective's state ([`ServerError::CollectiveState`]).
///
/// [`ServerError::CollectiveState`]: crate::ServerError::CollectiveState
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveFault {
    /// No communicator of exactly these ranks, in this order.
    #[error("no communicator for {devices:?}: call comm_init with them first")]
    NoCommunicator {
        /// The rank list the call named.
        devices: Vec<DeviceId>,
    },
    /// No communicator has this peer (a `send` or `recv`).
    #[error("no communicator has {peer}: call comm_init with it first")]
    NoPeer {
        /// The peer the call named.
        peer: DeviceId,
    },
    /// A rank list `comm_init` cannot form a communicator from.
    #[error("rank list {devices:?}: {problem}")]
    RankList {
        /// The list.
        devices: Vec<DeviceId>,
        /// What is wrong with it.
        problem: RankListProblem,
    },
    /// A thread collectives need could not start.
    #[error("could not start the {thread} thread: {error}")]
    ThreadStart {
        /// Which thread.
        thread: &'static str,
        /// The system's error.
        error: String,
    },
    /// A thread collectives need has stopped.
    #[error("the {thread} has stopped")]
    Stopped {
        /// Which thread.
        thread: &'static str,
    },
    /// Code of the communicator panicked on this call.
    #[error("{part} panicked on this call")]
    Panicked {
        /// What panicked.
        part: &'static str,
    },
    /// A group call where a message was due, or the reverse.
    #[error("{call} is not a group call")]
    NotAGroupCall {
        /// The call, in words.
        call: String,
    },
    /// A rank's part of a call's exchange is not as it must be.
    #[error("{call}: {problem}")]
    Round {
        /// The call, in words (`all_reduce #3`).
        call: String,
        /// What was wrong.
        problem: RoundProblem,
    },
    /// This rank stopped waiting for its own input before providing it.
    #[error("rank {rank} gave up on the call before providing its input")]
    GaveUp {
        /// The rank.
        rank: usize,
    },
    /// Nobody took this rank's result pieces within the call's timeout (the
    /// consumer stalled), so the call was aborted.
    #[error("rank {rank}'s result was not taken within the collective timeout")]
    ResultNotTaken {
        /// The rank.
        rank: usize,
    },
    /// A call's result or input was used out of order (a bug of the
    /// caller of `compute-collective`'s API, or of this server).
    #[error("{0}")]
    Misuse(&'static str),
    /// The stream stopped waiting for the collective's result (its wait
    /// gave up), so the result was never written.
    #[error("the stream stopped waiting for this collective's result")]
    StoppedWaiting,
    /// The batch holding a collective's input copy did not run.
    #[error("the batch holding the staging copy did not run")]
    StagingDidNotRun,
    /// A verdict on this rank's input had not arrived when it was staged.
    #[error("a verdict on this rank's input had not arrived when it was staged")]
    VerdictMissing,
    /// A collective did not complete within the time its stream waits.
    #[error("{call} on {stream} did not complete within {waited_ms} ms")]
    DidNotComplete {
        /// The call, in words.
        call: &'static str,
        /// Its stream.
        stream: StreamId,
        /// How long the stream waited.
        waited_ms: u64,
    },
    /// An MPI call failed.
    #[error("{call} failed: {message} (MPI error {code})")]
    Mpi {
        /// The MPI function.
        call: &'static str,
        /// Its return code.
        code: i32,
        /// MPI's own words for it.
        message: String,
    },
    /// MPI in this process can no longer be used (after a timeout: no
    /// ULFM), or was finalized.
    #[error("MPI in this process is unusable: {reason}")]
    MpiUnusable {
        /// Why.
        reason: String,
    },
    /// The MPI library does not give the thread level the transport needs.
    #[error(
        "the MPI library gives thread level {provided}; the MPI transport needs \
         MPI_THREAD_MULTIPLE ({needed}): each communicator has its own thread"
    )]
    MpiThreadLevel {
        /// What the library gives.
        provided: i32,
        /// `MPI_THREAD_MULTIPLE`.
        needed: i32,
    },
    /// A message from another process could not be read.
    #[error("a message from another process could not be read: {problem}")]
    Wire {
        /// What was wrong with it.
        problem: String,
    },
}

/// Why a rank list cannot form a communicator.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RankListProblem {
    /// No device at all.
    #[error("a communicator needs at least one device")]
    Empty,
    /// A device named twice.
    #[error("{device} appears twice")]
    Twice {
        /// The device.
        device: DeviceId,
    },
    /// This server's device is not in it.
    #[error("{device} (this server) is not in it")]
    NotIn {
        /// This server's device.
        device: DeviceId,
    },
    /// This device joined it already.
    #[error("{device} joined it already")]
    Joined {
        /// The device.
        device: DeviceId,
    },
    /// Its length does not match the transport's ranks.
    #[error("{ranks} ranks cannot be named by {devices} devices")]
    Length {
        /// Ranks of the transport.
        ranks: usize,
        /// Devices in the list.
        devices: usize,
    },
    /// Devices no process of the MPI job owns.
    #[error(
        "no process owns {unowned:?}: the MPI job has {processes} processes of \
         {per_process} devices each (DeviceId = world_rank * {per_process} + local_index)"
    )]
    Unowned {
        /// The devices.
        unowned: Vec<DeviceId>,
        /// Processes of the job.
        processes: usize,
        /// Devices each process has.
        per_process: usize,
    },
    /// This server's device belongs to another process of the MPI job.
    #[error("{device} is not a device of this process ({process})")]
    ForeignDevice {
        /// This server's device.
        device: DeviceId,
        /// This process.
        process: usize,
    },
    /// Two devices of one process (the MPI transport has one rank per
    /// process).
    #[error("{first} and {second} both belong to process {process}: one rank per process")]
    SameProcess {
        /// One device.
        first: DeviceId,
        /// The other.
        second: DeviceId,
        /// Their process.
        process: usize,
    },
}

/// What was wrong in one call's exchange.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RoundProblem {
    /// A rank that is not part of the call arrived.
    #[error("rank {rank} does not take part in it")]
    Stranger {
        /// The rank.
        rank: usize,
    },
    /// A rank arrived twice.
    #[error("rank {rank} took part twice")]
    Twice {
        /// The rank.
        rank: usize,
    },
    /// The call's state vanished while a rank waited.
    #[error("the round vanished")]
    Vanished,
    /// Computing the result panicked.
    #[error("computing the result panicked")]
    Panicked,
    /// Not every rank's descriptor or output is there.
    #[error("{got} parts for {ranks} ranks")]
    Parts {
        /// Parts present.
        got: usize,
        /// Ranks of the call.
        ranks: usize,
    },
    /// A rank (or the peer, `None`) sent no call.
    #[error("{} sent no call", match .rank { Some(r) => format!("rank {r}"), None => "the peer".to_owned() })]
    NoCall {
        /// The rank, or `None` for a message's peer.
        rank: Option<usize>,
    },
}
