//! [`MpiTransport`]: one rank per process, over an MPI communicator of the
//! owners of the rank list's devices.
//!
//! Every MPI call of a transport runs on its own worker thread (blocking
//! MPI: the same algorithms a plain `MPI_Allreduce` gets); the engine
//! thread waits for it until the step's deadline. Calls reach the worker in
//! the rank's order: group calls by sequence, messages per link, and a call
//! this rank abandoned before it could take part (its input never came, its
//! waiter gave up) still takes its place, as an exchange carrying the abort,
//! so every other rank fails it with the same
//! [`ServerError::CollectiveAborted`] at once.
//!
//! **Broken.** A step that times out (a peer died, or never calls) or fails
//! in MPI leaves the worker blocked in MPI, maybe for good, and the
//! communicator's sequence unknown: the transport is broken, and every later
//! call on it fails at once with [`ServerError::CollectiveAborted`] naming
//! the first failure; the process's MPI is marked broken too, so
//! [`super::finalize`] refuses (`MPI_Finalize` would wait for the dead
//! peer) and the process exits without it.
//!
//! Where the rest lives: the [`Transport`](crate::transport::Transport)
//! impl, one collective at a time, is `collectives.rs`; the communicator's
//! creation and the descriptor exchanges the worker runs are `exchange.rs`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use compute_runtime::CollectiveFault;
use compute_runtime::{DeviceId, ServerError};
use hashbrown::HashMap;
use mpi::ffi;

use super::exchange::{create, gather_entries, swap_entries};
use super::pool::Pool;
use super::worker::{Fail, Slot, Worker, run_until};
use super::world::{self, Comm, World, check};
use crate::call::{CallId, Link, describe};
use crate::communicator::CommConfig;
use crate::wire::{self, Entry, Join};

/// Which stage of a call is in flight: its opening exchange (which an
/// abort can still cut short), or anything after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Exchange,
    Data,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The next group call to hand to the worker.
    pub(super) next_group: u64,
    /// The next message of each link (from, to) to hand to the worker.
    pub(super) next_link: HashMap<(usize, usize), u64>,
    /// The call whose step the engine waits on.
    pub(super) inflight: Option<(CallId, Stage, Arc<dyn Fail>)>,
    /// Exchanges of abandoned calls, handed to the worker by `abort`.
    pub(super) abandoned_groups: HashMap<u64, Arc<Slot<Vec<Entry>>>>,
    pub(super) abandoned_links: HashMap<Link, (Arc<Slot<Entry>>, Entry)>,
    /// Why the transport cannot be used any more.
    pub(super) broken: Option<String>,
}

/// One rank's endpoint of a communicator whose ranks are processes of an
/// MPI job; see the module doc and `docs/mpi.md`.
#[derive(Debug)]
pub struct MpiTransport {
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) device_ids: Vec<DeviceId>,
    pub(super) comm: Comm,
    /// Bytes of each block a step moves (rank 0's choice).
    pub(super) chunk_bytes: usize,
    pub(super) world: &'static World,
    pub(super) worker: Worker,
    pub(super) state: Mutex<State>,
    /// Output buffers, reused across calls.
    pub(super) pool: Arc<Pool>,
}

