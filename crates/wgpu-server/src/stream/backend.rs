//! [`ScheduledWgpuBackend`]: the queue side of the streams.
//!
//! It submits a stream's batch when the scheduler says so (through the
//! [`Submitter`]), holds one back while a collective it comes after has not
//! answered (or hands it off, see `handoff.rs`), and owns the host writes
//! that land before the next submit of anything: `queue.write_buffer`'s
//! staged bytes (flushed past a threshold) and large writes' copies from
//! mapped upload buffers ([`HostCopies`]), submitted before any batch.

use std::sync::Arc;
use std::time::Duration;

use compute_runtime::StreamId;
use compute_stream::{BatchFailure, SchedulerStreamBackend, Submitted, Urgency};

use crate::memory::upload::{CopyTarget, HostCopies, Upload, UploadPool};
use crate::stream::WgpuStream;
use crate::stream::batch::{Batch, FinishedBatch};
use crate::stream::gate::Gate;
use crate::stream::handoff::{HandOff, HandOffs};
use crate::stream::parked::{ParkTicket, Taking};
use crate::stream::submit::Submitter;

/// Host-write bytes queued without a submit before the backend submits an
/// empty batch: `queue.write_buffer` stages every byte until the next
/// submit, so a loop of writes with no flush would grow without bound.
pub const HOST_WRITE_FLUSH_BYTES: u64 = 256 << 20;

/// Host writes queued without a submit before the backend submits.
pub const HOST_WRITE_FLUSH_COUNT: u32 = 1024;

/// How long a submission that must happen waits for a collective by
/// default: past the communicators' default timeout, which completes every
/// call (with an error if it must) first.
pub const DEFAULT_COLLECTIVE_WAIT: Duration = Duration::from_secs(90);

/// The wgpu side of the scheduler: the device's one queue.
#[derive(Debug)]
pub struct ScheduledWgpuBackend {
    submitter: Submitter,
    /// `queue.write_buffer` calls not yet followed by a submit: they only
    /// reach the GPU with the next submission; their bytes and calls,
    /// toward the flush thresholds.
    host_writes_pending: bool,
    host_write_bytes: u64,
    host_write_calls: u32,
    /// Where upload buffers go back once their copies are submitted.
    upload: UploadPool,
    /// Large host writes' copies, submitted before the next submit.
    host_copies: HostCopies,
    /// How long a submission that must happen waits for the collective that
    /// holds its batch (past the communicator's timeout, which always
    /// completes a call first).
    collective_wait: Duration,
    /// Who submits a held batch once what holds it is done (the collective
    /// applier; set by `comm_init`).
    handoffs: Option<Arc<dyn HandOffs>>,
    /// What the last hand-off left for the work that must follow it.
    handed: Option<Arc<Gate>>,
}

impl ScheduledWgpuBackend {
    pub(crate) fn new(submitter: Submitter, upload: UploadPool) -> Self {
        Self {
            submitter,
            host_writes_pending: false,
            host_write_bytes: 0,
            host_write_calls: 0,
            upload,
            host_copies: HostCopies::default(),
            collective_wait: DEFAULT_COLLECTIVE_WAIT,
            handoffs: None,
            handed: None,
        }
    }

    /// The submitter (for work of no stream).
    pub(crate) fn submitter(&self) -> &Submitter {
        &self.submitter
    }

    /// The latest submission on any stream, and its number.
    pub(crate) fn last_submission(&self) -> (Option<wgpu::SubmissionIndex>, u64) {
        self.submitter.newest()
    }

    /// Whether `write_buffer`s wait for a submit to reach the GPU.
    pub(crate) fn host_writes_pending(&self) -> bool {
        self.host_writes_pending
    }

    /// How long a submission waits for the collective holding its batch.
    pub(crate) fn collective_wait(&self) -> Duration {
        self.collective_wait
    }

    /// Collectives are on: batches may be held for as long as `wait`, and
    /// `handoffs` takes them when they must go on without waiting.
    pub(crate) fn enable_collectives(&mut self, wait: Duration, handoffs: Arc<dyn HandOffs>) {
        self.collective_wait = self.collective_wait.max(wait);
        self.handoffs = Some(handoffs);
    }

    /// Counts a host write of `bytes` waiting for a submit (a copy out of
    /// upload memory, or a collective result's `queue.write_buffer`); past
    /// the thresholds it submits, so upload memory and wgpu's staging go to
    /// the GPU and are recycled instead of growing.
    pub(crate) fn host_write(&mut self, bytes: u64) {
        self.host_writes_pending = true;
        self.host_write_bytes = self.host_write_bytes.saturating_add(bytes);
        self.host_write_calls = self.host_write_calls.saturating_add(1);
        if self.host_write_bytes >= HOST_WRITE_FLUSH_BYTES
            || self.host_write_calls >= HOST_WRITE_FLUSH_COUNT
        {
            self.flush_host_writes();
        }
    }

