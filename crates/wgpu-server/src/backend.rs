//! `ScheduledWgpuBackend`: what a stream's pending work is on wgpu.
//!
//! A stream's pending work is one command encoder, with at most one compute
//! pass open in it. Consecutive launches share the pass (and skip
//! `set_pipeline`/`set_bind_group` when they repeat), which is what lets the
//! launch path approach a hand-written loop; a copy ends the pass, and the
//! next launch opens a new one. Submitting ends the pass, finishes the
//! encoder and hands it to the queue.

use std::sync::Arc;
use std::time::Duration;

use compute_runtime::{MemoryId, ServerError, StreamId};
use compute_stream::{BatchFailure, LateFaults, SchedulerStreamBackend, Submitted, Urgency};

use crate::collective::applier::{Job, Jobs, Parked};
use crate::collective::gate::Gate;
use crate::device::faults::scoped;
use crate::device::poller::PollLock;
use crate::launch::audit::BatchAudit;
use crate::memory::upload::{HostCopies, UploadPool};

use crate::timing::batch::{BatchStamps, BatchTiming};
use crate::timing::stamps::StampAt;

/// One stream's pending work.
#[derive(Debug, Default)]
pub struct WgpuStream {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Identity of the pipeline set in the open pass.
    pass_pipeline: Option<u64>,
    /// Identity of the bind group set in the open pass.
    pass_bind_group: Option<u64>,
    /// The last submission of this stream (`None`: wait for everything),
    /// and its number.
    pub(crate) last_submission: Option<wgpu::SubmissionIndex>,
    pub(crate) last_submit_no: u64,
    /// Batch timestamps, when batch timing is on.
    stamps: Option<BatchStamps>,
    /// Every slice the pending batch's work writes: poisoned if the queue
    /// refuses the batch.
    writes: Vec<MemoryId>,
    /// Copies of the batch's indirect counts, checked once it has run.
    audit: BatchAudit,

    /// What the pending batch comes after: a `Wait` collective's result in
    /// `dst`, or a batch of this or another stream handed to the collective
    /// applier (see `collective/`). The batch is held until it is settled,
    /// whatever the outcome: the hold orders work, it never drops it.
    pub(crate) held_by: Option<Arc<Gate>>,
    /// Part of this stream's pending work was handed to the collective
    /// applier to submit: the stream's own submissions no longer tell when
    /// all its work has run.
    parked: bool,
    /// The last submit of this stream failed (the queue refused its batch).
    pub(crate) last_failed: bool,
}

