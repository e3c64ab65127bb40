//! Collectives: `ServerCommunication` on wgpu, over `compute-collective`.
//!
//! WebGPU has no peer-to-peer path, so every collective is host-staged: a
//! rank's `src` is copied on its stream into a mapped staging buffer
//! (`stage.rs`), the mapped bytes are this rank's input to its
//! [`Communicator`], which pairs the ranks' calls, checks they agree and
//! reduces on the host, and the outcome is written into `dst` by the
//! server's applier thread (`applier.rs`). Nothing in a collective call
//! waits for another rank: the input is staged by the device's poller, the
//! outcome applied by the applier, so one thread may call rank 0, then rank
//! 1, ..., and only `read`, `sync` and `sync_collective` wait.
//!
//! Ordering ([`ComputeWait`]):
//! - `Wait`: everything issued before the call on its stream reaches the
//!   queue before the result can land (submitted, or handed to the applier
//!   when it is itself held behind an earlier collective), whether or not
//!   this rank stages an input; the stream's later work is held until the
//!   result is in `dst` (the stream's batch carries a [`gate::Gate`]).
//!   Another stream whose work touches `dst`, a host write of it, or a
//!   `flush` does not wait: the held batch is handed to the applier and the
//!   other work is held behind it. Only `sync`, `read` and
//!   `sync_collective` wait.
//! - `Overlap`: later work on the stream does not wait; `dst` is refused to
//!   every use (`CollectivePending`) until `sync_collective` writes it.
//!
//! Trust: a rank whose `src` is untrusted, or at risk behind a verdict that
//! turns out bad, still takes part (so its peers never wait for it), giving
//! an input error that poisons every result that depends on it, on every
//! rank ([`ServerError::CollectiveInput`]). A failed collective (mismatch,
//! timeout, poisoned input) poisons its `dst` and whatever read it since
//! (`dst` is registered with [`compute_stream::LateFaults`] at the call and
//! judged by the outcome); the work queued after it runs. A `dst` the call
//! covers whole is trusted again at the call, like a host write, unless the
//! call fails. A call refused on this rank is still posted, so the other
//! ranks fail with it instead of pairing with this rank's next call.
//!
//! Ranks in other processes: with `CollectiveTransport::Mpi` (feature
//! `mpi`) `comm_init` joins through `compute_collective::mpi::MpiTransport`
//! (one rank per process, `DeviceId = world_rank * devices_per_process +
//! local_index`, blocking until every rank joined); the device side is the
//! same. See `docs/mpi.md`.
//!
//! Inside a graph capture collectives are refused (`CaptureState`): a graph
//! replays recorded dispatches, and a collective is a host exchange.

pub(crate) mod applier;
pub(crate) mod gate;
mod ops;
mod stage;

use std::sync::Arc;
use std::time::Duration;

use compute_collective::{CommConfig, Communicator};
use compute_runtime::{
    BufferBinding, ComputeWait, CopyDescriptor, DeviceId, Handle, Reduction, ServerCommunication,
    ServerError, StreamId,
};
use compute_wgsl::WgpuCompiler;
use hashbrown::HashMap;

use crate::collective::applier::Applier;
use crate::collective::gate::Gate;
use crate::collective::ops::{Operands, Peers};
use crate::{CollectiveTransport, WgpuServer};
use compute_collective::CollectiveCall;

/// A collective posted on a stream and not yet synced.
#[derive(Debug)]
pub(crate) struct Posted {
    gate: Arc<Gate>,
    mode: ComputeWait,
    dst: Option<BufferBinding>,
    /// The call, in words.
    call: &'static str,
}

/// A server's collective state.
#[derive(Debug)]
pub(crate) struct Collectives {
    /// This server's device: its rank in each communicator.
    pub device_id: DeviceId,
    /// The transport its options named (else the environment's).
    transport: Option<CollectiveTransport>,
    comms: Vec<Communicator>,
    applier: Option<Applier>,
    posted: HashMap<StreamId, Vec<Posted>>,
}

impl Collectives {
    pub fn new(device_id: DeviceId, transport: Option<CollectiveTransport>) -> Self {
        Collectives {
            device_id,
            transport,
            comms: Vec::new(),
            applier: None,
            posted: HashMap::new(),
        }
    }

    /// The communicator of exactly these ranks, in this order.
    fn by_ranks(&mut self, ids: &[DeviceId]) -> Result<&mut Communicator, ServerError> {
        self.comms
            .iter_mut()
            .find(|c| c.device_ids() == ids)
            .ok_or_else(|| ServerError::CollectiveState {
                reason: format!("no communicator for {ids:?}: call comm_init with them first"),
            })
    }

