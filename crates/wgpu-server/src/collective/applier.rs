//! The applier: one thread per server that turns collective outcomes into
//! device writes, in the order the calls were made.
//!
//! It owns the two steps that must happen after another rank has done its
//! part, when no call on this server may be running: writing a `Wait`
//! collective's result into `dst` (`queue.write_buffer`, which lands before
//! the next submit, under the gate's lock so the stream's held batch goes
//! after it), and submitting a batch that was held behind an earlier
//! collective of its stream (so the next collective's input gets staged
//! without anyone calling this server). Jobs run first in, first out: a
//! stream's outcomes and held batches are queued in call order, and each
//! rank's communicator completes its calls in that order too.
//!
//! What it does not do: decide anything about ordering or trust beyond
//! that; the server thread set both up when it queued the job, and failures
//! reach the trust registry as late verdicts ([`LateFaults`]).

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use compute_collective::PendingResult;
use compute_runtime::{ComputeWait, MemoryId, ServerError, StreamId};
use compute_stream::LateFaults;

use crate::collective::gate::{Gate, GateState};
use crate::collective::stage::Staged;
use crate::device::faults::scoped;
use crate::device::poller::{PollLock, PollerHandle};
use crate::launch::audit::BatchAudit;
use crate::memory::upload::{self, MIN_UPLOAD, UploadPool};

/// Where a `Wait` collective's result goes.
#[derive(Debug)]
pub(crate) struct Target {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
    /// Bytes the binding covers, rounded up to a whole word (the slice's
    /// own padding).
    pub padded_len: u64,
    pub memory: MemoryId,
}

/// A unit of the applier's work.
#[derive(Debug)]
pub(crate) enum Job {
    /// Waits for a collective's outcome and applies it.
    Outcome {
        pending: PendingResult,
        gate: Arc<Gate>,
        mode: ComputeWait,
        /// `None` for calls with nothing to receive (`send`).
        target: Option<Target>,
        stream: StreamId,
    },
    /// A stream's batch that was held behind `after`: submitted once `after`
    /// succeeded, else dropped with its writes poisoned.
    Parked {
        after: Arc<Gate>,
        batch: wgpu::CommandBuffer,
        writes: Vec<MemoryId>,
        audit: BatchAudit,
        stream: StreamId,
        staged: Option<Staged>,
        /// What the stream's later work is held by: settled once the batch
        /// is submitted (or dropped: failed with `after`'s error), so that
        /// work can never reach the queue before it.
        submitted: Arc<Gate>,
    },
}

/// What the applier thread needs of the device.
#[derive(Debug)]
pub(crate) struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub poller: PollerHandle,
    pub late: Arc<LateFaults>,
    /// `max_compute_workgroups_per_dimension`, for held batches' audits.
    pub indirect_max: u32,
    /// How long an outcome may take (past the communicator's own timeout,
    /// which always completes a call first).
    pub outcome_wait: Duration,
    /// Mapped upload buffers, for large results.
    pub upload: UploadPool,
    /// Held to submit (see `DevicePoller::start`).
    pub poll_lock: PollLock,
}