impl WgpuStream {
    fn encoder<'a>(
        encoder: &'a mut Option<wgpu::CommandEncoder>,
        stamps: &Option<BatchStamps>,
        device: &wgpu::Device,
    ) -> &'a mut wgpu::CommandEncoder {
        encoder.get_or_insert_with(|| {
            let mut e =
                device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            if let Some(s) = stamps {
                e.write_timestamp(&s.query_set, 0);
            }
            e
        })
    }

    /// The open compute pass, opening one if needed.
    fn pass(&mut self, device: &wgpu::Device) -> &mut wgpu::ComputePass<'static> {
        let encoder = &mut self.encoder;
        let stamps = &self.stamps;
        self.pass.get_or_insert_with(|| {
            Self::encoder(encoder, stamps, device)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                })
                .forget_lifetime()
        })
    }

    /// The encoder, with any open pass ended (for copies).
    pub(crate) fn encoder_for_copy(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.end_pass();
        Self::encoder(&mut self.encoder, &self.stamps, device)
    }

    /// Writes timestamp `index` of `query_set` after everything encoded so
    /// far, with an empty pass of its own (needs only `TIMESTAMP_QUERY`).
    pub(crate) fn stamp(&mut self, device: &wgpu::Device, query_set: &wgpu::QuerySet, index: u32) {
        self.end_pass();
        let encoder = Self::encoder(&mut self.encoder, &self.stamps, device);
        let _pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("timestamp"),
            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                query_set,
                beginning_of_pass_write_index: Some(index),
                end_of_pass_write_index: None,
            }),
        });
    }

    /// The pass a launch encodes into, with its pipeline and bind group
    /// set (skipped when the open pass already has them). With `timed`, a
    /// fresh pass whose timestamp writes bracket the launch; the caller ends
    /// it after its one dispatch.
    pub(crate) fn launch_pass(
        &mut self,
        device: &wgpu::Device,
        timed: Option<&StampAt>,
        pipeline: (&wgpu::ComputePipeline, u64),
        group: (&wgpu::BindGroup, u64),
    ) -> &mut wgpu::ComputePass<'static> {
        if let Some(at) = timed {
            self.end_pass();
            let encoder = Self::encoder(&mut self.encoder, &self.stamps, device);
            let pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("profiled launch"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &at.query_set,
                        beginning_of_pass_write_index: Some(at.base),
                        end_of_pass_write_index: Some(at.base + 1),
                    }),
                })
                .forget_lifetime();
            self.pass = Some(pass);
        }
        let fresh = self.pass.is_none();
        let set_pipeline = fresh || self.pass_pipeline != Some(pipeline.1);
        let set_group = set_pipeline || self.pass_bind_group != Some(group.1);
        self.pass_pipeline = Some(pipeline.1);
        self.pass_bind_group = Some(group.1);
        let pass = self.pass(device);
        if set_pipeline {
            pass.set_pipeline(pipeline.0);
        }
        if set_group {
            pass.set_bind_group(0, group.0, &[]);
        }
        pass
    }

    /// Encodes the audit copy of an indirect count (see
    /// `launch::audit`) for a launch writing `writes`.
    pub(crate) fn audit_indirect(
        &mut self,
        device: &wgpu::Device,
        src: &wgpu::Buffer,
        offset: u64,
        writes: &[MemoryId],
        late: &LateFaults,
    ) {
        self.end_pass();
        let encoder = Self::encoder(&mut self.encoder, &self.stamps, device);
        self.audit
            .record(device, encoder, src, offset, writes, late);
    }

    /// Whether the pending batch waits for a collective that has not
    /// completed.
    pub(crate) fn is_held(&self) -> bool {
        self.held_by.as_ref().is_some_and(|g| !g.is_settled())
    }

    /// Finishes what is encoded so far, for the collective applier to submit
    /// after the collective that holds it: the batch, what it writes, its
    /// audits. `None` when nothing is encoded. Later work starts a new
    /// encoder, still held.
    pub(crate) fn park(&mut self) -> Option<(wgpu::CommandBuffer, Vec<MemoryId>, BatchAudit)> {
        self.end_pass();
        let encoder = self.encoder.take()?;
        self.parked = true;
        Some((
            encoder.finish(),
            std::mem::take(&mut self.writes),
            std::mem::take(&mut self.audit),
        ))
    }

    /// Records that the pending batch writes `memory`.
    pub(crate) fn wrote(&mut self, memory: &[MemoryId]) {
        self.writes.extend_from_slice(memory);
    }

    pub(crate) fn end_pass(&mut self) {
        self.pass = None;
        self.pass_pipeline = None;
        self.pass_bind_group = None;
    }
}

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
    device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    /// The latest submission on any stream, and how many there were.
    pub(crate) last_submission: Option<wgpu::SubmissionIndex>,
    pub(crate) submits_made: u64,
    /// `queue.write_buffer` calls not yet followed by a submit: they only
    /// reach the GPU with the next submission.
    pub(crate) host_writes_pending: bool,
    /// Bytes and calls of those writes, toward the flush thresholds.
    host_write_bytes: u64,
    host_write_calls: u32,
    /// Batch timing for the `sync` log line, when on.
    pub(crate) timing: Option<BatchTiming>,
    /// Where audited indirect counts over the limit are recorded.
    pub(crate) late: Arc<LateFaults>,
    /// `max_compute_workgroups_per_dimension`, for the audits.
    pub(crate) indirect_max: u32,
    /// Where upload buffers go back once their copies are submitted.
    pub(crate) upload: UploadPool,
    /// Large host writes' copies, submitted before the next submit.
    host_copies: HostCopies,
    /// Held to poll the device, and to submit: wgpu 30's poll asserts on
    /// a race with another thread's poll or submit (fixed upstream after
    /// 30.0.2), so polls and submits of one device are serialized.
    pub(crate) poll_lock: Option<PollLock>,
    /// How long a submission that must happen waits for the collective that
    /// holds its batch (past the communicator's timeout, which always
    /// completes a call first).
    pub(crate) collective_wait: Duration,
    /// Where a held batch is handed to be submitted once what holds it is
    /// done (the collective applier's queue; set by `comm_init`).
    pub(crate) jobs: Option<Jobs>,
    /// What the last hand-off left for the work that must follow it.
    handed: Option<Arc<Gate>>,
}

