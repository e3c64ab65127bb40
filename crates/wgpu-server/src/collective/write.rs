//! Writing a `Wait` collective's result into `dst`, piece by piece as the
//! call's steps finish (one piece for a call of one step).
//!
//! Each piece is copied into a pooled mapped upload buffer
//! (`memory/upload.rs`, several threads for a large one), and a copy into
//! `dst` is submitted at once: the piece lands before anything submitted
//! later, so before the stream's held batch, which goes only after the
//! gate settles. No `queue.write_buffer`: its per-call staging allocation
//! took milliseconds on some H200 instances (the small-write arena's
//! reason, `docs/status.md`). At most [`IN_FLIGHT`] pieces' copies are in
//! flight; the next waits for the oldest (that poll also returns the
//! finished pieces' buffers to the pool), so a result of any size holds a
//! few pieces of upload memory.

use std::collections::VecDeque;

use compute_runtime::ServerError;

use crate::collective::applier::{Context, Target};
use crate::memory::upload;

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Pieces whose copies may be in flight at once.
pub(crate) const IN_FLIGHT: usize = 8;

/// One result's writes.
pub(crate) struct Writer<'a> {
    cx: &'a Context,
    target: &'a Target,
    in_flight: VecDeque<wgpu::SubmissionIndex>,
}

impl<'a> Writer<'a> {
    pub fn new(cx: &'a Context, target: &'a Target) -> Self {
        Writer {
            cx,
            target,
            in_flight: VecDeque::new(),
        }
    }

    /// Writes `bytes` at `offset` of `dst` (a whole number of words, or up
    /// to `dst`'s end, whose padding to the next word is the slice's own).
    pub fn piece(&mut self, offset: usize, bytes: &[u8]) -> Result<(), ServerError> {
        let t = self.target;
        let len = (bytes.len() as u64).next_multiple_of(ALIGN);
        let at = offset as u64;
        if !at.is_multiple_of(ALIGN) || at + len > t.padded_len {
            return Err(ServerError::SizeMismatch {
                expected: t.padded_len,
                actual: at + len,
            });
        }
        if len == 0 {
            return Ok(());
        }
        let device = self.cx.submitter.device();
        let staging = self.cx.upload.take(device, len)?;
        upload::fill(&staging, bytes)?;
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("collective result"),
        });
        encoder.copy_buffer_to_buffer(&staging, 0, &t.buffer, t.offset + at, len);
        let (index, _) = self.cx.submitter.commands(Some(encoder.finish()))?;
        // Mapped again once the copy ran, then back in the pool. Nobody is
        // asked to wait for it: a poller busy waiting for this copy would
        // hold the stream's next submit (its held batch) behind it; the
        // next poll of the device (the bound below, a `sync`) returns it.
        self.cx.upload.recycle(staging);
        self.in_flight.push_back(index);
        while self.in_flight.len() > IN_FLIGHT {
            let Some(oldest) = self.in_flight.pop_front() else {
                break;
            };
            let done = self.cx.poller.wait(Some(oldest));
            // The applier's own thread: no caller's executor to nest in.
            futures::executor::block_on(done).unwrap_or_else(|_| {
                Err(ServerError::DeviceLost {
                    reason: "the device's poller thread has stopped".into(),
                })
            })?;
        }
        Ok(())
    }
}
