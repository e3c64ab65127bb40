//! Profile windows: how time is measured and the values a window returns.

use std::fmt;
use std::time::Duration;

use crate::{DynFut, ServerError, StreamId};

/// Where durations come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimingMethod {
    /// GPU timestamp queries written by the device.
    #[default]
    Device,
    /// Host clocks around a drained queue.
    System,
}

/// An open profile window. Close it with `end_profile` or drop it with
/// `abandon_profile`; it is not `Clone`, so it closes once.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ProfilingToken {
    /// Server-unique id of the window.
    pub id: u64,
}

/// The measured length of a closed window, resolved when the GPU work has
/// run.
pub struct ProfileDuration {
    method: TimingMethod,
    future: DynFut<Result<Duration, ProfileError>>,
}

impl ProfileDuration {
    /// A duration that resolves through `future`.
    pub fn new(method: TimingMethod, future: DynFut<Result<Duration, ProfileError>>) -> Self {
        Self { method, future }
    }

    /// A duration already known.
    pub fn ready(method: TimingMethod, duration: Duration) -> Self {
        Self::new(method, Box::pin(async move { Ok(duration) }))
    }

    /// How it was measured.
    pub fn timing_method(&self) -> TimingMethod {
        self.method
    }

    /// Waits for the measurement.
    pub async fn resolve(self) -> Result<Duration, ProfileError> {
        self.future.await
    }
}

impl fmt::Debug for ProfileDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfileDuration")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// Why a profile window did not produce a duration.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileError {
    /// The token does not name an open window on this stream.
    #[error(
        "unknown profiling token {token} on {stream}: not opened on this stream of this \
         server, already closed, or closed as the oldest of too many open windows"
    )]
    UnknownToken {
        /// The token's id.
        token: u64,
        /// The stream asked.
        stream: StreamId,
    },
    /// Work inside the window failed; its time means nothing.
    #[error("profile window invalidated: {cause}")]
    Invalidated {
        /// The failure.
        cause: ServerError,
    },
    /// The server could not measure (device lost, unsupported method...).
    #[error(transparent)]
    Server(#[from] ServerError),
}
