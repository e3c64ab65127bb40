//! Device faults that arrive through callbacks: the device-lost callback and
//! the uncaptured-error handler.
//!
//! Both fire on whatever thread wgpu is on, so they only record. A lost
//! device is permanent: every later server call checks [`DeviceFaults::lost`]
//! first and answers `DeviceLost`. Uncaptured errors are reported once, by the
//! next `sync`, which drains first so every fault of the work it waited on has
//! had its chance to arrive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use compute_runtime::{ServerError, StreamId};

/// Faults recorded by the device's callbacks.
#[derive(Debug, Default)]
pub struct DeviceFaults {
    /// Fast path for the check every call makes.
    is_lost: AtomicBool,
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Vec<String>>,
    /// Faults a `sync` reported to its own stream, still owed to the others.
    owed: Mutex<Vec<(StreamId, ServerError)>>,
    /// Fast path for the check every call makes: whether `uncaptured` or
    /// `owed` may hold anything.
    any_fault: AtomicBool,
}

impl DeviceFaults {
    /// Installs the callbacks on `device` and returns the shared record.
    pub fn install(device: &wgpu::Device) -> Arc<Self> {
        let faults = Arc::new(Self::default());
        let f = Arc::clone(&faults);
        device.set_device_lost_callback(move |reason, message| {
            f.mark_lost(format!("{reason:?}: {message}"));
        });
        let f = Arc::clone(&faults);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            let mut errors = f.uncaptured.lock().unwrap_or_else(|e| e.into_inner());
            errors.push(error.to_string());
            f.any_fault.store(true, Ordering::Release);
        }));
        faults
    }

    /// `Err(DeviceLost)` once the device is gone.
    pub fn lost(&self) -> Result<(), ServerError> {
        if !self.is_lost.load(Ordering::Acquire) {
            return Ok(());
        }
        let lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        match &*lost {
            None => Ok(()),
            Some(reason) => Err(ServerError::DeviceLost {
                reason: reason.clone(),
            }),
        }
    }

    /// The error of a wait, or of a map of one of the server's own buffers,
    /// that failed: only a lost device makes those fail (its buffers are
    /// destroyed with it), and the failure may come before the lost
    /// callback has run, so it is `DeviceLost` either way: the recorded
    /// reason when there is one, else `what` and why it failed.
    pub fn lost_during(&self, what: &str, why: impl std::fmt::Display) -> ServerError {
        match self.lost() {
            Err(lost) => lost,
            Ok(()) => ServerError::DeviceLost {
                reason: format!("{what} failed: {why}"),
            },
        }
    }

    /// Marks the device lost (a poll that failed says so before the
    /// callback does).
    pub fn mark_lost(&self, reason: String) {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        lost.get_or_insert(reason);
        self.is_lost.store(true, Ordering::Release);
    }

    /// Uncaptured errors, taken by a `sync` of `stream` that reports them;
    /// the other streams are owed them ([`DeviceFaults::take_owed`]), so a
    /// fault no scope could attribute reaches every stream once.
    pub fn take_uncaptured_for(&self, stream: StreamId) -> Result<(), ServerError> {
        let result = self.take_uncaptured();
        if let Err(e) = &result {
            let mut owed = self.owed.lock().unwrap_or_else(|e| e.into_inner());
            owed.push((stream, e.clone()));
            self.any_fault.store(true, Ordering::Release);
        }
        result
    }

    /// Faults reported to one stream and owed to the others.
    pub fn take_owed(&self) -> Vec<(StreamId, ServerError)> {
        if !self.any_fault.load(Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.owed.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether an uncaptured error or an owed fault may be waiting: the
    /// lock-free check a call makes before looking.
    pub fn any(&self) -> bool {
        self.any_fault.load(Ordering::Acquire)
    }

    /// The uncaptured errors since the last call, if any, as one fault.
    pub fn take_uncaptured(&self) -> Result<(), ServerError> {
        if !self.any_fault.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut errors = self.uncaptured.lock().unwrap_or_else(|e| e.into_inner());
        if errors.is_empty() {
            return Ok(());
        }
        let message = errors.join("; ");
        errors.clear();
        Err(ServerError::DeviceFault { message })
    }
}

/// Runs `f` inside validation and out-of-memory error scopes, turning what
/// they catch into a [`ServerError`]. On native wgpu the scope's future is
/// ready when popped, so it is polled once, not run on an executor: this
/// runs inside futures too (a profile window's submits its parked batch),
/// and inside a caller's `block_on`, where a nested executor would panic.
pub fn scoped<R>(device: &wgpu::Device, f: impl FnOnce() -> R) -> Result<R, ServerError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let out = f();
    let validation = ready(validation.pop(), "popping an error scope")?;
    let oom = ready(oom.pop(), "popping an error scope")?;
    if let Some(e) = oom {
        return Err(ServerError::OutOfMemory {
            size: 0,
            reason: e.to_string(),
        });
    }
    if let Some(e) = validation {
        return Err(ServerError::Validation {
            message: e.to_string(),
        });
    }
    Ok(out)
}

/// The output of a wgpu future that native backends resolve at once
/// (error scopes, adapter and device requests), polled once rather than
/// run on an executor: a server call may run inside a caller's executor,
/// where a nested `block_on` panics. A backend that would resolve it later
/// is unsupported.
pub fn ready<F: std::future::Future>(f: F, what: &'static str) -> Result<F::Output, ServerError> {
    use futures::FutureExt;
    f.now_or_never().ok_or(ServerError::Unsupported {
        what,
        reason: "this wgpu backend resolves it later; the server needs it at once",
    })
}