    /// The most recent communicator that has `peer`, and `peer`'s rank in it.
    fn with_peer(&mut self, peer: DeviceId) -> Result<(&mut Communicator, usize), ServerError> {
        self.comms
            .iter_mut()
            .rev()
            .find_map(|c| c.rank_of(peer).map(|r| (c, r)))
            .ok_or_else(|| ServerError::CollectiveState {
                reason: format!("no communicator has {peer}: call comm_init with it first"),
            })
    }
}

/// Joins through MPI: one rank per process, blocking until every rank's
/// process joined or the communicator's timeout passed.
#[cfg(feature = "mpi")]
fn join_mpi(
    device_ids: &[DeviceId],
    me: DeviceId,
    config: CommConfig,
) -> Result<Communicator, ServerError> {
    Communicator::join_mpi(device_ids, me, config)
}

#[cfg(not(feature = "mpi"))]
fn join_mpi(_: &[DeviceId], _: DeviceId, _: CommConfig) -> Result<Communicator, ServerError> {
    Err(ServerError::Unsupported {
        what: "the MPI collective transport",
        reason: "wgpu-server was built without its `mpi` feature",
    })
}

/// Waits on a gate and what to do with its outcome are in `ops.rs`; this is
/// the seed's surface.
impl<C: WgpuCompiler> ServerCommunication for WgpuServer<C> {
    fn sync_collective(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        self.sync_collectives(stream_id)
    }

    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        self.enter()?;
        let c = &mut self.collectives;
        if c.comms
            .iter()
            .any(|comm| comm.device_ids() == device_ids.as_slice())
        {
            return Ok(());
        }
        let config = CommConfig::from_env();
        // Past the communicator's own timeout, which completes every call.
        let wait = config.timeout.saturating_mul(3) / 2 + Duration::from_secs(30);
        let transport = match c.transport {
            Some(t) => t,
            None => CollectiveTransport::from_env()?,
        };
        let comm = match transport {
            CollectiveTransport::Mpi => join_mpi(&device_ids, c.device_id, config)?,
            _ => Communicator::join_in_process(&device_ids, c.device_id, config)?,
        };
        if c.applier.is_none() {
            c.applier = Some(Applier::start(applier::Context {
                device: self.gpu.device.clone(),
                queue: self.gpu.queue.clone(),
                poller: self.gpu.poller.handle(),
                late: Arc::clone(self.streams.trust().late()),
                indirect_max: self.gpu.caps.limits.max_compute_workgroups_per_dimension,
                outcome_wait: wait,
                upload: self.memory.upload.clone(),
                poll_lock: self.gpu.poll_lock.clone(),
            })?);
        }
        c.comms.push(comm);
        let jobs = c.applier.as_ref().map(|a| a.jobs().clone());
        let backend = self.streams.backend_mut();
        backend.collective_wait = backend.collective_wait.max(wait);
        backend.jobs = jobs;
        Ok(())
    }

    fn all_reduce(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        reduction: Reduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
        wait: ComputeWait,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::AllReduce {
            reduction,
            len: src.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(call, Peers::Ranks(&device_ids), operands, stream_id, wait)
    }

    fn all_gather(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::AllGather {
            src_len: src.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn reduce_scatter(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        reduction: Reduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::ReduceScatter {
            reduction,
            dst_len: dst.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn broadcast(
        &mut self,
        src: Option<BufferBinding>,
        dst: BufferBinding,
        stream_id: StreamId,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::Broadcast {
            // A root outside the list is a rank past the last: the call is
            // posted, invalid, so every rank fails with the same mismatch and
            // the ranks' calls stay paired (refused here, it took no turn,
            // and the other ranks' broadcast paired with this rank's next
            // call).
            root: device_ids
                .iter()
                .position(|d| *d == root)
                .unwrap_or(device_ids.len()),
            len: dst.size as usize,
            has_src: src.is_some(),
        };
        let operands = Operands::new(src, Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn all_to_all(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::AllToAll {
            len: src.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn send(
        &mut self,
        desc: CopyDescriptor,
        stream_id: StreamId,
        device_id_dst: DeviceId,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::Send {
            peer: usize::MAX, // set from the communicator by `collective`
            len: desc.binding.size as usize,
        };
        let operands = Operands::new(Some(desc.binding), None);
        self.collective(
            call,
            Peers::Peer(device_id_dst),
            operands,
            stream_id,
            ComputeWait::Overlap,
        )
    }

    fn recv(
        &mut self,
        handle: Handle,
        stream_id: StreamId,
        device_id_src: DeviceId,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::Recv {
            peer: usize::MAX, // set from the communicator by `collective`
            len: handle.size as usize,
        };
        let operands = Operands::new(None, Some(handle.binding()));
        self.collective(
            call,
            Peers::Peer(device_id_src),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }
}
