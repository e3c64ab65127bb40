//! The shared-memory rendezvous of the in-process transport: a [`Hub`] of
//! rounds where the ranks of one call meet.
//!
//! A round is one phase (descriptor exchange, or data) of one call
//! ([`CallId`]). Each participant deposits its part; the *last* to arrive
//! computes the outputs from all deposits, outside the lock, and every
//! participant takes its own. A round is removed as soon as every
//! participant has taken its output, so completed calls hold no memory.
//!
//! A round that cannot complete is *aborted*: by a participant whose
//! deadline passed, by [`Hub::abort`] (a rank's `wait` that timed out), or
//! because a missing participant has left. Its deposits are dropped and a
//! small tombstone stays, so a late arrival fails at once instead of
//! waiting; the tombstone is collected once every participant has returned
//! from it or moved past it (entered a later round of the same sequence).
//!
//! **Buys:** no thread of its own, no spinning (one condition variable);
//! the reduction runs on the last arrival's engine thread while the others
//! sleep; calls of different sequences (group, and each ordered pair of
//! ranks) never wait for one another. **Doesn't buy:** cancelling a round
//! whose every part has arrived (its work is bounded and completes), or
//! collecting the tombstone of a call that some alive rank never posts.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::ServerError;
use compute_runtime::{CollectiveFault, RoundProblem};
use hashbrown::HashMap;

use crate::call::{CallId, Descriptor};

mod round;

use round::{Progress, Round};

/// Which phase of a call a round is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// The descriptor exchange.
    Exchange,
    /// The data movement of one step.
    Data(usize),
    /// The closing exchange of a call of several steps.
    Close,
    /// The exchange and the one data step of a small call, in one meeting.
    Fused,
    /// A device call's piece filled, on every rank.
    Filled(usize),
    /// A device call's piece read, on every rank.
    Read(usize),
}

/// A part of a fused round: a rank's descriptor and input going in; every
/// rank's descriptor and this rank's output coming out.
#[derive(Debug)]
pub(crate) enum Fused {
    In(Descriptor, Bytes),
    Out(Arc<Vec<Descriptor>>, Bytes),
}

/// A call aborted as a whole: every later round of it fails at once.
struct Tomb {
    error: ServerError,
    returned: Vec<bool>,
}

type Key = (CallId, Phase);

pub(crate) struct State {
    descs: HashMap<Key, Round<Descriptor>>,
    data: HashMap<Key, Round<Bytes>>,
    fused: HashMap<Key, Round<Fused>>,
    aborted: HashMap<CallId, Tomb>,
    joined: Vec<bool>,
    departed: Vec<bool>,
    progress: Progress,
}

/// Selects one of the hub's two maps of rounds.
pub(crate) type Pick<T> = fn(&mut State) -> &mut HashMap<Key, Round<T>>;

/// The descriptor rounds.
pub(crate) fn descs(state: &mut State) -> &mut HashMap<Key, Round<Descriptor>> {
    &mut state.descs
}

/// The data rounds.
pub(crate) fn data(state: &mut State) -> &mut HashMap<Key, Round<Bytes>> {
    &mut state.data
}

/// The fused rounds (exchange and data of a one-step call).
pub(crate) fn fused(state: &mut State) -> &mut HashMap<Key, Round<Fused>> {
    &mut state.fused
}

/// Whether a rank may join a hub.
pub(crate) enum Join {
    /// It joined.
    Joined,
    /// It had joined and has not left: it cannot join twice.
    AlreadyJoined,
    /// A rank has left this hub: its calls are over, a new hub is needed.
    Over,
}

/// The rounds of one in-process communicator.
pub(crate) struct Hub {
    ranks: usize,
    chunk_bytes: usize,
    /// What the server attached for its ranks (`Transport::local_shared`).
    shared: Mutex<Option<crate::transport::Shared>>,
    state: Mutex<State>,
    changed: Condvar,
}

impl fmt::Debug for Hub {
    /// The shape only: rounds hold the ranks' bytes, which are not for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("ranks", &self.ranks)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("rounds_held", &self.rounds_held())
            .finish()
    }
}