impl ScheduledWgpuBackend {
    /// The backend of `device`'s `queue`.
    pub fn new(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        let indirect_max = device.limits().max_compute_workgroups_per_dimension;
        Self {
            indirect_max,
            late: Arc::default(),
            collective_wait: DEFAULT_COLLECTIVE_WAIT,
            upload: UploadPool::default(),
            host_copies: HostCopies::default(),
            poll_lock: None,
            jobs: None,
            handed: None,
            device,
            queue,
            last_submission: None,
            submits_made: 0,
            host_writes_pending: false,
            host_write_bytes: 0,
            host_write_calls: 0,
            timing: None,
        }
    }

    /// Counts a `queue.write_buffer` of `bytes`; past the thresholds it
    /// submits an empty batch so wgpu's staging is handed to the GPU and
    /// recycled instead of growing.
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
    #[allow(clippy::too_many_arguments)] // One copy's endpoints and its origin.
    pub(crate) fn host_copy(
        &mut self,
        upload: wgpu::Buffer,
        dst: &wgpu::Buffer,
        offset: u64,
        len: u64,
        stream: StreamId,
        memory: MemoryId,
    ) {
        let device = self.device.clone();
        self.host_copies
            .record(&device, upload, dst, offset, len, stream, memory);
        self.host_write(len);
    }

    /// Submits the waiting host copies, if any: before any other submit,
    /// and before a `write_buffer` (which would otherwise land before them).
    pub(crate) fn flush_host_copies(&mut self) {
        let Some((commands, uploads, writes)) = self.host_copies.take() else {
            return;
        };
        let queue = &self.queue;
        let submitted = {
            let _submitting = self.poll_lock.as_ref().map(PollLock::lock);
            scoped(&self.device, || queue.submit(Some(commands)))
        };
        match submitted {
            Ok(index) => {
                for upload in uploads {
                    self.upload.recycle(upload);
                }
                // The upload buffers come back through map callbacks, run by
                // whatever polls next; a poll that does not wait runs those
                // already due, so a loop of writes with no waits recycles.
                if let Some(lock) = &self.poll_lock
                    && let Some(_polling) = lock.try_lock()
                {
                    let _ = self.device.poll(wgpu::PollType::Poll);
                }
                self.submitted(index);
            }
            Err(e) => {
                let error = ServerError::BatchRejected {
                    reason: e.to_string(),
                };
                for (stream, memory) in writes {
                    self.late.poison(stream, &[memory], error.clone());
                }
            }
        }
    }

    fn submitted(&mut self, index: wgpu::SubmissionIndex) {
        self.submits_made += 1;
        self.last_submission = Some(index);
        self.host_writes_pending = false;
        self.host_write_bytes = 0;
        self.host_write_calls = 0;
    }

    /// Hands `stream`'s batch, held behind `gate`, to the applier, which
    /// submits it once `gate` is settled; the stream's later work and the
    /// work that must follow (`follow`) are held behind that submission.
    /// `false` when there is no applier to hand it to.
    fn hand_off(&mut self, id: StreamId, stream: &mut WgpuStream, gate: &Arc<Gate>) -> bool {
        let Some(jobs) = &self.jobs else {
            return false;
        };
        let Some((batch, writes, audit)) = stream.park() else {
            // Nothing encoded: what follows waits for the gate itself.
            self.handed = Some(Arc::clone(gate));
            return true;
        };
        let submitted = Arc::new(Gate::new());
        let parked = Parked {
            after: Arc::clone(gate),
            batch,
            writes,
            audit,
            stream: id,
            staged: None,
            submitted: Arc::clone(&submitted),
        };
        if jobs.push(Job::Parked(Box::new(parked))).is_err() {
            return false;
        }
        stream.held_by = Some(Arc::clone(&submitted));
        self.handed = Some(submitted);
        true
    }

    /// Submits a command buffer that belongs to no stream (the timeline's
    /// resolve); returns it with its number.
    pub(crate) fn submit_outside(
        &mut self,
        commands: wgpu::CommandBuffer,
    ) -> (wgpu::SubmissionIndex, u64) {
        let index = {
            let _submitting = self.poll_lock.as_ref().map(PollLock::lock);
            self.queue.submit(Some(commands))
        };
        self.submitted(index.clone());
        (index, self.submits_made)
    }

    /// Submits an empty batch when host writes are pending, so a drain
    /// covers them; returns the submission to wait on.
    pub(crate) fn flush_host_writes(&mut self) -> Option<wgpu::SubmissionIndex> {
        self.flush_host_copies();
        if self.host_writes_pending {
            let index = {
                let _submitting = self.poll_lock.as_ref().map(PollLock::lock);
                self.queue.submit(std::iter::empty())
            };
            self.submitted(index);
        }
        self.last_submission.clone()
    }
}

impl SchedulerStreamBackend for ScheduledWgpuBackend {
    type Stream = WgpuStream;

