//! `SchedulerMultiStream`: logical streams folded onto one in-order queue.
//!
//! Each stream encodes into its own pending batch (the backend's
//! [`SchedulerStreamBackend::Stream`]); batches reach the queue when the
//! stream submits. The queue runs submissions in order, so the one hazard is
//! *pending* work: a batch on stream A that touches a page while stream B's
//! unsubmitted batch also touches it. The rule, applied in [`prepare`] to
//! every page an operation touches:
//!
//! - a read submits any other stream whose pending batch *writes* the page;
//! - a write submits any other stream whose pending batch reads or writes it;
//! - a host write ([`prepare_host_write`]) lands in the queue before the next
//!   submit of *every* stream (wgpu's `queue.write_buffer`), so it submits
//!   every stream, its own included, whose pending batch touches the page.
//!
//! A batch therefore only ever depends on work already submitted, and
//! submission order is program order for every byte. Uses are tracked per
//! byte range of a page, so slices of one page that do not overlap never
//! order each other (two streams writing neighbouring tensors of one page
//! run without forced submits). The same rule makes memory reuse safe: a
//! slice freed while its last use is pending on stream A and reserved again
//! by stream B overlaps A's range, so B's first use submits A first.
//!
//! Only uses by pending batches matter; entries of submitted batches are
//! dropped whenever their page is looked at, so a page's list holds at most
//! the pending uses of each stream.
//!
//! [`prepare`]: SchedulerMultiStream::prepare
//! [`prepare_host_write`]: SchedulerMultiStream::prepare_host_write

use std::sync::Arc;

use compute_runtime::{MemoryId, ReleaseQueue, ServerError, StorageId, StreamId};
use hashbrown::HashMap;

use crate::{TrustKey, TrustRegistry};

#[path = "ordering.rs"]
mod ordering;
#[path = "sweep.rs"]
mod sweep;
pub use sweep::MAX_IDLE_STREAMS;

/// What a backend provides per stream.
pub trait SchedulerStreamBackend {
    /// A stream's pending, unsubmitted work.
    type Stream;

    /// State for a stream seen for the first time.
    fn create_stream(&mut self, id: StreamId) -> Self::Stream;

    /// Hands the stream's pending work to the queue. Called only when the
    /// stream has pending tasks. A batch the queue refused is a
    /// [`BatchFailure`]: none of it ran, so what it wrote is poisoned and
    /// the error is reported to the stream.
    ///
    /// A backend may hold a batch back that waits for something outside the
    /// queue (the wgpu server: a collective's result, written by another
    /// thread): with [`Urgency::WhenReady`] it answers
    /// [`Submitted::Held`] and the batch stays pending; with
    /// [`Urgency::Now`] (someone must see its work: another stream's
    /// conflicting use, a host write, a wait) it waits for what holds it,
    /// which must complete in bounded time, and submits.
    fn submit(
        &mut self,
        id: StreamId,
        stream: &mut Self::Stream,
        urgency: Urgency,
    ) -> Result<Submitted, BatchFailure>;

    /// After a submit answered [`Submitted::HandedOff`] for work that
    /// `id`'s next work must follow: holds `id`'s pending batch (and what
    /// it encodes next) until the handed-off batch is on the queue. Never
    /// called on a backend that never hands off.
    fn follow(&mut self, id: StreamId, stream: &mut Self::Stream) {
        let _ = (id, stream);
    }
}

/// Why a batch is being submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// The stream reached `tasks_max`, or a flush: submit if nothing holds
    /// the batch back.
    WhenReady,
    /// Something depends on the batch having been submitted.
    Now,
    /// Work of another stream (or a `flush`) must come after the batch, and
    /// may itself be held behind it: submit if nothing holds the batch
    /// back, else hand it to whoever submits it once that is done, without
    /// waiting ([`Submitted::HandedOff`]).
    Before,
}

/// What [`SchedulerStreamBackend::submit`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// The batch is on the queue.
    Yes,
    /// The backend held it back; it stays pending.
    Held,
    /// The backend took the batch and will submit it once what holds it is
    /// done; the stream's later work stays held behind it.
    HandedOff,
}

/// A submitted batch that did not run.
#[derive(Debug)]
pub struct BatchFailure {
    /// Why (the queue's own error, as a [`ServerError`]).
    pub error: ServerError,
    /// Every slice the batch's work writes.
    pub writes: Vec<MemoryId>,
}

/// How an operation uses a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The operation reads the page.
    Read,
    /// The operation writes (or reads and writes) the page.
    Write,
}

#[derive(Debug)]
struct StreamState<S> {
    inner: S,
    /// Number of the batch being encoded; bumped by each submit.
    batch: u64,
    /// Tasks encoded into the current batch.
    tasks: usize,
    /// First failure on this stream not reported yet.
    deferred: Option<Arc<ServerError>>,
    /// Failures after it, not reported yet.
    later: u32,
    /// The sweep count when the stream was last used: a stream not used
    /// since the last sweep is idle.
    seen: u64,
}