/// The applier thread; dropping it lets the thread finish its queue and end.
#[derive(Debug)]
pub(crate) struct Applier {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Applier {
    pub fn start(cx: Context) -> Result<Self, ServerError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("wgpu-server-coll".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    run(&cx, job);
                }
            })
            .map_err(|e| ServerError::CollectiveState {
                reason: format!("could not start the collective applier thread: {e}"),
            })?;
        Ok(Applier {
            jobs: Some(tx),
            thread: Some(thread),
        })
    }

    pub fn push(&self, job: Job) -> Result<(), ServerError> {
        self.jobs
            .as_ref()
            .and_then(|jobs| jobs.send(job).ok())
            .ok_or_else(|| ServerError::CollectiveState {
                reason: "the collective applier thread has stopped".into(),
            })
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(cx: &Context, job: Job) {
    match job {
        Job::Outcome {
            pending,
            gate,
            mode,
            target,
            stream,
        } => {
            let outcome = pending
                .wait(cx.outcome_wait)
                .and_then(|o| match o.poisoned {
                    Some(e) => Err(e),
                    None => Ok(o.bytes),
                });
            let failed = |e: &ServerError| {
                if let Some(t) = &target {
                    cx.late.poison(stream, &[t.memory], e.clone());
                } else {
                    cx.late.poison(stream, &[], e.clone());
                }
            };
            let ran = gate.settle(|| match outcome {
                Err(e) => {
                    failed(&e);
                    GateState::Failed(e)
                }
                Ok(bytes) => match (&target, mode) {
                    (None, _) => GateState::Written,
                    (Some(_), ComputeWait::Overlap) => GateState::Ready(bytes),
                    (Some(t), ComputeWait::Wait) => match write(cx, t, &bytes) {
                        Ok(()) => GateState::Written,
                        Err(e) => {
                            failed(&e);
                            GateState::Failed(e)
                        }
                    },
                },
            });
            if !ran {
                // The stream gave up waiting; its later work was dropped.
                let e = ServerError::CollectiveState {
                    reason: "the stream stopped waiting for this collective's result".into(),
                };
                failed(&e);
            }
        }
        Job::Parked {
            after,
            batch,
            writes,
            audit,
            stream,
            staged,
            submitted: later,
        } => {
            // The gate was settled by an earlier job of this queue.
            let cause = match after.wait(Duration::ZERO) {
                Some(Ok(())) => None,
                Some(Err(e)) => Some(e),
                None => Some(ServerError::CollectiveState {
                    reason: "the stream stopped waiting for an earlier collective".into(),
                }),
            };
            let held = cause.clone();
            let submitted = match cause {
                Some(e) => Err(e),
                None => {
                    let _submitting = cx.poll_lock.lock();
                    scoped(&cx.device, || cx.queue.submit(Some(batch)))
                }
                .map_err(|e| ServerError::BatchRejected {
                    reason: e.to_string(),
                }),
            };
            match submitted {
                Ok(index) => {
                    audit.submitted(stream, cx.indirect_max, &cx.late);
                    if let Some(s) = staged {
                        s.map_and_provide(&cx.poller, index);
                    }
                }
                Err(e) => {
                    cx.late.poison(stream, &writes, e.clone());
                    if let Some(s) = staged {
                        s.fail(Arc::new(e));
                    }
                }
            }
            later.settle(|| match held {
                Some(e) => GateState::Failed(e),
                None => GateState::Written,
            });
        }
    }
}

/// Writes a result into `dst` (a whole number of words: the padding past an
/// odd length belongs to the slice). A large result goes through a mapped
/// upload buffer filled on several threads and a copy submitted at once
/// (`memory/upload.rs`); it runs before the stream's held batch, which is
/// submitted only after the gate settles.
fn write(cx: &Context, t: &Target, bytes: &[u8]) -> Result<(), ServerError> {
    if bytes.len() as u64 >= MIN_UPLOAD {
        let staging = cx.upload.take(&cx.device, bytes.len() as u64)?;
        upload::fill(&staging, bytes)?;
        let mut encoder = cx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("collective result"),
            });
        encoder.copy_buffer_to_buffer(&staging, 0, &t.buffer, t.offset, t.padded_len);
        let commands = encoder.finish();
        {
            let _submitting = cx.poll_lock.lock();
            scoped(&cx.device, || cx.queue.submit(Some(commands)))?;
        }
        cx.upload.recycle(staging);
        return Ok(());
    }
    scoped(&cx.device, || {
        if bytes.len() as u64 == t.padded_len {
            cx.queue.write_buffer(&t.buffer, t.offset, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(t.padded_len as usize, 0);
            cx.queue.write_buffer(&t.buffer, t.offset, &padded);
        }
    })
}
