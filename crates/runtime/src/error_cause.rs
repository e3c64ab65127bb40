//! What a [`ServerError`] is about, beyond its message: the innermost
//! cause of a report that wraps another, and whether the device is gone.

use crate::ServerError;

impl ServerError {
    /// Shorthand for [`ServerError::Unsupported`].
    pub const fn unsupported(what: &'static str, reason: &'static str) -> Self {
        ServerError::Unsupported { what, reason }
    }

    /// Whether the device is gone (no later call can succeed). A
    /// [`CollectiveInput`](Self::CollectiveInput) is not: the device it names
    /// is another rank's.
    pub fn is_device_lost(&self) -> bool {
        match self {
            ServerError::DeviceLost { .. } => true,
            ServerError::Untrusted { cause, .. }
            | ServerError::Deferred { cause, .. }
            | ServerError::Launch { cause, .. } => cause.is_device_lost(),
            _ => false,
        }
    }

    /// The innermost error: the cause of an [`Untrusted`](Self::Untrusted),
    /// [`UntrustedInput`](Self::UntrustedInput), [`Deferred`](Self::Deferred),
    /// [`Launch`](Self::Launch) or [`CollectiveInput`](Self::CollectiveInput)
    /// report, else `self`. (For
    /// `CollectiveInput` the root cause happened on the rank it names, which
    /// may be another device.)
    ///
    /// ```
    /// use std::sync::Arc;
    /// use compute_runtime::{ServerError, StreamId};
    ///
    /// let compile = ServerError::Compilation { kernel: "k".into(), diagnostic: "bad".into() };
    /// let reported = ServerError::Deferred {
    ///     stream: StreamId(0),
    ///     cause: Arc::new(ServerError::Launch { kernel: "k".into(), cause: Arc::new(compile.clone()) }),
    ///     later: 0,
    /// };
    /// assert_eq!(reported.root_cause(), &compile);
    /// ```
    pub fn root_cause(&self) -> &ServerError {
        match self {
            ServerError::Untrusted { cause, .. }
            | ServerError::Deferred { cause, .. }
            | ServerError::UntrustedInput { cause, .. }
            | ServerError::Launch { cause, .. }
            | ServerError::CollectiveInput { cause, .. } => cause.root_cause(),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{MemoryId, ServerError, StreamId};

    #[test]
    fn root_cause_unwraps_reports() {
        let inner = ServerError::Compilation {
            kernel: "k".into(),
            diagnostic: "bad".into(),
        };
        let wrapped = ServerError::Deferred {
            stream: StreamId(1),
            cause: Arc::new(ServerError::Untrusted {
                memory: MemoryId(3),
                cause: Arc::new(inner.clone()),
            }),
            later: 2,
        };
        assert_eq!(wrapped.root_cause(), &inner);
        assert!(wrapped.to_string().ends_with("(and 2 later failures)"));
        assert!(!wrapped.is_device_lost());
    }

    #[test]
    fn collective_input_names_a_peer() {
        let lost = ServerError::DeviceLost {
            reason: "gone".into(),
        };
        let poisoned = ServerError::Untrusted {
            memory: MemoryId(7),
            cause: Arc::new(ServerError::CollectiveInput {
                rank: 2,
                cause: Arc::new(lost.clone()),
            }),
        };
        assert_eq!(poisoned.root_cause(), &lost);
        // The lost device is rank 2's, not this one.
        assert!(!poisoned.is_device_lost());
        let timeout = ServerError::CollectiveTimeout {
            rank: 0,
            call: "all_reduce #3".into(),
            waited_ms: 50,
            missing: vec![2],
        };
        assert_eq!(
            timeout.to_string(),
            "collective timeout: rank 0 waited 50 ms on all_reduce #3; still missing: ranks [2]"
        );
    }
}
