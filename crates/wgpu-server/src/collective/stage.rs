//! Staging a collective's input: the device half of the data path.
//!
//! A rank's `src` is copied, on its stream, into a pooled `MAP_READ` buffer
//! (the read path's); once the copy has run, the buffer's map callback hands
//! the mapped range itself to the communicator as the rank's input
//! (`Contribution::provide`), with no host copy. Nothing here waits: the
//! device's poller is asked to drive the submission, so the input arrives
//! even if no call on this server waits.

use std::sync::Arc;

use compute_collective::Contribution;
use compute_runtime::{Bytes, CollectiveFault, ServerError};
use compute_stream::{DependOutcome, LateFaults};

use crate::device::poller::PollerHandle;
use crate::memory::readback::{MappedRange, ReadbackPool};

/// A copy of `src` on its way to host memory, and where it goes then.
#[derive(Debug)]
pub(crate) struct Staged {
    pub buffer: wgpu::Buffer,
    /// Bytes mapped (the copy, rounded to whole words).
    pub mapped_len: u64,
    /// Where the input starts in the mapped range, and its length.
    pub start: usize,
    pub len: usize,
    pub contribution: Contribution,
    pub pool: ReadbackPool,
    /// `src` was at risk when it was staged (written by work whose verdict
    /// comes late, see [`LateFaults`]): the registration that says whether
    /// the staged bytes were bad, asked once they have landed.
    pub risk: Option<(u64, Arc<LateFaults>)>,
}

impl Staged {
    /// After the submission `index` that holds the copy: maps the staging
    /// buffer, provides the input from the map callback, and has the poller
    /// drive the submission.
    pub fn map_and_provide(self, poller: &PollerHandle, index: wgpu::SubmissionIndex) {
        let Staged {
            buffer,
            mapped_len,
            start,
            len,
            contribution,
            pool,
            risk,
        } = self;
        let mapped = buffer.clone();
        buffer.map_async(wgpu::MapMode::Read, 0..mapped_len, move |r| {
            // Every verdict on the bytes copied is in by the time the copy
            // has run (see `compute_stream::LateFaults`).
            let judged = match risk.as_ref().map(|(t, late)| late.outcome(*t)) {
                None | Some(DependOutcome::Clean) => Ok(()),
                // The input's own cause, as when the verdict was known at
                // the call (the copy read it: not a second step to name).
                Some(DependOutcome::Poisoned(cause)) => Err(match &*cause {
                    ServerError::UntrustedInput { cause, .. } => Arc::clone(cause),
                    _ => cause,
                }),
                Some(DependOutcome::Pending) => Err(Arc::new(ServerError::CollectiveState {
                    fault: CollectiveFault::VerdictMissing,
                })),
            };
            if let Err(cause) = judged {
                contribution.provide(Err(cause));
                return;
            }
            let input = r
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    mapped
                        .slice(0..mapped_len)
                        .get_mapped_range()
                        .map_err(|e| e.to_string())
                })
                .map(|view| {
                    Bytes::from_owner(MappedRange::new(view, mapped.clone(), pool, start, len))
                })
                .map_err(|why| {
                    Arc::new(ServerError::DeviceLost {
                        reason: format!("mapping a collective's staged input failed: {why}"),
                    })
                });
            contribution.provide(input);
        });
        poller.kick(index);
    }

    /// The input will never be staged: tells the peers why.
    pub fn fail(self, cause: Arc<ServerError>) {
        self.contribution.provide(Err(cause));
    }
}
