//! `ScheduledWgpuBackend`: what a stream's pending work is on wgpu.
//!
//! A stream's pending work is one command encoder, with at most one compute
//! pass open in it. Consecutive launches share the pass (and skip
//! `set_pipeline`/`set_bind_group` when they repeat), which is what lets the
//! launch path approach a hand-written loop; a copy ends the pass, and the
//! next launch opens a new one. Submitting ends the pass, finishes the
//! encoder and hands it to the queue.

use compute_runtime::StreamId;
use compute_stream::SchedulerStreamBackend;

/// One stream's pending work.
#[derive(Debug, Default)]
pub struct WgpuStream {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Identity of the pipeline set in the open pass.
    pub(crate) pass_pipeline: Option<u64>,
    /// Identity of the bind group set in the open pass.
    pub(crate) pass_bind_group: Option<u64>,
    /// The last submission of this stream.
    pub(crate) last_submission: Option<wgpu::SubmissionIndex>,
}

impl WgpuStream {
    fn encoder<'a>(
        encoder: &'a mut Option<wgpu::CommandEncoder>,
        device: &wgpu::Device,
    ) -> &'a mut wgpu::CommandEncoder {
        encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        })
    }

    /// The open compute pass, opening one if needed.
    pub(crate) fn pass(&mut self, device: &wgpu::Device) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            self.pass_pipeline = None;
            self.pass_bind_group = None;
        }
        let encoder = &mut self.encoder;
        self.pass.get_or_insert_with(|| {
            Self::encoder(encoder, device)
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
        Self::encoder(&mut self.encoder, device)
    }

    fn end_pass(&mut self) {
        self.pass = None;
        self.pass_pipeline = None;
        self.pass_bind_group = None;
    }
}

/// The wgpu side of the scheduler: the device's one queue.
#[derive(Debug)]
pub struct ScheduledWgpuBackend {
    pub(crate) queue: wgpu::Queue,
    /// The latest submission on any stream.
    pub(crate) last_submission: Option<wgpu::SubmissionIndex>,
    /// `queue.write_buffer` calls not yet followed by a submit: they only
    /// reach the GPU with the next submission.
    pub(crate) host_writes_pending: bool,
}

impl ScheduledWgpuBackend {
    /// The backend of `queue`.
    pub fn new(queue: wgpu::Queue) -> Self {
        Self {
            queue,
            last_submission: None,
            host_writes_pending: false,
        }
    }

    /// Submits an empty batch when host writes are pending, so a drain
    /// covers them; returns the submission to wait on.
    pub(crate) fn flush_host_writes(&mut self) -> Option<wgpu::SubmissionIndex> {
        if self.host_writes_pending {
            self.last_submission = Some(self.queue.submit(std::iter::empty()));
            self.host_writes_pending = false;
        }
        self.last_submission.clone()
    }
}

impl SchedulerStreamBackend for ScheduledWgpuBackend {
    type Stream = WgpuStream;

    fn create_stream(&mut self, _id: StreamId) -> WgpuStream {
        WgpuStream::default()
    }

    fn submit(&mut self, _id: StreamId, stream: &mut WgpuStream) {
        stream.end_pass();
        if let Some(encoder) = stream.encoder.take() {
            let index = self.queue.submit(Some(encoder.finish()));
            stream.last_submission = Some(index.clone());
            self.last_submission = Some(index);
            self.host_writes_pending = false;
        }
    }
}