/// A use of a byte range of a page by one stream's batch.
#[derive(Debug, Clone, Copy)]
struct Use {
    start: u64,
    end: u64,
    stream: StreamId,
    batch: u64,
    write: bool,
}

impl Use {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start < end && start < self.end
    }
}

/// Any number of logical streams over one queue.
///
/// Every field is private: the order of submissions and the trust state
/// change only through the methods here and the write scopes, so a caller
/// cannot forget a pending use; trust is restored only with the scheduler's
/// [`TrustKey`].
#[derive(Debug)]
pub struct SchedulerMultiStream<B: SchedulerStreamBackend> {
    backend: B,
    streams: HashMap<StreamId, StreamState<B::Stream>>,
    pages: HashMap<StorageId, Vec<Use>>,
    tasks_max: usize,
    trust: TrustRegistry,
    submits: u64,
    /// Batch numbers are unique across streams and never reused, so a use
    /// recorded by a stream that was retired never matches a new batch.
    next_batch: u64,
    /// Failed batches not yet told to the server (`take_failures`).
    failures: Vec<(StreamId, Arc<ServerError>)>,
    /// The stream count at which a new stream sweeps the map (see
    /// [`MAX_IDLE_STREAMS`]).
    sweep_at: usize,
    /// Sweeps so far.
    sweeps: u64,
    /// Streams sweeps have looked at (what they cost).
    swept: u64,
    /// Failures of retired streams, until their stream reports them or is
    /// used again.
    unreported: HashMap<StreamId, sweep::Unreported>,
    /// This scheduler's id: what its [`TrustKey`] carries.
    owner: u64,
}

impl<B: SchedulerStreamBackend> SchedulerMultiStream<B> {
    /// A scheduler that submits a stream once `tasks_max` tasks are pending
    /// on it (at least 1), and the one key that restores trust on it: the
    /// server keeps it private (see [`TrustKey`]).
    pub fn new(backend: B, tasks_max: usize) -> (Self, TrustKey) {
        Self::with_late_faults(backend, tasks_max, Arc::default())
    }

    /// [`new`](Self::new), recording late verdicts in `late` (which the
    /// backend, made first, may already hold to give them).
    pub fn with_late_faults(
        backend: B,
        tasks_max: usize,
        late: Arc<crate::LateFaults>,
    ) -> (Self, TrustKey) {
        let key = TrustKey::mint();
        let scheduler = Self {
            backend,
            streams: HashMap::new(),
            pages: HashMap::new(),
            tasks_max: tasks_max.max(1),
            trust: TrustRegistry::new(key.owner(), late),
            submits: 0,
            next_batch: 0,
            failures: Vec::new(),
            sweep_at: MAX_IDLE_STREAMS,
            sweeps: 0,
            swept: 0,
            unreported: HashMap::new(),
            owner: key.owner(),
        };
        (scheduler, key)
    }

    /// `Ok` when `key` is this scheduler's, else
    /// [`ServerError::ForeignTrustKey`].
    pub(crate) fn check_key(&self, key: &TrustKey) -> Result<(), ServerError> {
        key.check(self.owner)
    }

    /// The bound on pending tasks per stream.
    pub fn tasks_max(&self) -> usize {
        self.tasks_max
    }

