//! The steps of a large collective's input that are staged after the call:
//! a ring of staging buffers refilled as the host uses them.
//!
//! At the call, at most [`STAGING_WINDOW`] bytes ([`WINDOW_STEPS`] steps)
//! of a call are copied into staging buffers (`server/collective.rs`). The
//! later steps must still read `src` as of the call. A `Wait` call with a
//! `dst` holds its stream's later work until the result is in, and its held
//! batch reads `src` too, so any stream's write of `src` waits for the
//! result: its later steps are copied from `src` itself. Any other call
//! with more steps than the window (`Overlap`, `send`) first copies all of
//! `src` on the device into a scratch buffer of its own ([`ScratchPool`]),
//! on the stream, in order, and its later steps are copied from there.
//! Each step's buffer comes back here when the host has used its bytes
//! ([`Refill::back`]), and is refilled with the next step by the server's
//! stager thread ([`Stager`]), which submits the copy and has the poller
//! drive it. So a call of any size holds [`STAGING_WINDOW`] of host
//! staging (and, unless it holds its stream, a device copy of `src`).

//! **Buys:** no staging proportional to the call (a 1 GiB `all_reduce`
//! used to stage 1 GiB per rank, and allocated it each call: the
//! `h200-collective.txt` cliff past 64 MiB); the copies down overlap the
//! host's work on earlier steps. **Doesn't buy:** a call larger than the
//! window without the device memory for its scratch copy (that is
//! `OutOfMemory` at the call).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use compute_collective::{Feed, Plan};
use compute_runtime::{CollectiveFault, ServerError};

use crate::collective::stage::{Provide, Source, Staged, StepCopies};
use crate::device::faults::scoped;
use crate::device::poller::PollerHandle;
use crate::memory::readback::{Back, ReadbackPool};
use crate::stream::submit::Submitter;

/// Bytes of a call's steps staged at once, at most.
pub(crate) const STAGING_WINDOW: u64 = 64 << 20;

/// Steps staged at once, at most (each is a submission at the call).
pub(crate) const WINDOW_STEPS: usize = 16;

/// Steps staged at the call: as many as fit in [`STAGING_WINDOW`], at
/// most [`WINDOW_STEPS`], at least two (so one lands while the host works
/// on the other).
pub(crate) fn window_steps(plan: &Plan) -> usize {
    let step = (plan.input_len(0) as u64).max(1);
    ((STAGING_WINDOW / step) as usize)
        .clamp(2, WINDOW_STEPS)
        .min(plan.steps())
}

/// Device buffers a call's `src` is copied into when it has more steps than
/// the window; a few are kept for the next calls.
#[derive(Clone, Debug, Default)]
pub(crate) struct ScratchPool {
    free: Arc<Mutex<Vec<wgpu::Buffer>>>,
}

/// Scratch buffers kept idle at most.
const SCRATCH_KEPT: usize = 2;

impl ScratchPool {
    /// A buffer of at least `size` bytes.
    pub fn take(&self, device: &wgpu::Device, size: u64) -> Result<wgpu::Buffer, ServerError> {
        let class = ReadbackPool::class(size, device.limits().max_buffer_size);
        {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = free
                .iter()
                .position(|b| b.size() >= size && b.size() <= class)
            {
                return Ok(free.swap_remove(i));
            }
        }
        scoped(device, || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("collective scratch"),
                size: class,
                // Storage too: a device collective's shifting copy reads it.
                usage: wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        })
        .map_err(|e| ServerError::OutOfMemory {
            size: class,
            reason: format!("a collective's device copy of its input: {e}"),
        })
    }

    pub fn put(&self, buffer: wgpu::Buffer) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.push(buffer);
        if free.len() > SCRATCH_KEPT {
            free.remove(0);
        }
    }
}

/// What staging a step on its own needs of the device: made once per
/// call from the server's parts (`staging.rs`), cloned into its refill.
#[derive(Clone)]
pub(crate) struct StepDevice {
    pub device: wgpu::Device,
    pub submitter: Submitter,
    pub poller: PollerHandle,
    pub pool: ReadbackPool,
}

