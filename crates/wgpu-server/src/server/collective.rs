//! One collective call on the server thread: resolve, post, stage the
//! input, order the output, hand the outcome to the applier; and
//! `sync_collective`.

use std::sync::Arc;

use compute_collective::{CollectiveCall, Contribution, PendingResult};
use compute_runtime::{
    BufferBinding, CollectiveFault, ComputeWait, CopyDescriptor, DeviceId, ServerError,
    StorageHandle, StreamId,
};
use compute_stream::Access;
use compute_wgsl::WgpuCompiler;

use crate::collective::Posted;
use crate::collective::applier::{Job, Target};
use crate::collective::pipeline::{Refill, window_steps};
use crate::collective::stage::{Provide, Source, Staged, StepCopies};
use crate::memory::readback::Back;
use crate::server::WgpuServer;
use crate::stream::gate::Gate;
use crate::stream::handoff::HandOff;

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Which communicator a call goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Peers<'a> {
    /// The one of exactly these ranks.
    Ranks(&'a [DeviceId]),
    /// The most recent one with this peer (point to point).
    Peer(DeviceId),
}

/// A call's input copies, staged and waiting for their submissions.
#[derive(Debug, Default)]
pub(crate) struct Staging {
    /// Recorded in the stream's batch: mapped after its submission.
    in_batch: Vec<Staged>,
    /// Steps with a submission of their own, right after the batch's.
    own: Vec<(wgpu::CommandBuffer, Staged)>,
}

/// A call's buffers.
#[derive(Debug)]
pub(crate) struct Operands {
    src: Option<BufferBinding>,
    dst: Option<BufferBinding>,
}

impl Operands {
    pub fn new(src: Option<BufferBinding>, dst: Option<BufferBinding>) -> Self {
        Operands { src, dst }
    }
}

impl<C: WgpuCompiler> WgpuServer<C> {
    /// Runs one collective call (see the module doc of `collective`).
    pub(crate) fn collective(
        &mut self,
        call: CollectiveCall,
        peers: Peers<'_>,
        operands: Operands,
        stream: StreamId,
        mode: ComputeWait,
    ) -> Result<(), ServerError> {
        let (call, (contribution, pending), (src_range, dst_range)) =
            self.post(call, peers, &operands, stream)?;
        // A `Wait` result is written piece by piece as it comes (a few
        // steps queued at most); an `Overlap` one is kept whole for
        // `sync_collective`.
        let pending = match mode {
            ComputeWait::Wait => pending.take_as_they_come(),
            ComputeWait::Overlap => pending,
        };
        // A large host write asked for before the call lands before its
        // result (which may be written with a submit of its own).
        self.streams.backend_mut().flush_host_copies();

        // The input: staged on the stream, after everything before it.
        let staging = match (&operands.src, src_range) {
            (Some(src), Some(range)) => self.stage(stream, src, range, contribution)?,
            _ => {
                drop(contribution);
                Staging::default()
            }
        };
        // Everything issued before the call goes to the queue (or to the
        // applier, behind an earlier collective) before the result can
        // land, whether or not this rank staged anything.
        self.hand_off_before_result(stream, staging)?;

        // The output: ordered now, written by the applier.
        let gate = Arc::new(Gate::new());
        let target = match (&operands.dst, dst_range) {
            (Some(dst), Some(range)) if range.size > 0 => {
                Some(self.order_dst(stream, dst, range, mode, call.name(), &gate)?)
            }
            _ => None,
        };
        self.collectives.jobs()?.push(Job::Outcome {
            pending,
            gate: Arc::clone(&gate),
            mode,
            target,
            stream,
        })?;
        let dst = operands.dst;
        let call = call.name();
        let posted = Posted {
            gate,
            mode,
            dst,
            call,
        };
        self.collectives.post(stream, posted);
        Ok(())
    }

    /// Posts `call` to its communicator, then checks it here: a call
    /// refused on this rank is still posted (its input is the refusal), so
    /// the peers learn of it as a failed call instead of pairing their call
    /// with this rank's next one (or waiting for it). Only a call with no
    /// communicator posts nothing: there is nobody to tell.
    #[allow(clippy::type_complexity)] // The call, its two ends, its two ranges.
    fn post(
        &mut self,
        mut call: CollectiveCall,
        peers: Peers<'_>,
        operands: &Operands,
        stream: StreamId,
    ) -> Result<
        (
            CollectiveCall,
            (Contribution, PendingResult),
            (Option<StorageHandle>, Option<StorageHandle>),
        ),
        ServerError,
    > {
        let comm = match peers {
            Peers::Ranks(ids) => self.collectives.by_ranks(ids)?,
            Peers::Peer(peer) => {
                let (comm, rank) = self.collectives.with_peer(peer)?;
                if let CollectiveCall::Send { peer, .. } | CollectiveCall::Recv { peer, .. } =
                    &mut call
                {
                    *peer = rank;
                }
                comm
            }
        };
        let ranks = comm.size();
        let posted = comm.post(call);
        let local = self
            .enter()
            .and_then(|()| self.refuse_in_capture(stream, &call))
            .and_then(|()| self.check_operands(&call, ranks, operands));
        match (posted, local) {
            (Ok(ends), Ok(ranges)) => Ok((call, ends, ranges)),
            (Ok((contribution, _)), Err(e)) => {
                contribution.provide(Err(Arc::new(e.clone())));
                Err(e)
            }
            (Err(e), _) => Err(e),
        }
    }

