//! Collectives: `ServerCommunication` on wgpu, over `compute-collective`.
//!
//! Two paths, the same for every rank of a call (the collective log,
//! `COMPUTE_LOG=collective=basic`, says which each call took and why).
//! **On the devices** (`shared.rs`, `layout.rs`, `device_call.rs`,
//! `fold.rs`): ranks of one process whose
//! devices share memory (devices of one GPU: Vulkan opaque fds, equal
//! device and driver UUIDs) put their input into an exchange buffer every
//! rank imports, and each combines every rank's piece into its `dst` with
//! device copies and a fold kernel; the host only agrees, meets between
//! pieces and judges (`compute_collective::DeviceData`). Group calls the
//! devices do exactly (32-bit elements; float sums and products only where
//! the devices keep denormals; not `Mean`; whole words) take it; the rest,
//! messages, ranks in other processes, CPU adapters (unless
//! `WGPU_SERVER_COLLECTIVE_PATH=device`) and `WGPU_SERVER_COLLECTIVE_PATH=host`
//! are **host-staged**: a rank's `src` is copied on its stream into a mapped staging buffer
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
pub(crate) mod device_call;
pub(crate) mod fold;
pub(crate) mod layout;
pub(crate) mod pipeline;
pub(crate) mod shared;
pub(crate) mod stage;
pub(crate) mod staging;
pub(crate) mod transport;
pub(crate) mod write;

use std::sync::Arc;
use std::time::Duration;

use compute_collective::{CommConfig, Communicator};
use compute_runtime::{
    BufferBinding, CollectiveFault, ComputeWait, DeviceId, ServerError, StreamId,
};
use hashbrown::HashMap;

use crate::collective::applier::{Applier, Context, Jobs};
use crate::collective::device_call::exact_floats;
use crate::collective::fold::Folds;
use crate::collective::pipeline::{ScratchPool, Stager};
use crate::collective::shared::{Exchange, Group, Member, Path};
use crate::collective::transport::CollectiveTransport;
use crate::stream::gate::Gate;
use crate::stream::handoff::HandOffs;

/// What registering with a group needs of the rank's device.
pub(crate) struct Device {
    pub device: wgpu::Device,
    pub submitter: crate::stream::submit::Submitter,
    pub poller: crate::device::poller::PollerHandle,
    /// A CPU adapter (lavapipe): its device memory is host memory.
    pub cpu: bool,
}

/// Whether a rank asks for the device path: `WGPU_SERVER_COLLECTIVE_PATH`
/// `host` or `device` where set, else every adapter but a CPU one (whose
/// "device" copies and folds run on the same cores as host staging's, and
/// measured slower there: `docs/status.md`).
fn wants_device(cpu: bool) -> bool {
    match std::env::var("WGPU_SERVER_COLLECTIVE_PATH").as_deref() {
        Ok("host") => false,
        Ok("device") => true,
        _ => !cpu,
    }
}

/// A collective posted on a stream and not yet synced.
#[derive(Debug)]
pub(crate) struct Posted {
    pub gate: Arc<Gate>,
    pub mode: ComputeWait,
    pub dst: Option<BufferBinding>,
    /// The call, in words.
    pub call: &'static str,
}

/// A server's collective state: its communicators, the applier thread that
/// applies their outcomes, and what each stream has posted.
#[derive(Debug)]
pub(crate) struct Collectives {
    /// This server's device: its rank in each communicator.
    device_id: DeviceId,
    /// The transport its options named (else the environment's).
    transport: Option<CollectiveTransport>,
    /// The timeout its options named (else the environment's).
    timeout: Option<Duration>,
    /// The chunk size its options named (else the environment's).
    chunk_bytes: Option<usize>,
    comms: Vec<Communicator>,
    applier: Option<Applier>,
    /// Stages the steps of large calls after the window (`pipeline.rs`).
    stager: Option<Stager>,
    /// Device copies of large calls' inputs.
    scratch: ScratchPool,
    posted: HashMap<StreamId, Vec<Posted>>,
    /// Each in-process communicator's exchange memory (`shared.rs`), by
    /// its device list.
    exchanges: HashMap<Vec<DeviceId>, Arc<Exchange>>,
    /// The fold kernels of device collectives, made at the first join.
    folds: Option<Arc<Folds>>,
}

/// What a new communicator asks of the streams: to hold batches for as
/// long as `wait`, and to hand them to `handoffs` when they must go on
/// without waiting.
pub(crate) struct Joined {
    pub wait: Duration,
    pub handoffs: Arc<dyn HandOffs>,
}

impl Collectives {
    pub fn new(
        device_id: DeviceId,
        transport: Option<CollectiveTransport>,
        timeout: Option<Duration>,
        chunk_bytes: Option<usize>,
    ) -> Self {
        Collectives {
            device_id,
            transport,
            timeout,
            chunk_bytes,
            comms: Vec::new(),
            applier: None,
            stager: None,
            scratch: ScratchPool::default(),
            posted: HashMap::new(),
            exchanges: HashMap::new(),
            folds: None,
        }
    }

    /// What the next group call on the communicator of `ids` runs on, with
    /// its path (decided for every rank of the call by the first to post
    /// it); `None` where its ranks are not all in this process. Once per
    /// call, in call order.
    pub fn device_of(&self, ids: &[DeviceId]) -> Option<(Arc<Exchange>, Arc<Folds>, Path)> {
        let exchange = self.exchanges.get(ids)?;
        let folds = self.folds.clone()?;
        let path = exchange.next_call();
        Some((Arc::clone(exchange), folds, path))
    }

    /// The settled path of the communicator of `ids` (`Some(None)` while a
    /// rank has not registered); `None` as for [`Self::device_of`].
    #[cfg(feature = "testing")]
    pub fn settled_path(&self, ids: &[DeviceId]) -> Option<Option<Path>> {
        let exchange = self.exchanges.get(ids)?;
        Some(exchange.group().settled())
    }

