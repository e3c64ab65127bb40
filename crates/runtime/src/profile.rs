//! Profile windows: how time is measured and the values a window returns.

use std::fmt;
use std::time::Duration;

use crate::{DynFut, ProfileError};

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