    fn refuse_in_capture(
        &self,
        stream: StreamId,
        call: &CollectiveCall,
    ) -> Result<(), ServerError> {
        if !self.is_capturing(stream) {
            return Ok(());
        }
        Err(ServerError::CaptureState {
            stream,
            reason: format!(
                "{} cannot be recorded into a graph: collectives are refused inside a capture \
                 window",
                call.name()
            ),
        })
    }

    /// Orders `dst` for the result. `Wait`: the stream's later work is held
    /// behind the result, `dst` is trusted again if the call covers it
    /// whole (like a host write) and is at risk until the verdict (a
    /// failure poisons it and whatever read it since). `Overlap`: `dst` is
    /// refused to everyone until `sync_collective` writes it.
    fn order_dst(
        &mut self,
        stream: StreamId,
        dst: &BufferBinding,
        range: StorageHandle,
        mode: ComputeWait,
        call: &'static str,
        gate: &Arc<Gate>,
    ) -> Result<Target, ServerError> {
        let memory = dst.memory_id();
        let verdict = match mode {
            ComputeWait::Wait => {
                self.streams.prepare(stream, &[(range, Access::Write)]);
                let _ = self.scoped_overwrite(stream, std::slice::from_ref(dst), |_| Ok(()));
                let verdict = self.streams.trust().late().expect(&[memory]);
                let (_, ws) = self.streams.encoder(stream);
                ws.hold_behind(Arc::clone(gate));
                // The held batch now has a pending use of `dst`.
                self.streams.task_done(stream);
                Some(verdict)
            }
            ComputeWait::Overlap => {
                let cause = Arc::new(ServerError::CollectivePending { call, stream });
                self.streams.begin_pending(memory, cause);
                None
            }
        };
        Ok(Target {
            buffer: self.memory.page_buffer(range.id)?,
            offset: range.offset,
            padded_len: range.size.next_multiple_of(ALIGN),
            verdict,
        })
    }
    /// `src`'s and `dst`'s page ranges, checked against the call.
    #[allow(clippy::type_complexity)] // Two optional ranges, named at the one call site.
    fn check_operands(
        &self,
        call: &CollectiveCall,
        ranks: usize,
        operands: &Operands,
    ) -> Result<(Option<StorageHandle>, Option<StorageHandle>), ServerError> {
        let src = match &operands.src {
            Some(b) => {
                let want = call.input_len(ranks).unwrap_or(0) as u64;
                if b.size != want {
                    return Err(ServerError::SizeMismatch {
                        expected: want,
                        actual: b.size,
                    });
                }
                Some(self.resolve(b)?)
            }
            None => None,
        };
        let dst = match &operands.dst {
            Some(b) => {
                let want = call.output_len(ranks) as u64;
                if b.size != want {
                    return Err(ServerError::SizeMismatch {
                        expected: want,
                        actual: b.size,
                    });
                }
                let range = self.resolve(b)?;
                let ends_slice = b.end() == self.memory.manager().size_of(b.memory_id());
                if range.offset % ALIGN != 0 || (b.size % ALIGN != 0 && !ends_slice) {
                    return Err(ServerError::InvalidArgument {
                        reason: format!(
                            "a collective's destination must start on a 4-byte boundary and end \
                             on one or at the end of its slice (offset {}, size {})",
                            b.offset, b.size
                        ),
                    });
                }
                Some(range)
            }
            None => None,
        };
        Ok((src, dst))
    }

