//! The capture state machine of one stream.
//!
//! ```text
//!   Idle --prepare--> Prepared --begin--> Capturing --end--> Idle
//!     \______________________begin_______/^
//! ```
//!
//! `begin` is allowed from `Idle` too (a capture without `graph_prepare` may
//! still allocate inside the window, which the server then reports);
//! everything else out of order is an error naming the state.

use compute_runtime::{ServerError, StreamId};

/// Where a stream is in the capture protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CaptureState {
    /// Not capturing.
    #[default]
    Idle,
    /// `graph_prepare` was called; the warm-up runs next.
    Prepared,
    /// Launches are being recorded.
    Capturing,
}

impl CaptureState {
    fn refuse(self, stream: StreamId, call: &str) -> ServerError {
        ServerError::CaptureState {
            stream,
            reason: format!("{call} is not allowed while {self:?}"),
        }
    }

    /// `graph_prepare`.
    pub fn prepare(self, stream: StreamId) -> Result<Self, ServerError> {
        match self {
            CaptureState::Idle | CaptureState::Prepared => Ok(CaptureState::Prepared),
            CaptureState::Capturing => Err(self.refuse(stream, "graph_prepare")),
        }
    }

    /// `begin_capture`.
    pub fn begin(self, stream: StreamId) -> Result<Self, ServerError> {
        match self {
            CaptureState::Idle | CaptureState::Prepared => Ok(CaptureState::Capturing),
            CaptureState::Capturing => Err(self.refuse(stream, "begin_capture")),
        }
    }

    /// `end_capture`.
    pub fn end(self, stream: StreamId) -> Result<Self, ServerError> {
        match self {
            CaptureState::Capturing => Ok(CaptureState::Idle),
            _ => Err(self.refuse(stream, "end_capture")),
        }
    }

    /// Reads, syncs and profiles, which are refused while capturing.
    pub fn allow_host_wait(self, stream: StreamId, call: &str) -> Result<(), ServerError> {
        match self {
            CaptureState::Capturing => Err(self.refuse(stream, call)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: StreamId = StreamId(0);

    #[test]
    fn legal_sequences() {
        let s = CaptureState::Idle.prepare(S).and_then(|s| s.begin(S));
        assert_eq!(s, Ok(CaptureState::Capturing));
        assert_eq!(CaptureState::Capturing.end(S), Ok(CaptureState::Idle));
        assert_eq!(CaptureState::Idle.begin(S), Ok(CaptureState::Capturing));
    }

    #[test]
    fn misuse_names_the_state() {
        let err = CaptureState::Idle.end(S).expect_err("end without begin");
        assert!(err.to_string().contains("Idle"));
        assert!(CaptureState::Capturing.begin(S).is_err());
        assert!(CaptureState::Capturing.prepare(S).is_err());
        assert!(CaptureState::Capturing.allow_host_wait(S, "read").is_err());
        assert!(CaptureState::Prepared.allow_host_wait(S, "read").is_ok());
    }
}
