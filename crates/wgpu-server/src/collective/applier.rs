//! The applier: one thread per server that turns collective outcomes into
//! device writes, in the order the calls were made.
//!
//! It owns the steps that must happen after another rank has done its part,
//! when no call on this server may be running: writing a `Wait`
//! collective's result into `dst`, piece by piece as the call's steps
//! finish (`write.rs`: each piece's copy submitted at once, under the
//! gate's lock, so the stream's held batch goes after every piece) and
//! giving the verdict on `dst` ([`LateFaults::verdict`]: a
//! failure poisons `dst` and whatever read it since); and submitting a batch
//! that was handed over because it is held behind an earlier collective (so
//! the next collective's input gets staged, and other streams' work that
//! follows it gets submitted, without anyone calling this server). Jobs run
//! first in, first out: a stream's outcomes and held batches are queued in
//! call order, and each rank's communicator completes its calls in that
//! order too, so every job finds the gates it comes after settled.
//!
//! What it does not do: decide anything about ordering or trust beyond
//! that; the server thread set both up when it queued the job. A held batch
//! is never dropped: a failed collective poisons data, not the unrelated
//! work queued after it.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use compute_collective::{Delivery, PendingResult};
use compute_runtime::{CollectiveFault, ComputeWait, ServerError, StreamId};
use compute_stream::{LateAudit, LateFaults};

use crate::collective::write::Writer;
use crate::device::poller::PollerHandle;
use crate::memory::upload::UploadPool;
use crate::stream::gate::{Gate, GateState, Held};
use crate::stream::handoff::{HandOff, HandOffs};
use crate::stream::submit::Submitter;

/// Where a `Wait` collective's result goes.
#[derive(Debug)]
pub(crate) struct Target {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
    /// Bytes the binding covers, rounded up to a whole word (the slice's
    /// own padding).
    pub padded_len: u64,
    /// The registration of `dst` with [`LateFaults::expect`] (`Wait` only).
    pub verdict: Option<LateAudit>,
}

/// A unit of the applier's work.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // One per collective call; never stored in bulk.
pub(crate) enum Job {
    /// Waits for a collective's outcome and applies it.
    Outcome {
        pending: PendingResult,
        gate: Arc<Gate>,
        mode: ComputeWait,
        /// `None` for calls with nothing to receive (`send`, 0 bytes).
        target: Option<Target>,
        stream: StreamId,
        /// Where the result is: the outcome's bytes, or where the devices
        /// put it (`device_call.rs`; the outcome then has only a verdict).
        result: ResultAt,
    },
    /// A stream's batch held behind an earlier job's gate.
    Parked(Box<HandOff>),
    /// Settles a gate once every job queued before it has run: what work
    /// held behind several things at once waits for.
    Mark(Arc<Gate>),
}

/// Where a collective's result is.
#[derive(Debug)]
pub(crate) enum ResultAt {
    /// In the outcome's bytes (host staging).
    Outcome,
    /// The devices wrote it into `dst` (`Wait`).
    Dst,
    /// The devices wrote it into this buffer, from offset 0, for
    /// `sync_collective` to copy into `dst` (`Overlap`).
    Buffer(wgpu::Buffer),
}

/// What the applier thread needs of the device.
#[derive(Debug)]
pub(crate) struct Context {
    /// Submits results and handed-off batches (and knows where late
    /// verdicts go).
    pub submitter: Submitter,
    /// How long an outcome may take (past the communicator's own timeout,
    /// which always completes a call first).
    pub outcome_wait: Duration,
    /// Mapped upload buffers, for results.
    pub upload: UploadPool,
    /// Drives the results' copies (their upload buffers come back when
    /// they ran).
    pub poller: PollerHandle,
}

impl Context {
    fn late(&self) -> &LateFaults {
        self.submitter.late()
    }
}

/// Where jobs go; shared by the server's collective part and its streams'
/// backend, and closed when the applier stops.
#[derive(Clone, Debug, Default)]
pub(crate) struct Jobs(Arc<Mutex<Option<mpsc::Sender<Job>>>>);

impl Jobs {
    pub fn push(&self, job: Job) -> Result<(), ServerError> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|jobs| jobs.send(job).ok())
            .ok_or(ServerError::CollectiveState {
                fault: CollectiveFault::Stopped {
                    thread: "collective applier",
                },
            })
    }

    /// Where the streams hand off held batches: this queue.
    pub fn handoffs(&self) -> Arc<dyn HandOffs> {
        Arc::new(self.clone())
    }

    /// Settles a new gate once every job queued so far has run.
    pub fn mark(&self) -> Result<Arc<Gate>, ServerError> {
        let gate = Arc::new(Gate::new());
        self.push(Job::Mark(Arc::clone(&gate)))?;
        Ok(gate)
    }

    fn close(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl HandOffs for Jobs {
    fn hand_off(&self, h: HandOff) -> Result<(), ServerError> {
        self.push(Job::Parked(Box::new(h)))
    }

    fn mark(&self) -> Result<Arc<Gate>, ServerError> {
        Jobs::mark(self)
    }
}

/// The applier thread; dropping it lets the thread finish its queue and end.
#[derive(Debug)]
pub(crate) struct Applier {
    jobs: Jobs,
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
                fault: CollectiveFault::ThreadStart {
                    thread: "collective applier",
                    error: e.to_string(),
                },
            })?;
        Ok(Applier {
            jobs: Jobs(Arc::new(Mutex::new(Some(tx)))),
            thread: Some(thread),
        })
    }

    /// Where to push jobs.
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.jobs.close();
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
            result,
        } => outcome(cx, pending, &gate, (mode, result), target, stream),
        Job::Parked(h) => submit_parked(cx, *h),
        Job::Mark(gate) => {
            gate.settle(|| GateState::Written);
        }
    }
}

