//! A collective's input on the server thread, on [`StageParts`] (the parts
//! it borrows from the server): staged into mapped memory on its stream
//! (whole, or step by step, `stage.rs` and `pipeline.rs`), and the
//! stream's earlier work sent on before the result can land.

use std::sync::Arc;

use compute_collective::Contribution;
use compute_runtime::{BufferBinding, CollectiveFault, ServerError, StorageHandle, StreamId};
use compute_stream::Access;
use compute_stream::SchedulerMultiStream;

use crate::collective::Collectives;
use crate::collective::applier::Job;
use crate::collective::pipeline::{Refill, ScratchPool, StepDevice, window_steps};
use crate::collective::stage::{Provide, Source, Staged, StepCopies};
use crate::device::Gpu;
use crate::memory::Memory;
use crate::memory::readback::Back;
use crate::stream::ScheduledWgpuBackend;
use crate::stream::gate::Gate;
use crate::stream::handoff::HandOff;

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// The parts staging a collective's input borrows from the server: the
/// device, memory, the streams and the collectives (the applier's queue,
/// the stager).
pub(crate) struct StageParts<'a> {
    pub gpu: &'a Gpu,
    pub memory: &'a mut Memory,
    pub streams: &'a mut SchedulerMultiStream<ScheduledWgpuBackend>,
    pub collectives: &'a mut Collectives,
}

/// A call's input copies, staged and waiting for their submissions.
#[derive(Debug, Default)]
pub(crate) struct Staging {
    /// Recorded in the stream's batch: mapped after its submission.
    pub(crate) in_batch: Vec<Staged>,
    /// Steps with a submission of their own, right after the batch's.
    pub(crate) own: Vec<(wgpu::CommandBuffer, Staged)>,
    /// Steps are staged from `src` itself after the call: its range.
    pub(crate) read_later: Option<StorageHandle>,
}

