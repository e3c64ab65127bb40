//! The in-process transport: the ranks of one process meet in a shared
//! [`Hub`] of rounds; a process-global registry pairs the servers that name
//! the same device list.
//!
//! Data rounds (one per step of a call) compute every rank's output once,
//! on the engine thread of the last rank to arrive (a reduction splits
//! across the host pool's threads when it is large): an all-reduce result,
//! an all-gather concatenation and a broadcast are one shared `Bytes`
//! handed to every rank (no copy per rank); a reduce-scatter hands out
//! slices of one reduction; an all-to-all builds one buffer per rank. The
//! chunk size steps are cut by is the hub's: the one the rank that formed
//! it asked for (it decides only how the work is cut, never a result).
//!
//! **Buys:** joining never blocks (one thread may join rank 0, then rank 1,
//! ...); host bytes move by reference count, not copy, where the result is
//! the same for every rank. **Doesn't buy:** overlap of one rank's calls
//! (each rank's calls run in order, as on a stream), or reaching another
//! process.

use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Instant;

use bytes::Bytes;
use compute_runtime::{CollectiveFault, RankListProblem, RoundProblem};
use compute_runtime::{DeviceId, Reduction, ServerError};
use hashbrown::HashMap;

use crate::call::{CallId, Descriptor, Link, Verdict, agree, describe};
use crate::plan::Plan;
use crate::reduce::Parallelism;
use crate::rendezvous::{self, Fused, Hub, Join, Phase};
use crate::transport::{Round, Transport};

mod ops;

use ops::Op;

type Registry = Mutex<HashMap<Vec<DeviceId>, Weak<Hub>>>;

/// The hubs of the communicators of this process, by device list.
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// One rank's endpoint of an in-process communicator.
#[derive(Debug)]
pub struct InProcessTransport {
    hub: Arc<Hub>,
    rank: usize,
    parallelism: Parallelism,
}

/// How a rank joining a hub asks it to work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinOptions {
    /// When this rank's reductions split across threads.
    pub parallelism: Parallelism,
    /// Bytes of each block one step moves, if this rank forms the hub.
    pub chunk_bytes: usize,
}

impl Default for JoinOptions {
    fn default() -> Self {
        JoinOptions {
            parallelism: Parallelism::default(),
            chunk_bytes: crate::plan::DEFAULT_CHUNK_BYTES,
        }
    }
}

impl InProcessTransport {
    /// Joins the communicator over `device_ids` as the rank of `me` (its
    /// position in the list). Never blocks. Fails with
    /// [`ServerError::CollectiveState`] when the list is empty or names a
    /// device twice, when `me` is not in it, or when `me` already joined the
    /// communicator over this list and has not left it. After any rank has
    /// left a communicator, joining the same list starts a new one (every
    /// rank re-joins).
    pub fn join(
        device_ids: &[DeviceId],
        me: DeviceId,
        options: JoinOptions,
    ) -> Result<Self, ServerError> {
        let parallelism = options.parallelism;
        let state = |problem: RankListProblem| ServerError::CollectiveState {
            fault: CollectiveFault::RankList {
                devices: device_ids.to_vec(),
                problem,
            },
        };
        if device_ids.is_empty() {
            return Err(state(RankListProblem::Empty));
        }
        for (i, id) in device_ids.iter().enumerate() {
            if device_ids[..i].contains(id) {
                return Err(state(RankListProblem::Twice { device: *id }));
            }
        }
        let rank = device_ids
            .iter()
            .position(|id| *id == me)
            .ok_or_else(|| state(RankListProblem::NotIn { device: me }))?;
        let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        registry.retain(|_, hub| hub.strong_count() > 0);
        if let Some(hub) = registry.get(device_ids).and_then(Weak::upgrade) {
            match hub.join(rank) {
                Join::Joined => return Ok(Self::new(hub, rank, parallelism)),
                Join::AlreadyJoined => {
                    return Err(state(RankListProblem::Joined { device: me }));
                }
                Join::Over => {}
            }
        }
        let hub = Arc::new(Hub::new(
            device_ids.len(),
            crate::plan::normalize_chunk(options.chunk_bytes),
        ));
        // A fresh hub: the join cannot be refused.
        let _ = hub.join(rank);
        registry.insert(device_ids.to_vec(), Arc::downgrade(&hub));
        Ok(Self::new(hub, rank, parallelism))
    }

