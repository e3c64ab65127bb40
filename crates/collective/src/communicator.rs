//! [`Communicator`]: one rank's handle on a group of ranks, and its
//! [`CommConfig`].
//!
//! A communicator numbers the rank's calls (group calls in one sequence,
//! point-to-point messages per peer and direction), checks what it can
//! locally, and queues each call for the rank's engine thread; `post` never
//! blocks and never waits for another rank.
//!
//! **Buys:** a server owns one `Communicator` per device list and drives it
//! from its own thread through `&mut self`, like the rest of the server; the
//! transport behind it is a trait object, so in-process and MPI
//! communicators are the same type. **Doesn't buy:** sharing one rank's
//! communicator between threads (the sequence numbers are the rank's order
//! of calls; two threads posting would make that order a race).

use std::sync::{Arc, mpsc};
use std::time::Duration;

use compute_runtime::{CollectiveFault, RankListProblem};
use compute_runtime::{DeviceId, ServerError};

use crate::call::{CallId, CollectiveCall, Link, invalid_call};
use crate::cell::Cell;
use crate::device::DeviceData;
use crate::engine::{self, Job};
use crate::inprocess::{InProcessTransport, JoinOptions};
use crate::plan::{DEFAULT_CHUNK_BYTES, Plan, normalize_chunk};
use crate::reduce::Parallelism;
use crate::result::{Contribution, PendingResult};
use crate::transport::{Shared, Transport};

/// How a communicator behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommConfig {
    /// How long the engine waits at each step of a call (for the rank's
    /// input, for the other ranks at the exchange, for the data) before the
    /// call fails with [`ServerError::CollectiveTimeout`] and is aborted.
    pub timeout: Duration,
    /// When host reductions split across threads.
    pub parallelism: Parallelism,
    /// Bytes of each block one step of a call moves ([`Plan`]): a call
    /// larger than this is pipelined in steps. The same on every rank: the
    /// rank that forms an in-process communicator sets it; across processes
    /// rank 0's counts.
    pub chunk_bytes: usize,
}

impl CommConfig {
    /// The environment variable that sets the default timeout, in
    /// milliseconds.
    pub const TIMEOUT_ENV: &'static str = "COMPUTE_COLLECTIVE_TIMEOUT_MS";

    /// The timeout when the environment does not set one: 60 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// The environment variable that sets the default chunk size, in bytes.
    pub const CHUNK_ENV: &'static str = "COMPUTE_COLLECTIVE_CHUNK_BYTES";

    /// The default configuration, with the timeout read from
    /// [`Self::TIMEOUT_ENV`] when it holds a number of milliseconds, and
    /// the chunk size from [`Self::CHUNK_ENV`] when it holds a number of
    /// bytes (else [`DEFAULT_CHUNK_BYTES`]).
    pub fn from_env() -> Self {
        let number = |name| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let timeout =
            number(Self::TIMEOUT_ENV).map_or(Self::DEFAULT_TIMEOUT, Duration::from_millis);
        let chunk_bytes = number(Self::CHUNK_ENV)
            .and_then(|b| usize::try_from(b).ok())
            .map_or(DEFAULT_CHUNK_BYTES, normalize_chunk);
        CommConfig {
            timeout,
            parallelism: Parallelism::default(),
            chunk_bytes,
        }
    }

    /// This configuration with steps of `chunk_bytes` (rounded down to a
    /// whole number of [`CHUNK_ALIGN`](crate::CHUNK_ALIGN) bytes, at least
    /// one).
    pub fn with_chunk_bytes(mut self, chunk_bytes: usize) -> Self {
        self.chunk_bytes = normalize_chunk(chunk_bytes);
        self
    }

    /// This configuration with `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// This configuration with `parallelism`.
    pub fn with_parallelism(mut self, parallelism: Parallelism) -> Self {
        self.parallelism = parallelism;
        self
    }
}

