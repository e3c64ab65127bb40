//! One collective call on the server thread: resolve, post, stage the
//! input, order the output, hand the outcome to the applier; and
//! `sync_collective`.

use std::sync::Arc;

use compute_collective::CollectiveCall;
use compute_runtime::{
    BufferBinding, ComputeWait, CopyDescriptor, DeviceId, ServerError, StorageHandle, StreamId,
};
use compute_stream::Access;
use compute_wgsl::WgpuCompiler;

use crate::WgpuServer;
use crate::collective::Posted;
use crate::collective::applier::{Job, Target};
use crate::collective::gate::Gate;
use crate::collective::stage::Staged;
use crate::memory::readback::ReadbackPool;

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Which communicator a call goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Peers<'a> {
    /// The one of exactly these ranks.
    Ranks(&'a [DeviceId]),
    /// The most recent one with this peer (point to point).
    Peer(DeviceId),
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
        mut call: CollectiveCall,
        peers: Peers<'_>,
        operands: Operands,
        stream: StreamId,
        mode: ComputeWait,
    ) -> Result<(), ServerError> {
        self.enter()?;
        if self.is_capturing(stream) {
            return Err(ServerError::CaptureState {
                stream,
                reason: format!(
                    "{} cannot be recorded into a graph: collectives are refused inside a \
                     capture window",
                    call.name()
                ),
            });
        }
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
        // Posted first, whatever is wrong locally, so the peers learn of a
        // failure here instead of waiting for this rank.
        let posted = comm.post(call);
        let local = self.check_operands(&call, ranks, &operands);
        let (contribution, pending) = match (posted, &local) {
            (Ok(p), Ok(_)) => p,
            (Ok((contribution, _)), Err(e)) => {
                contribution.provide(Err(Arc::new(e.clone())));
                return self.fail_dst(stream, operands.dst.as_ref(), e.clone());
            }
            (Err(e), _) => return self.fail_dst(stream, operands.dst.as_ref(), e),
        };
        let (src_range, dst_range) = local?;

        // The input: staged on the stream, after everything before it.
        if let (Some(src), Some(range)) = (&operands.src, src_range) {
            self.streams.prepare(stream, &[(range, Access::Read)]);
            match self.streams.check(src.memory_id()) {
                Err(ServerError::Untrusted { cause, .. }) => contribution.provide(Err(cause)),
                Err(other) => contribution.provide(Err(Arc::new(other))),
                Ok(()) => self.stage(stream, range, src.size as usize, contribution)?,
            }
        } else {
            drop(contribution);
        }

        // The output: ordered now, written by the applier.
        let gate = Arc::new(Gate::new());
        let target = match (&operands.dst, dst_range) {
            (Some(dst), Some(range)) => {
                if mode == ComputeWait::Wait {
                    self.streams.prepare(stream, &[(range, Access::Write)]);
                    // A result covering the whole slice makes it trusted, as
                    // a host write would; a failure poisons it again.
                    let _ = self.scoped_overwrite(stream, std::slice::from_ref(dst), |_| Ok(()));
                    let (_, ws) = self.streams.encoder(stream);
                    ws.held_by = Some(Arc::clone(&gate));
                    // The held batch now has a pending use of `dst`.
                    self.streams.task_done(stream);
                }
                Some(Target {
                    buffer: self.page_buffer(range.id)?,
                    offset: range.offset,
                    padded_len: range.size.next_multiple_of(ALIGN),
                    memory: dst.memory_id(),
                })
            }
            _ => None,
        };
        self.applier()?.push(Job::Outcome {
            pending,
            gate: Arc::clone(&gate),
            mode,
            target,
            stream,
        })?;
        let posted = self.collectives.posted.entry(stream).or_default();
        // `Wait` entries that already settled have nothing left for
        // `sync_collective` (their failures were reported to the stream).
        posted.retain(|p| p.mode == ComputeWait::Overlap || !p.gate.is_settled());
        posted.push(Posted {
            gate,
            mode,
            dst: operands.dst,
        });
        Ok(())
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
                let ends_slice = b.end() == self.memory.manager.size_of(b.memory_id());
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

    /// A call that failed here: its `dst` is poisoned, the error returned.
    fn fail_dst(
        &mut self,
        stream: StreamId,
        dst: Option<&BufferBinding>,
        error: ServerError,
    ) -> Result<(), ServerError> {
        let writes: Vec<BufferBinding> = dst.cloned().into_iter().collect();
        self.scoped(stream, &writes, |_| Err(error))
    }

    fn page_buffer(
        &mut self,
        page: compute_runtime::StorageId,
    ) -> Result<wgpu::Buffer, ServerError> {
        self.memory
            .manager
            .storage()
            .buffer(page)
            .cloned()
            .ok_or_else(|| ServerError::InvalidArgument {
                reason: format!("page {page} is gone"),
            })
    }

    fn applier(&self) -> Result<&crate::collective::applier::Applier, ServerError> {
        self.collectives
            .applier
            .as_ref()
            .ok_or_else(|| ServerError::CollectiveState {
                reason: "no communicator: call comm_init first".into(),
            })
    }

    /// Copies `len` bytes at `range` into mapped staging on `stream`; the
    /// map callback provides them. On a stream held behind an earlier
    /// collective, the batch so far is handed to the applier, which submits
    /// it once that collective's result is in.
    fn stage(
        &mut self,
        stream: StreamId,
        range: StorageHandle,
        len: usize,
        contribution: compute_collective::Contribution,
    ) -> Result<(), ServerError> {
        // An empty input has nothing to copy and depends on no earlier work:
        // it is provided now. (Submitting a stream held behind an earlier
        // collective to carry an empty batch would wait for that
        // collective, that is, for the other ranks.)
        if len == 0 {
            contribution.provide(Ok(compute_runtime::Bytes::new()));
            return Ok(());
        }
        // A batch held behind a collective that has settled goes first: if
        // that collective failed, the held work is dropped, and the copy
        // below must not go with it.
        let (_, ws) = self.streams.encoder(stream);
        if ws.held_by.as_ref().is_some_and(|g| g.is_settled()) {
            self.streams.submit(stream);
        }
        let start = range.offset - range.offset % ALIGN;
        let buffer = self.page_buffer(range.id)?;
        let end = (range.offset + range.size)
            .next_multiple_of(ALIGN)
            .min(buffer.size());
        let copy_len = (end - start).max(ALIGN);
        let class = ReadbackPool::class(copy_len, self.gpu.caps.limits.max_buffer_size);
        let device = self.gpu.device.clone();
        let staging = match self.memory.readback.take(class) {
            Some(b) => b,
            None => crate::device::faults::scoped(&device, || {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("collective staging"),
                    size: class,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?,
        };
        let (_, ws) = self.streams.encoder(stream);
        ws.encoder_for_copy(&device).copy_buffer_to_buffer(
            &buffer,
            start,
            &staging,
            0,
            end - start,
        );
        self.streams.task_done(stream);
        let staged = Staged {
            buffer: staging,
            mapped_len: copy_len,
            start: (range.offset - start) as usize,
            len,
            contribution,
            pool: self.memory.readback.clone(),
        };
        let (_, ws) = self.streams.encoder(stream);
        if ws.is_held() {
            let after = ws.held_by.clone();
            // Nothing encoded, or nothing holding it after all: submitted
            // below like any batch.
            if let (Some((batch, writes, audit)), Some(after)) = (ws.park(), after) {
                // The stream's later work goes after this batch, not only
                // after `after`: the applier settles `submitted` once it has
                // submitted the batch (or dropped it, with `after`'s error).
                let submitted = Arc::new(Gate::new());
                ws.held_by = Some(Arc::clone(&submitted));
                return self.applier()?.push(Job::Parked {
                    after,
                    batch,
                    writes,
                    audit,
                    stream,
                    staged: Some(staged),
                    submitted,
                });
            }
        }
        self.streams.submit(stream);
        let (_, ws) = self.streams.encoder(stream);
        let failed = std::mem::take(&mut ws.last_failed);
        match (failed, self.streams.backend().last_submission.clone()) {
            (false, Some(index)) => staged.map_and_provide(&self.gpu.poller.handle(), index),
            _ => staged.fail(Arc::new(ServerError::CollectiveState {
                reason: "the batch holding the staging copy did not run".into(),
            })),
        }
        Ok(())
    }

    /// `sync_collective`: waits for every collective posted on `stream`,
    /// writes the `Overlap` results, and reports the first failure (the
    /// others are deferred to the stream).
    pub(crate) fn sync_collectives(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let posted = self.collectives.posted.remove(&stream).unwrap_or_default();
        let wait = self.streams.backend().collective_wait;
        let mut first: Option<ServerError> = None;
        for p in posted {
            let result = match p.gate.wait(wait) {
                Some(Ok(())) => match (p.mode, p.gate.take_ready(), &p.dst) {
                    (ComputeWait::Overlap, Some(bytes), Some(dst)) => {
                        let descriptor = CopyDescriptor::contiguous(dst.clone());
                        self.scoped_overwrite(stream, std::slice::from_ref(dst), |s| {
                            crate::memory::transfer::write(s, &descriptor, &bytes, stream)
                        })
                    }
                    _ => Ok(()),
                },
                Some(Err(e)) => Err(e),
                None => {
                    let e = ServerError::CollectiveState {
                        reason: format!(
                            "a collective on {stream} did not complete within {wait:?}"
                        ),
                    };
                    let writes: Vec<BufferBinding> = p.dst.into_iter().collect();
                    let _ = self.scoped(stream, &writes, |_| Err::<(), _>(e.clone()));
                    Err(e)
                }
            };
            if let Err(e) = result {
                match &first {
                    None => first = Some(e),
                    Some(_) => self.streams.defer_error(stream, &Arc::new(e)),
                }
            }
        }
        // `Wait` results reach the GPU with the stream's next submission.
        self.streams.submit(stream);
        match first {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}
