//! # compute-collective
//!
//! The host side of collectives for the compute server: communicators, the
//! rendezvous that pairs the ranks' calls, host reductions, and the
//! transports that move host bytes between ranks. No wgpu, no naga.
//!
//! **Owns:** matching (the k-th group call of every rank pairs with the k-th
//! of every other; messages pair per sender and receiver, in order),
//! validation (every rank exchanges a small [`Descriptor`] of its call before
//! any data moves, and every rank draws the same [`Verdict`] from them, so a
//! disagreement is the same [`ServerError::CollectiveMismatch`] on every rank,
//! never a hang), poison propagation (a rank's failed input poisons exactly
//! the results that depend on it, with [`ServerError::CollectiveInput`]),
//! timeouts and aborts ([`ServerError::CollectiveTimeout`],
//! [`ServerError::CollectiveAborted`]), the host reductions ([`reduce`]: every
//! [`DType`](compute_runtime::DType) x [`ReduceOp`](compute_runtime::ReduceOp),
//! in rank order, reproducible), and the [`Transport`] seam with its
//! in-process implementation.
//!
//! **Leaves to the server:** device staging (copying `src` into mapped
//! staging, and the outcome's bytes back into `dst`), the device work of a
//! call whose data moves on the devices ([`DeviceData`]), stream ordering (when a
//! collective's input is ready, what later work waits for, `sync_collective`),
//! and the trust registry (whether `src` is trusted, which it tells
//! [`Contribution::provide`] with an `Err`; marking `dst` untrusted with an
//! [`Outcome::poisoned`] error or a failed call's error).
//!
//! ## Flow of one call
//!
//! ```text
//! server thread      post(call) ─────────────► (Contribution, PendingResult)
//! GPU map callbacks  contribution.provide(whole) | feed.provide(step, bytes)
//! engine thread      wait step 0 → exchange descriptors → verdict
//!                    → per step: transport data op (last arrival reduces)
//!                      → the step's output pieces to the result end
//!                    → (several steps) closing exchange → complete
//! server             pending.next() piece by piece, or wait / .await whole
//! ```
//!
//! A call moves in steps ([`Plan`]) of at most the communicator's
//! [`CommConfig::chunk_bytes`] per block, so a server can copy step `k + 1`
//! down and step `k - 1` up while step `k` is combined, with a few steps
//! of memory whatever the call's size.
//!
//! Each rank has one engine thread, owned by its [`Communicator`]; it runs
//! the rank's calls in post order and is the only thread that calls the
//! rank's [`Transport`]. Neither `post` nor `provide` does collective work or
//! waits for another rank, so one thread may drive every rank in turn, and a
//! GPU callback may provide. Every wait of the engine is bounded by
//! [`CommConfig::timeout`], so every posted call completes.
//!
//! ## Calls whose data moves on the devices
//!
//! A server whose ranks can read each other's device memory (devices of one
//! GPU) posts a group call with [`Communicator::post_on_device`] and a
//! [`DeviceData`]: the contribution then only says whether the rank's input
//! is ready and trusted, and the engine runs the same opening as a host
//! call (so a mismatch or a poisoned input is the same verdict), then per
//! piece the device's fill, a [`Round::Filled`] exchange, its combine and a
//! [`Round::Read`] barrier (`device.rs`). Ranks must agree on where a call's
//! data moves; a [`Descriptor::on_device`] that differs fails the call as a
//! mismatch.
//!
//! ## The transport seam
//!
//! A [`Transport`] is one rank's endpoint: blocking methods that map one to
//! one onto MPI (`Allgather` of descriptors, `Allreduce`, `Allgather`,
//! `Reduce_scatter_block`, `Bcast`, `Alltoall`, `Send`/`Recv`), called on the
//! engine thread. [`InProcessTransport`] implements it with a shared-memory
//! rendezvous among the ranks of one process; an MPI transport (one rank per
//! process) implements the same trait and is handed to
//! [`Communicator::with_transport`]. Everything above the seam (numbering,
//! validation, poison, results) is shared by both.
//!
//! ## Across processes (feature `mpi`)
//!
//! `mpi::MpiTransport` is that MPI transport: one rank per process, device
//! ids mapped to processes by [`MpiLayout`]
//! (`DeviceId = world_rank * devices_per_process + local_index`), MPI's own
//! collectives for the data, every blocking MPI call on a worker thread
//! bounded by the call's deadline. `Communicator::join_mpi` joins one;
//! `docs/mpi.md` has the design and the commands.

mod call;
mod cell;
mod communicator;
mod device;
mod engine;
pub mod half;
mod inprocess;
mod layout;
#[cfg(feature = "mpi")]
pub mod mpi;
mod outbuf;
mod plan;
pub mod reduce;
mod rendezvous;
mod result;
mod transport;
// The wire format of the cross-process transport: pure, tested in every
// build, used by the `mpi` feature.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod wire;

pub use call::{CallId, CollectiveCall, Descriptor, Link, Verdict, agree, agree_pair, describe};
pub use communicator::{CommConfig, Communicator};
pub use device::DeviceData;
pub use inprocess::{InProcessTransport, JoinOptions};
pub use layout::MpiLayout;
pub use plan::{CHUNK_ALIGN, DEFAULT_CHUNK_BYTES, Piece, Plan, normalize_chunk};
pub use reduce::Parallelism;
pub use result::{Contribution, Delivery, Feed, Outcome, PendingResult};
pub use transport::{Round, Shared, Transport};

/// Re-exported so users name one error type.
pub use compute_runtime::ServerError;