impl Default for CommConfig {
    /// [`CommConfig::from_env`].
    fn default() -> Self {
        Self::from_env()
    }
}

/// One rank's handle on a communicator. Dropping it lets the rank's queued
/// calls finish, then the rank leaves (calls of other ranks that wait for
/// it fail with [`ServerError::CollectiveAborted`]).
#[derive(Debug)]
pub struct Communicator {
    transport: Arc<dyn Transport>,
    config: CommConfig,
    device_ids: Vec<DeviceId>,
    jobs: mpsc::Sender<Job>,
    next_group: u64,
    next_send: Vec<u64>,
    next_recv: Vec<u64>,
}

impl Communicator {
    /// Joins the in-process communicator over `device_ids` as `me`'s rank
    /// (ranks are the list's order). Never blocks: the ranks may join from
    /// one thread in turn. See [`InProcessTransport::join`] for the errors.
    pub fn join_in_process(
        device_ids: &[DeviceId],
        me: DeviceId,
        config: CommConfig,
    ) -> Result<Self, ServerError> {
        let options = JoinOptions {
            parallelism: config.parallelism,
            chunk_bytes: config.chunk_bytes,
        };
        let transport = InProcessTransport::join(device_ids, me, options)?;
        Self::with_transport(Arc::new(transport), device_ids.to_vec(), config)
    }

    /// Joins the cross-process communicator over `device_ids` as `me`'s
    /// rank, through MPI (one rank per process); blocks until every rank
    /// has joined or `config.timeout` passes. See
    /// [`MpiTransport::join`](crate::mpi::MpiTransport::join).
    #[cfg(feature = "mpi")]
    pub fn join_mpi(
        device_ids: &[DeviceId],
        me: DeviceId,
        config: CommConfig,
    ) -> Result<Self, ServerError> {
        let transport = crate::mpi::MpiTransport::join(device_ids, me, &config)?;
        Self::with_transport(Arc::new(transport), device_ids.to_vec(), config)
    }

