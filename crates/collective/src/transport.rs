//! The seam between the engine (which orders a rank's calls, waits for their
//! inputs, and decides from the exchanged descriptors whether data moves)
//! and the transport (which moves host bytes between ranks).
//!
//! A [`Transport`] is one rank's endpoint. Its methods block, and are called
//! from that rank's engine thread only, one call at a time, in the order the
//! rank posted its calls; every method but `exchange*` is only called after
//! an exchange whose verdict was [`Verdict::Run`](crate::Verdict::Run) on
//! every rank. A call moves its data in steps ([`Plan`](crate::Plan), cut
//! by [`Transport::chunk_bytes`]): the data methods are called once per
//! step, in step order, each with that step's input; a call of several
//! steps ends with a [`Round::Close`] exchange. The methods map one to one
//! onto MPI, so an MPI transport (one rank per process, the `mpi` crate,
//! behind a feature) is a thin layer:
//!
//! | method            | MPI                                                   |
//! |-------------------|-------------------------------------------------------|
//! | `exchange`        | `MPI_Allgather` of the encoded descriptors (both rounds) |
//! | `exchange_pair`   | `MPI_Sendrecv` of the descriptors with the peer        |
//! | `all_reduce`      | `MPI_Allreduce`, user op over [`crate::reduce::combine`] |
//! | `all_gather`      | `MPI_Allgather`                                       |
//! | `reduce_scatter`  | `MPI_Reduce_scatter_block`                            |
//! | `broadcast`       | `MPI_Bcast`                                           |
//! | `all_to_all`      | `MPI_Alltoall`                                        |
//! | `send` / `recv`   | `MPI_Send` / `MPI_Recv`, tag from [`Link::seq`]       |
//!
//! An MPI transport must keep the crate's arithmetic (user ops over
//! [`crate::reduce::combine`] where MPI's built-in ops would differ, `Mean`
//! as a sum finished by [`crate::reduce::finish`], integer means on widened
//! elements) and carry the descriptors' input errors as text. Its calls
//! block in MPI, where a dead peer means forever, so it must honour
//! `deadline` and [`Transport::abort`] some other way: the one built
//! (`mpi::MpiTransport`, feature `mpi`) runs them on a worker thread and
//! waits until the deadline. Its `abort` reaches the peers through the
//! exchange (a call this rank abandoned still takes its place, carrying the
//! abort), and `missing` answers an empty list for group calls (MPI does not
//! say who is absent).
//!
//! **Buys:** ordering, validation, poison and results live above the seam,
//! once, so every transport behaves the same on mismatches and failures; a
//! transport only moves bytes and meets its peers. **Doesn't buy:** overlap
//! inside one rank (one call at a time on the engine thread), or device
//! buffers (host bytes only: the server stages).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use compute_runtime::{Reduction, ServerError};

use crate::call::{CallId, Descriptor, Link};

/// State the ranks of one in-process communicator share
/// ([`Transport::local_shared`]).
pub type Shared = Arc<dyn Any + Send + Sync>;

/// Which exchange of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Round {
    /// Before any data moves: the calls, and whether each rank's input
    /// arrived for the first step.
    Open,
    /// After the last step of a call of several: whether every rank's input
    /// arrived for every step.
    Close,
    /// A call whose data moves on the devices ([`crate::DeviceData`]): every
    /// rank has put its input of this piece where the others read it (or
    /// says why not).
    Filled(usize),
    /// A call whose data moves on the devices: every rank has read this
    /// piece (so the next one may overwrite it).
    Read(usize),
}

/// One rank's endpoint of a communicator: see the module doc.
pub trait Transport: Send + Sync + fmt::Debug + 'static {
    /// This endpoint's rank.
    fn rank(&self) -> usize;

    /// How many ranks the communicator has.
    fn size(&self) -> usize;

    /// Bytes of each block one step of a call moves, the same on every
    /// rank of the communicator (agreed when it formed).
    fn chunk_bytes(&self) -> usize;

    /// Every rank's descriptor of group call `seq` at `round`, in rank
    /// order, once every rank has given its own.
    fn exchange(
        &self,
        seq: u64,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Vec<Descriptor>, ServerError>;

    /// The peer's descriptor of message `link` at `round` (this rank is its
    /// sender or its receiver), once both have given theirs.
    fn exchange_pair(
        &self,
        link: Link,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Descriptor, ServerError>;

    /// Group call `seq` of one step: its opening exchange and its data in
    /// one meeting, where the transport can (in-process: one rendezvous
    /// instead of two). Every rank's descriptor, and this rank's output of
    /// the step when every rank agreed to run it (empty otherwise). `None`
    /// (the default): not offered; the engine runs the two apart.
    fn exchange_and_run(
        &self,
        seq: u64,
        mine: Descriptor,
        input: Bytes,
        deadline: Instant,
    ) -> Option<Result<(Vec<Descriptor>, Bytes), ServerError>> {
        let _ = (seq, mine, input, deadline);
        None
    }

    /// Step `step`: the element-wise reduction of every rank's `input`.
    fn all_reduce(
        &self,
        seq: u64,
        step: usize,
        reduction: Reduction,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError>;

    /// Step `step`: every rank's `input`, concatenated in rank order.
    fn all_gather(
        &self,
        seq: u64,
        step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError>;

    /// Step `step`: this rank's chunk of the element-wise reduction of
    /// every rank's `input` (which holds one chunk per rank).
    fn reduce_scatter(
        &self,
        seq: u64,
        step: usize,
        reduction: Reduction,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError>;

    /// Step `step`: rank `root`'s `input` (`len` bytes); other ranks'
    /// `input` is empty.
    #[allow(clippy::too_many_arguments)] // MPI_Bcast's own, and the step.
    fn broadcast(
        &self,
        seq: u64,
        step: usize,
        root: usize,
        input: Bytes,
        len: usize,
        deadline: Instant,
    ) -> Result<Bytes, ServerError>;

    /// Step `step`: chunk `rank` of every rank's `input`, concatenated in
    /// rank order.
    fn all_to_all(
        &self,
        seq: u64,
        step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError>;

    /// Step `step`: sends `input` on `link` (this rank is its sender).
    fn send(
        &self,
        link: Link,
        step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<(), ServerError>;

    /// Step `step`: receives the `len` bytes of `link` (this rank is its
    /// receiver).
    fn recv(
        &self,
        link: Link,
        step: usize,
        len: usize,
        deadline: Instant,
    ) -> Result<Bytes, ServerError>;

    /// State every rank of this communicator shares, where all are in this
    /// process: the same value for each, made by `init` for the first to
    /// ask. `None` (the default): the ranks are not all here.
    fn local_shared(&self, init: &mut dyn FnMut() -> Shared) -> Option<Shared> {
        let _ = init;
        None
    }

    /// Aborts `call`, from any thread: ranks blocked in it, and ranks that
    /// reach it later, fail with `error`. A no-op once every rank's part of
    /// the round in flight has arrived (that round then completes).
    fn abort(&self, call: CallId, error: ServerError);

    /// The ranks whose part of `call` has not arrived, as far as this
    /// endpoint knows (for timeout reports); callable from any thread.
    fn missing(&self, call: CallId) -> Vec<usize>;

    /// This rank's engine has stopped: it will take part in nothing more.
    fn leave(&self);
}