impl MpiTransport {
    /// Joins the communicator over `device_ids` as the rank of `me` (its
    /// position in the list), blocking until every rank of the list has
    /// joined or `config.timeout` has passed.
    ///
    /// Starts the process's MPI first if it is not yet (see
    /// [`super::init`]). The list is checked against the [`MpiLayout`]
    /// before any MPI call ([`MpiLayout::plan`]: a device no process owns is
    /// the same [`ServerError::CollectiveState`] on every rank); then the
    /// owners create a communicator (`MPI_Comm_create_group` over
    /// `MPI_COMM_WORLD`, ranks in list order) and exchange join headers
    /// (device, process, a hash of the list), which must agree
    /// ([`ServerError::CollectiveMismatch`] on every rank otherwise). Ranks
    /// that name different lists never meet: each fails with
    /// [`ServerError::CollectiveTimeout`] at its deadline.
    ///
    /// [`MpiLayout`]: crate::MpiLayout
    /// [`MpiLayout::plan`]: crate::MpiLayout::plan
    pub fn join(
        device_ids: &[DeviceId],
        me: DeviceId,
        config: &CommConfig,
    ) -> Result<Self, ServerError> {
        let started = Instant::now();
        let deadline = after(started, config.timeout);
        let world = world::world(config.timeout)?;
        if let Some(reason) = world.broken() {
            return Err(ServerError::CollectiveState {
                fault: CollectiveFault::MpiUnusable { reason },
            });
        }
        let owners = world.layout.plan(device_ids, me, world.rank)?;
        let rank = device_ids.iter().position(|d| *d == me).unwrap_or(0);
        let size = device_ids.len();
        world.enter();
        let worker = match Worker::spawn(format!("compute-mpi-{}", me.0), || {
            if let Some(Ok(w)) = world::started() {
                w.exit();
            }
        }) {
            Ok(w) => w,
            Err(e) => {
                world.exit();
                return Err(e);
            }
        };
        let list = device_ids.to_vec();
        let join = Join {
            devices_per_process: world.layout.devices_per_process as u64,
            process: world.rank as u64,
            device: me.0,
            list_len: list.len() as u64,
            list_hash: wire::list_hash(&list),
            chunk_bytes: config.chunk_bytes as u64,
        };
        let what = format!("comm_init over {device_ids:?}");
        let made = run_until(&worker, &what, deadline, move || {
            create(&list, &owners, join)
        });
        match made {
            Ok((comm, chunk_bytes)) => Ok(MpiTransport {
                rank,
                size,
                device_ids: device_ids.to_vec(),
                comm,
                chunk_bytes,
                world,
                worker,
                state: Mutex::new(State::default()),
                pool: Arc::default(),
            }),
            Err(Some(e)) => {
                worker.stop();
                Err(e)
            }
            Err(None) => {
                worker.stop();
                let waited_ms = ms(started);
                world.break_with(&format!("{what} did not complete within {waited_ms} ms"));
                Err(ServerError::CollectiveTimeout {
                    rank,
                    call: what,
                    waited_ms,
                    missing: Vec::new(),
                })
            }
        }
    }

    /// The devices of the ranks, in rank order.
    pub fn device_ids(&self) -> &[DeviceId] {
        &self.device_ids
    }

