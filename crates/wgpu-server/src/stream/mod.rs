//! Streams on wgpu: what a stream's pending work is and how it reaches the
//! device's one queue (the backend of `compute-stream`'s scheduler).
//!
//! - `batch`: [`Batch`](batch::Batch), the pending commands of one stream,
//!   what they write, their audits and stamps;
//! - [`WgpuStream`]: a stream's batch, what holds it back, and its last
//!   submission;
//! - `backend`: [`ScheduledWgpuBackend`], the queue side: submits, host
//!   writes that land before the next submit, hand-offs;
//! - `submit`: [`Submitter`](submit::Submitter), the one place a batch
//!   is submitted (by the backend, and by the collective applier for a
//!   handed-off batch);
//! - `gate`: [`Gate`](gate::Gate), where a batch held behind something
//!   outside the queue (a collective's result) waits;
//! - `handoff`: a held batch handed to whoever submits it once its gate is
//!   settled (the collective applier), so nothing waits for another rank;
//! - `parked`: batches finished before the stream submits them (a profile
//!   window's end), submitted with its next submit or by a waiter;
//! - `audit`: indirect counts read back once a batch has run (late
//!   verdicts);
//! - `reports`: the bounds reports of kernels compiled with
//!   `BoundsChecks::Reported`, read back the same way;
//! - `timing`: GPU time per batch, for the `sync` log line.
//!
//! This is the floor above the device and memory: it knows nothing of
//! launches, collectives or profiling, which encode into it.

pub(crate) mod audit;
mod backend;
pub(crate) mod batch;
pub(crate) mod gate;
pub(crate) mod handoff;
pub(crate) mod parked;
pub(crate) mod reports;
pub(crate) mod submit;
pub(crate) mod timing;

use std::sync::Arc;

use compute_runtime::StreamId;

pub use backend::ScheduledWgpuBackend;

use crate::stream::batch::{Batch, FinishedBatch};
use crate::stream::gate::Gate;
use crate::stream::parked::{ParkTicket, Parked, Submission};

/// One stream's pending work: its batch, what it is held behind, and what
/// its submissions were.
#[derive(Debug, Default)]
pub struct WgpuStream {
    batch: Batch,
    /// What the batch comes after: a `Wait` collective's result in `dst`,
    /// or a batch of this or another stream handed to the collective
    /// applier. The batch is held until it is settled, whatever the
    /// outcome: a hold orders work, it never drops it.
    hold: Option<Arc<Gate>>,
    /// Part of this stream's work was handed off to be submitted by
    /// another thread: the stream's own submissions no longer tell when all
    /// its work has run.
    handed_off: bool,
    /// The last submission of this stream and its number.
    last: Option<wgpu::SubmissionIndex>,
    last_no: u64,
    /// The last submit of this stream failed (the queue refused its batch).
    failed: bool,
    /// Batches finished and not submitted yet (see `parked`).
    parked: Parked,
}

impl WgpuStream {
    fn new(batch: Batch, last: Option<wgpu::SubmissionIndex>, last_no: u64) -> Self {
        WgpuStream {
            batch,
            last,
            last_no,
            ..WgpuStream::default()
        }
    }

    /// The pending commands, to encode into.
    pub(crate) fn batch(&mut self) -> &mut Batch {
        &mut self.batch
    }

    /// Whether the batch waits for something that has not happened yet.
    pub(crate) fn is_held(&self) -> bool {
        self.hold.as_ref().is_some_and(|g| !g.is_settled())
    }

    /// Whether anything holds the batch, settled or not (a settled `Wait`
    /// result still has to reach the GPU with the next submit).
    pub(crate) fn has_hold(&self) -> bool {
        self.hold.is_some()
    }

    /// Holds the batch, and what is encoded next, behind `gate`.
    pub(crate) fn hold_behind(&mut self, gate: Arc<Gate>) {
        self.hold = Some(gate);
    }

    /// What holds the batch now, if anything.
    pub(crate) fn hold(&self) -> Option<&Arc<Gate>> {
        self.hold.as_ref()
    }

    /// Finishes the batch to hand it off (see `handoff`): later work
    /// starts a new batch, held as before. `None` when nothing is encoded.
    pub(crate) fn hand_off(
        &mut self,
        timing: Option<&timing::BatchTiming>,
    ) -> Option<FinishedBatch> {
        let finished = self.batch.finish(timing)?;
        self.handed_off = true;
        Some(finished)
    }

    /// Parks the batch (see `parked`): finished now, submitted with the
    /// stream's next submit or by whoever waits on it first. `None` when
    /// nothing is encoded, or when the batch is held back (a held batch
    /// goes to the queue only once what holds it is settled).
    fn park(&mut self, id: StreamId, submitter: &submit::Submitter) -> Option<ParkTicket> {
        if self.hold.is_some() {
            return None;
        }
        let finished = self.batch.finish(submitter.timing())?;
        Some(self.parked.park(id, finished, submitter))
    }

    /// The stream's parked batches.
    pub(crate) fn parked(&self) -> &Parked {
        &self.parked
    }

    /// Parked batches were submitted from another thread as `s`: the
    /// stream's last submission covers them.
    fn cover(&mut self, s: &Submission) {
        if s.1 > self.last_no {
            self.last = Some(s.0.clone());
            self.last_no = s.1;
        }
    }

    /// The last submission of this stream (the newest of any stream when
    /// part of its work was handed off), and its number.
    pub(crate) fn last_submission(&self) -> (Option<wgpu::SubmissionIndex>, u64) {
        (self.last.clone(), self.last_no)
    }

    /// Whether the last submit failed; asking clears it.
    pub(crate) fn take_failed(&mut self) -> bool {
        std::mem::take(&mut self.failed)
    }

    fn set_failed(&mut self, failed: bool) {
        self.failed = failed;
    }

    fn release_hold(&mut self) {
        self.hold = None;
    }

    /// The batch was submitted as `index` (number `no`): it covers any work
    /// handed off before it.
    fn submitted(&mut self, index: wgpu::SubmissionIndex, no: u64) {
        self.handed_off = false;
        self.last = Some(index);
        self.last_no = no;
    }

    /// Nothing of its own was submitted; work it handed off went to the
    /// queue before this point (it is submitted before the gate the stream
    /// was held behind settles), so the newest submission covers it.
    fn caught_up(&mut self, newest: Option<wgpu::SubmissionIndex>, no: u64) {
        if std::mem::take(&mut self.handed_off) {
            self.last = newest;
            self.last_no = no;
        }
    }
}
