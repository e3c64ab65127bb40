//! [`Submitter`]: the one place a finished batch reaches the queue.
//!
//! A batch is submitted inside an error scope (a batch the queue refuses is
//! a [`ServerError::BatchRejected`], never an uncaptured error that a later
//! `sync` of any stream would report) and under the device's [`PollLock`]
//! (wgpu 30's poll asserts when another thread submits during its wait).
//! Once submitted, its audits are mapped for their verdicts and its batch
//! timing, if any, for its GPU time; refused, its audits' verdict is the
//! refusal and what it writes is the caller's to poison. The stream backend
//! submits through it, and so does the collective applier for a batch that
//! was handed off.

use std::sync::{Arc, Mutex};

use compute_runtime::{ServerError, StreamId};
use compute_stream::LateFaults;

use crate::device::faults::scoped;
use crate::device::poller::PollLock;
use crate::stream::batch::FinishedBatch;
use crate::stream::timing::BatchTiming;

/// Submits batches of one device's queue; clones share everything.
#[derive(Clone, Debug)]
pub(crate) struct Submitter {
    device: wgpu::Device,
    queue: wgpu::Queue,
    poll_lock: PollLock,
    late: Arc<LateFaults>,
    /// `max_compute_workgroups_per_dimension`, for the audits.
    indirect_max: u32,
    timing: Option<Arc<BatchTiming>>,
    /// The newest submission of the queue and how many there were, by
    /// anyone (the streams' backend, the collective applier): what a wait
    /// for "everything so far" waits for.
    newest: Arc<Mutex<(Option<wgpu::SubmissionIndex>, u64)>>,
}

impl Submitter {
    pub fn new(
        device: wgpu::Device,
        queue: wgpu::Queue,
        poll_lock: PollLock,
        late: Arc<LateFaults>,
        timing: Option<Arc<BatchTiming>>,
    ) -> Self {
        let indirect_max = device.limits().max_compute_workgroups_per_dimension;
        Submitter {
            device,
            queue,
            poll_lock,
            late,
            indirect_max,
            timing,
            newest: Arc::default(),
        }
    }

    /// Runs `f` once everything submitted so far has run (from whichever
    /// thread polls then). Registered under the submit lock: wgpu submits
    /// its pending `write_buffer`s before it registers, and a submit while
    /// another thread is inside `poll(Wait)` trips wgpu 30's assertion.
    pub fn after_work_done(&self, f: impl FnOnce() + Send + 'static) {
        let _submitting = self.poll_lock.lock();
        self.queue.on_submitted_work_done(f);
    }

    /// The newest submission to the queue, and its number.
    pub fn newest(&self) -> (Option<wgpu::SubmissionIndex>, u64) {
        self.newest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Batch timing, when on.
    pub fn timing(&self) -> Option<&BatchTiming> {
        self.timing.as_deref()
    }

    /// Batch timing, when on, shared.
    pub fn timing_arc(&self) -> Option<Arc<BatchTiming>> {
        self.timing.clone()
    }

    /// Where late verdicts go.
    pub fn late(&self) -> &Arc<LateFaults> {
        &self.late
    }

    /// Submits `stream`'s batch. Refused, the batch's audits are judged
    /// with the refusal; the caller poisons what it wrote.
    pub fn submit(
        &self,
        stream: StreamId,
        batch: FinishedBatch,
    ) -> Result<(wgpu::SubmissionIndex, u64), (ServerError, FinishedWrites)> {
        self.submit_all(stream, vec![batch])
    }

    /// Submits `stream`'s batches, in order, in one `queue.submit` (parked
    /// batches and the stream's own, see `parked.rs`). Refused, every
    /// batch's audits are judged with the refusal, and what they all wrote
    /// is the caller's to poison.
    pub fn submit_all(
        &self,
        stream: StreamId,
        batches: Vec<FinishedBatch>,
    ) -> Result<(wgpu::SubmissionIndex, u64), (ServerError, FinishedWrites)> {
        let mut commands = Vec::with_capacity(batches.len());
        let mut after = Vec::with_capacity(batches.len());
        for b in batches {
            commands.push(b.commands);
            after.push((b.writes, b.audit, b.timing));
        }
        match self.commands(commands) {
            Ok((index, no)) => {
                for (_, audit, timing) in after {
                    if let (Some(t), Some(r)) = (&self.timing, timing) {
                        t.after_submit(r);
                    }
                    audit.submitted(stream, self.indirect_max, &self.late);
                }
                Ok((index, no))
            }
            Err(error) => {
                let mut wrote = Vec::new();
                for (writes, audit, _) in after {
                    audit.abandon(stream, &self.late, &error);
                    wrote.extend(writes);
                }
                Err((error, wrote))
            }
        }
    }

    /// Submits command buffers of no stream (host copies, a resolve), or
    /// none at all (so pending `write_buffer`s land); returns the
    /// submission and its number.
    pub fn commands(
        &self,
        commands: impl IntoIterator<Item = wgpu::CommandBuffer>,
    ) -> Result<(wgpu::SubmissionIndex, u64), ServerError> {
        let _submitting = self.poll_lock.lock();
        let index = scoped(&self.device, || self.queue.submit(commands)).map_err(|e| {
            ServerError::BatchRejected {
                reason: e.to_string(),
            }
        })?;
        // Numbered under the submit lock: numbers follow the queue's order.
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        newest.1 += 1;
        newest.0 = Some(index.clone());
        Ok((index, newest.1))
    }

    /// Runs the map callbacks already due without waiting, if no other
    /// thread is polling: recycles what finished work gave back.
    pub fn poll_ready(&self) {
        if let Some(_polling) = self.poll_lock.try_lock() {
            let _ = self.device.poll(wgpu::PollType::Poll);
        }
    }
}

/// What a refused batch wrote.
pub(crate) type FinishedWrites = Vec<compute_runtime::MemoryId>;