    /// Device calls this rank posted on the communicator of `ids`.
    #[cfg(feature = "testing")]
    pub fn device_calls(&self, ids: &[DeviceId]) -> Option<u64> {
        self.exchanges.get(ids).map(|e| e.posted())
    }

    /// Registers this rank's device with `comm`'s group, where its ranks
    /// are all in this process.
    fn register(&mut self, comm: &Communicator, device: &Device) {
        let Some(group) = Group::of(comm) else {
            return;
        };
        let folds = Arc::clone(
            self.folds
                .get_or_insert_with(|| Arc::new(Folds::new(device.device.clone()))),
        );
        let uuids = crate::device::shared_memory::identity(&device.device).ok();
        let wants_device = wants_device(device.cpu);
        let exact_floats = uuids.is_some()
            && wants_device
            && exact_floats(&folds, &device.device, &device.submitter, &device.poller);
        tracing::debug!(
            device = ?self.device_id,
            shares_memory = uuids.is_some(),
            wants_device,
            exact_floats,
            "collective group member"
        );
        group.register(
            comm.rank(),
            Member {
                uuids,
                wants_device,
                exact_floats,
            },
        );
        let exchange = Exchange::new(group, comm.rank(), comm.size(), device.device.clone());
        self.exchanges
            .insert(comm.device_ids().to_vec(), Arc::new(exchange));
    }

    /// Forms the communicator of `device_ids` (a no-op, `None`, when it
    /// exists), starting the applier with `context` the first time.
    pub fn join(
        &mut self,
        device_ids: &[DeviceId],
        device: &Device,
        context: impl FnOnce(Duration) -> Context,
    ) -> Result<Option<Joined>, ServerError> {
        if self.comms.iter().any(|c| c.device_ids() == device_ids) {
            return Ok(None);
        }
        let mut config = CommConfig::from_env();
        if let Some(t) = self.timeout {
            config = config.with_timeout(t);
        }
        if let Some(c) = self.chunk_bytes {
            config = config.with_chunk_bytes(c);
        }
        // Past the communicator's own timeout, which completes every call.
        let wait = config.timeout.saturating_mul(3) / 2 + Duration::from_secs(30);
        let transport = match self.transport {
            Some(t) => t,
            None => CollectiveTransport::from_env()?,
        };
        let comm = match transport {
            CollectiveTransport::Mpi => join_mpi(device_ids, self.device_id, config)?,
            _ => Communicator::join_in_process(device_ids, self.device_id, config)?,
        };
        if self.applier.is_none() {
            self.applier = Some(Applier::start(context(wait))?);
        }
        if self.stager.is_none() {
            self.stager = Some(Stager::start()?);
        }
        self.register(&comm, device);
        self.comms.push(comm);
        let handoffs = self.jobs()?.handoffs();
        Ok(Some(Joined { wait, handoffs }))
    }

    /// The communicator of exactly these ranks, in this order.
    pub fn by_ranks(&mut self, ids: &[DeviceId]) -> Result<&mut Communicator, ServerError> {
        self.comms
            .iter_mut()
            .find(|c| c.device_ids() == ids)
            .ok_or_else(|| ServerError::CollectiveState {
                fault: CollectiveFault::NoCommunicator {
                    devices: ids.to_vec(),
                },
            })
    }

    /// The communicator a message with `peer` goes through, and `peer`'s
    /// rank in it: the pair's own (exactly this device and `peer`) when one
    /// was joined, else the most recent one that has `peer`. Both ends of a
    /// message pick the same one when both joined their pair's, whatever
    /// order either joined the others in (the most recent alone depends on
    /// that order, and two ends that disagree never pair).
    pub fn with_peer(&mut self, peer: DeviceId) -> Result<(&mut Communicator, usize), ServerError> {
        let has_peer = |c: &Communicator| c.rank_of(peer).is_some();
        let index = self
            .comms
            .iter()
            .position(|c| c.size() == 2 && has_peer(c))
            .or_else(|| self.comms.iter().rposition(has_peer));
        index
            .and_then(|i| self.comms.get_mut(i))
            .and_then(|c| c.rank_of(peer).map(|r| (c, r)))
            .ok_or(ServerError::CollectiveState {
                fault: CollectiveFault::NoPeer { peer },
            })
    }

    /// The applier's queue.
    pub fn jobs(&self) -> Result<&Jobs, ServerError> {
        self.applier
            .as_ref()
            .map(Applier::jobs)
            .ok_or_else(|| ServerError::CollectiveState {
                fault: CollectiveFault::NoCommunicator {
                    devices: Vec::new(),
                },
            })
    }

    /// The stager thread and the scratch pool, for a call with more steps
    /// than the staging window.
    pub fn refills(&self) -> Result<(Stager, ScratchPool), ServerError> {
        let stager = self.stager.clone().ok_or(ServerError::CollectiveState {
            fault: CollectiveFault::NoCommunicator {
                devices: Vec::new(),
            },
        })?;
        Ok((stager, self.scratch.clone()))
    }

    /// Records a collective posted on `stream`, for `sync_collective`.
    pub fn post(&mut self, stream: StreamId, posted: Posted) {
        let list = self.posted.entry(stream).or_default();
        // Settled `Wait` entries have nothing left for `sync_collective`.
        list.retain(|p| p.mode == ComputeWait::Overlap || !p.gate.is_settled());
        list.push(posted);
    }

    /// Every collective posted on `stream` since the last call.
    pub fn take_posted(&mut self, stream: StreamId) -> Vec<Posted> {
        self.posted.remove(&stream).unwrap_or_default()
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
