//! Waiting for a submission: where a `read`, a `sync` or a profile window's
//! future spends its time.
//!
//! Two paths. A caller that waits at once (`block_on(server.read(..))`, the
//! common case) polls the device on its own thread, for at most
//! [`INLINE_WAIT`]: no hand-off to the poller thread, no thread wake-up on
//! the way back (on the H200 that hop was a third of a 4 KiB round trip).
//! A wait that lasts longer is handed to the device's poller thread, so an
//! async executor is never blocked for long. Either way nothing spins:
//! `device.poll(Wait)` sleeps in the driver.
//!
//! And a shortcut: submissions are numbered, and the number of the newest
//! one known complete is kept; a wait for work that is already known done
//! (a `sync` with nothing pending) returns at once, without a poll.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use compute_runtime::ServerError;

use crate::device::faults::DeviceFaults;
use crate::device::poller::{PollLock, PollerHandle};

/// How long a future polls the device on its caller's thread before it
/// hands the wait to the poller thread.
pub const INLINE_WAIT: Duration = Duration::from_millis(5);

/// A cloneable handle to wait on one device's submissions.
#[derive(Clone, Debug)]
pub(crate) struct Waiter {
    device: wgpu::Device,
    poller: PollerHandle,
    faults: Arc<DeviceFaults>,
    /// Held while polling: one thread polls the device at a time.
    poll_lock: PollLock,
    /// Number of the newest submission known complete.
    completed: Arc<AtomicU64>,
}

impl Waiter {
    pub fn new(
        device: wgpu::Device,
        poller: PollerHandle,
        faults: Arc<DeviceFaults>,
        poll_lock: PollLock,
    ) -> Self {
        Waiter {
            device,
            poller,
            faults,
            poll_lock,
            completed: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Whether submission number `no` is known to have run.
    pub fn is_done(&self, no: u64) -> bool {
        no <= self.completed.load(Ordering::Acquire)
    }

    /// The submission to wait for, unless there is none: `None` means
    /// nothing was ever submitted (callers pass the newest submission
    /// otherwise), or number `no` is known to have run.
    fn pending(
        &self,
        index: Option<wgpu::SubmissionIndex>,
        no: u64,
    ) -> Option<wgpu::SubmissionIndex> {
        index.filter(|_| !self.is_done(no))
    }

    /// Waits until submission `index` (number `no`) has run, and the map
    /// callbacks of the work it covers with it. `None`: nothing submitted.
    pub async fn wait(
        self,
        index: Option<wgpu::SubmissionIndex>,
        no: u64,
    ) -> Result<(), ServerError> {
        match self.pending(index, no) {
            Some(index) => self.poll_until(index, no).await,
            None => Ok(()),
        }
    }

    /// Waits as [`Waiter::wait`], but polls even when the submission is
    /// known to have run: for a buffer mapped after its submission, whose
    /// map callback runs only in a poll that follows the request.
    pub async fn wait_polled(
        self,
        index: wgpu::SubmissionIndex,
        no: u64,
    ) -> Result<(), ServerError> {
        self.poll_until(index, no).await
    }

    /// Waits as [`Waiter::wait`] on the calling thread, with no executor:
    /// for a server call's own wait (a call may run inside the caller's
    /// executor, where a nested `block_on` panics).
    pub fn wait_blocking(
        &self,
        index: Option<wgpu::SubmissionIndex>,
        no: u64,
    ) -> Result<(), ServerError> {
        let Some(index) = self.pending(index, no) else {
            return Ok(());
        };
        let _polling = self.poll_lock.lock();
        self.poll_for(index, None).map_err(|e| self.lost(e))?;
        self.completed.fetch_max(no, Ordering::AcqRel);
        Ok(())
    }

    /// `poll(Wait)` for `index`, for at most `timeout`; the caller holds
    /// the poll lock. A submission that failed validation has an index but
    /// never runs: then it waits for what did run.
    fn poll_for(
        &self,
        index: wgpu::SubmissionIndex,
        timeout: Option<Duration>,
    ) -> Result<wgpu::PollStatus, wgpu::PollError> {
        let poll = |index: Option<wgpu::SubmissionIndex>| {
            self.device.poll(wgpu::PollType::Wait {
                submission_index: index,
                timeout,
            })
        };
        match poll(Some(index)) {
            Err(wgpu::PollError::WrongSubmissionIndex(..)) => poll(None),
            other => other,
        }
    }

    /// A poll that failed: the device is lost.
    fn lost(&self, e: wgpu::PollError) -> ServerError {
        let reason = format!("poll failed: {e}");
        self.faults.mark_lost(reason.clone());
        ServerError::DeviceLost { reason }
    }

    async fn poll_until(self, index: wgpu::SubmissionIndex, no: u64) -> Result<(), ServerError> {
        // Inline only when no other thread is polling (the poller thread, or
        // another caller's inline wait); else straight to the poller.
        let inline = match self.poll_lock.try_lock() {
            Some(_polling) => self.poll_for(index.clone(), Some(INLINE_WAIT)),
            None => Err(wgpu::PollError::Timeout),
        };
        match inline {
            Ok(_) => {}
            Err(wgpu::PollError::Timeout) => match self.poller.wait(Some(index)).await {
                Ok(r) => r?,
                // The poller stopped before answering (its server went
                // away): the wait never happened.
                Err(e) => return Err(self.faults.lost_during("waiting on the poller", e)),
            },
            Err(e) => return Err(self.lost(e)),
        }
        self.completed.fetch_max(no, Ordering::AcqRel);
        Ok(())
    }
}
