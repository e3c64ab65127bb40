//! GPU time of submitted batches, for the log line `sync` writes.
//!
//! With device timing, `TIMESTAMP_QUERY_INSIDE_ENCODERS`, and the `sync` log
//! category on when the server is built (`COMPUTE_LOG=sync=basic`), every
//! batch is bracketed by two timestamps written into its own encoder: one
//! when the encoder is created, one just before it is finished. The pair is
//! resolved and copied into a small readback buffer in the same command
//! buffer; its map callback (run by the poller) adds the batch's GPU time to
//! a counter that `sync` takes and logs. Off, it costs nothing: no stream
//! gets stamps.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A stream's two-query set and its resolve buffer.
#[derive(Debug)]
pub(crate) struct BatchStamps {
    pub query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
}

/// The device-wide accumulator.
#[derive(Debug)]
pub(crate) struct BatchTiming {
    device: wgpu::Device,
    period_ns: f64,
    completed_ns: Arc<AtomicU64>,
}

impl BatchTiming {
    pub fn new(device: wgpu::Device, period_ns: f32) -> Self {
        Self {
            device,
            period_ns: f64::from(period_ns),
            completed_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Stamps for a new stream.
    pub fn stamps(&self) -> BatchStamps {
        BatchStamps {
            query_set: self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("batch stamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("batch stamps resolve"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
        }
    }

    /// Ends a batch's bracket in `encoder`; returns the buffer to map once
    /// it is submitted.
    pub fn end_batch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        stamps: &BatchStamps,
    ) -> wgpu::Buffer {
        encoder.write_timestamp(&stamps.query_set, 1);
        encoder.resolve_query_set(&stamps.query_set, 0..2, &stamps.resolve, 0);
        let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("batch stamps readback"),
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(&stamps.resolve, 0, &readback, 0, 16);
        readback
    }

    /// Maps a submitted batch's readback; its callback adds the batch's time.
    pub fn after_submit(&self, readback: wgpu::Buffer) {
        let completed = Arc::clone(&self.completed_ns);
        let period = self.period_ns;
        let buffer = readback.clone();
        readback.map_async(wgpu::MapMode::Read, .., move |r| {
            if r.is_err() {
                return;
            }
            if let Ok(view) = buffer.slice(..).get_mapped_range() {
                let stamp = |i: usize| {
                    view.get(i * 8..i * 8 + 8)
                        .and_then(|b| b.try_into().ok())
                        .map(u64::from_le_bytes)
                        .unwrap_or(0)
                };
                let ns = (stamp(1).saturating_sub(stamp(0)) as f64 * period) as u64;
                completed.fetch_add(ns, Ordering::Relaxed);
            }
        });
    }

    /// The shared counter, for futures that read it after a wait.
    pub fn counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.completed_ns)
    }
}
