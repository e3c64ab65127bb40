//! The device's one waiter.
//!
//! A thread per device blocks in `device.poll(Wait)` for the submission a
//! job names, then completes the job's channel; map callbacks of buffers used
//! by that submission fire inside the same poll. Nothing spins: with no job
//! the thread sleeps on its channel, and with one it sleeps in the driver.
//! Futures from `read` and `sync` wait on these channels, so they wake when
//! their submission completes, on any executor.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use compute_runtime::ServerError;
use futures::channel::oneshot;

use crate::device::faults::DeviceFaults;

struct Job {
    index: Option<wgpu::SubmissionIndex>,
    done: oneshot::Sender<Result<(), ServerError>>,
}

/// What the poller thread is asked.
enum Request {
    Wait(Job),
    /// End the thread (other handles may still hold senders).
    Stop,
}

/// The right to poll a device: one thread at a time (see
/// [`DevicePoller::start`]).
#[derive(Clone, Debug, Default)]
pub struct PollLock(Arc<std::sync::Mutex<()>>);

impl PollLock {
    /// Blocks until this thread may poll.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The right to poll now, if no other thread is polling.
    pub fn try_lock(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// Handle to the waiter thread; dropping it ends the thread.
#[derive(Debug)]
pub struct DevicePoller {
    jobs: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl DevicePoller {
    /// Starts the waiter of `device`.
    /// Starts the waiter of `device`. Every poll holds `poll_lock`: wgpu
    /// 30's `Device::poll` may panic when two threads poll one device at
    /// once (an assertion that races with another thread's poll; fixed
    /// upstream after 30.0.2), so the device is polled by one thread at a
    /// time (see [`PollLock`]).
    pub fn start(device: wgpu::Device, faults: Arc<DeviceFaults>, poll_lock: PollLock) -> Self {
        let (tx, rx) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("wgpu-server-poller".into())
            .spawn(move || {
                while let Ok(Request::Wait(job)) = rx.recv() {
                    let wait = |index| {
                        let _polling = poll_lock.lock();
                        device.poll(wgpu::PollType::Wait {
                            submission_index: index,
                            timeout: None,
                        })
                    };
                    let result = match wait(job.index) {
                        // A submission that failed validation has an index
                        // but never runs (its error goes to the uncaptured
                        // handler, reported by sync): wait for what did run.
                        Err(wgpu::PollError::WrongSubmissionIndex(..)) => wait(None),
                        other => other,
                    };
                    let result = result.map(|_| ()).map_err(|e| {
                        let reason = format!("poll failed: {e}");
                        faults.mark_lost(reason.clone());
                        ServerError::DeviceLost { reason }
                    });
                    // The waiter may have been dropped; nobody to tell.
                    let _ = job.done.send(result);
                }
            })
            .ok();
        Self {
            jobs: thread.is_some().then_some(tx),
            thread,
        }
    }

    /// A handle other threads can use to ask this poller to wait for a
    /// submission (so the map callbacks of that submission run without
    /// anyone waiting on the server).
    pub fn handle(&self) -> PollerHandle {
        PollerHandle {
            jobs: self.jobs.clone(),
        }
    }
}

/// Asks a device's poller to drive a submission to completion; cloneable and
/// usable from any thread.
#[derive(Clone, Debug)]
pub struct PollerHandle {
    jobs: Option<mpsc::Sender<Request>>,
}

impl PollerHandle {
    /// A channel that completes once `index` (or, for `None`, everything
    /// submitted so far) has run, as [`DevicePoller::wait`].
    pub fn wait(
        &self,
        index: Option<wgpu::SubmissionIndex>,
    ) -> oneshot::Receiver<Result<(), ServerError>> {
        let (done, rx) = oneshot::channel();
        let job = Job { index, done };
        let refused = match &self.jobs {
            Some(jobs) => match jobs.send(Request::Wait(job)) {
                Ok(()) => None,
                Err(mpsc::SendError(Request::Wait(job))) => Some(job),
                Err(_) => None,
            },
            None => Some(job),
        };
        if let Some(job) = refused {
            let _ = job.done.send(Err(ServerError::DeviceLost {
                reason: "the device's poller thread has stopped".into(),
            }));
        }
        rx
    }

    /// Has the poller wait for `index`, so the map callbacks of the work it
    /// covers run; nobody waits for the answer.
    pub fn kick(&self, index: wgpu::SubmissionIndex) {
        if let Some(jobs) = &self.jobs {
            let (done, _) = oneshot::channel();
            // A stopped poller means a lost device; the caller hears of it
            // from its own next call.
            let _ = jobs.send(Request::Wait(Job {
                index: Some(index),
                done,
            }));
        }
    }
}

impl Drop for DevicePoller {
    fn drop(&mut self) {
        // An explicit stop: handles given out may outlive the poller.
        if let Some(jobs) = self.jobs.take() {
            let _ = jobs.send(Request::Stop);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