/// Applies one collective's outcome: the result into `dst` (`Wait`) or
/// kept for `sync_collective` (`Overlap`), the verdict on `dst`, the gate.
fn outcome(
    cx: &Context,
    pending: PendingResult,
    gate: &Gate,
    (mode, result): (ComputeWait, ResultAt),
    target: Option<Target>,
    stream: StreamId,
) {
    let mut target = target;
    // The ticket for the verdict on `dst`, given once.
    let verdict = std::cell::Cell::new(target.as_mut().and_then(|t| t.verdict.take()));
    // An `Overlap` result (or failure) is `sync_collective`'s to apply and
    // report.
    let overlap = mode == ComputeWait::Overlap && target.is_some();
    let judge = |result: Result<(), ServerError>| match verdict.take() {
        _ if overlap => {}
        Some(audit) => cx.late().verdict(audit, stream, result),
        // Nothing of this rank's memory depends on it (a `send`, 0 bytes):
        // a failure is only reported.
        None => {
            if let Err(e) = result {
                cx.late().poison(stream, &[], e);
            }
        }
    };
    let settled = match (&target, mode) {
        (Some(t), ComputeWait::Wait) => {
            let written = write_pieces(cx, pending, gate, t);
            gate.settle(|| match written {
                Ok(()) => {
                    judge(Ok(()));
                    GateState::Written
                }
                Err(e) => {
                    judge(Err(e.clone()));
                    GateState::Failed(e)
                }
            })
        }
        _ => {
            let outcome = pending
                .wait(cx.outcome_wait)
                .and_then(|o| match o.poisoned {
                    Some(e) => Err(e),
                    None => Ok(o.bytes),
                });
            gate.settle(|| match outcome {
                Err(e) => {
                    judge(Err(e.clone()));
                    GateState::Failed(e)
                }
                Ok(_) if target.is_none() => GateState::Written,
                Ok(bytes) => match result {
                    ResultAt::Outcome => GateState::Ready(Held::Bytes(bytes)),
                    ResultAt::Dst => GateState::Written,
                    ResultAt::Buffer(buffer) => GateState::Ready(Held::Device(buffer)),
                },
            })
        }
    };
    if !settled {
        // The stream gave up waiting and went on: the result was not
        // written, so `dst` keeps bytes that are not the result.
        judge(Err(ServerError::CollectiveState {
            fault: CollectiveFault::StoppedWaiting,
        }));
    }
}

/// Writes a `Wait` result's pieces into `dst` as they come; the call's
/// outcome once every piece is in (a poisoned outcome as its error).
fn write_pieces(
    cx: &Context,
    mut pending: PendingResult,
    gate: &Gate,
    target: &Target,
) -> Result<(), ServerError> {
    let mut writer = Writer::new(cx, target);
    let mut failed = None;
    loop {
        match pending.next(cx.outcome_wait) {
            Delivery::Piece { offset, bytes } => {
                if failed.is_some() {
                    continue;
                }
                match gate.if_pending(|| writer.piece(offset, &bytes)) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => failed = Some(e),
                    // Abandoned: nothing more may land in `dst`.
                    None => {
                        failed = Some(ServerError::CollectiveState {
                            fault: CollectiveFault::StoppedWaiting,
                        })
                    }
                }
            }
            Delivery::Done(result) => {
                let outcome = result?;
                if let Some(e) = failed {
                    return Err(e);
                }
                return match outcome.poisoned {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
            }
        }
    }
}

/// Submits a batch that was handed off behind `after` (settled by an
/// earlier job), tells whoever waits for its submission, and settles what
/// the stream's later work waits for.
fn submit_parked(cx: &Context, h: HandOff) {
    let _ = h.after.wait(Duration::ZERO);
    let submitted = cx
        .submitter
        .submit(h.stream, h.batch)
        .map(|(index, _)| index)
        .map_err(|(e, writes)| {
            cx.late().poison(h.stream, &writes, e.clone());
            Arc::new(e)
        });
    if let Some(then) = h.then {
        then(submitted);
    }
    h.submitted.settle(|| GateState::Written);
}