    /// Holds `stream` behind the batch just handed off. A stream already
    /// held behind something else is held behind a mark the applier settles
    /// after both (its queue runs in order).
    fn follow(&mut self, _id: StreamId, stream: &mut WgpuStream) {
        let Some(hold) = self.handed.take() else {
            return;
        };
        if stream.is_held()
            && let Some(jobs) = &self.jobs
            && let Ok(mark) = jobs.mark()
        {
            stream.held_by = Some(mark);
            return;
        }
        stream.held_by = Some(hold);
    }

    fn create_stream(&mut self, _id: StreamId) -> WgpuStream {
        WgpuStream {
            stamps: self.timing.as_ref().map(BatchTiming::stamps),
            // A fresh stream (or one retired and used again) may have work
            // in flight from before: the newest submission covers it. (Not
            // `None`: a wait for "everything" keeps waiting while other
            // threads submit.)
            last_submission: self.last_submission.clone(),
            last_submit_no: self.submits_made,
            ..WgpuStream::default()
        }
    }

    /// Finishes and submits the stream's encoder inside error scopes: a
    /// batch the queue refuses (which no check before encoding should let
    /// happen) is a [`BatchFailure`] naming what it wrote, never an
    /// uncaptured error that a later `sync` of any stream would report.
    ///
    /// A batch held behind a collective (`WgpuStream::held_by`) stays
    /// pending when the submit is only opportunistic, is handed to the
    /// applier with [`Urgency::Before`] (never waiting), and waits for what
    /// holds it with [`Urgency::Now`]. Whatever the collective's outcome,
    /// the batch then runs: a failure poisons the data it concerns (its
    /// `dst`, and what read it), not the work queued after it.
    fn submit(
        &mut self,
        id: StreamId,
        stream: &mut WgpuStream,
        urgency: Urgency,
    ) -> Result<Submitted, BatchFailure> {
        stream.last_failed = false;
        // What an earlier hand-off left is for the `follow` right after it.
        self.handed = None;
        // Host writes' copies were asked for first: they go first.
        self.flush_host_copies();
        let mut flush_host_write = false;
        if let Some(gate) = stream.held_by.clone() {
            if !gate.is_settled() {
                match urgency {
                    Urgency::WhenReady => return Ok(Submitted::Held),
                    Urgency::Before if self.hand_off(id, stream, &gate) => {
                        return Ok(Submitted::HandedOff);
                    }
                    // A wait that gives up submits anyway: the collective's
                    // result is then never written (see `Gate::wait`).
                    _ => {
                        let _ = gate.wait(self.collective_wait);
                    }
                }
            }
            stream.held_by = None;
            // A result written with `write_buffer` reaches the GPU with the
            // next submit, which must happen even with nothing encoded.
            flush_host_write = true;
        }
        stream.end_pass();
        let writes = std::mem::take(&mut stream.writes);
        let audit = std::mem::take(&mut stream.audit);
        let Some(mut encoder) = stream.encoder.take() else {
            if flush_host_write {
                self.host_writes_pending = true;
                self.flush_host_writes();
            }
            if std::mem::take(&mut stream.parked) {
                // Parked work went to the queue before this point (the
                // applier submits it before the gate settles): the newest
                // submission covers it.
                stream.last_submission = self.last_submission.clone();
                stream.last_submit_no = self.submits_made;
            }
            return Ok(Submitted::Yes);
        };
        let readback = match (&self.timing, &stream.stamps) {
            (Some(t), Some(s)) => Some(t.end_batch(&mut encoder, s)),
            _ => None,
        };
        let queue = &self.queue;
        let commands = encoder.finish();
        let submitted = {
            let _submitting = self.poll_lock.as_ref().map(PollLock::lock);
            scoped(&self.device, || queue.submit(Some(commands)))
        };
        let index = match submitted {
            Ok(index) => index,
            Err(error) => {
                stream.last_failed = true;
                let error = ServerError::BatchRejected {
                    reason: error.to_string(),
                };
                audit.abandon(id, &self.late, &error);
                return Err(BatchFailure { error, writes });
            }
        };
        if let (Some(t), Some(r)) = (&self.timing, readback) {
            t.after_submit(r);
        }
        audit.submitted(id, self.indirect_max, &self.late);
        // Parked work of this stream was submitted before this batch, so
        // this batch's index covers it too.
        stream.parked = false;
        stream.last_submission = Some(index.clone());
        self.submitted(index);
        stream.last_submit_no = self.submits_made;
        Ok(Submitted::Yes)
    }
}
