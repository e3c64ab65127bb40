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

use crate::device::stamps::{self, PAIR_BYTES, StampPair};

/// A stream's two stamps: one when its encoder is created, one before it
/// is finished.
pub(crate) type BatchStamps = StampPair;

/// The device-wide accumulator.
#[derive(Debug)]
pub(crate) struct BatchTiming {
    device: wgpu::Device,
    period_ns: f32,
    completed_ns: Arc<AtomicU64>,
}

impl BatchTiming {
    pub fn new(device: wgpu::Device, period_ns: f32) -> Self {
        Self {
            device,
            period_ns,
            completed_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Stamps for a new stream.
    pub fn stamps(&self) -> BatchStamps {
        StampPair::new(&self.device, "batch stamps")
    }

    /// Ends a batch's bracket in `encoder`; returns the buffer to map once
    /// it is submitted.
    pub fn end_batch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        stamps: &BatchStamps,
    ) -> wgpu::Buffer {
        encoder.write_timestamp(&stamps.query_set, 1);
        let readback = stamps::readback(&self.device, PAIR_BYTES, "batch stamps readback");
        stamps.copy_to(encoder, &readback, 0);
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
            if let Ok(view) = buffer.slice(..).get_mapped_range()
                && let Some(d) = stamps::duration(&view, period)
            {
                completed.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
            }
        });
    }

    /// The shared counter, for futures that read it after a wait.
    pub fn counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.completed_ns)
    }
}