    /// Copies `src` (at `range`) into mapped staging on `stream`: whole for
    /// a call of one step, else step by step (the first steps now, the
    /// rest from a device copy as the host uses the first, `pipeline.rs`);
    /// each map callback provides its bytes once the copy has run. An
    /// untrusted `src` is provided as its error at once (the peers still
    /// get this rank's part); an empty one as no bytes (it depends on no
    /// earlier work).
    fn stage(
        &mut self,
        stream: StreamId,
        src: &BufferBinding,
        range: StorageHandle,
        contribution: Contribution,
    ) -> Result<Staging, ServerError> {
        let len = src.size as usize;
        if len == 0 {
            contribution.provide(Ok(compute_runtime::Bytes::new()));
            return Ok(Staging::default());
        }
        self.streams.prepare(stream, &[(range, Access::Read)]);
        match self.streams.check(src.memory_id()) {
            Ok(()) => {}
            Err(ServerError::Untrusted { cause, .. }) => {
                contribution.provide(Err(cause));
                return Ok(Staging::default());
            }
            Err(other) => {
                contribution.provide(Err(Arc::new(other)));
                return Ok(Staging::default());
            }
        }
        let page = Source {
            buffer: self.memory.page_buffer(range.id)?,
            base: range.offset,
        };
        let plan = *contribution.plan();
        let late = Arc::clone(self.streams.trust().late());
        let risk = |s: &mut Self| {
            late.depend_token(stream, &[src.memory_id()])
                .map(|t| (t, Arc::clone(&late)))
                .filter(|_| s.streams.check(src.memory_id()).is_ok())
        };
        if plan.steps() == 1 {
            let copies = StepCopies::plan(&page, std::slice::from_ref(&(0..len)));
            let staging = self.staging_buffer(copies.size())?;
            let (_, ws) = self.streams.encoder(stream);
            copies.encode(
                ws.batch().encoder_for_copy(self.gpu.device()),
                &page,
                &staging,
            );
            self.streams.task_done(stream);
            let staged = Staged {
                buffer: staging,
                copies,
                to: Provide::Whole(contribution),
                back: Back::Pool(self.memory.readback().clone()),
                risk: risk(self),
            };
            return Ok(Staging {
                in_batch: vec![staged],
                own: Vec::new(),
            });
        }
        let risk = risk(self);
        self.stage_steps(stream, page, len as u64, plan, contribution.feed(), risk)
    }

    /// A staging buffer of at least `size` bytes from the read path's pool.
    fn staging_buffer(&self, size: u64) -> Result<wgpu::Buffer, ServerError> {
        let max = self.gpu.caps().limits.max_buffer_size;
        self.memory
            .readback()
            .take_or_create(self.gpu.device(), size, max, "collective staging")
    }