    /// Encodes a large host write's copy (see `memory/upload.rs`); it is
    /// submitted before the next submit of anything, like `write_buffer`.
    pub(crate) fn host_copy(&mut self, upload: Upload, to: CopyTarget<'_>) {
        let len = to.len;
        self.host_copies.record(self.submitter.device(), upload, to);
        self.host_write(len);
    }

    /// Copies a small host write into the upload arena and encodes its copy
    /// (see `memory/upload.rs`); submitted with the large ones.
    pub(crate) fn host_copy_small(
        &mut self,
        data: &[u8],
        to: CopyTarget<'_>,
    ) -> Result<(), compute_runtime::ServerError> {
        let len = to.len;
        self.host_copies
            .record_small(self.submitter.device(), &self.upload, data, to)?;
        self.host_write(len);
        Ok(())
    }

    /// Submits the waiting host copies, if any: before any other submit,
    /// and before a `write_buffer` (which would otherwise land before them).
    pub(crate) fn flush_host_copies(&mut self) {
        let Some(taken) = self.host_copies.take() else {
            return;
        };
        match self.submitter.commands(Some(taken.commands)) {
            Ok(_) => {
                for upload in taken.uploads {
                    self.recycle(upload);
                }
                // The upload buffers come back through map callbacks, run by
                // whatever polls next; a poll that does not wait runs those
                // already due, so a loop of writes with no waits recycles.
                self.submitter.poll_ready();
                self.submitted();
            }
            Err(error) => {
                for (stream, memory) in taken.writes {
                    self.submitter
                        .late()
                        .poison(stream, &[memory], error.clone());
                }
            }
        }
    }

    /// After the copy out of `upload` was submitted: back to its pool once
    /// the copy has run (a mapped buffer through its map callback, a block
    /// of imported host memory through the queue's work-done callback).
    fn recycle(&self, upload: Upload) {
        match upload {
            Upload::Mapped(b) => self.upload.recycle(b),
            Upload::Pinned(block, pool) => self.submitter.after_work_done(move || pool.put(block)),
        }
    }

    /// A submit happened: pending `write_buffer`s went with it.
    fn submitted(&mut self) {
        self.host_writes_pending = false;
        self.host_write_bytes = 0;
        self.host_write_calls = 0;
    }

    /// Hands `stream`'s batch, held behind `gate`, to whoever submits it
    /// once `gate` is settled; the stream's later work and the work that
    /// must follow ([`follow`](SchedulerStreamBackend::follow)) are held
    /// behind that submission. `false` when nobody takes hand-offs.
    fn hand_off(&mut self, id: StreamId, stream: &mut WgpuStream, gate: &Arc<Gate>) -> bool {
        let Some(handoffs) = &self.handoffs else {
            return false;
        };
        let Some(batch) = stream.hand_off(self.submitter.timing()) else {
            // Nothing encoded: what follows waits for the gate itself.
            self.handed = Some(Arc::clone(gate));
            return true;
        };
        let submitted = Arc::new(Gate::new());
        let h = HandOff {
            after: Arc::clone(gate),
            batch,
            stream: id,
            submitted: Arc::clone(&submitted),
            then: None,
        };
        if handoffs.hand_off(h).is_err() {
            return false;
        }
        stream.hold_behind(Arc::clone(&submitted));
        self.handed = Some(submitted);
        true
    }

    /// Parks `stream`'s batch (see `parked.rs`) instead of submitting it:
    /// pending host copies go to the queue first, so the batch, submitted
    /// later from any thread, never passes them. `None` when the batch is
    /// held back or empty (the caller then submits it, which would flush
    /// the copies as well).
    pub(crate) fn park(&mut self, id: StreamId, stream: &mut WgpuStream) -> Option<ParkTicket> {
        self.flush_host_copies();
        stream.park(id, &self.submitter)
    }

    /// Submits a command buffer that belongs to no stream (the timeline's
    /// resolve); returns it with its number.
    pub(crate) fn submit_outside(
        &mut self,
        commands: wgpu::CommandBuffer,
    ) -> Result<(wgpu::SubmissionIndex, u64), compute_runtime::ServerError> {
        let submitted = self.submitter.commands(Some(commands))?;
        self.submitted();
        Ok(submitted)
    }

    /// Submits an empty batch when host writes are pending, so a drain
    /// covers them; returns the submission to wait on.
    pub(crate) fn flush_host_writes(&mut self) -> Option<wgpu::SubmissionIndex> {
        self.flush_host_copies();
        if self.host_writes_pending && self.submitter.commands(None).is_ok() {
            self.submitted();
        }
        self.submitter.newest().0
    }