impl StageParts<'_> {
    /// Copies `src` (at `range`) into mapped staging on `stream`: whole for
    /// a call of one step, else step by step (the first steps now, the
    /// rest from a device copy as the host uses the first, `pipeline.rs`);
    /// each map callback provides its bytes once the copy has run. An
    /// untrusted `src` is provided as its error at once (the peers still
    /// get this rank's part); an empty one as no bytes (it depends on no
    /// earlier work).
    pub(crate) fn stage(
        &mut self,
        stream: StreamId,
        src: &BufferBinding,
        range: StorageHandle,
        contribution: Contribution,
        holds: bool,
    ) -> Result<Staging, ServerError> {
        let len = src.size as usize;
        if len == 0 {
            contribution.provide(Ok(compute_runtime::Bytes::new()));
            return Ok(Staging::default());
        }
        if let Some(cause) = self.refused(stream, src, range) {
            contribution.provide(Err(cause));
            return Ok(Staging::default());
        }
        let page = Source {
            buffer: self.memory.page_buffer(range.id)?,
            base: range.offset,
        };
        let plan = *contribution.plan();
        let late = Arc::clone(self.streams.trust().late());
        // Asked once the copy is encoded: a verdict on `src` that comes
        // after the trust check above is judged in the map callback.
        let risk = || {
            late.depend_token(stream, &[src.memory_id()])
                .map(|t| (t, Arc::clone(&late)))
        };
        if plan.steps() == 1 {
            return self.stage_whole(stream, &page, 0..len, contribution, risk);
        }
        let risk = risk();
        let feed = contribution.feed();
        let mut staging = self.stage_steps(stream, page, len as u64, plan, feed, risk, holds)?;
        if holds && window_steps(&plan) < plan.steps() {
            staging.read_later = Some(range);
        }
        Ok(staging)
    }

    /// A device call's input (`device_call.rs`): where its fill reads
    /// `src` (its page when the stream `holds` its later work behind the
    /// result, else a device copy made now, on the stream, and handed back
    /// to `scratch` after the call), and a word of it staged on the stream
    /// so `contribution` says, once everything before the call has run,
    /// whether the input is ready and trusted (the peers read it only
    /// then). An untrusted `src` is provided as its error at once.
    /// `prefill`, when given, records more work on the stream right before
    /// that word (a call's first piece), and says whether it could.
    #[allow(clippy::type_complexity)] // The staging, where it reads, its copy, whether prefilled.
    pub(crate) fn stage_for_device(
        &mut self,
        stream: StreamId,
        (src, range): (&BufferBinding, StorageHandle),
        contribution: Contribution,
        holds: bool,
        prefill: Option<&dyn Fn(&mut wgpu::CommandEncoder, &Source) -> bool>,
    ) -> Result<(Staging, Option<Source>, Option<ScratchPool>, bool), ServerError> {
        if let Some(cause) = self.refused(stream, src, range) {
            contribution.provide(Err(cause));
            return Ok((Staging::default(), None, None, false));
        }
        let page = Source {
            buffer: self.memory.page_buffer(range.id)?,
            base: range.offset,
        };
        let device = self.gpu.device().clone();
        let (source, scratch) = if holds {
            (page, None)
        } else {
            let (_, pool) = self.collectives.refills()?;
            (
                self.copy_on_device(stream, &page, src.size, &pool)?,
                Some(pool),
            )
        };
        let late = Arc::clone(self.streams.trust().late());
        let risk = || {
            late.depend_token(stream, &[src.memory_id()])
                .map(|t| (t, Arc::clone(&late)))
        };
        let prefilled = prefill.is_some_and(|fill| {
            let (_, ws) = self.streams.encoder(stream);
            fill(ws.batch().encoder_for_copy(&device), &source)
        });
        let mut staging = self.probe(stream, &source, contribution, risk)?;
        staging.read_later = holds.then_some(range);
        Ok((staging, Some(source), scratch, prefilled))
    }

    /// A device copy of `len` bytes of `page` from its `base`, made on
    /// `stream` into a buffer of `pool` (from the word before to the word
    /// after): where a call reads `src` as of the call when later work may
    /// write it.
    fn copy_on_device(
        &mut self,
        stream: StreamId,
        page: &Source,
        len: u64,
        pool: &ScratchPool,
    ) -> Result<Source, ServerError> {
        let device = self.gpu.device().clone();
        let from = page.base - page.base % ALIGN;
        let end = (page.base + len)
            .next_multiple_of(ALIGN)
            .min(page.buffer.size());
        let copy = pool.take(&device, end - from)?;
        let (_, ws) = self.streams.encoder(stream);
        ws.batch().encoder_for_copy(&device).copy_buffer_to_buffer(
            &page.buffer,
            from,
            &copy,
            0,
            end - from,
        );
        Ok(Source {
            buffer: copy,
            base: page.base - from,
        })
    }

    /// Whether `src` (at `range`) is refused as an input: its cause, for
    /// the peers, when it is untrusted (after other streams' writes of it
    /// are ordered before this stream's read).
    fn refused(
        &mut self,
        stream: StreamId,
        src: &BufferBinding,
        range: StorageHandle,
    ) -> Option<Arc<ServerError>> {
        self.streams.prepare(stream, &[(range, Access::Read)]);
        match self.streams.check(src.memory_id()) {
            Ok(()) => None,
            Err(ServerError::Untrusted { cause, .. }) => Some(cause),
            Err(other) => Some(Arc::new(other)),
        }
    }

    /// A word of `source` staged on `stream` (`stage_whole`): what
    /// a device call's rank waits for before its peers read its input or
    /// it writes its output.
    pub(crate) fn probe(
        &mut self,
        stream: StreamId,
        source: &Source,
        contribution: Contribution,
        risk: impl FnOnce() -> Option<(u64, Arc<compute_stream::LateFaults>)>,
    ) -> Result<Staging, ServerError> {
        let word = (source.buffer.size() - source.base).min(ALIGN) as usize;
        self.stage_whole(stream, source, 0..word, contribution, risk)
    }

    /// Bytes `bytes` of `source` staged on `stream` in one copy: the whole
    /// input of a one-step call, or a word of a device call's input (or of
    /// its `dst`), which says once everything before it on the stream has
    /// run whether the input is ready. `contribution` is provided from the
    /// map callback, judged by `risk` (asked once the copy is encoded).
    fn stage_whole(
        &mut self,
        stream: StreamId,
        source: &Source,
        bytes: std::ops::Range<usize>,
        contribution: Contribution,
        risk: impl FnOnce() -> Option<(u64, Arc<compute_stream::LateFaults>)>,
    ) -> Result<Staging, ServerError> {
        let device = self.gpu.device().clone();
        let copies = StepCopies::plan(source, std::slice::from_ref(&bytes));
        let staging = self.staging_buffer(copies.size())?;
        let (_, ws) = self.streams.encoder(stream);
        copies.encode(ws.batch().encoder_for_copy(&device), source, &staging);
        self.streams.task_done(stream);
        let staged = Staged {
            buffer: staging,
            copies,
            to: Provide::Whole(contribution),
            back: Back::Pool(self.memory.readback().clone()),
            risk: risk(),
        };
        Ok(Staging {
            in_batch: vec![staged],
            ..Staging::default()
        })
    }

    /// What a step staged on its own needs of the device.
    fn step_device(&self) -> StepDevice {
        StepDevice {
            device: self.gpu.device().clone(),
            submitter: self.streams.backend().submitter().clone(),
            poller: self.gpu.poller().handle(),
            pool: self.memory.readback().clone(),
        }
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
    /// held behind an earlier collective), the rest refilled later: from
    /// `src` itself when the stream `holds` its later work behind the
    /// result (its held batch then reads `src` too, so no stream writes it
    /// before the result is in), else from a device copy of `src` made in
    /// the batch.
    #[allow(clippy::too_many_arguments)] // `src`, its plan, its feed, its risk.
    fn stage_steps(
        &mut self,
        stream: StreamId,
        page: Source,
        len: u64,
        plan: compute_collective::Plan,
        feed: compute_collective::Feed,
        risk: Option<(u64, Arc<compute_stream::LateFaults>)>,
        holds: bool,
    ) -> Result<Staging, ServerError> {
        let device = self.gpu.device().clone();
        let window = window_steps(&plan);
        let (source, refill) = if window < plan.steps() && holds {
            let (stager, _) = self.collectives.refills()?;
            let refill = Refill::new(
                page.clone(),
                plan,
                feed.clone(),
                window,
                self.step_device(),
                (stager, None),
            );
            (page, Some(refill))
        } else if window < plan.steps() {
            let (stager, scratch_pool) = self.collectives.refills()?;
            let source = self.copy_on_device(stream, &page, len, &scratch_pool)?;
            let refill = Refill::new(
                source.clone(),
                plan,
                feed.clone(),
                window,
                self.step_device(),
                (stager, Some(scratch_pool)),
            );
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
    pub(crate) fn hand_off_before_result(
        &mut self,
        stream: StreamId,
        staging: Staging,
    ) -> Result<(), ServerError> {
        let Staging { in_batch, own, .. } = staging;
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
}