    /// [`stage`](Self::stage) for a call of several steps: the window's
    /// steps staged now (the first in the stream's batch, each other in a
    /// submission of its own right after it, or all in the batch when it is
    /// held behind an earlier collective), the rest refilled later from a
    /// device copy of `src` made in the batch.
    #[allow(clippy::too_many_arguments)] // `src`, its plan, its feed, its risk.
    fn stage_steps(
        &mut self,
        stream: StreamId,
        page: Source,
        len: u64,
        plan: compute_collective::Plan,
        feed: compute_collective::Feed,
        risk: Option<(u64, Arc<compute_stream::LateFaults>)>,
    ) -> Result<Staging, ServerError> {
        let device = self.gpu.device().clone();
        let window = window_steps(&plan);
        let (source, refill) = if window < plan.steps() {
            let (stager, scratch_pool) = self.collectives.refills()?;
            let from = page.base - page.base % ALIGN;
            let end = (page.base + len)
                .next_multiple_of(ALIGN)
                .min(page.buffer.size());
            let scratch = scratch_pool.take(&device, end - from)?;
            let (_, ws) = self.streams.encoder(stream);
            ws.batch().encoder_for_copy(&device).copy_buffer_to_buffer(
                &page.buffer,
                from,
                &scratch,
                0,
                end - from,
            );
            let source = Source {
                buffer: scratch,
                base: page.base - from,
            };
            let refill = Arc::new(Refill {
                source: source.clone(),
                plan,
                feed: feed.clone(),
                next: std::sync::Mutex::new(window),
                device: device.clone(),
                submitter: self.streams.backend().submitter().clone(),
                poller: self.gpu.poller().handle(),
                pool: self.memory.readback().clone(),
                stager,
                scratch: scratch_pool,
            });
            (source, Some(refill))
        } else {
            (page, None)
        };
        let held = {
            let (_, ws) = self.streams.encoder(stream);
            ws.hold().is_some_and(|g| !g.is_settled())
        };
        let mut staging = Staging::default();
        let mut risk = risk;
        for step in 0..window {
            let copies = StepCopies::plan(&source, &plan.input_pieces(step));
            let buffer = self.staging_buffer(copies.size())?;
            let back = match &refill {
                Some(r) => r.back(),
                None => Back::Pool(self.memory.readback().clone()),
            };
            let staged = Staged {
                buffer,
                copies,
                to: Provide::Step(feed.clone(), step),
                back,
                risk: risk.take(),
            };
            if step == 0 || held {
                let (_, ws) = self.streams.encoder(stream);
                let encoder = ws.batch().encoder_for_copy(&device);
                staged.copies.encode(encoder, &source, &staged.buffer);
                staging.in_batch.push(staged);
            } else {
                let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("collective step"),
                });
                staged.copies.encode(&mut encoder, &source, &staged.buffer);
                staging.own.push((encoder.finish(), staged));
            }
        }
        self.streams.task_done(stream);
        Ok(staging)
    }

    /// Sends the stream's pending work on before a collective's result can
    /// land: submitted now, or handed to the applier when it is held behind
    /// an earlier collective (never waiting for the other ranks); each
    /// staged copy is provided once it has run.
    fn hand_off_before_result(
        &mut self,
        stream: StreamId,
        staging: Staging,
    ) -> Result<(), ServerError> {
        let Staging { in_batch, own } = staging;
        let timing = self.streams.backend().submitter().timing_arc();
        let (_, ws) = self.streams.encoder(stream);
        if let Some(after) = ws.hold().filter(|g| !g.is_settled()).cloned() {
            let Some(batch) = ws.hand_off(timing.as_deref()) else {
                // Nothing encoded: nothing to send on, and no copy staged.
                return Ok(());
            };
            let submitted = Arc::new(Gate::new());
            ws.hold_behind(Arc::clone(&submitted));
            let poller = self.gpu.poller().handle();
            let then = (!in_batch.is_empty()).then(|| -> crate::stream::handoff::AfterSubmit {
                Box::new(move |submitted| {
                    for s in in_batch {
                        match &submitted {
                            Ok(index) => s.map_and_provide(&poller, index.clone()),
                            Err(e) => s.fail(Arc::clone(e)),
                        }
                    }
                })
            });
            let h = HandOff {
                after,
                batch,
                stream,
                submitted,
                then,
            };
            return self.collectives.jobs()?.push(Job::Parked(Box::new(h)));
        }
        self.streams.submit(stream);
        if in_batch.is_empty() {
            return Ok(());
        }
        let (_, ws) = self.streams.encoder(stream);
        let failed = ws.take_failed();
        let poller = self.gpu.poller().handle();
        let index = match (failed, self.streams.backend().last_submission().0) {
            (false, Some(index)) => index,
            _ => {
                let cause = Arc::new(ServerError::CollectiveState {
                    fault: CollectiveFault::StagingDidNotRun,
                });
                for s in in_batch {
                    s.fail(Arc::clone(&cause));
                }
                for (_, s) in own {
                    s.fail(Arc::clone(&cause));
                }
                return Ok(());
            }
        };
        for s in in_batch {
            s.map_and_provide(&poller, index.clone());
        }
        let submitter = self.streams.backend().submitter().clone();
        for (commands, s) in own {
            match submitter.commands(Some(commands)) {
                Ok((index, _)) => s.map_and_provide(&poller, index),
                Err(e) => s.fail(Arc::new(e)),
            }
        }
        Ok(())
    }

    /// `sync_collective`: waits for every collective posted on `stream`,
    /// writes the `Overlap` results (or poisons their `dst` with the
    /// failure), submits the stream, and reports its first failure not
    /// reported yet, like `flush` (each failure is reported once, by
    /// whichever of `flush`, `sync` and `sync_collective` comes first).
    pub(crate) fn sync_collectives(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let posted = self.collectives.take_posted(stream);
        let wait = self.streams.backend().collective_wait();
        for p in posted {
            let settled = p.gate.wait(wait);
            let (ComputeWait::Overlap, Some(dst)) = (p.mode, &p.dst) else {
                continue;
            };
            self.end_pending(dst.memory_id())?;
            let result = match (settled, p.gate.take_ready()) {
                (Some(Ok(())), Some(bytes)) => {
                    let descriptor = CopyDescriptor::contiguous(dst.clone());
                    self.scoped_overwrite(stream, std::slice::from_ref(dst), |s| {
                        crate::server::transfer::write(s, &descriptor, &bytes, stream)
                    })
                    .map(|_| ())
                }
                (Some(Ok(())), None) => Ok(()),
                (Some(Err(e)), _) => Err(e),
                (None, _) => Err(ServerError::CollectiveState {
                    fault: CollectiveFault::DidNotComplete {
                        call: p.call,
                        stream,
                        waited_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    },
                }),
            };
            if let Err(e) = result {
                // Poisons `dst` and defers the failure to the stream.
                let _ = self.scoped(stream, std::slice::from_ref(dst), |_| Err::<(), _>(e));
            }
        }
        // `Wait` results reach the GPU with the stream's next submission.
        self.streams.submit(stream);
        compute_stream::settle_batch_failures(self);
        self.streams.take_deferred(stream)
    }
}
