//! The two error vocabularies side by side: this server's
//! `compute_runtime::ServerError` in, cubecl's `ServerError` out.
//!
//! The mapping keeps what a cubecl caller branches on: a kernel the
//! compiler or the server refused before it ran reads as a refusal
//! (`is_refusal`), a buffer whose writer failed reads as `Unwritten` with
//! the failure that started it as its root, a lost device as a device
//! fault. Everything else is `Generic` with this server's own message,
//! which names the buffer (by its cubecl id, the bridge's label) and the
//! kernel.

use std::sync::Arc;

use cubecl_environment::backtrace::BackTrace;
use cubecl_runtime::compiler::CompilationError;
use cubecl_runtime::server::{IoError, LaunchError, ServerError};
use wgpu_server::runtime::ServerError as Inner;

/// A cubecl `Generic` error with `reason`.
pub fn generic(reason: impl Into<String>) -> ServerError {
    ServerError::Generic {
        reason: reason.into(),
        backtrace: BackTrace::capture(),
    }
}

/// A kernel refused before it ran, as cubecl names one.
pub fn refused(reason: impl Into<String>) -> ServerError {
    ServerError::Launch(LaunchError::CompilationError(CompilationError::Validation {
        reason: reason.into(),
        backtrace: BackTrace::capture(),
    }))
}

/// Whether a server error is a fault of the device itself (the only
/// failures cubecl's `sync` and `flush` report: every other failure lives
/// on the buffers the failed work left unwritten).
pub fn is_device_fault(error: &Inner) -> bool {
    match error {
        Inner::DeviceFault { .. } | Inner::DeviceLost { .. } => true,
        Inner::Deferred { cause, .. } => is_device_fault(cause),
        _ => false,
    }
}

/// This server's error in cubecl's words.
pub fn to_cubecl(error: &Inner) -> ServerError {
    match error {
        // The failure a deferred report carries is the one that counts.
        Inner::Deferred { cause, .. } => to_cubecl(cause),
        // A refused kernel: what a harness skips rather than reports.
        Inner::Compilation { .. }
        | Inner::LayoutMismatch { .. }
        | Inner::ForeignKernel { .. }
        | Inner::BindingTooSmall { .. } => refused(error.to_string()),
        Inner::Launch { cause, .. } if is_refusal_cause(cause) => refused(error.to_string()),
        Inner::OutOfMemory { size, .. } => ServerError::Io(IoError::OutOfMemory {
            size: *size,
            backtrace: BackTrace::capture(),
        }),
        // A buffer its writer left unwritten: cubecl's claim check.
        Inner::Untrusted { memory, cause } | Inner::UntrustedInput { input: memory, cause } => {
            unwritten(memory.to_string(), cause)
        }
        _ => generic(error.to_string()),
    }
}

fn is_refusal_cause(cause: &Inner) -> bool {
    matches!(
        cause,
        Inner::Compilation { .. }
            | Inner::LayoutMismatch { .. }
            | Inner::BindingTooSmall { .. }
            | Inner::LimitExceeded { .. }
    )
}

/// `memory` carries the failure `cause`: cubecl's `Unwritten`, rooted at
/// the failure itself so `is_refusal` and `is_device_poisoned` walk to it.
pub fn unwritten(memory: String, cause: &Arc<Inner>) -> ServerError {
    ServerError::Unwritten {
        failure: 0,
        claimed: 1,
        chain: vec![memory],
        root: Box::new(to_cubecl(cause)),
        backtrace: BackTrace::capture(),
    }
}
