//! One collective call on the server thread: resolve, post, stage the
//! input, order the output, hand the outcome to the applier; and
//! `sync_collective`.

use std::sync::Arc;

use compute_collective::{CollectiveCall, Contribution, PendingResult};
use compute_runtime::{
    BufferBinding, CollectiveFault, ComputeWait, CopyDescriptor, DeviceId, LogCategory, LogLevel,
    ServerError, StorageHandle, StreamId,
};
use compute_stream::Access;
use compute_wgsl::WgpuCompiler;

use crate::collective::Posted;
use crate::collective::applier::{Job, ResultAt, Target};
use crate::collective::device_call::{LateCall, On};
use crate::collective::layout::{Layout, Staged, eligible};
use crate::collective::staging::Staging;
use crate::server::WgpuServer;
use crate::stream::gate::Gate;
use crate::stream::gate::Held;
use compute_collective::DeviceData;

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Which communicator a call goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Peers<'a> {
    /// The one of exactly these ranks.
    Ranks(&'a [DeviceId]),
    /// The one a message with this peer goes through (point to point: the
    /// pair's own when joined, else the most recent with the peer).
    Peer(DeviceId),
}

/// A call whose data moves on the devices (`collective/device_call.rs`),
/// posted and not made yet.
pub(crate) struct OnDevice {
    pub late: Arc<LateCall>,
    pub layout: Layout,
    pub on: On,
    pub rank: usize,
    pub ranks: usize,
    /// This rank's exchange buffer was free when the call was posted: its
    /// first piece may be filled on the stream, at the call.
    pub free: bool,
}

/// What the stream's held batch uses until a `Wait` result is in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Uses {
    pub dst: StorageHandle,
    /// `src`, when steps are staged from it after the call.
    pub src: Option<StorageHandle>,
}

/// A call's buffers.
#[derive(Debug)]
pub(crate) struct Operands {
    pub src: Option<BufferBinding>,
    pub dst: Option<BufferBinding>,
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
        let (call, (contribution, pending), (src_range, dst_range), device) =
            self.post(call, peers, &operands, stream)?;
        if let Some(device) = device {
            let ends = (contribution, pending);
            let ranges = (src_range, dst_range);
            return self.collective_on_device(call, device, operands, ranges, ends, stream, mode);
        }
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

        // The stream's later work waits for the result: what `src` holds
        // until then is `src` as of the call, for steps staged later too.
        let holds = mode == ComputeWait::Wait && dst_range.is_some_and(|r| r.size > 0);

        // The input: staged on the stream, after everything before it.
        let staging = match (&operands.src, src_range) {
            (Some(src), Some(range)) => {
                self.stage_parts()
                    .stage(stream, src, range, contribution, holds)?
            }
            _ => {
                drop(contribution);
                Staging::default()
            }
        };
        let read_later = staging.read_later;
        // Everything issued before the call goes to the queue (or to the
        // applier, behind an earlier collective) before the result can
        // land, whether or not this rank staged anything.
        self.stage_parts().hand_off_before_result(stream, staging)?;