    /// Rendezvous rounds the communicator's hub holds now: calls in flight,
    /// and tombstones of aborted calls some rank has not moved past yet.
    /// Zero once every posted call has completed everywhere.
    pub fn rounds_held(&self) -> usize {
        self.hub.rounds_held()
    }

    fn new(hub: Arc<Hub>, rank: usize, parallelism: Parallelism) -> Self {
        InProcessTransport {
            hub,
            rank,
            parallelism,
        }
    }

    /// The descriptor round of `id`: this rank's slot, and every
    /// participant's descriptor in slot order.
    fn descriptors(
        &self,
        id: CallId,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<(usize, Arc<Vec<Descriptor>>), ServerError> {
        let what = describe(mine.call.name(), id);
        let phase = match round {
            Round::Open => Phase::Exchange,
            Round::Close => Phase::Close,
            Round::Filled(piece) => Phase::Filled(piece),
            Round::Read(piece) => Phase::Read(piece),
        };
        self.hub.meet(
            rendezvous::descs,
            id,
            phase,
            self.rank,
            mine,
            deadline,
            &what,
            Ok,
        )
    }

    /// The data round of `id` (`name` is the call's): deposit `input`, get
    /// this rank's output of `finish`.
    #[allow(clippy::too_many_arguments)] // The round's key, its input and its work.
    fn data(
        &self,
        id: CallId,
        step: usize,
        name: &str,
        input: Bytes,
        deadline: Instant,
        finish: impl FnOnce(Vec<Bytes>) -> Result<Vec<Bytes>, ServerError>,
    ) -> Result<Bytes, ServerError> {
        let what = describe(name, id);
        let (slot, outputs) = self.hub.meet(
            rendezvous::data,
            id,
            Phase::Data(step),
            self.rank,
            input,
            deadline,
            &what,
            finish,
        )?;
        output(&outputs, slot, &what)
    }

    /// The data round of message `link`: the sender (slot 0) deposits its
    /// bytes, the receiver (slot 1) gets them.
    fn message(
        &self,
        link: Link,
        step: usize,
        name: &str,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        self.data(
            CallId::P2p(link),
            step,
            name,
            input,
            deadline,
            |mut parts| {
                parts.reverse();
                Ok(parts)
            },
        )
    }
}

fn output(outputs: &[Bytes], slot: usize, what: &str) -> Result<Bytes, ServerError> {
    outputs
        .get(slot)
        .cloned()
        .ok_or_else(|| ServerError::CollectiveState {
            fault: CollectiveFault::Round {
                call: what.to_owned(),
                problem: RoundProblem::Parts {
                    got: outputs.len(),
                    ranks: slot + 1,
                },
            },
        })
}

impl Transport for InProcessTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.hub.ranks()
    }

    fn chunk_bytes(&self) -> usize {
        self.hub.chunk_bytes()
    }

    fn exchange(
        &self,
        seq: u64,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Vec<Descriptor>, ServerError> {
        let (_, all) = self.descriptors(CallId::Group { seq }, round, mine, deadline)?;
        Ok(all.as_ref().clone())
    }

    fn exchange_pair(
        &self,
        link: Link,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Descriptor, ServerError> {
        let (slot, both) = self.descriptors(CallId::P2p(link), round, mine, deadline)?;
        both.get(1 - slot)
            .cloned()
            .ok_or_else(|| ServerError::CollectiveState {
                fault: CollectiveFault::Round {
                    call: describe("send", CallId::P2p(link)),
                    problem: RoundProblem::NoCall { rank: None },
                },
            })
    }

    fn all_reduce(
        &self,
        seq: u64,
        step: usize,
        reduction: Reduction,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        self.group_step(seq, step, Op::AllReduce(reduction), input, deadline)
    }

    fn all_gather(
        &self,
        seq: u64,
        step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        self.group_step(seq, step, Op::AllGather, input, deadline)
    }

    fn reduce_scatter(
        &self,
        seq: u64,
        step: usize,
        reduction: Reduction,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        self.group_step(seq, step, Op::ReduceScatter(reduction), input, deadline)
    }

    fn broadcast(
        &self,
        seq: u64,
        step: usize,
        root: usize,
        input: Bytes,
        len: usize,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        self.group_step(seq, step, Op::Broadcast { root, len }, input, deadline)
    }

    fn all_to_all(
        &self,
        seq: u64,
        step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        self.group_step(seq, step, Op::AllToAll, input, deadline)
    }

    fn local_shared(
        &self,
        init: &mut dyn FnMut() -> crate::transport::Shared,
    ) -> Option<crate::transport::Shared> {
        Some(self.hub.shared(init))
    }

    fn exchange_and_run(
        &self,
        seq: u64,
        mine: Descriptor,
        input: Bytes,
        deadline: Instant,
    ) -> Option<Result<(Vec<Descriptor>, Bytes), ServerError>> {
        let id = CallId::Group { seq };
        let what = describe(mine.call.name(), id);
        let ranks = self.hub.ranks();
        let finish = |parts: Vec<Fused>| -> Result<Vec<Fused>, ServerError> {
            let mut descs = Vec::with_capacity(parts.len());
            let mut inputs = Vec::with_capacity(parts.len());
            for part in parts {
                match part {
                    Fused::In(d, b) => {
                        descs.push(d);
                        inputs.push(b);
                    }
                    Fused::Out(..) => {
                        return Err(ServerError::CollectiveState {
                            fault: CollectiveFault::Misuse("an output was deposited in a round"),
                        });
                    }
                }
            }
            // The first step's operation (a broadcast moves that step's
            // bytes, not the call's).
            let op = descs.first().and_then(|d| {
                let step = Plan::new(d.call, ranks, self.hub.chunk_bytes())
                    .range(0)
                    .len();
                match Op::of(d.call)? {
                    Op::Broadcast { root, .. } => Some(Op::Broadcast { root, len: step }),
                    other => Some(other),
                }
            });
            // A device call's data is not here (`device.rs`).
            let on_device = descs.iter().any(|d| d.on_device);
            let outputs = match (agree(seq, ranks, &descs), op) {
                (Verdict::Run, Some(op)) if !on_device => self.outputs(op, &what, inputs)?,
                _ => vec![Bytes::new(); descs.len()],
            };
            let descs = Arc::new(descs);
            Ok(outputs
                .into_iter()
                .map(|out| Fused::Out(Arc::clone(&descs), out))
                .collect())
        };
        let met = self.hub.meet(
            rendezvous::fused,
            id,
            Phase::Fused,
            self.rank,
            Fused::In(mine, input),
            deadline,
            &what,
            finish,
        );
        Some(met.and_then(|(slot, outs)| match outs.get(slot) {
            Some(Fused::Out(descs, out)) => Ok((descs.as_ref().clone(), out.clone())),
            _ => Err(ServerError::CollectiveState {
                fault: CollectiveFault::Round {
                    call: what.clone(),
                    problem: RoundProblem::Parts {
                        got: outs.len(),
                        ranks: slot + 1,
                    },
                },
            }),
        }))
    }

    fn send(
        &self,
        link: Link,
        step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<(), ServerError> {
        self.message(link, step, "send", input, deadline)
            .map(|_| ())
    }

    fn recv(
        &self,
        link: Link,
        step: usize,
        len: usize,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let bytes = self.message(link, step, "recv", Bytes::new(), deadline)?;
        if bytes.len() != len {
            return Err(ServerError::SizeMismatch {
                expected: len as u64,
                actual: bytes.len() as u64,
            });
        }
        Ok(bytes)
    }

    fn abort(&self, call: CallId, error: ServerError) {
        self.hub.abort(call, error);
    }

    fn missing(&self, call: CallId) -> Vec<usize> {
        self.hub.missing(call)
    }

    fn leave(&self) {
        self.hub.leave(self.rank);
    }
}