    /// Why this transport cannot be used any more, if it cannot.
    pub fn broken(&self) -> Option<String> {
        self.lock().broken.clone()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn break_with(&self, st: &mut State, reason: String) {
        if st.broken.is_none() {
            tracing::warn!(rank = self.rank, %reason, "MPI transport broken");
            self.world.break_with(&reason);
            st.broken = Some(reason);
        }
    }

    pub(super) fn refuse_if_broken(
        &self,
        st: &State,
        id: CallId,
        name: &str,
    ) -> Result<(), ServerError> {
        match &st.broken {
            Some(reason) => Err(ServerError::CollectiveAborted {
                call: describe(name, id),
                reason: format!(
                    "the MPI transport of rank {} is broken by an earlier failure: {reason}",
                    self.rank
                ),
            }),
            None => Ok(()),
        }
    }

    /// Hands the worker the exchange of every group call before `seq` that
    /// this rank skipped (abandoned without `abort` reaching the transport
    /// first), so the sequence stays aligned with the other ranks.
    pub(super) fn catch_up_group(&self, st: &mut State, seq: u64) {
        while st.next_group < seq {
            let skipped = CallId::Group { seq: st.next_group };
            let error = self.skipped(skipped);
            let slot = self.submit_exchange(Entry::abandoned(self.rank, skipped, &error));
            st.abandoned_groups.insert(st.next_group, slot);
            st.next_group += 1;
        }
    }

    pub(super) fn catch_up_link(&self, st: &mut State, link: Link) {
        let next = st.next_link.entry((link.from, link.to)).or_insert(0);
        while *next < link.seq {
            let skipped = Link { seq: *next, ..link };
            let error = self.skipped(CallId::P2p(skipped));
            let entry = Entry::abandoned(self.rank, CallId::P2p(skipped), &error);
            let slot = self.submit_pair(skipped, entry.clone());
            *next += 1;
            st.abandoned_links.insert(skipped, (slot, entry));
        }
    }

    pub(super) fn skipped(&self, id: CallId) -> ServerError {
        ServerError::CollectiveAborted {
            call: describe("call", id),
            reason: format!("rank {} abandoned it before taking part", self.rank),
        }
    }

    pub(super) fn submit_exchange(&self, entry: Entry) -> Arc<Slot<Vec<Entry>>> {
        let (comm, size) = (self.comm, self.size);
        self.worker
            .submit("exchange", move || gather_entries(comm, size, entry))
    }

    pub(super) fn submit_pair(&self, link: Link, entry: Entry) -> Arc<Slot<Entry>> {
        let comm = self.comm;
        let sending = link.from == self.rank;
        let peer = if sending { link.to } else { link.from };
        self.worker.submit("exchange_pair", move || {
            swap_entries(comm, peer, sending, entry)
        })
    }

    /// Waits for `slot` until `deadline`; a failure or a timeout breaks
    /// the transport.
    pub(super) fn wait<T>(
        &self,
        id: CallId,
        name: &str,
        slot: &Slot<T>,
        started: Instant,
        deadline: Instant,
    ) -> Result<T, ServerError> {
        let result = slot.wait(deadline);
        let mut st = self.lock();
        if st.inflight.as_ref().is_some_and(|(c, _, _)| *c == id) {
            st.inflight = None;
        }
        match result {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => {
                self.break_with(&mut st, format!("{} failed: {e}", describe(name, id)));
                Err(e)
            }
            None => {
                let waited_ms = ms(started);
                self.break_with(
                    &mut st,
                    format!(
                        "{} did not complete within {waited_ms} ms (a peer died or never called)",
                        describe(name, id)
                    ),
                );
                Err(ServerError::CollectiveTimeout {
                    rank: self.rank,
                    call: describe(name, id),
                    waited_ms,
                    missing: match id {
                        CallId::P2p(link) => vec![if link.from == self.rank {
                            link.to
                        } else {
                            link.from
                        }],
                        CallId::Group { .. } => Vec::new(),
                    },
                })
            }
        }
    }

    /// Runs a data step on the worker and waits for it.
    pub(super) fn data<T: Send + std::fmt::Debug + 'static>(
        &self,
        id: CallId,
        name: &str,
        deadline: Instant,
        f: impl FnOnce() -> Result<T, ServerError> + Send + 'static,
    ) -> Result<T, ServerError> {
        let started = Instant::now();
        let slot = {
            let mut st = self.lock();
            self.refuse_if_broken(&st, id, name)?;
            let slot = self.worker.submit(name, f);
            st.inflight = Some((id, Stage::Data, Arc::clone(&slot) as Arc<dyn Fail>));
            slot
        };
        self.wait(id, name, &slot, started, deadline)
    }

    /// The ids of `entries` must all be `id`: ranks at different calls mean
    /// the sequence is lost (the same error on every rank).
    pub(super) fn aligned(
        &self,
        id: CallId,
        name: &str,
        entries: &[Entry],
    ) -> Result<(), ServerError> {
        if entries.iter().all(|e| e.id == id) {
            return Ok(());
        }
        let at: Vec<String> = entries
            .iter()
            .map(|e| format!("rank {} at {}", e.rank, describe("call", e.id)))
            .collect();
        let error = ServerError::CollectiveMismatch {
            reason: format!(
                "{}: the ranks are at different calls ({}); the communicator's sequence is lost",
                describe(name, id),
                at.join(", ")
            ),
        };
        let mut st = self.lock();
        self.break_with(&mut st, error.to_string());
        Err(error)
    }
}

pub(super) fn after(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .unwrap_or(start + Duration::from_secs(86_400 * 365))
}

pub(super) fn ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        let broken = self.lock().broken.is_some();
        if !broken {
            let comm = self.comm;
            // The communicator is freed on the worker, after every call it
            // still has queued.
            drop(self.worker.submit("MPI_Comm_free", move || {
                let mut comm = comm;
                // SAFETY: no call uses the communicator after this one.
                check(unsafe { ffi::MPI_Comm_free(&mut comm.0) }, "MPI_Comm_free")
            }));
        }
        self.worker.stop();
    }
}
