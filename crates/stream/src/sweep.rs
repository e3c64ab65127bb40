//! The life of a stream's state: created on first use, retired by sweeps
//! once idle, and the failures it has to report, which outlive it.

use std::sync::Arc;

use compute_runtime::{ServerError, StreamId};

use super::{SchedulerMultiStream, SchedulerStreamBackend, Urgency};

/// Streams kept before a new stream sweeps the map. A sweep submits the
/// pending work of streams not used since the previous sweep (a batch the
/// backend holds stays), then retires every stream with nothing pending,
/// keeping unreported failures aside for their stream's next report. The
/// next sweep comes when the map has doubled what survived (and holds at
/// least this many): a sweep costs O(1) per stream created, and a program
/// that opens a fresh stream per task keeps at most twice this many.
pub const MAX_IDLE_STREAMS: usize = 64;

/// The unreported failures of a retired stream: its first, and how many
/// came after it.
pub(super) type Unreported = (Arc<ServerError>, u32);

impl<B: SchedulerStreamBackend> SchedulerMultiStream<B> {
    /// Submits the work of streams idle since the last sweep and retires
    /// every stream with nothing pending (see [`MAX_IDLE_STREAMS`]). A
    /// retired stream comes back fresh when used again, with its unreported
    /// failures.
    pub(super) fn sweep(&mut self) {
        let since = self.sweeps;
        self.sweeps += 1;
        self.swept += self.streams.len() as u64;
        let idle: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, s)| s.tasks > 0 && s.seen < since)
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            self.submit_with(id, Urgency::WhenReady);
        }
        let unreported = &mut self.unreported;
        self.streams.retain(|id, s| {
            if s.tasks > 0 {
                return true;
            }
            if let Some(first) = s.deferred.take() {
                unreported.insert(*id, (first, s.later));
            }
            false
        });
        self.sweep_at = MAX_IDLE_STREAMS.max(2 * self.streams.len());
    }

    /// Records a failure on `stream` for its next `flush` or `sync`. The
    /// first unreported failure is kept as the cause; later ones are
    /// counted, so none goes unmentioned.
    pub fn defer_error(&mut self, stream: StreamId, error: &Arc<ServerError>) {
        self.ensure(stream);
        if let Some(s) = self.streams.get_mut(&stream) {
            match &s.deferred {
                None => s.deferred = Some(Arc::clone(error)),
                Some(_) => s.later = s.later.saturating_add(1),
            }
        }
    }

    /// Records `error` on every stream seen so far (a fault that cannot be
    /// attributed to one), retired streams with failures still to report
    /// included.
    pub fn defer_error_everywhere(&mut self, error: &Arc<ServerError>) {
        for id in self.stream_ids() {
            self.defer_error(id, error);
        }
        for (_, later) in self.unreported.values_mut() {
            *later = later.saturating_add(1);
        }
    }

    /// Takes the unreported failure of `stream`, as a
    /// [`ServerError::Deferred`].
    pub fn take_deferred(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let Some(state) = self.streams.get_mut(&stream) else {
            return match self.unreported.remove(&stream) {
                None => Ok(()),
                Some((cause, later)) => Err(ServerError::Deferred {
                    stream,
                    cause,
                    later,
                }),
            };
        };
        let later = std::mem::take(&mut state.later);
        match state.deferred.take() {
            None => Ok(()),
            Some(cause) => Err(ServerError::Deferred {
                stream,
                cause,
                later,
            }),
        }
    }
}
