//! Profile windows: this server's durations as cubecl's ticks.

use std::time::Instant;

use cubecl_common::profile::{ProfileDuration, ProfileTicks, TimingMethod};
use cubecl_runtime::server::{ProfileError, ProfilingToken};
use wgpu_server::runtime::{self as inner_rt, Server as _, StreamId};

use crate::server::BridgeServer;

/// Closes the window `token` opened on `stream`. A window the server
/// could not measure (invalidated by a failure inside it) resolves to no
/// measurement, cubecl's way of saying so; a refused close is an error.
impl BridgeServer {
    pub(crate) fn end_window(
        &mut self,
        stream: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        let duration = self
            .inner
            .end_profile(stream, inner_rt::ProfilingToken { id: token.id })
            .map_err(|e| match e {
                // A token the server does not know (never opened, closed, or
                // abandoned): cubecl's "no profiling registered".
                inner_rt::ProfileError::UnknownToken { .. } => ProfileError::NotRegistered {
                    backtrace: cubecl_environment::backtrace::BackTrace::capture(),
                },
                e => ProfileError::Unknown {
                    reason: e.to_string(),
                    backtrace: cubecl_environment::backtrace::BackTrace::capture(),
                },
            })?;
        let method = match duration.timing_method() {
            inner_rt::TimingMethod::Device => TimingMethod::Device,
            inner_rt::TimingMethod::System => TimingMethod::System,
        };
        let future = Box::pin(async move {
            let measured = duration.resolve().await.ok()?;
            // cubecl wants two instants; the server measures a span.
            let start = Instant::now();
            Some(ProfileTicks::from_start_end(start, start + measured))
        });
        Ok(ProfileDuration::new(future, method))
    }
}
