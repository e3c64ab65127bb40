//! Auditing indirect counts: the one launch failure only the GPU can see.
//!
//! wgpu validates an indirect dispatch's count on the device and skips a
//! dispatch whose count is over `max_compute_workgroups_per_dimension`,
//! without an error. The server cannot read the count at enqueue time (the
//! GPU may write it), so it copies the 12 bytes next to the dispatch into a
//! small `MAP_READ` buffer of the batch; once the batch has run, the map
//! callback reads every count back and records a late verdict
//! ([`compute_stream::LateFaults`]) poisoning the writes of each launch that
//! was skipped. A read of those writes waits for the batch, so it sees the
//! verdict.
//!
//! What it costs: one 12-byte copy per indirect launch (which also ends the
//! open compute pass) and one mapped buffer per batch that has any; nothing
//! for batches without indirect launches.

use std::sync::Arc;

use compute_runtime::{MemoryId, ServerError, StreamId};
use compute_stream::{LateAudit, LateFaults};

use crate::stream::reports::BoundsReports;

/// Bytes of an indirect dispatch's count (three `u32`s).
pub(crate) const INDIRECT_BYTES: u64 = 12;

/// Bytes one audited count takes in the audit buffer.
const SLOT: u64 = 16;
/// Counts one audit buffer holds.
const SLOTS: usize = 256;

/// One audit buffer and, per slot, the launch's registration with
/// [`LateFaults::expect`] (which keeps what it writes).
#[derive(Debug)]
struct AuditBuffer {
    buffer: wgpu::Buffer,
    audits: Vec<LateAudit>,
}

/// The audits of one pending batch: its indirect counts and its bounds
/// reports (`reports.rs`).
#[derive(Debug, Default)]
pub(crate) struct BatchAudit {
    buffers: Vec<AuditBuffer>,
    bounds: BoundsReports,
}

impl BatchAudit {
    /// Encodes the copy of the count at `src[offset..offset + 12]` for a
    /// launch writing `writes`, registered with `late`.
    pub fn record(
        &mut self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        offset: u64,
        writes: &[MemoryId],
        late: &LateFaults,
    ) {
        if self.buffers.last().is_none_or(|b| b.audits.len() >= SLOTS) {
            self.buffers.push(AuditBuffer {
                buffer: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("indirect count audit"),
                    size: SLOT * SLOTS as u64,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }),
                audits: Vec::new(),
            });
        }
        if let Some(audit) = self.buffers.last_mut() {
            let at = SLOT * audit.audits.len() as u64;
            encoder.copy_buffer_to_buffer(src, offset, &audit.buffer, at, INDIRECT_BYTES);
            audit.audits.push(late.expect(writes));
        }
    }

    /// The batch's bounds report slots (see `reports.rs`).
    pub fn bounds(&mut self) -> &mut BoundsReports {
        &mut self.bounds
    }

    /// Encodes what must follow the batch's commands: the copies of its
    /// bounds reports.
    pub fn finish(&self, encoder: &mut wgpu::CommandEncoder) {
        self.bounds.finish(encoder);
    }

    /// The batch will not run (the queue refused it with `error`): the
    /// verdict on each launch is that failure.
    pub fn abandon(self, stream: StreamId, late: &LateFaults, error: &ServerError) {
        self.bounds.abandon(stream, late, error);
        for audit in self.buffers {
            for id in audit.audits {
                late.verdict(id, stream, Err(error.clone()));
            }
        }
    }

    /// After the batch is submitted: maps every audit buffer; the callback
    /// gives the verdict on each launch, a failure for those whose count was
    /// over `max`.
    pub fn submitted(self, stream: StreamId, max: u32, late: &Arc<LateFaults>) {
        self.bounds.submitted(stream, late);
        for audit in self.buffers {
            let late = Arc::clone(late);
            let buffer = audit.buffer.clone();
            audit.buffer.map_async(wgpu::MapMode::Read, .., move |r| {
                // A failed map means the device is gone (every later call
                // says so): no verdict but that.
                let view = r
                    .ok()
                    .and_then(|()| buffer.slice(..).get_mapped_range().ok());
                for (i, id) in audit.audits.into_iter().enumerate() {
                    let over = view.as_ref().and_then(|v| over_limit(v, i, max));
                    let outcome = match over {
                        None => Ok(()),
                        Some(over) => Err(ServerError::LimitExceeded {
                            limit: "max_compute_workgroups_per_dimension (indirect count; \
                                    the dispatch was skipped)",
                            requested: u64::from(over),
                            max: u64::from(max),
                        }),
                    };
                    late.verdict(id, stream, outcome);
                }
            });
        }
    }
}

/// The first dimension of slot `i`'s count over `max`, if any.
fn over_limit(view: &[u8], i: usize, max: u32) -> Option<u32> {
    let at = i * SLOT as usize;
    (0..3)
        .filter_map(|d| {
            let b: [u8; 4] = view.get(at + 4 * d..at + 4 * d + 4)?.try_into().ok()?;
            Some(u32::from_le_bytes(b))
        })
        .find(|d| *d > max)
}
