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

use crate::timing::batch::{BatchStamps, BatchTiming};

/// One stream's pending work.
#[derive(Debug, Default)]
pub struct WgpuStream {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Identity of the pipeline set in the open pass.
    pass_pipeline: Option<u64>,
    /// Identity of the bind group set in the open pass.
    pass_bind_group: Option<u64>,
    /// The last submission of this stream.
    pub(crate) last_submission: Option<wgpu::SubmissionIndex>,
    /// Batch timestamps, when batch timing is on.
    stamps: Option<BatchStamps>,
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
    /// fresh pass whose timestamp writes (queries 0 and 1) bracket the
    /// launch; the caller ends it after its one dispatch.
    pub(crate) fn launch_pass(
        &mut self,
        device: &wgpu::Device,
        timed: Option<&wgpu::QuerySet>,
        pipeline: (&wgpu::ComputePipeline, u64),
        group: (&wgpu::BindGroup, u64),
    ) -> &mut wgpu::ComputePass<'static> {
        if let Some(query_set) = timed {
            self.end_pass();
            let encoder = Self::encoder(&mut self.encoder, &self.stamps, device);
            let pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("profiled launch"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
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

    pub(crate) fn end_pass(&mut self) {
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
    /// Batch timing for the `sync` log line, when on.
    pub(crate) timing: Option<BatchTiming>,
}

impl ScheduledWgpuBackend {
    /// The backend of `queue`.
    pub fn new(queue: wgpu::Queue) -> Self {
        Self {
            queue,
            last_submission: None,
            host_writes_pending: false,
            timing: None,
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
        WgpuStream {
            stamps: self.timing.as_ref().map(BatchTiming::stamps),
            ..WgpuStream::default()
        }
    }

    fn submit(&mut self, _id: StreamId, stream: &mut WgpuStream) {
        stream.end_pass();
        if let Some(mut encoder) = stream.encoder.take() {
            let readback = match (&self.timing, &stream.stamps) {
                (Some(t), Some(s)) => Some(t.end_batch(&mut encoder, s)),
                _ => None,
            };
            let index = self.queue.submit(Some(encoder.finish()));
            if let (Some(t), Some(r)) = (&self.timing, readback) {
                t.after_submit(r);
            }
            stream.last_submission = Some(index.clone());
            self.last_submission = Some(index);
            self.host_writes_pending = false;
        }
    }
}
