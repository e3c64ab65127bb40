//! Poison that arrives after the work was enqueued, and follows the data.
//!
//! Some failures are only known once the device has run a batch (an
//! indirect dispatch whose count is over the device's per-dimension limit
//! is skipped by wgpu without a word; only a readback of the count says
//! so), or once other ranks have answered (a collective's outcome). Such a
//! verdict arrives on another thread, while the server may be in the middle
//! of another call. It is recorded here, behind a lock the callback can
//! take, and is part of the trust state from then on:
//! [`TrustRegistry::check`](crate::TrustRegistry) consults it, and a read
//! that was already waiting checks it once its wait is over.
//!
//! Poison follows data here too. Work whose verdict will come late is
//! registered when it is enqueued ([`LateFaults::expect`]): the slices it
//! writes are *at risk*. Work enqueued later that reads an at-risk slice
//! registers itself ([`LateFaults::depend`]): what it writes is at risk
//! too, behind the same verdict, transitively. A failed verdict
//! ([`LateFaults::verdict`]) then poisons the judged writes with its error
//! and every dependent's writes with [`ServerError::UntrustedInput`] naming
//! the input it read, in program order, and reports each dependent's
//! failure to its stream once, exactly as if the work had been refused for
//! that input at enqueue. A full overwrite of a slice ([`LateFaults::clear`],
//! through the trust registry) takes it out of reach: bytes written after
//! the failed work are never poisoned by its verdict. What the verdict
//! reaches is decided by the order of enqueue, never by when it arrives.
//!
//! Every verdict on bytes is known before any later submission that reads
//! them completes (an audit's map callback runs in the poll that retires its
//! batch, before any later batch's; a collective's outcome is recorded before
//! the batch held behind it is submitted), so a read, a `sync` or a staged
//! collective input that waited for the work sees the verdict.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::late_verdict::{Dependent, Event, Inner, Verdict};
use compute_runtime::{MemoryId, ServerError, StreamId};

/// Failures with the stream each happened on.
pub type Reports = Vec<(StreamId, Arc<ServerError>)>;

/// What a late verdict has said so far about work registered with
/// [`LateFaults::depend_token`].
#[derive(Clone, Debug, PartialEq)]
pub enum DependOutcome {
    /// A verdict it depends on has not arrived.
    Pending,
    /// Every verdict it depends on was good.
    Clean,
    /// A verdict poisoned an input it read: the error its writes carry.
    Poisoned(Arc<ServerError>),
}

/// The ticket [`LateFaults::expect`] hands out: only its holder gives the
/// verdict ([`LateFaults::verdict`] consumes it), so nobody else can take
/// the work's writes out of its verdict's reach.
#[derive(Debug)]
#[must_use = "give the verdict once it has come (or will not): LateFaults::verdict"]
pub struct LateAudit(u64);

/// Late verdicts; shared (`Arc`) between the registry and the callbacks.
#[derive(Debug, Default)]
pub struct LateFaults {
    /// Fast path: nothing was ever poisoned late.
    any: AtomicBool,
    /// Fast path: verdicts still to come.
    pending: AtomicUsize,
    inner: Mutex<Inner>,
}

impl LateFaults {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that the work of `stream` writing `writes` failed with
    /// `error`, known now; callable from any thread.
    pub fn poison(&self, stream: StreamId, writes: &[MemoryId], error: ServerError) {
        let cause = Arc::new(error);
        let mut inner = self.lock();
        for m in writes {
            inner.poison_one(*m, &cause);
        }
        inner.reports.push((stream, cause));
        self.any.store(true, Ordering::Release);
    }

