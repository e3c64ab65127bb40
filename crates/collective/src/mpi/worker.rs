//! A thread that makes blocking MPI calls, and the slots callers wait on
//! with a deadline.
//!
//! MPI's blocking calls (and some nonblocking ones: communicator creation,
//! `MPI_Init`'s fence) can wait forever when a peer died or never calls.
//! The caller never makes them itself: it hands the call to a worker and
//! waits on the call's [`Slot`] until its deadline. On timeout the caller
//! fails the call and moves on; the worker may stay blocked in MPI for the
//! rest of the process (its transport is then broken: see `transport.rs`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::Instant;

use compute_runtime::CollectiveFault;
use compute_runtime::ServerError;

type Job = Box<dyn FnOnce() + Send>;

/// Where one call's result lands: the first of the worker and a failing
/// caller wins.
#[derive(Debug)]
pub(crate) struct Slot<T> {
    value: Mutex<Option<Result<T, ServerError>>>,
    changed: Condvar,
}

impl<T> Slot<T> {
    pub fn new() -> Arc<Self> {
        Arc::new(Slot {
            value: Mutex::new(None),
            changed: Condvar::new(),
        })
    }

    /// Stores `result` unless the slot already holds one; whether it did.
    pub fn fill(&self, result: Result<T, ServerError>) -> bool {
        let mut v = self.value.lock().unwrap_or_else(|e| e.into_inner());
        if v.is_some() {
            return false;
        }
        *v = Some(result);
        self.changed.notify_all();
        true
    }

    /// The result once it is there, or `None` at `deadline`.
    pub fn wait(&self, deadline: Instant) -> Option<Result<T, ServerError>> {
        let mut v = self.value.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(result) = v.take() {
                return Some(result);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            v = self
                .changed
                .wait_timeout(v, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Failing a slot whatever its payload type.
pub(crate) trait Fail: Send + Sync + std::fmt::Debug {
    fn fail(&self, error: ServerError) -> bool;
}

impl<T: Send + std::fmt::Debug> Fail for Slot<T> {
    fn fail(&self, error: ServerError) -> bool {
        self.fill(Err(error))
    }
}

/// One thread running submitted MPI calls in order.
#[derive(Debug)]
pub(crate) struct Worker {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

impl Worker {
    /// Starts a worker thread named `name`; `on_exit` runs on it once it
    /// is stopped and its queue is empty (never, if a call never returns).
    pub fn spawn(
        name: String,
        on_exit: impl FnOnce() + Send + 'static,
    ) -> Result<Self, ServerError> {
        let (tx, rx) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name(name)
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
                on_exit();
            })
            .map_err(|e| ServerError::CollectiveState {
                fault: CollectiveFault::ThreadStart {
                    thread: "MPI worker",
                    error: e.to_string(),
                },
            })?;
        Ok(Worker {
            jobs: Mutex::new(Some(tx)),
        })
    }

    /// Queues `f`; its result lands in the returned slot (a panic in `f`
    /// lands as an error).
    pub fn submit<T: Send + 'static>(
        &self,
        _what: &str,
        f: impl FnOnce() -> Result<T, ServerError> + Send + 'static,
    ) -> Arc<Slot<T>> {
        let slot = Slot::new();
        let out = Arc::clone(&slot);
        let job: Job = Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
                Err(ServerError::CollectiveState {
                    fault: CollectiveFault::Panicked {
                        part: "the MPI worker",
                    },
                })
            });
            out.fill(result);
        });
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|tx| tx.send(job).is_ok())
            .unwrap_or(false);
        if !sent {
            slot.fill(Err(ServerError::CollectiveState {
                fault: CollectiveFault::Stopped {
                    thread: "MPI worker",
                },
            }));
        }
        slot
    }

    /// Lets the thread end once its queue is empty.
    pub fn stop(&self) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Runs `f` on `worker` and waits for it until `deadline`: `Err(None)` when
/// the deadline passed first (the call may still be running).
pub(crate) fn run_until<T: Send + 'static>(
    worker: &Worker,
    what: &str,
    deadline: Instant,
    f: impl FnOnce() -> Result<T, ServerError> + Send + 'static,
) -> Result<T, Option<ServerError>> {
    let slot = worker.submit(what, f);
    match slot.wait(deadline) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(Some(e)),
        None => Err(None),
    }
}
