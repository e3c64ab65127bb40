//! The bookkeeping behind [`LateFaults`](crate::LateFaults): verdicts still
//! to come, the work that read their bytes since, and how a failed verdict
//! is carried through them.

use std::sync::Arc;

use compute_runtime::{MemoryId, ServerError, StreamId};
use hashbrown::{HashMap, HashSet};

use crate::Reports;

/// One step of a pending verdict's history, in enqueue order.
#[derive(Debug)]
pub(crate) enum Event {
    /// The judged work: what it writes.
    Judged(Vec<MemoryId>),
    /// Work (dependent `dep`) that read `inputs` (the at-risk ones, in
    /// binding order) and writes `writes`.
    Read {
        dep: u64,
        inputs: Vec<MemoryId>,
        writes: Vec<MemoryId>,
    },
    /// A full overwrite: the slice's bytes no longer come from the events
    /// before.
    Cleared(MemoryId),
}

/// A verdict still to come.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub events: Vec<Event>,
    /// Slices whose current bytes depend on it.
    pub live: HashSet<MemoryId>,
}

impl Verdict {
    pub fn new(writes: &[MemoryId]) -> Self {
        Verdict {
            events: vec![Event::Judged(writes.to_vec())],
            live: writes.iter().copied().collect(),
        }
    }
}

/// Work registered as reading at-risk bytes, until every verdict it
/// depends on has come.
#[derive(Debug)]
pub(crate) struct Dependent {
    pub stream: StreamId,
    /// Verdicts still to come.
    pub remaining: u32,
    /// The first verdict that poisoned one of its inputs: what its writes
    /// carry; reported to `stream` once.
    pub cause: Option<Arc<ServerError>>,
    /// Kept once settled, until its outcome is asked.
    pub keep: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub poisoned: HashMap<MemoryId, Arc<ServerError>>,
    pub reports: Reports,
    /// Reports a `sync` already handed to its caller: still to be settled by
    /// the server, not to be deferred again.
    pub claimed: Reports,
    pub verdicts: HashMap<u64, Verdict>,
    pub dependents: HashMap<u64, Dependent>,
    /// Ids of verdicts and dependents: one sequence, never reused.
    pub next_id: u64,
}

impl Inner {
    /// Poisons `m` unless a first cause is on record.
    pub fn poison_one(&mut self, m: MemoryId, cause: &Arc<ServerError>) {
        self.poisoned.entry(m).or_insert_with(|| Arc::clone(cause));
    }

    /// A token that is settled already, poisoned with `cause`.
    pub fn settled_token(&mut self, cause: Arc<ServerError>) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.dependents.insert(
            id,
            Dependent {
                stream: StreamId(0),
                remaining: 0,
                cause: Some(cause),
                keep: true,
            },
        );
        id
    }

    /// Carries verdict `v` through its history; returns whether it poisoned
    /// anything.
    pub fn apply(
        &mut self,
        v: Verdict,
        stream: StreamId,
        outcome: Result<(), ServerError>,
    ) -> bool {
        let failure = outcome.err().map(Arc::new);
        // What each slice's bytes carry at this point of the history.
        let mut carries: HashMap<MemoryId, Arc<ServerError>> = HashMap::new();
        for event in v.events {
            match event {
                Event::Judged(writes) => {
                    if let Some(e) = &failure {
                        for w in writes {
                            carries.entry(w).or_insert_with(|| Arc::clone(e));
                        }
                    }
                }
                Event::Cleared(m) => {
                    carries.remove(&m);
                }
                Event::Read {
                    dep,
                    inputs,
                    writes,
                } => {
                    let cause = inputs.iter().find_map(|i| {
                        carries.get(i).map(|c| {
                            Arc::new(ServerError::UntrustedInput {
                                input: *i,
                                cause: Arc::clone(c),
                            })
                        })
                    });
                    // The first cause wins, as for work refused at enqueue.
                    if let Some(c) = &cause {
                        for w in &writes {
                            carries.entry(*w).or_insert_with(|| Arc::clone(c));
                        }
                    }
                    self.settle_dependent(dep, cause);
                }
            }
        }
        let Some(failure) = failure else {
            return false;
        };
        for m in v.live {
            if let Some(c) = carries.get(&m) {
                self.poison_one(m, c);
            }
        }
        self.reports.push((stream, failure));
        true
    }

    /// One of `dep`'s verdicts came, poisoning it with `cause` or not.
    fn settle_dependent(&mut self, dep: u64, cause: Option<Arc<ServerError>>) {
        let Some(d) = self.dependents.get_mut(&dep) else {
            return;
        };
        d.remaining = d.remaining.saturating_sub(1);
        if let Some(c) = cause
            && d.cause.is_none()
        {
            d.cause = Some(Arc::clone(&c));
            if !d.keep {
                self.reports.push((d.stream, c));
            }
        }
        if d.remaining == 0 && !d.keep {
            self.dependents.remove(&dep);
        }
    }
}