    /// Submissions made so far (all streams).
    pub fn submit_count(&self) -> u64 {
        self.submits
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, for operations that encode or flush outside a stream
    /// (the wgpu server's host writes). Holds no scheduler state.
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Trust state of every managed slice, read-only: slices are poisoned
    /// by the write scopes, and trusted again only with the scheduler's key
    /// ([`write_scope_restoring`](crate::write_scope_restoring)).
    pub fn trust(&self) -> &TrustRegistry {
        &self.trust
    }

    /// `Ok` when `memory`'s bytes can be trusted, else
    /// [`ServerError::Untrusted`] (see [`TrustRegistry::check`]).
    pub fn check(&self, memory: MemoryId) -> Result<(), ServerError> {
        self.trust.check(memory)
    }

    /// Marks `memory` as about to be replaced by work still to come (see
    /// [`TrustRegistry::begin_pending`]).
    pub fn begin_pending(&mut self, memory: MemoryId, cause: Arc<ServerError>) {
        self.trust.begin_pending(memory, cause);
    }

    /// The work `memory` was pending on is done (see
    /// [`TrustRegistry::end_pending`]; needs the scheduler's key).
    pub fn end_pending(&mut self, key: &TrustKey, memory: MemoryId) -> Result<(), ServerError> {
        self.trust.end_pending(key, memory)
    }

    /// The mutating path to trust, for the write scopes.
    pub(crate) fn trust_mut(&mut self) -> &mut TrustRegistry {
        &mut self.trust
    }

    /// Takes the ids of slices whose handles were dropped since the last
    /// call from `queue`, appending them to `out` for the caller to free,
    /// and forgets their trust state (ids are never reused). It needs no
    /// [`TrustKey`]: only the drop of a handle's last clone puts its id on a
    /// queue, the one its server attached when binding it (a handle binds
    /// once), so whatever queue a caller passes, this cannot trust a live
    /// slice of this scheduler again.
    pub fn drain_released(&mut self, queue: &ReleaseQueue, out: &mut Vec<MemoryId>) {
        let start = out.len();
        queue.drain_into(out);
        for id in &out[start..] {
            self.trust.forget(*id);
        }
    }

    fn ensure(&mut self, id: StreamId) {
        let _ = self.encoder(id);
    }

    /// The backend and the stream's pending work, to encode into.
    pub fn encoder(&mut self, id: StreamId) -> (&mut B, &mut B::Stream) {
        if self.streams.len() >= self.sweep_at && !self.streams.contains_key(&id) {
            self.sweep();
        }
        let backend = &mut self.backend;
        let next_batch = &mut self.next_batch;
        let unreported = &mut self.unreported;
        let state = self.streams.entry(id).or_insert_with(|| {
            *next_batch += 1;
            let (deferred, later) = unreported
                .remove(&id)
                .map_or((None, 0), |(first, later)| (Some(first), later));
            StreamState {
                inner: backend.create_stream(id),
                batch: *next_batch,
                tasks: 0,
                deferred,
                later,
                seen: 0,
            }
        });
        state.seen = self.sweeps;
        (&mut self.backend, &mut state.inner)
    }

    /// Streams seen so far, in id order.
    pub fn stream_ids(&self) -> Vec<StreamId> {
        let mut ids: Vec<_> = self.streams.keys().copied().collect();
        ids.sort();
        ids
    }

    /// Counts one encoded task on `stream`, submitting at `tasks_max`.
    pub fn task_done(&mut self, stream: StreamId) {
        self.tasks_done(stream, 1);
    }

    /// Counts `n` encoded tasks on `stream` (a run encoded at once),
    /// submitting once `tasks_max` are pending.
    pub fn tasks_done(&mut self, stream: StreamId, n: usize) {
        self.ensure(stream);
        let full = self.streams.get_mut(&stream).is_some_and(|s| {
            s.tasks += n;
            s.tasks >= self.tasks_max
        });
        if full {
            self.submit_with(stream, Urgency::WhenReady);
        }
    }

    /// Tasks pending on `stream`.
    pub fn pending_tasks(&self, stream: StreamId) -> usize {
        self.streams.get(&stream).map_or(0, |s| s.tasks)
    }

    /// Submits `stream`'s pending work, if any, now (see [`Urgency::Now`]).
    pub fn submit(&mut self, stream: StreamId) {
        self.submit_with(stream, Urgency::Now);
    }

    /// Submits `stream`'s pending work, or hands it to the backend to
    /// submit once what holds it is done: never waits (see
    /// [`Urgency::Before`]).
    pub fn hand_off(&mut self, stream: StreamId) {
        self.submit_with(stream, Urgency::Before);
    }

    /// Submits `stream`'s pending work, if any; with
    /// [`Urgency::WhenReady`] the backend may hold it back.
    /// Returns what the backend did, `None` when nothing was pending.
    pub fn submit_with(&mut self, stream: StreamId, urgency: Urgency) -> Option<Submitted> {
        let state = self.streams.get_mut(&stream)?;
        if state.tasks == 0 {
            return None;
        }
        let result = self.backend.submit(stream, &mut state.inner, urgency);
        // Held, or handed to be submitted later: the batch's uses stay
        // pending (work that meets them is ordered after them), and so does
        // the stream (a wait for it waits for what holds it).
        if let Ok(later @ (Submitted::Held | Submitted::HandedOff)) = result {
            return Some(later);
        }
        state.tasks = 0;
        self.next_batch += 1;
        state.batch = self.next_batch;
        self.submits += 1;
        match result {
            Ok(done) => Some(done),
            Err(failure) => {
                let cause = Arc::new(failure.error);
                for m in &failure.writes {
                    self.trust.poison(*m, &cause);
                }
                self.defer_error(stream, &cause);
                self.failures.push((stream, cause));
                Some(Submitted::Yes)
            }
        }
    }

    /// Batches that failed to submit, and late verdicts of the GPU (see
    /// [`LateFaults`](crate::LateFaults)), since the last call, with their
    /// stream, for the server's `on_failure`. Each late verdict's error is
    /// deferred to its stream here, unless a `sync` has reported it already
    /// ([`LateFaults::claim`](crate::LateFaults::claim)).
    pub fn take_failures(&mut self) -> Vec<(StreamId, Arc<ServerError>)> {
        // Every server call asks: nothing to take is the common answer.
        if self.failures.is_empty() && self.trust.late().is_empty() {
            return Vec::new();
        }
        let (unreported, claimed) = self.trust.late().take_reports();
        for (stream, cause) in unreported {
            self.defer_error(stream, &cause);
            self.failures.push((stream, cause));
        }
        // A `sync` reported these to its caller already.
        self.failures.extend(claimed);
        std::mem::take(&mut self.failures)
    }

    /// Submits every stream's pending work.
    pub fn submit_all(&mut self) {
        for id in self.stream_ids() {
            self.submit(id);
        }
    }

    /// Forgets a page that was deallocated.
    pub fn forget_page(&mut self, page: StorageId) {
        self.pages.remove(&page);
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