        // The output: ordered now, written by the applier.
        let gate = Arc::new(Gate::new());
        let target = match (&operands.dst, dst_range) {
            (Some(dst), Some(range)) if range.size > 0 => {
                let uses = Uses {
                    dst: range,
                    src: read_later,
                };
                Some(self.order_dst(stream, dst, uses, mode, call.name(), &gate)?)
            }
            (Some(_), Some(_)) if mode == ComputeWait::Wait => {
                // Nothing to write, but the outcome is still this stream's
                // to report: its later work, and so its `sync`, wait for it.
                self.hold_behind(stream, &gate);
                None
            }
            _ => None,
        };
        let writes_dst = target.is_some();
        self.collectives.jobs()?.push(Job::Outcome {
            pending,
            gate: Arc::clone(&gate),
            mode,
            target,
            stream,
            result: ResultAt::Outcome,
        })?;
        // A 0-byte `dst` has nothing for `sync_collective` to write or
        // poison (the applier reports its failure).
        let dst = operands.dst.filter(|_| writes_dst);
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
            Option<OnDevice>,
        ),
        ServerError,
    > {
        let device = match peers {
            Peers::Ranks(ids) => self.collectives.device_of(ids),
            Peers::Peer(_) => None,
        };
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
        let (rank, ranks) = (comm.rank(), comm.size());
        // The device path is a function of the call and the group alone:
        // every rank of the call takes the same one.
        let device =
            device.map(|(exchange, folds, path)| (exchange, folds, eligible(&call, ranks, path)));
        let staged = match (&device, peers) {
            (_, Peers::Peer(_)) => Some(Some(Staged::Message)),
            (None, Peers::Ranks(_)) => None,
            (Some((_, _, layout)), Peers::Ranks(_)) => Some(layout.as_ref().err().copied()),
        };
        log_path(&self.logger, &call, (rank, ranks), staged);
        let device = device.and_then(|(exchange, folds, layout)| {
            let layout = layout.ok()?;
            let on = On {
                exchange,
                folds,
                device: self.gpu.device().clone(),
                submitter: self.streams.backend().submitter().clone(),
                poller: self.gpu.poller().handle(),
            };
            // Counted for every call posted on the device, refused here or
            // not: its engine counts it as finished too.
            let free = on.exchange.post_call();
            Some(OnDevice {
                late: Arc::new(LateCall::new(Arc::clone(&on.exchange))),
                layout,
                on,
                rank,
                ranks,
                free,
            })
        });
        let posted = match &device {
            Some(d) => comm.post_on_device(call, Arc::clone(&d.late) as Arc<dyn DeviceData>),
            None => comm.post(call),
        };
        let local = self
            .enter()
            .and_then(|()| self.refuse_in_capture(stream, &call))
            .and_then(|()| self.check_operands(&call, ranks, operands));
        match (posted, local) {
            (Ok(ends), Ok(ranges)) => Ok((call, ends, ranges, device)),
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
    pub(crate) fn order_dst(
        &mut self,
        stream: StreamId,
        dst: &BufferBinding,
        uses: Uses,
        mode: ComputeWait,
        call: &'static str,
        gate: &Arc<Gate>,
    ) -> Result<Target, ServerError> {
        let memory = dst.memory_id();
        let range = uses.dst;
        let verdict = match mode {
            ComputeWait::Wait => {
                // `src` too when steps are staged from it after the call:
                // writes of it on any stream go after the result.
                match uses.src {
                    Some(src) => self
                        .streams
                        .prepare(stream, &[(src, Access::Read), (range, Access::Write)]),
                    None => self.streams.prepare(stream, &[(range, Access::Write)]),
                }
                let _ = self.scoped_overwrite(stream, std::slice::from_ref(dst), |_| Ok(()));
                let verdict = self.streams.trust().late().expect(&[memory]);
                // The held batch now has a pending use of `dst`.
                self.hold_behind(stream, gate);
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
    /// Holds `stream`'s batch, and its later work, behind `gate`: pending
    /// work of the stream, so its `sync` waits for the gate.
    fn hold_behind(&mut self, stream: StreamId, gate: &Arc<Gate>) {
        self.streams.encoder(stream).1.hold_behind(Arc::clone(gate));
        self.streams.task_done(stream);
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
                (Some(Ok(())), Some(Held::Device(buffer))) => self
                    .scoped_overwrite(stream, std::slice::from_ref(dst), |s| {
                        s.copy_result_in(stream, &buffer, dst)
                    })
                    .map(|_| ()),
                (Some(Ok(())), Some(Held::Bytes(bytes))) => {
                    let descriptor = CopyDescriptor::contiguous(dst.clone());
                    self.scoped_overwrite(stream, std::slice::from_ref(dst), |s| {
                        crate::transfer::write::write(
                            &mut s.transfers(),
                            &descriptor,
                            &bytes,
                            stream,
                        )
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

/// The collective log's line for a call: where its data moves. `staged`
/// is `None` where the ranks are not all in this process, else why the
/// call is host-staged (`None` inside: it is not).
fn log_path(
    logger: &compute_runtime::ServerLogger,
    call: &CollectiveCall,
    (rank, ranks): (usize, usize),
    staged: Option<Option<Staged>>,
) {
    logger.log(LogCategory::Collective, LogLevel::Basic, || {
        let place = match staged {
            None => "host staging (ranks in other processes)".to_string(),
            Some(None) => "on the devices".to_string(),
            Some(Some(why)) => format!("host staging ({why})"),
        };
        format!("{} at rank {rank} of {ranks}: {place}", call.name())
    });
}