impl Hub {
    pub(crate) fn new(ranks: usize, chunk_bytes: usize) -> Self {
        Hub {
            ranks,
            chunk_bytes,
            shared: Mutex::new(None),
            state: Mutex::new(State {
                descs: HashMap::new(),
                data: HashMap::new(),
                fused: HashMap::new(),
                aborted: HashMap::new(),
                joined: vec![false; ranks],
                departed: vec![false; ranks],
                progress: Progress::default(),
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value attached for the ranks, made by `init` the first time.
    pub(crate) fn shared(
        &self,
        init: &mut dyn FnMut() -> crate::transport::Shared,
    ) -> crate::transport::Shared {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(shared.get_or_insert_with(init))
    }

    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }

    /// Bytes of each block one step of a call moves.
    pub(crate) fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Rounds held now (in flight, or tombstones not collected yet).
    pub(crate) fn rounds_held(&self) -> usize {
        let state = self.lock();
        state.descs.len() + state.data.len() + state.fused.len() + state.aborted.len()
    }

    pub(crate) fn join(&self, rank: usize) -> Join {
        let mut state = self.lock();
        match (state.joined.get(rank), state.departed.get(rank)) {
            (Some(true), Some(false)) => Join::AlreadyJoined,
            _ if state.departed.iter().any(|d| *d) => Join::Over,
            (Some(false), _) => {
                state.joined[rank] = true;
                Join::Joined
            }
            _ => Join::Over,
        }
    }

    pub(crate) fn leave(&self, rank: usize) {
        let mut state = self.lock();
        if let Some(departed) = state.departed.get_mut(rank) {
            *departed = true;
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Aborts `call`: its rounds in flight that are still missing a part
    /// (see [`Round::abort`]), and every round of it still to come.
    pub(crate) fn abort(&self, call: CallId, error: ServerError) {
        let slots = call.participants(self.ranks).len();
        let mut state = self.lock();
        for (key, round) in state.descs.iter_mut() {
            if key.0 == call {
                round.abort(error.clone());
            }
        }
        for (key, round) in state.data.iter_mut() {
            if key.0 == call {
                round.abort(error.clone());
            }
        }
        for (key, round) in state.fused.iter_mut() {
            if key.0 == call {
                round.abort(error.clone());
            }
        }
        state.aborted.entry(call).or_insert(Tomb {
            error,
            returned: vec![false; slots],
        });
        drop(state);
        self.changed.notify_all();
    }

    /// The ranks whose part of `call`'s current round has not arrived (the
    /// latest round of it that exists).
    pub(crate) fn missing(&self, call: CallId) -> Vec<usize> {
        let participants = call.participants(self.ranks);
        let state = self.lock();
        let close = state.descs.get(&(call, Phase::Close));
        if let Some(round) = close {
            return round.missing(&participants);
        }
        if let Some(round) = state.fused.get(&(call, Phase::Fused)) {
            return round.missing(&participants);
        }
        let latest = state
            .data
            .iter()
            .filter(|(k, _)| k.0 == call)
            .max_by_key(|(k, _)| match k.1 {
                Phase::Data(step) => step,
                _ => 0,
            });
        if let Some((_, round)) = latest {
            return round.missing(&participants);
        }
        // A device call's rounds: the latest piece's, its read after its fill.
        let device = state
            .descs
            .iter()
            .filter(|(k, _)| k.0 == call)
            .filter_map(|(k, round)| match k.1 {
                Phase::Filled(piece) => Some(((piece, 0), round)),
                Phase::Read(piece) => Some(((piece, 1), round)),
                _ => None,
            })
            .max_by_key(|(at, _)| *at);
        if let Some((_, round)) = device {
            return round.missing(&participants);
        }
        match state.descs.get(&(call, Phase::Exchange)) {
            Some(round) => round.missing(&participants),
            None => participants,
        }
    }

    /// Meets the other participants of round (`call`, `phase`): deposits
    /// `mine` and returns every participant's output once the last arrival
    /// has computed them with `finish` (deposits in slot order in, outputs in
    /// slot order out). `what` names the call in errors.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn meet<T: Send>(
        &self,
        pick: Pick<T>,
        call: CallId,
        phase: Phase,
        rank: usize,
        mine: T,
        deadline: Instant,
        what: &str,
        finish: impl FnOnce(Vec<T>) -> Result<Vec<T>, ServerError>,
    ) -> Result<(usize, Arc<Vec<T>>), ServerError> {
        let participants = call.participants(self.ranks);
        let slot = participants
            .iter()
            .position(|r| *r == rank)
            .ok_or_else(|| round_fault(what, RoundProblem::Stranger { rank }))?;
        let key = (call, phase);
        let mut state = self.lock();
        state.progress.enter(call, rank);
        collect(&mut state);
        if let Some(tomb) = state.aborted.get_mut(&call) {
            if let Some(r) = tomb.returned.get_mut(slot) {
                *r = true;
            }
            return Err(tomb.error.clone());
        }
        let round = pick(&mut state)
            .entry(key)
            .or_insert_with(|| Round::new(participants.len()));
        if let Some(error) = &round.aborted {
            let error = error.clone();
            round.returned[slot] = true;
            return Err(error);
        }
        if round.deposits[slot].is_some() || round.returned[slot] || round.complete() {
            return Err(round_fault(what, RoundProblem::Twice { rank }));
        }
        round.deposits[slot] = Some(mine);
        round.arrived += 1;
        if round.complete() {
            let deposits: Vec<T> = round.deposits.iter_mut().filter_map(Option::take).collect();
            drop(state);
            // A panic here would leave the others waiting on a round that
            // never gets its result: turn it into the round's error.
            let result = catch_unwind(AssertUnwindSafe(|| finish(deposits)))
                .unwrap_or_else(|_| Err(round_fault(what, RoundProblem::Panicked)))
                .map(Arc::new);
            let mut state = self.lock();
            if let Some(round) = pick(&mut state).get_mut(&key) {
                round.result = Some(result.clone());
            }
            drop(state);
            self.changed.notify_all();
            return self
                .take(pick, key, slot)
                .unwrap_or(result)
                .map(|out| (slot, out));
        }
        let start = Instant::now();
        loop {
            let now = Instant::now();
            let Some(round) = pick(&mut state).get_mut(&key) else {
                return Err(round_fault(what, RoundProblem::Vanished));
            };
            if round.result.is_some() || round.aborted.is_some() {
                drop(state);
                return self
                    .take(pick, key, slot)
                    .unwrap_or_else(|| Err(round_fault(what, RoundProblem::Vanished)))
                    .map(|out| (slot, out));
            }
            let wait = if round.complete() {
                // Every part is in; the last arrival is computing: bounded.
                Duration::from_millis(100)
            } else {
                let missing = round.missing(&participants);
                let departed = &state.departed;
                if let Some(gone) = missing.iter().find(|r| departed.get(**r) == Some(&true)) {
                    let error = ServerError::CollectiveAborted {
                        call: what.to_string(),
                        reason: format!("rank {gone} left the communicator"),
                    };
                    self.abort_round(&mut state, pick, key, slot, error.clone());
                    return Err(error);
                }
                if now >= deadline {
                    let waited_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                    let reason = format!(
                        "rank {rank} timed out after {waited_ms} ms waiting for ranks {missing:?}"
                    );
                    let aborted = ServerError::CollectiveAborted {
                        call: what.to_string(),
                        reason,
                    };
                    self.abort_round(&mut state, pick, key, slot, aborted);
                    return Err(ServerError::CollectiveTimeout {
                        rank,
                        call: what.to_string(),
                        waited_ms,
                        missing,
                    });
                }
                deadline - now
            };
            state = self
                .changed
                .wait_timeout(state, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn abort_round<T>(
        &self,
        state: &mut State,
        pick: Pick<T>,
        key: Key,
        slot: usize,
        error: ServerError,
    ) {
        if let Some(round) = pick(state).get_mut(&key) {
            round.abort(error);
            round.returned[slot] = true;
        }
        returned_from_tomb(state, key.0, slot);
        self.changed.notify_all();
    }

    /// Takes slot `slot`'s view of a finished round, removing the round once
    /// every participant has taken it.
    fn take<T>(
        &self,
        pick: Pick<T>,
        key: Key,
        slot: usize,
    ) -> Option<Result<Arc<Vec<T>>, ServerError>> {
        let mut state = self.lock();
        let rounds = pick(&mut state);
        let round = rounds.get_mut(&key)?;
        let out = match (&round.result, &round.aborted) {
            (Some(result), _) => result.clone(),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => return None,
        };
        round.returned[slot] = true;
        if round.result.is_some() && round.returned.iter().all(|r| *r) {
            rounds.remove(&key);
        }
        if out.is_err() {
            returned_from_tomb(&mut state, key.0, slot);
        }
        Some(out)
    }
}

/// Slot `slot` has returned from `call`'s abort, if the call was aborted as
/// a whole.
fn returned_from_tomb(state: &mut State, call: CallId, slot: usize) {
    if let Some(r) = state
        .aborted
        .get_mut(&call)
        .and_then(|t| t.returned.get_mut(slot))
    {
        *r = true;
    }
}

/// Drops the tombstones of aborted rounds and calls every participant has
/// returned from, moved past, or left.
fn collect(state: &mut State) {
    let State {
        descs,
        data,
        fused,
        aborted,
        departed,
        progress,
        ..
    } = state;
    let ranks = departed.len();
    let done = |call: CallId, returned: &[bool]| {
        call.participants(ranks)
            .iter()
            .enumerate()
            .all(|(slot, rank)| {
                returned.get(slot) == Some(&true)
                    || departed.get(*rank) == Some(&true)
                    || progress.past(call, slot, *rank)
            })
    };
    descs.retain(|(call, _), r| r.aborted.is_none() || !done(*call, &r.returned));
    data.retain(|(call, _), r| r.aborted.is_none() || !done(*call, &r.returned));
    fused.retain(|(call, _), r| r.aborted.is_none() || !done(*call, &r.returned));
    aborted.retain(|call, t| !done(*call, &t.returned));
}

/// The state error of a round of call `what`.
fn round_fault(what: &str, problem: RoundProblem) -> ServerError {
    ServerError::CollectiveState {
        fault: CollectiveFault::Round {
            call: what.to_owned(),
            problem,
        },
    }
}