    /// Submits `batches` of `stream` (parked ones, then its own) in one
    /// submission, telling the parked batches' lock how it went.
    fn submit_batches(
        &mut self,
        id: StreamId,
        stream: &mut WgpuStream,
        taking: Taking<'_>,
        batches: Vec<FinishedBatch>,
    ) -> Result<(), BatchFailure> {
        if batches.is_empty() {
            return Ok(());
        }
        match self.submitter.submit_all(id, batches) {
            Ok(submission) => {
                taking.done(Ok(&submission));
                self.submitted();
                stream.submitted(submission.0, submission.1);
                Ok(())
            }
            Err((error, writes)) => {
                taking.done(Err(&error));
                stream.set_failed(true);
                Err(BatchFailure { error, writes })
            }
        }
    }

    /// Waits for what holds `stream`'s batch when it must go now
    /// (`Ok(true)`: it was held); `Err` with `Held` or `HandedOff` when it
    /// goes later.
    fn release(
        &mut self,
        id: StreamId,
        stream: &mut WgpuStream,
        urgency: Urgency,
    ) -> Result<bool, Submitted> {
        let Some(gate) = stream.hold().cloned() else {
            return Ok(false);
        };
        if !gate.is_settled() {
            match urgency {
                Urgency::WhenReady => return Err(Submitted::Held),
                Urgency::Before if self.hand_off(id, stream, &gate) => {
                    return Err(Submitted::HandedOff);
                }
                // A wait that gives up submits anyway: the collective's
                // result is then never written (see `Gate::wait`).
                _ => {
                    let _ = gate.wait(self.collective_wait);
                }
            }
        }
        stream.release_hold();
        Ok(true)
    }
}

impl SchedulerStreamBackend for ScheduledWgpuBackend {
    type Stream = WgpuStream;

    /// Holds `stream` behind the batch just handed off. A stream already
    /// held behind something else is held behind a mark settled after both
    /// (hand-offs are dealt with in order).
    fn follow(&mut self, _id: StreamId, stream: &mut WgpuStream) {
        let Some(hold) = self.handed.take() else {
            return;
        };
        if stream.is_held()
            && let Some(handoffs) = &self.handoffs
            && let Ok(mark) = handoffs.mark()
        {
            stream.hold_behind(mark);
            return;
        }
        stream.hold_behind(hold);
    }

    fn create_stream(&mut self, _id: StreamId) -> WgpuStream {
        // A fresh stream (or one retired and used again) may have work in
        // flight from before: the newest submission covers it. (Not `None`:
        // a wait for "everything" keeps waiting while other threads submit.)
        let (newest, no) = self.submitter.newest();
        WgpuStream::new(Batch::new(self.submitter.timing()), newest, no)
    }

    /// Submits the stream's batch (through `stream/submit.rs`): a batch the queue
    /// refuses is a [`BatchFailure`] naming what it wrote.
    ///
    /// A batch held behind a collective stays pending when the submit is
    /// only opportunistic, is handed off with [`Urgency::Before`] (never
    /// waiting), and waits for what holds it with [`Urgency::Now`].
    /// Whatever the collective's outcome, the batch then runs: a failure
    /// poisons the data it concerns (its `dst`, and what read it), not the
    /// work queued after it.
    fn submit(
        &mut self,
        id: StreamId,
        stream: &mut WgpuStream,
        urgency: Urgency,
    ) -> Result<Submitted, BatchFailure> {
        stream.set_failed(false);
        // What an earlier hand-off left is for the `follow` right after it.
        self.handed = None;
        // Host writes' copies were asked for first: they go first.
        self.flush_host_copies();
        // Parked batches come before anything encoded after them; the lock
        // taken here keeps a waiter from submitting them meanwhile.
        let parked = stream.parked().clone();
        let (taking, mut batches) = parked.take();
        if let Some(covered) = taking.covered() {
            stream.cover(covered);
        }
        if !batches.is_empty() && stream.has_hold() {
            // They were parked before the hold: they do not wait for it.
            let earlier = std::mem::take(&mut batches);
            self.submit_batches(id, stream, taking, earlier)?;
            // The stream's own batch, as if nothing had been parked.
            return SchedulerStreamBackend::submit(self, id, stream, urgency);
        }
        let was_held = match self.release(id, stream, urgency) {
            Ok(was_held) => was_held,
            Err(later) => return Ok(later),
        };
        match stream.batch().finish(self.submitter.timing()) {
            Some(own) => batches.push(own),
            None if batches.is_empty() => {
                if was_held {
                    // A result written with `write_buffer` reaches the GPU
                    // with the next submit, which must happen even with
                    // nothing encoded.
                    self.host_writes_pending = true;
                    self.flush_host_writes();
                }
                let (newest, no) = self.submitter.newest();
                stream.caught_up(newest, no);
                return Ok(Submitted::Yes);
            }
            None => {}
        }
        self.submit_batches(id, stream, taking, batches)?;
        Ok(Submitted::Yes)
    }
}