    /// The late cause that poisoned `memory`, if any.
    pub fn cause(&self, memory: MemoryId) -> Option<Arc<ServerError>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.lock().poisoned.get(&memory).cloned()
    }

    /// `Ok` when no late verdict poisoned `memory`, else
    /// [`ServerError::Untrusted`].
    pub fn check(&self, memory: MemoryId) -> Result<(), ServerError> {
        match self.cause(memory) {
            None => Ok(()),
            Some(cause) => Err(ServerError::Untrusted { memory, cause }),
        }
    }

    /// Whether no late verdict is on record.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// Verdicts still to come.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Registers work writing `writes` whose verdict will come late; the
    /// ticket is for [`LateFaults::verdict`].
    pub fn expect(&self, writes: &[MemoryId]) -> LateAudit {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner.verdicts.insert(id, Verdict::new(writes));
        self.pending.fetch_add(1, Ordering::AcqRel);
        LateAudit(id)
    }

    /// Work of `stream` that read `reads` and writes `writes`, enqueued
    /// after its inputs were checked: where an input is at risk, so are its
    /// writes, behind the same verdicts; where an input was poisoned late
    /// since it was checked, its writes are poisoned now. Nothing to do (and
    /// no lock taken) while no verdict is pending or on record.
    pub fn depend(&self, stream: StreamId, reads: &[MemoryId], writes: &[MemoryId]) {
        if self.pending() > 0 || !self.is_empty() {
            self.register(stream, reads, writes, false);
        }
    }

    /// [`depend`](Self::depend) for work whose own outcome is asked later
    /// ([`LateFaults::outcome`]): a collective's staged input. `None` when
    /// none of `reads` is at risk or poisoned.
    pub fn depend_token(&self, stream: StreamId, reads: &[MemoryId]) -> Option<u64> {
        if self.pending() == 0 && self.is_empty() {
            return None;
        }
        self.register(stream, reads, &[], true)
    }

    fn register(
        &self,
        stream: StreamId,
        reads: &[MemoryId],
        writes: &[MemoryId],
        keep: bool,
    ) -> Option<u64> {
        let mut inner = self.lock();
        let poisoned = reads
            .iter()
            .find_map(|r| inner.poisoned.get(r).map(|c| (*r, Arc::clone(c))));
        if let Some((input, cause)) = poisoned {
            let cause = Arc::new(ServerError::UntrustedInput { input, cause });
            for m in writes {
                inner.poison_one(*m, &cause);
            }
            if keep {
                return Some(inner.settled_token(cause));
            }
            inner.reports.push((stream, cause));
            return None;
        }
        inner.next_id += 1;
        let dep = inner.next_id;
        let mut remaining = 0;
        for v in inner.verdicts.values_mut() {
            let inputs: Vec<MemoryId> = reads
                .iter()
                .copied()
                .filter(|r| v.live.contains(r))
                .collect();
            if inputs.is_empty() {
                continue;
            }
            remaining += 1;
            v.live.extend(writes.iter().copied());
            v.events.push(Event::Read {
                dep,
                inputs,
                writes: writes.to_vec(),
            });
        }
        if remaining == 0 {
            return None;
        }
        inner.dependents.insert(
            dep,
            Dependent {
                stream,
                remaining,
                cause: None,
                keep,
            },
        );
        keep.then_some(dep)
    }

    /// What the verdicts said about work registered with
    /// [`depend_token`](Self::depend_token); once it is no longer
    /// [`DependOutcome::Pending`], the token is forgotten.
    pub fn outcome(&self, token: u64) -> DependOutcome {
        let mut inner = self.lock();
        let outcome = match inner.dependents.get(&token) {
            None => DependOutcome::Clean,
            Some(d) if d.remaining > 0 => return DependOutcome::Pending,
            Some(d) => match &d.cause {
                Some(c) => DependOutcome::Poisoned(Arc::clone(c)),
                None => DependOutcome::Clean,
            },
        };
        inner.dependents.remove(&token);
        outcome
    }

    /// The verdict on the work registered by [`expect`](Self::expect):
    /// `Ok` when it ran as enqueued, else the failure (of `stream`'s work),
    /// which poisons what it wrote and what read that since (see the module
    /// doc).
    pub fn verdict(&self, audit: LateAudit, stream: StreamId, outcome: Result<(), ServerError>) {
        let mut inner = self.lock();
        let Some(v) = inner.verdicts.remove(&audit.0) else {
            return;
        };
        #[cfg(test)]
        if let Some(meanwhile) = tests::WHILE_APPLYING.take() {
            meanwhile();
        }
        if inner.apply(v, stream, outcome) {
            self.any.store(true, Ordering::Release);
        }
        // Last, once what it poisoned is on record: `depend`, `depend_token`
        // and `clear` skip the lock when nothing is pending and nothing was
        // poisoned, so a count that dropped first would let work enqueued
        // during `apply` read the judged bytes unregistered (its failure
        // never reported) or an overwrite leave them poisoned.
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// Clears `memory` (a full overwrite, or the slice was freed), including
    /// for verdicts still to come on work enqueued before.
    pub(crate) fn clear(&self, memory: MemoryId) {
        let pending = self.pending() > 0;
        if pending || !self.is_empty() {
            let mut inner = self.lock();
            inner.poisoned.remove(&memory);
            if pending {
                for v in inner.verdicts.values_mut() {
                    if v.live.remove(&memory) {
                        v.events.push(Event::Cleared(memory));
                    }
                }
            }
        }
    }

    /// The failures recorded since the last call, with their streams: those
    /// nobody reported yet, then those a `sync` has reported already
    /// ([`LateFaults::claim`]).
    pub fn take_reports(&self) -> (Reports, Reports) {
        if self.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let mut inner = self.lock();
        (
            std::mem::take(&mut inner.reports),
            std::mem::take(&mut inner.claimed),
        )
    }

    /// The failures of `stream` recorded and not reported yet, for a `sync`
    /// of `stream` whose wait they arrived during: it reports them itself,
    /// so they are not deferred again (they still reach
    /// [`LateFaults::take_reports`], as claimed).
    pub fn claim(&self, stream: StreamId) -> Vec<Arc<ServerError>> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut inner = self.lock();
        let (mine, others) = std::mem::take(&mut inner.reports)
            .into_iter()
            .partition::<Vec<_>, _>(|(s, _)| *s == stream);
        inner.reports = others;
        inner.claimed.extend(mine.iter().cloned());
        mine.into_iter().map(|(_, e)| e).collect()
    }
}

/// What a test asks about the registry's bookkeeping.
impl LateFaults {
    /// Dependents whose verdicts have not all come (bounded by the work in
    /// flight).
    pub fn dependents(&self) -> usize {
        self.lock().dependents.len()
    }
}

#[cfg(test)]
#[path = "late_tests.rs"]
mod tests;