/// What refilling a call's staging ring needs.
pub(crate) struct Refill {
    source: Source,
    plan: Plan,
    feed: Feed,
    /// The next step to stage.
    next: Mutex<usize>,
    on: StepDevice,
    stager: Stager,
    /// Where `source` goes back once every step is staged: `None` when it
    /// is `src`'s own page.
    scratch: Option<ScratchPool>,
}

impl std::fmt::Debug for Refill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refill")
            .field("steps", &self.plan.steps())
            .finish_non_exhaustive()
    }
}

impl Refill {
    /// The refill of a call whose first `window` steps are staged at the
    /// call, the rest from `source` as the host frees their buffers.
    pub fn new(
        source: Source,
        plan: Plan,
        feed: Feed,
        window: usize,
        on: StepDevice,
        (stager, scratch): (Stager, Option<ScratchPool>),
    ) -> Arc<Self> {
        Arc::new(Refill {
            source,
            plan,
            feed,
            next: Mutex::new(window),
            on,
            stager,
            scratch,
        })
    }

    /// Where a step's buffer goes once its bytes are used: back here.
    pub fn back(self: &Arc<Self>) -> Back {
        let me = Arc::clone(self);
        Back::Hook(Box::new(move |buffer| me.again(buffer)))
    }

    /// `buffer` is free: stage the next step into it, or keep it.
    fn again(self: Arc<Self>, buffer: wgpu::Buffer) {
        let step = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let step = *next;
            *next += 1;
            step
        };
        if step >= self.plan.steps() {
            self.on.pool.put(buffer);
            return;
        }
        let stager = self.stager.clone();
        stager.push(Job {
            refill: self,
            buffer,
            step,
        });
    }

    /// On the stager thread: copies step `step` from the source into
    /// `buffer` (another if it is too small), submits, and maps.
    fn stage(self: Arc<Self>, buffer: wgpu::Buffer, step: usize) {
        let copies = StepCopies::plan(&self.source, &self.plan.input_pieces(step));
        let buffer = if buffer.size() >= copies.size() {
            buffer
        } else {
            self.on.pool.put(buffer);
            let max = self.on.device.limits().max_buffer_size;
            match self.on.pool.take_or_create(
                &self.on.device,
                copies.size(),
                max,
                "collective staging",
            ) {
                Ok(b) => b,
                Err(e) => return self.feed.provide(step, Err(Arc::new(e))),
            }
        };
        let mut encoder = self
            .on
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("collective step"),
            });
        copies.encode(&mut encoder, &self.source, &buffer);
        let staged = Staged {
            buffer,
            copies,
            to: Provide::Step(self.feed.clone(), step),
            back: self.back(),
            risk: None,
        };
        match self.on.submitter.commands(Some(encoder.finish())) {
            Ok((index, _)) => staged.map_and_provide(&self.on.poller, index),
            Err(e) => staged.fail(Arc::new(e)),
        }
    }
}

impl Drop for Refill {
    fn drop(&mut self) {
        if let Some(scratch) = &self.scratch {
            scratch.put(self.source.buffer.clone());
        }
    }
}

/// A refill for the stager thread.
struct Job {
    refill: Arc<Refill>,
    buffer: wgpu::Buffer,
    step: usize,
}

/// The server's stager thread: it stages the steps of large collectives
/// that come after the window, as their buffers come back. Its own thread
/// (not the applier's), so a call's input never waits for another call's
/// result to be written.
#[derive(Clone, Debug)]
pub(crate) struct Stager {
    jobs: mpsc::Sender<Job>,
}

impl Stager {
    pub fn start() -> Result<Self, ServerError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("wgpu-server-stager".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job.refill.stage(job.buffer, job.step);
                }
            })
            .map_err(|e| ServerError::CollectiveState {
                fault: CollectiveFault::ThreadStart {
                    thread: "collective stager",
                    error: e.to_string(),
                },
            })?;
        Ok(Stager { jobs })
    }

    fn push(&self, job: Job) {
        if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
            // The thread is gone (the server is going away): the step will
            // never be staged.
            job.refill.feed.provide(
                job.step,
                Err(Arc::new(ServerError::CollectiveState {
                    fault: CollectiveFault::Stopped {
                        thread: "collective stager",
                    },
                })),
            );
        }
    }
}
