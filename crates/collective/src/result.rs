//! The two ends of one posted call: [`Contribution`] (the input goes in) and
//! [`PendingResult`] (the outcome comes out), joined by a shared cell that
//! the rank's engine thread reads and fills.
//!
//! **Buys:** neither end ever runs collective work: `provide` stores bytes
//! and wakes the engine, so it is safe from a GPU map callback; the result
//! end can block ([`PendingResult::wait`]), poll ([`PendingResult::try_take`]),
//! be awaited (it is a `Future`), or ask for a callback
//! ([`PendingResult::on_ready`]), so a server can wake without polling.
//! **Doesn't buy:** cancellation of work already running: a timed-out wait
//! aborts the rendezvous, but a reduction that had every input finishes
//! (bounded work) and its result is dropped.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::CollectiveFault;
use compute_runtime::ServerError;

use crate::call::{CallId, CollectiveCall, describe};
use crate::transport::Transport;

/// What one rank gets from a completed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// This rank's destination bytes ([`CollectiveCall::output_len`] of
    /// them); empty for `Send`, and empty when `poisoned` is set.
    pub bytes: Bytes,
    /// Set when the result depends on a rank's failed input
    /// ([`ServerError::CollectiveInput`]): no data moved, and the server
    /// marks the destination untrusted with this error.
    pub poisoned: Option<ServerError>,
}

impl Outcome {
    /// A clean result.
    pub fn ok(bytes: Bytes) -> Self {
        Outcome {
            bytes,
            poisoned: None,
        }
    }

    /// A poisoned result (no bytes).
    pub fn poisoned(error: ServerError) -> Self {
        Outcome {
            bytes: Bytes::new(),
            poisoned: Some(error),
        }
    }
}

type Callback = Box<dyn FnOnce() + Send>;

enum Input {
    Pending,
    Ready(Result<Bytes, Arc<ServerError>>),
    Taken,
}

enum Output {
    Pending,
    Ready(Result<Outcome, ServerError>),
    Taken,
}

struct State {
    input: Input,
    output: Output,
    /// The result end gave up: the engine stops waiting for the input.
    cancelled: bool,
    callbacks: Vec<Callback>,
    waker: Option<Waker>,
}

/// The cell one call's two ends and the engine share.
pub(crate) struct Cell {
    state: Mutex<State>,
    changed: Condvar,
}

/// How the engine's wait for a call's input ended.
pub(crate) enum InputWait {
    /// The input (or its failure).
    Ready(Result<Bytes, Arc<ServerError>>),
    /// The result end gave up first.
    Cancelled,
    /// The deadline passed.
    TimedOut,
}

