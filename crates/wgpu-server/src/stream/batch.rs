//! [`Batch`]: one stream's pending work on wgpu, a value of its own.
//!
//! A batch is one command encoder with at most one compute pass open in
//! it. Consecutive launches share the pass (and skip `set_pipeline` /
//! `set_bind_group` when they repeat), which is what lets the launch path
//! approach a hand-written loop; a copy ends the pass, and the next launch
//! opens a new one. Beside the commands it keeps what they write (poisoned
//! if the queue refuses the batch), the audits of its indirect counts, and
//! its timestamps when batch timing is on. [`Batch::finish`] turns it into
//! a [`FinishedBatch`], which [`Submitter`](super::Submitter) submits.

use compute_runtime::MemoryId;
use compute_stream::LateFaults;

use crate::device::stamps::StampAt;
use crate::stream::audit::BatchAudit;
use crate::stream::timing::{BatchStamps, BatchTiming};

/// One stream's pending commands and what they write.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Identity of the pipeline set in the open pass.
    pass_pipeline: Option<u64>,
    /// Identity of the bind group set in the open pass.
    pass_bind_group: Option<u64>,
    /// Batch timestamps, when batch timing is on.
    stamps: Option<BatchStamps>,
    /// Every slice the batch's work writes.
    writes: Vec<MemoryId>,
    /// Copies of the batch's indirect counts, checked once it has run.
    audit: BatchAudit,
}

/// A batch's commands, finished, with what they write and their audits.
#[derive(Debug)]
pub(crate) struct FinishedBatch {
    pub commands: wgpu::CommandBuffer,
    pub writes: Vec<MemoryId>,
    pub audit: BatchAudit,
    /// The batch timing readback, mapped once submitted.
    pub timing: Option<wgpu::Buffer>,
}

impl Batch {
    /// An empty batch, stamped when `timing` is on.
    pub fn new(timing: Option<&BatchTiming>) -> Self {
        Batch {
            stamps: timing.map(BatchTiming::stamps),
            ..Batch::default()
        }
    }

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
    pub fn encoder_for_copy(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.end_pass();
        Self::encoder(&mut self.encoder, &self.stamps, device)
    }

    /// Writes timestamp `index` of `query_set` after everything encoded so
    /// far, with an empty pass of its own (needs only `TIMESTAMP_QUERY`).
    pub fn stamp(&mut self, device: &wgpu::Device, query_set: &wgpu::QuerySet, index: u32) {
        let _pass =
            self.encoder_for_copy(device)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
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
    /// fresh pass whose timestamp writes bracket the launch; the caller ends
    /// it after its one dispatch.
    pub fn launch_pass(
        &mut self,
        device: &wgpu::Device,
        timed: Option<&StampAt>,
        pipeline: (&wgpu::ComputePipeline, u64),
        group: (&wgpu::BindGroup, u64),
    ) -> &mut wgpu::ComputePass<'static> {
        if let Some(at) = timed {
            let pass = self
                .encoder_for_copy(device)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("profiled launch"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &at.query_set,
                        beginning_of_pass_write_index: Some(at.base),
                        end_of_pass_write_index: Some(at.base + 1),
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

    /// Encodes the audit copy of an indirect count (see `audit.rs`) for a
    /// launch writing `writes`.
    pub fn audit_indirect(
        &mut self,
        device: &wgpu::Device,
        src: &wgpu::Buffer,
        offset: u64,
        writes: &[MemoryId],
        late: &LateFaults,
    ) {
        self.end_pass();
        let encoder = Self::encoder(&mut self.encoder, &self.stamps, device);
        self.audit
            .record(device, encoder, src, offset, writes, late);
    }

    /// A bounds report slot for a launch of `kernel` writing `writes`: the
    /// bind group and dynamic offset of group 1 (see `reports.rs`).
    pub fn report_slot(
        &mut self,
        device: &wgpu::Device,
        kernel: &str,
        writes: &[MemoryId],
        late: &LateFaults,
    ) -> (wgpu::BindGroup, u32) {
        self.audit.bounds().slot(device, kernel, writes, late)
    }

    /// Records that the batch writes `memory`.
    pub fn wrote(&mut self, memory: &[MemoryId]) {
        self.writes.extend_from_slice(memory);
    }

    pub fn end_pass(&mut self) {
        self.pass = None;
        self.pass_pipeline = None;
        self.pass_bind_group = None;
    }

    /// The commands encoded so far, finished (the batch timestamps closed
    /// when `timing` is on), and what they write; `None` when nothing is
    /// encoded. The batch starts over empty.
    pub fn finish(&mut self, timing: Option<&BatchTiming>) -> Option<FinishedBatch> {
        self.end_pass();
        let mut encoder = self.encoder.take()?;
        self.audit.finish(&mut encoder);
        let timing = match (timing, &self.stamps) {
            (Some(t), Some(s)) => Some(t.end_batch(&mut encoder, s)),
            _ => None,
        };
        Some(FinishedBatch {
            commands: encoder.finish(),
            writes: std::mem::take(&mut self.writes),
            audit: std::mem::take(&mut self.audit),
            timing,
        })
    }
}
