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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

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
    ServerError::Launch(LaunchError::CompilationError(
        CompilationError::Validation {
            reason: reason.into(),
            backtrace: BackTrace::capture(),
        },
    ))
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
        // A failure the bridge raised in cubecl's words: those words back.
        Inner::Compilation {
            diagnostic: text, ..
        }
        | Inner::InvalidArgument { reason: text }
            if original(text).is_some() =>
        {
            original(text)
                .map(|(_, e)| e)
                .unwrap_or_else(|| generic(text.clone()))
        }
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
        Inner::Untrusted { memory, cause } => unwritten(memory.to_string(), cause),
        Inner::UntrustedInput { input, cause } => unwritten(input.to_string(), cause),
        _ => generic(error.to_string()),
    }
}

/// What a read answers for `error`: cubecl's reads report the failures
/// their buffers carry as a group (`Several`), even of one.
pub fn read_error(error: &Inner) -> ServerError {
    match to_cubecl(error) {
        e @ ServerError::Unwritten { .. } => ServerError::Several {
            errors: vec![e],
            backtrace: BackTrace::capture(),
        },
        e => e,
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

/// `memory` carries the failure `cause`: cubecl's `Unwritten`, with one
/// hop per launch skipped because its input carried the failure, rooted at
/// the failure that started it (so `is_refusal` and `is_device_poisoned`
/// walk to it).
pub fn unwritten(memory: String, cause: &Arc<Inner>) -> ServerError {
    let mut chain = vec![memory];
    let mut root = cause;
    loop {
        match &**root {
            Inner::Deferred { cause, .. } | Inner::Untrusted { cause, .. } => root = cause,
            Inner::Launch { kernel, cause } => match &**cause {
                Inner::UntrustedInput { input, cause } => {
                    chain.push(format!(
                        "skipped `{kernel}`: its input {input} carried the failure"
                    ));
                    root = cause;
                }
                _ => break,
            },
            Inner::UntrustedInput { input, cause } => {
                chain.push(format!(
                    "skipped `a launch`: its input {input} carried the failure"
                ));
                root = cause;
            }
            _ => break,
        }
    }
    let failure = match &**root {
        Inner::Compilation {
            diagnostic: text, ..
        }
        | Inner::InvalidArgument { reason: text } => original(text).map_or(0, |(n, _)| n),
        _ => 0,
    };
    ServerError::Unwritten {
        failure,
        claimed: 1,
        chain,
        root: Box::new(to_cubecl(root)),
        backtrace: BackTrace::capture(),
    }
}

/// cubecl's own errors for failures the bridge raises (a kernel that does
/// not compile, a cube too large): kept whole, so a read of the buffer the
/// failure left unwritten answers them as cubecl-wgpu would (a resource
/// limit as `TooManyResources`, not a string). The server carries a tag
/// naming the kept error; the most recent [`KEPT`] are kept.
struct Kept {
    next: u64,
    errors: VecDeque<(u64, ServerError)>,
}

const KEPT: usize = 4096;
const TAG: &str = " [cubecl failure #";

fn kept() -> &'static Mutex<Kept> {
    static KEPT_ERRORS: OnceLock<Mutex<Kept>> = OnceLock::new();
    KEPT_ERRORS.get_or_init(|| {
        Mutex::new(Kept {
            next: 1,
            errors: VecDeque::new(),
        })
    })
}

/// cubecl's `error` for the kernel `kernel`, as this server's error:
/// `Compilation` when cubecl calls it a refusal, else `InvalidArgument`.
pub fn keep(kernel: &str, error: ServerError) -> Inner {
    let refusal = error.is_refusal();
    let mut kept = kept().lock().unwrap_or_else(|e| e.into_inner());
    let n = kept.next;
    kept.next += 1;
    let text = format!("{error}{TAG}{n}]");
    kept.errors.push_back((n, error));
    if kept.errors.len() > KEPT {
        kept.errors.pop_front();
    }
    if refusal {
        Inner::Compilation {
            kernel: kernel.to_string(),
            diagnostic: text,
        }
    } else {
        Inner::InvalidArgument { reason: text }
    }
}

/// The kept error `text` names, with its number.
fn original(text: &str) -> Option<(u64, ServerError)> {
    let at = text.rfind(TAG)? + TAG.len();
    let n: u64 = text[at..].strip_suffix(']')?.parse().ok()?;
    let kept = kept().lock().unwrap_or_else(|e| e.into_inner());
    kept.errors
        .iter()
        .find(|(k, _)| *k == n)
        .map(|(k, e)| (*k, e.clone()))
}