impl Cell {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Cell {
            state: Mutex::new(State {
                input: Input::Pending,
                output: Output::Pending,
                cancelled: false,
                callbacks: Vec::new(),
                waker: None,
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put_input(&self, input: Result<Bytes, Arc<ServerError>>) {
        let mut state = self.lock();
        if matches!(state.input, Input::Pending) {
            state.input = Input::Ready(input);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Blocks the engine until the input arrives, the result end gives up,
    /// or `deadline` passes.
    pub(crate) fn wait_input(&self, deadline: Instant) -> InputWait {
        let mut state = self.lock();
        loop {
            if matches!(state.input, Input::Ready(_))
                && let Input::Ready(input) = std::mem::replace(&mut state.input, Input::Taken)
            {
                return InputWait::Ready(input);
            }
            if state.cancelled {
                return InputWait::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                return InputWait::TimedOut;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Stores the result unless one is already there; wakes every waiter,
    /// then runs the callbacks (outside the lock). Whether it was stored.
    pub(crate) fn complete(&self, result: Result<Outcome, ServerError>) -> bool {
        let mut state = self.lock();
        if !matches!(state.output, Output::Pending) {
            return false;
        }
        state.output = Output::Ready(result);
        let callbacks = std::mem::take(&mut state.callbacks);
        let waker = state.waker.take();
        drop(state);
        self.changed.notify_all();
        if let Some(waker) = waker
            && catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err()
        {
            tracing::error!("a collective result's waker panicked");
        }
        for callback in callbacks {
            // A panicking callback must not take the engine thread with it.
            if catch_unwind(AssertUnwindSafe(callback)).is_err() {
                tracing::error!("a collective on_ready callback panicked");
            }
        }
        true
    }

    fn take(state: &mut State) -> Option<Result<Outcome, ServerError>> {
        match std::mem::replace(&mut state.output, Output::Taken) {
            Output::Ready(result) => Some(result),
            Output::Taken => Some(Err(ServerError::CollectiveState {
                fault: CollectiveFault::Misuse("the result of this call was already taken"),
            })),
            Output::Pending => {
                state.output = Output::Pending;
                None
            }
        }
    }
}

/// This rank's input to a posted call: give it once, from any thread, with
/// [`provide`](Self::provide). Calls with no input (`Recv`, a non-root
/// `Broadcast`) get an inert contribution: [`needs_input`](Self::needs_input)
/// is false, and providing or dropping it does nothing. Dropping a
/// contribution that needs input without providing it counts as a failed
/// input ([`ServerError::CollectiveState`]), so no rank waits for it.
pub struct Contribution {
    cell: Option<Arc<Cell>>,
    expected: Option<usize>,
}

impl Contribution {
    pub(crate) fn new(cell: Arc<Cell>, expected: Option<usize>) -> Self {
        Contribution {
            cell: expected.is_some().then_some(cell),
            expected,
        }
    }

    /// Whether the call waits for this contribution.
    pub fn needs_input(&self) -> bool {
        self.cell.is_some()
    }

    /// Bytes [`provide`](Self::provide) must give, when it is needed.
    pub fn expected_len(&self) -> Option<usize> {
        self.expected
    }

    /// Gives this rank's input: the bytes, or why they cannot be trusted. An
    /// `Err` (or bytes of the wrong length, reported as
    /// [`ServerError::SizeMismatch`]) poisons every result that depends on
    /// this input with [`ServerError::CollectiveInput`]. Never blocks and runs
    /// no collective work: callable from a GPU callback.
    pub fn provide(mut self, input: Result<Bytes, Arc<ServerError>>) {
        let (Some(cell), Some(expected)) = (self.cell.take(), self.expected) else {
            return;
        };
        let input = input.and_then(|bytes| {
            if bytes.len() == expected {
                Ok(bytes)
            } else {
                Err(Arc::new(ServerError::SizeMismatch {
                    expected: expected as u64,
                    actual: bytes.len() as u64,
                }))
            }
        });
        cell.put_input(input);
    }
}

impl Drop for Contribution {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            cell.put_input(Err(Arc::new(ServerError::CollectiveState {
                fault: CollectiveFault::Misuse("the contribution was dropped without an input"),
            })));
        }
    }
}

impl fmt::Debug for Contribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contribution")
            .field("needs_input", &self.needs_input())
            .field("expected_len", &self.expected)
            .finish()
    }
}

/// The outcome of a posted call, on this rank. Completes within the
/// communicator's timeout (then with [`ServerError::CollectiveTimeout`]) even
/// if nobody waits for it, so awaiting it never hangs.
pub struct PendingResult {
    cell: Arc<Cell>,
    transport: Arc<dyn Transport>,
    id: CallId,
    call: CollectiveCall,
}

impl PendingResult {
    pub(crate) fn new(
        cell: Arc<Cell>,
        transport: Arc<dyn Transport>,
        id: CallId,
        call: CollectiveCall,
    ) -> Self {
        PendingResult {
            cell,
            transport,
            id,
            call,
        }
    }

    /// The call this is the result of.
    pub fn call(&self) -> CollectiveCall {
        self.call
    }

    /// Which rendezvous the call takes part in.
    pub fn id(&self) -> CallId {
        self.id
    }

    /// Whether the outcome is there ([`try_take`](Self::try_take) returns it).
    pub fn is_ready(&self) -> bool {
        !matches!(self.cell.lock().output, Output::Pending)
    }

    /// The outcome if it is there, without blocking. Once taken, later calls
    /// answer [`ServerError::CollectiveState`].
    pub fn try_take(&mut self) -> Option<Result<Outcome, ServerError>> {
        Cell::take(&mut self.cell.lock())
    }

    /// Runs `callback` once the outcome is there: at once, on this thread, if
    /// it already is; else on the thread that completes the call (the
    /// engine's, or a waiter's that timed out). Keep it short: wake the
    /// server's poller, send on a channel.
    pub fn on_ready(&self, callback: impl FnOnce() + Send + 'static) {
        let mut state = self.cell.lock();
        if matches!(state.output, Output::Pending) {
            state.callbacks.push(Box::new(callback));
        } else {
            drop(state);
            callback();
        }
    }

    /// Blocks until the outcome is there, at most `timeout`. On timeout the
    /// call is aborted on every rank (ranks waiting in it and ranks that
    /// reach it later get [`ServerError::CollectiveAborted`]) and this
    /// answers [`ServerError::CollectiveTimeout`].
    pub fn wait(self, timeout: Duration) -> Result<Outcome, ServerError> {
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        let mut state = self.cell.lock();
        loop {
            if let Some(result) = Cell::take(&mut state) {
                return result;
            }
            let now = Instant::now();
            let left = match deadline {
                Some(deadline) if now >= deadline => break,
                Some(deadline) => deadline - now,
                None => Duration::from_secs(3600),
            };
            state = self
                .cell
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(state);
        self.give_up(start.elapsed())
    }

    /// Times the call out on this rank: completes the cell with the timeout
    /// (unless the engine just completed it), stops the engine waiting for
    /// the input, and aborts the rendezvous for the others.
    fn give_up(self, waited: Duration) -> Result<Outcome, ServerError> {
        let what = describe(self.call.name(), self.id);
        let rank = self.transport.rank();
        let missing = self.transport.missing(self.id);
        let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        let timeout = ServerError::CollectiveTimeout {
            rank,
            call: what.clone(),
            waited_ms,
            missing: missing.clone(),
        };
        if self.cell.complete(Err(timeout)) {
            self.cell.lock().cancelled = true;
            self.cell.changed.notify_all();
            self.transport.abort(
                self.id,
                ServerError::CollectiveAborted {
                    call: what,
                    reason: format!(
                        "rank {rank} timed out after {waited_ms} ms waiting for ranks {missing:?}"
                    ),
                },
            );
        }
        let mut state = self.cell.lock();
        Cell::take(&mut state).unwrap_or_else(|| {
            Err(ServerError::CollectiveState {
                fault: CollectiveFault::Misuse("the call completed twice"),
            })
        })
    }
}

impl Future for PendingResult {
    type Output = Result<Outcome, ServerError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.cell.lock();
        match Cell::take(&mut state) {
            Some(result) => Poll::Ready(result),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl fmt::Debug for PendingResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingResult")
            .field("id", &self.id)
            .field("call", &self.call)
            .field("ready", &self.is_ready())
            .finish()
    }
}
