//! One collective call whose data moves on the devices
//! (`collective/device_call.rs`), on the server thread: its input staged
//! as a word that says when it is ready, the call made, the stream's
//! earlier work sent on, `dst` ordered, the outcome handed to the applier
//! (which only judges it: the devices wrote `dst`).

use std::sync::Arc;

use compute_collective::{CollectiveCall, Contribution, PendingResult};
use compute_runtime::{CollectiveFault, ComputeWait, ServerError, StorageHandle, StreamId};
use compute_stream::Access;
use compute_wgsl::WgpuCompiler;

use crate::collective::Posted;
use crate::collective::applier::{Job, ResultAt};
use crate::collective::device_call::DeviceCall;
use crate::collective::stage::Source;
use crate::server::WgpuServer;
use crate::server::collective::{OnDevice, Operands, Uses};
use crate::stream::gate::Gate;

impl<C: WgpuCompiler> WgpuServer<C> {
    /// Runs `call` on the devices (see the module doc).
    #[allow(clippy::too_many_arguments)] // The call, its two ends and ranges, where it runs.
    pub(crate) fn collective_on_device(
        &mut self,
        call: CollectiveCall,
        device: OnDevice,
        operands: Operands,
        (src_range, dst_range): (Option<StorageHandle>, Option<StorageHandle>),
        (contribution, pending): (Contribution, PendingResult),
        stream: StreamId,
        mode: ComputeWait,
    ) -> Result<(), ServerError> {
        let (Some(dst), Some(dst_range)) = (&operands.dst, dst_range) else {
            let e = ServerError::CollectiveState {
                fault: CollectiveFault::Misuse("a device collective without a destination"),
            };
            contribution.provide(Err(Arc::new(e.clone())));
            return Err(e);
        };
        self.streams.backend_mut().flush_host_copies();
        // Other streams' work on `src` and `dst` goes first: the result may
        // land as soon as every rank's input is ready.
        match src_range {
            Some(src) => self
                .streams
                .prepare(stream, &[(src, Access::Read), (dst_range, Access::Write)]),
            None => self.streams.prepare(stream, &[(dst_range, Access::Write)]),
        }
        let holds = mode == ComputeWait::Wait;
        let dst_page = self.memory.page_buffer(dst_range.id)?;
        // Where this rank's exchange buffer was free at the call, its first
        // piece is filled on the stream (after the work before the call,
        // before the word that says the input is ready): one device round
        // trip fewer. Where that cannot be recorded, the engine fills it.
        let prefill = |encoder: &mut wgpu::CommandEncoder, source: &Source| {
            DeviceCall::encode_fill(&device.on, device.layout, source, encoder, 0).is_ok()
        };
        let prefill = device
            .free
            .then_some(&prefill as &dyn Fn(&mut wgpu::CommandEncoder, &Source) -> bool);
        let (staging, source, scratch, prefilled) = match (&operands.src, src_range) {
            (Some(src), Some(range)) => self.stage_parts().stage_for_device(
                stream,
                (src, range),
                contribution,
                holds,
                prefill,
            )?,
            _ => {
                // No input: ready once the stream's earlier work (which
                // may touch `dst`) has run.
                let at = Source {
                    buffer: dst_page.clone(),
                    base: dst_range.offset,
                };
                let staging = self
                    .stage_parts()
                    .probe(stream, &at, contribution, || None)?;
                (staging, None, None, false)
            }
        };
        let gate = Arc::new(Gate::new());
        // An `Overlap` result lands in `dst` at `sync_collective`, as a host
        // one does: until then the devices keep it in a buffer of its own.
        let held = match mode {
            ComputeWait::Wait => None,
            ComputeWait::Overlap => Some(self.result_buffer(dst.size)?),
        };
        let out = match &held {
            Some(buffer) => (buffer.clone(), 0),
            None => (dst_page, dst_range.offset),
        };
        let OnDevice {
            late,
            layout,
            on,
            rank,
            ranks,
            free: _,
        } = device;
        let mut made = DeviceCall::new(
            on,
            layout,
            (rank, ranks),
            source,
            Some(out),
            Arc::clone(&gate),
            scratch,
        );
        if prefilled {
            made.prefilled();
        }
        late.set(made);
        let read_later = staging.read_later;
        self.stage_parts().hand_off_before_result(stream, staging)?;
        let uses = Uses {
            dst: dst_range,
            src: read_later,
        };
        let target = self.order_dst(stream, dst, uses, mode, call.name(), &gate)?;
        self.collectives.jobs()?.push(Job::Outcome {
            pending,
            gate: Arc::clone(&gate),
            mode,
            target: Some(target),
            stream,
            result: match held {
                Some(buffer) => ResultAt::Buffer(buffer),
                None => ResultAt::Dst,
            },
        })?;
        let posted = Posted {
            gate,
            mode,
            dst: Some(dst.clone()),
            call: call.name(),
        };
        self.collectives.post(stream, posted);
        Ok(())
    }

    /// See `testing::collective_on_device`.
    #[cfg(feature = "testing")]
    pub(crate) fn collective_on_device_for(
        &self,
        device_ids: &[compute_runtime::DeviceId],
    ) -> Option<(bool, bool)> {
        self.collectives
            .settled_path(device_ids)
            .map(|path| path.map_or((false, false), |p| (p.on_device, p.exact_floats)))
    }

    /// See `testing::collective_device_calls`.
    #[cfg(feature = "testing")]
    pub(crate) fn collective_device_calls_for(
        &self,
        device_ids: &[compute_runtime::DeviceId],
    ) -> Option<u64> {
        self.collectives.device_calls(device_ids)
    }

    /// A device buffer for an `Overlap` result of `len` bytes.
    fn result_buffer(&self, len: u64) -> Result<wgpu::Buffer, ServerError> {
        let device = self.gpu.device();
        let size = len.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        crate::device::faults::scoped(device, || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("collective result"),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
        .map_err(|e| ServerError::OutOfMemory {
            size,
            reason: format!("a device collective's result: {e}"),
        })
    }

    /// Copies a device-held `Overlap` result into `dst`, on `stream`.
    pub(crate) fn copy_result_in(
        &mut self,
        stream: StreamId,
        from: &wgpu::Buffer,
        dst: &compute_runtime::BufferBinding,
    ) -> Result<(), ServerError> {
        let range = self.resolve(dst)?;
        let page = self.memory.page_buffer(range.id)?;
        let len = dst.size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        // After other streams' work on `dst` (a host write of it on another
        // stream lands before the result, as the host path's write does).
        self.streams.prepare(stream, &[(range, Access::Write)]);
        let device = self.gpu.device().clone();
        let (_, ws) = self.streams.encoder(stream);
        ws.batch().encoder_for_copy(&device).copy_buffer_to_buffer(
            from,
            0,
            &page,
            range.offset,
            len,
        );
        self.streams.task_done(stream);
        Ok(())
    }
}
