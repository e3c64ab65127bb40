//! [`Parked`]: batches a stream finished before submitting them, which go
//! to the queue with the stream's next submit, or earlier when someone
//! waiting on one of them submits them from its own thread.
//!
//! A profile window's end needs its stamps resolved after the work inside
//! it, and the caller wants `end_profile` to cost about a launch, not a
//! submit. So the end finishes the stream's batch and parks it here instead
//! of submitting: the stream's next submit takes every parked batch first,
//! in one `queue.submit` with its own (the window rides along), and the
//! window's future, awaited before that, submits what is parked itself.
//!
//! Order is kept by one lock: whoever submits parked batches holds it
//! through the `queue.submit`, and the stream's own submit takes it before
//! its own batch. So a parked batch reaches the queue before anything the
//! stream encoded after it, and before any host write issued after it (a
//! host write first submits the streams with pending work on its range,
//! which takes this lock). Batches are parked only when nothing holds the
//! stream back (see `gate.rs`) and after pending host copies went to the
//! queue, so submitting them from another thread never passes work they
//! come after.

use std::sync::{Arc, Mutex, MutexGuard};

use compute_runtime::{InternalFault, ServerError, StreamId};

use crate::stream::batch::FinishedBatch;
use crate::stream::submit::Submitter;

/// A submission and its number.
pub(crate) type Submission = (wgpu::SubmissionIndex, u64);

#[derive(Debug, Default)]
struct State {
    batches: Vec<FinishedBatch>,
    /// Batches ever parked, and how many of them went to the queue.
    parked: u64,
    submitted: u64,
    /// The submission that covers every batch submitted so far (`None`
    /// before the first), or why the queue refused the last ones.
    last: Option<Result<Submission, Arc<ServerError>>>,
}

/// One stream's parked batches; clones share them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Parked(Arc<Mutex<State>>);

/// What a waiter on one parked batch holds: enough to submit it itself.
#[derive(Clone, Debug)]
pub(crate) struct ParkTicket {
    parked: Parked,
    number: u64,
    stream: StreamId,
    submitter: Submitter,
}

impl ParkTicket {
    /// The submission covering the batch, submitting it now (with every
    /// batch parked before it) if it has not gone yet.
    pub fn submission(&self) -> Result<Submission, Arc<ServerError>> {
        self.parked
            .submission_of(self.number, self.stream, &self.submitter)
    }
}

/// Held while the stream submits: nothing parked can reach the queue from
/// another thread until the stream's own batch has.
pub(crate) struct Taking<'a> {
    state: MutexGuard<'a, State>,
}

impl Parked {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks `stream`'s `batch`; returns the ticket of whoever waits on it.
    pub fn park(
        &self,
        stream: StreamId,
        batch: FinishedBatch,
        submitter: &Submitter,
    ) -> ParkTicket {
        let mut state = self.lock();
        state.batches.push(batch);
        state.parked += 1;
        ParkTicket {
            parked: self.clone(),
            number: state.parked,
            stream,
            submitter: submitter.clone(),
        }
    }

    /// For the stream's own submit: the lock, and with it the parked
    /// batches to submit first.
    pub fn take(&self) -> (Taking<'_>, Vec<FinishedBatch>) {
        let mut state = self.lock();
        let batches = std::mem::take(&mut state.batches);
        (Taking { state }, batches)
    }

    /// The submission covering parked batch `number`, submitting every
    /// parked batch (from the calling thread) when it has not gone yet.
    /// What a refused submission wrote is poisoned through the late
    /// verdicts, reported at the server's next call.
    fn submission_of(
        &self,
        number: u64,
        stream: StreamId,
        submitter: &Submitter,
    ) -> Result<Submission, Arc<ServerError>> {
        let mut state = self.lock();
        if state.submitted < number {
            let batches = std::mem::take(&mut state.batches);
            let count = batches.len() as u64;
            let outcome = match submitter.submit_all(stream, batches) {
                Ok(s) => Ok(s),
                Err((error, writes)) => {
                    submitter.late().poison(stream, &writes, error.clone());
                    Err(Arc::new(error))
                }
            };
            state.submitted += count;
            state.last = Some(outcome);
        }
        match &state.last {
            Some(outcome) => outcome.clone(),
            None => Err(Arc::new(ServerError::Internal {
                fault: InternalFault::ParkedBatchLost { number },
            })),
        }
    }
}

impl Taking<'_> {
    /// What covers the batches submitted from other threads so far, if
    /// anything was.
    pub fn covered(&self) -> Option<&Submission> {
        self.state.last.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// The batches taken went to the queue (or were refused) as `outcome`,
    /// with or before the stream's own.
    pub fn done(mut self, outcome: Result<&Submission, &ServerError>) {
        let state = &mut *self.state;
        state.submitted = state.parked;
        state.last = Some(match outcome {
            Ok(s) => Ok(s.clone()),
            Err(error) => Err(Arc::new(error.clone())),
        });
    }
}
