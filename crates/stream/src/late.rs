//! Poison that arrives from the GPU after the work was enqueued.
//!
//! Some failures are only known once the device has run the batch: an
//! indirect dispatch whose count is over the device's per-dimension limit is
//! skipped by wgpu without a word, and only a readback of the count says so.
//! Such a verdict arrives in a buffer-map callback, on whatever thread polls
//! the device, while the server may be in the middle of another call. It is
//! recorded here, behind a lock the callback can take, and is part of the
//! trust state from then on: [`TrustRegistry::check`](crate::TrustRegistry)
//! consults it, and a read that was already waiting checks it once its
//! wait is over (the verdict's callback runs in the same poll that completes
//! the batch, before any later batch's wait returns). The server takes the
//! reports to defer each error to its stream; a `sync` of the stream whose
//! wait the verdict arrived during reports it itself ([`LateFaults::claim`]).
//!
//! Work whose verdict will come late is registered when it is encoded
//! ([`LateFaults::expect`]); a full overwrite of one of its writes before
//! the verdict arrives takes that slice out of the verdict's reach, so bytes
//! written after the failed work are never poisoned by it.
//!
//! What it buys: "Ok never hands back wrong bytes" holds for failures only
//! the GPU can see. What it does not: work enqueued on those outputs before
//! the verdict arrived is not poisoned after the fact (its own inputs were
//! trusted when it was checked); only reads of the outputs themselves, and
//! work enqueued after the verdict, see it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use compute_runtime::{MemoryId, ServerError, StreamId};
use hashbrown::HashMap;

/// Failures with the stream each happened on.
pub type Reports = Vec<(StreamId, Arc<ServerError>)>;

#[derive(Debug, Default)]
struct Inner {
    poisoned: HashMap<MemoryId, Arc<ServerError>>,
    reports: Reports,
    /// Reports a `sync` already handed to its caller ([`LateFaults::claim`]):
    /// still to be settled by the server, not to be deferred again.
    claimed: Reports,
    /// Audited work whose verdict has not arrived, by audit id: the slices
    /// it writes that no full overwrite has trusted again since it was
    /// encoded (a verdict must not poison bytes written after the work).
    pending: HashMap<u64, Vec<MemoryId>>,
    next_audit: u64,
}

/// Work registered with [`LateFaults::expect`]: only its holder can settle
/// it, so nobody else can take the work's writes out of its verdict's reach.
#[derive(Debug)]
#[must_use = "settle it once its verdict has come (or will not)"]
pub struct LateAudit(u64);

/// Late verdicts; shared (`Arc`) between the registry and the callbacks.
#[derive(Debug, Default)]
pub struct LateFaults {
    /// Fast path: nothing was ever recorded.
    any: AtomicBool,
    /// Fast path: audits waiting for their verdict.
    pending: AtomicUsize,
    inner: Mutex<Inner>,
}

impl LateFaults {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that the work of `stream` writing `writes` failed with
    /// `error`; callable from any thread.
    pub fn poison(&self, stream: StreamId, writes: &[MemoryId], error: ServerError) {
        let cause = Arc::new(error);
        let mut inner = self.lock();
        for m in writes {
            inner
                .poisoned
                .entry(*m)
                .or_insert_with(|| Arc::clone(&cause));
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

    /// Whether any late verdict is on record.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// Registers work writing `writes` whose verdict will come late; the
    /// audit is for [`LateFaults::settle`] once it has.
    pub fn expect(&self, writes: &[MemoryId]) -> LateAudit {
        let mut inner = self.lock();
        inner.next_audit += 1;
        let id = inner.next_audit;
        inner.pending.insert(id, writes.to_vec());
        self.pending.fetch_add(1, Ordering::AcqRel);
        LateAudit(id)
    }

    /// The slices `audit` ([`LateFaults::expect`]) writes that are still
    /// to be judged by its verdict: those no full overwrite has trusted
    /// again since. Call once, whether the verdict came or not.
    pub fn settle(&self, audit: LateAudit) -> Vec<MemoryId> {
        let writes = self.lock().pending.remove(&audit.0);
        match writes {
            Some(w) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                w
            }
            None => Vec::new(),
        }
    }

    /// Clears `memory` (a full overwrite, or the slice was freed), including
    /// for verdicts still to come on work encoded before.
    pub(crate) fn clear(&self, memory: MemoryId) {
        let pending = self.pending.load(Ordering::Acquire) > 0;
        if pending || self.any.load(Ordering::Acquire) {
            let mut inner = self.lock();
            inner.poisoned.remove(&memory);
            if pending {
                for writes in inner.pending.values_mut() {
                    writes.retain(|m| *m != memory);
                }
            }
        }
    }

    /// The failures recorded since the last call, with their streams: those
    /// nobody reported yet, then those a `sync` has reported already
    /// ([`LateFaults::claim`]).
    pub fn take_reports(&self) -> (Reports, Reports) {
        if !self.any.load(Ordering::Acquire) {
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
        if !self.any.load(Ordering::Acquire) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_poison_until_cleared_and_report_once() {
        let late = LateFaults::default();
        assert!(late.is_empty());
        assert!(late.check(MemoryId(1)).is_ok());
        late.poison(
            StreamId(3),
            &[MemoryId(1), MemoryId(2)],
            ServerError::unsupported("x", "late"),
        );
        assert!(late.check(MemoryId(1)).is_err());
        assert!(late.check(MemoryId(2)).is_err());
        assert!(late.check(MemoryId(9)).is_ok());
        assert_eq!(late.take_reports().0.len(), 1);
        assert!(late.take_reports().0.is_empty());
        late.clear(MemoryId(1));
        assert!(late.check(MemoryId(1)).is_ok());
        assert!(late.check(MemoryId(2)).is_err());
    }

    #[test]
    fn a_verdict_does_not_poison_what_was_overwritten_after_the_work() {
        let late = LateFaults::default();
        let id = late.expect(&[MemoryId(1), MemoryId(2)]);
        late.clear(MemoryId(1));
        let writes = late.settle(id);
        assert_eq!(writes, vec![MemoryId(2)]);
        late.poison(StreamId(0), &writes, ServerError::unsupported("x", "late"));
        assert!(late.check(MemoryId(1)).is_ok());
        assert!(late.check(MemoryId(2)).is_err());
    }

    #[test]
    fn a_claimed_report_is_settled_but_not_reported_again() {
        let late = LateFaults::default();
        let error = || ServerError::unsupported("x", "late");
        late.poison(StreamId(1), &[MemoryId(1)], error());
        late.poison(StreamId(2), &[MemoryId(2)], error());
        assert_eq!(late.claim(StreamId(1)).len(), 1);
        assert!(late.claim(StreamId(1)).is_empty(), "claimed once");
        let (unreported, claimed) = late.take_reports();
        assert_eq!(unreported.len(), 1);
        assert_eq!(unreported[0].0, StreamId(2));
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].0, StreamId(1));
    }
}
