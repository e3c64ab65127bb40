//! `Gate`: where one collective's outcome meets the stream that waits for
//! it.
//!
//! A collective's result is known on the communicator's threads, long after
//! the call returned; the stream's later work must not reach the queue
//! before it. The gate is the handshake: the applier thread settles it (after
//! writing the result, or with the failure), the stream's batch holds back
//! until it is settled, and a wait that gives up marks it abandoned so the
//! applier writes nothing afterwards. One mutex orders the three, so "the
//! result was written" and "the batch was submitted" can never be seen in
//! the wrong order.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use compute_runtime::{Bytes, ServerError};

/// Where a collective's outcome is.
#[derive(Debug)]
pub(crate) enum GateState {
    /// Not known yet.
    Pending,
    /// `ComputeWait::Wait`: the result is in `dst` (queued before the next
    /// submit).
    Written,
    /// `ComputeWait::Overlap`: the result, for `sync_collective` to write.
    Ready(Held),
    /// The call failed (or a rank's input was untrusted): `dst` is poisoned
    /// with this error.
    Failed(ServerError),
    /// A wait gave up before the outcome; the applier must not write.
    Abandoned,
}

/// An `Overlap` result held for `sync_collective`.
#[derive(Debug)]
pub(crate) enum Held {
    /// Its bytes, on the host (host staging).
    Bytes(Bytes),
    /// A device buffer that holds it from offset 0 (the devices combined
    /// it, `collective/device_call.rs`).
    Device(wgpu::Buffer),
}

/// One collective's gate.
#[derive(Debug)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    pub fn new() -> Self {
        Gate {
            state: Mutex::new(GateState::Pending),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the outcome is known (or the wait was abandoned).
    pub fn is_settled(&self) -> bool {
        !matches!(*self.lock(), GateState::Pending)
    }

    /// Settles a pending gate with what `settle` returns, run under the
    /// gate's lock (so a result written there is queued before anyone sees
    /// the gate settled). An abandoned gate runs nothing; returns whether it
    /// ran.
    pub fn settle(&self, settle: impl FnOnce() -> GateState) -> bool {
        let mut state = self.lock();
        if !matches!(*state, GateState::Pending) {
            return false;
        }
        *state = settle();
        drop(state);
        self.changed.notify_all();
        true
    }

    /// Runs `f` under the gate's lock if the gate is still pending (nobody
    /// gave up on it): what the applier writes into `dst` piece by piece,
    /// so that no piece lands after a wait abandoned the gate.
    pub fn if_pending<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let state = self.lock();
        matches!(*state, GateState::Pending).then(f)
    }

    /// Waits up to `timeout` for the outcome; `None` when it did not come,
    /// and the gate is then abandoned. Otherwise the failure, if any.
    pub fn wait(&self, timeout: Duration) -> Option<Result<(), ServerError>> {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        loop {
            match &*state {
                GateState::Pending => {}
                GateState::Failed(e) => return Some(Err(e.clone())),
                GateState::Abandoned => return None,
                GateState::Written | GateState::Ready(_) => return Some(Ok(())),
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => {
                        *state = GateState::Abandoned;
                        return None;
                    }
                },
                None => Duration::from_secs(3600),
            };
            state = self
                .changed
                .wait_timeout(state, left)
                .map(|(s, _)| s)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// The overlap result, once: `Some(Ok(bytes))` the first time after a
    /// `Ready`, then `Some(Ok(empty))`.
    pub fn take_ready(&self) -> Option<Held> {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, GateState::Written) {
            GateState::Ready(bytes) => Some(bytes),
            other => {
                *state = other;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settles_once_and_an_abandoned_gate_runs_nothing() {
        let g = Gate::new();
        assert!(!g.is_settled());
        assert!(g.settle(|| GateState::Written));
        assert!(!g.settle(|| GateState::Failed(ServerError::unsupported("x", "y"))));
        assert_eq!(g.wait(Duration::ZERO).map(|r| r.is_ok()), Some(true));

        let late = Gate::new();
        assert!(late.wait(Duration::from_millis(1)).is_none(), "timed out");
        let mut ran = false;
        assert!(!late.settle(|| {
            ran = true;
            GateState::Written
        }));
        assert!(!ran, "an abandoned gate writes nothing");
    }
}