    /// A communicator over any transport; `device_ids` names its ranks (one
    /// per rank, in rank order).
    pub fn with_transport(
        transport: Arc<dyn Transport>,
        device_ids: Vec<DeviceId>,
        config: CommConfig,
    ) -> Result<Self, ServerError> {
        let ranks = transport.size();
        if device_ids.len() != ranks || transport.rank() >= ranks {
            return Err(ServerError::CollectiveState {
                fault: CollectiveFault::RankList {
                    problem: RankListProblem::Length {
                        ranks,
                        devices: device_ids.len(),
                    },
                    devices: device_ids,
                },
            });
        }
        let jobs = engine::spawn(Arc::clone(&transport), config.timeout)?;
        Ok(Communicator {
            transport,
            config,
            device_ids,
            jobs,
            next_group: 0,
            next_send: vec![0; ranks],
            next_recv: vec![0; ranks],
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.transport.rank()
    }

    /// How many ranks the communicator has.
    pub fn size(&self) -> usize {
        self.transport.size()
    }

    /// The devices of the ranks, in rank order.
    pub fn device_ids(&self) -> &[DeviceId] {
        &self.device_ids
    }

    /// The rank of `device`, if it is one.
    pub fn rank_of(&self, device: DeviceId) -> Option<usize> {
        self.device_ids.iter().position(|d| *d == device)
    }

    /// The configuration.
    pub fn config(&self) -> &CommConfig {
        &self.config
    }

    /// Posts this rank's next call: returns where its input goes and where
    /// its outcome comes from. Never blocks.
    ///
    /// Group calls pair by sequence: the k-th group call of every rank with
    /// the k-th of every other. Messages pair per (sender, receiver), in
    /// order. A group call that cannot be valid (see
    /// [`CollectiveCall::problem`]) still takes its place in the sequence, so
    /// the other ranks fail with the same [`ServerError::CollectiveMismatch`]
    /// this returns, instead of waiting. A message to or from a rank that
    /// does not exist, or to this rank itself, is refused with
    /// [`ServerError::InvalidArgument`] and takes no place.
    pub fn post(
        &mut self,
        call: CollectiveCall,
    ) -> Result<(Contribution, PendingResult), ServerError> {
        self.post_with(call, None)
    }

    /// [`post`](Self::post) for a group call whose data moves on the
    /// devices (`data`, see [`DeviceData`]): the contribution only says
    /// whether this rank's input is ready and trusted (any bytes, or an
    /// error), and the outcome carries no bytes (the devices wrote them).
    /// Every rank of the call must post it this way (ranks that do not
    /// fail it as a mismatch).
    pub fn post_on_device(
        &mut self,
        call: CollectiveCall,
        data: Arc<dyn DeviceData>,
    ) -> Result<(Contribution, PendingResult), ServerError> {
        if !call.is_group() {
            return Err(ServerError::InvalidArgument {
                reason: format!("{call} is not a group call: only group calls move on devices"),
            });
        }
        self.post_with(call, Some(data))
    }

    /// State every rank of this communicator in this process shares: the
    /// same value for each, made by the first to ask. `None` where the
    /// ranks are not all in this process (MPI).
    pub fn local_shared(&self, init: &mut dyn FnMut() -> Shared) -> Option<Shared> {
        self.transport.local_shared(init)
    }

    fn post_with(
        &mut self,
        call: CollectiveCall,
        device: Option<Arc<dyn DeviceData>>,
    ) -> Result<(Contribution, PendingResult), ServerError> {
        let (rank, ranks) = (self.rank(), self.size());
        let on_device = device.is_some();
        let problem = call.problem(rank, ranks);
        let id = match call {
            CollectiveCall::Send { peer, .. } | CollectiveCall::Recv { peer, .. } => {
                if let Some(reason) = problem {
                    return Err(ServerError::InvalidArgument {
                        reason: format!("{call} on rank {rank}: {reason}"),
                    });
                }
                let (counter, from, to) = match call {
                    CollectiveCall::Send { .. } => (&mut self.next_send, rank, peer),
                    _ => (&mut self.next_recv, peer, rank),
                };
                let seq = counter.get(peer).copied().unwrap_or(0);
                if let Some(next) = counter.get_mut(peer) {
                    *next += 1;
                }
                CallId::P2p(Link { from, to, seq })
            }
            _ => {
                let seq = self.next_group;
                self.next_group += 1;
                CallId::Group { seq }
            }
        };
        let cell = Cell::new();
        let job = Job {
            id,
            call,
            invalid: problem.clone(),
            cell: Arc::clone(&cell),
            posted: std::time::Instant::now(),
            device,
        };
        self.jobs
            .send(job)
            .map_err(|_| ServerError::CollectiveState {
                fault: CollectiveFault::Stopped {
                    thread: "collective engine",
                },
            })?;
        if let Some(reason) = problem {
            return Err(invalid_call(id, rank, &call, &reason));
        }
        let plan = Plan::new(call, ranks, self.transport.chunk_bytes());
        let contribution = match on_device {
            true => Contribution::status(Arc::clone(&cell), plan),
            false => Contribution::new(Arc::clone(&cell), call.input_len(ranks), plan),
        };
        let pending = PendingResult::new(cell, Arc::clone(&self.transport), id, call);
        Ok((contribution, pending))
    }

    /// Posts this rank's next group call as [`CollectiveCall::Refused`]
    /// with `cause`: a call its caller refused before it could say what it
    /// was. Every rank's call at its place fails with
    /// [`ServerError::CollectiveInput`] naming this rank and `cause`; the
    /// next calls pair as usual. Never blocks; this rank's own outcome is
    /// the refusal, so nothing waits for it.
    pub fn post_refused(&mut self, cause: Arc<ServerError>) -> Result<(), ServerError> {
        let (contribution, _outcome) = self.post(CollectiveCall::Refused)?;
        contribution.provide(Err(cause));
        Ok(())
    }
}
