//! The cell one posted call's two ends and the rank's engine share: the
//! input as it arrives (whole, or step by step), the output pieces the
//! engine streams out, and the outcome.
//!
//! **Buys:** the input side never blocks (a GPU map callback provides a
//! step); for a consumer that takes pieces as they come
//! ([`Cell::bound_queue`]) the output side is bounded: the engine waits
//! while more than [`Cell::set_queue_limit`]'s bytes of pieces are queued
//! and not taken, so a call of any size holds a few steps of output at a
//! time. **Doesn't
//! buy:** a consumer that never takes its pieces and never gives up stalls
//! its call until the engine's deadline; a dropped [`PendingResult`]
//! (crate::PendingResult) is a consumer gone, whose pieces are dropped.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::{CollectiveFault, ServerError};

use crate::result::Outcome;

type Callback = Box<dyn FnOnce() + Send>;

/// One step's input (or why it is missing), as provided.
pub(crate) type Part = Result<Bytes, Arc<ServerError>>;

/// What a wait for a step's input found.
pub(crate) enum InputWait {
    /// The whole input, provided at once: the engine cuts every step from it.
    Whole(Part),
    /// This step's input.
    Step(Part),
    /// The result end gave up first.
    Cancelled,
    /// No input will come (every handle on the input was dropped).
    Closed,
    /// The deadline passed.
    TimedOut,
}

/// What the engine's offer of a piece found.
pub(crate) enum Offered {
    /// Queued (or dropped because nobody takes pieces any more).
    Taken,
    /// The result end gave up.
    Cancelled,
    /// The consumer took nothing before the deadline.
    TimedOut,
}

/// What the consumer's wait found.
pub(crate) enum Delivered {
    Piece { offset: usize, bytes: Bytes },
    Done(Result<Outcome, ServerError>),
    Pending,
}

enum Output {
    Pending,
    Ready(Result<Outcome, ServerError>),
    Taken,
}

struct State {
    whole: Option<Part>,
    parts: BTreeMap<usize, Part>,
    /// Nothing more will be provided.
    closed: bool,
    pieces: VecDeque<(usize, Bytes)>,
    queued: usize,
    limit: usize,
    /// The consumer takes pieces as they come: the limit applies. (One
    /// that assembles the whole result takes them only when it looks, one
    /// rank after another when one thread drives every rank: bounding its
    /// queue would stall the others' steps.)
    bounded: bool,
    /// Nobody will take pieces: they are dropped as they come.
    discard: bool,
    output: Output,
    /// The result end gave up: the engine stops.
    cancelled: bool,
    callbacks: Vec<Callback>,
    waker: Option<Waker>,
}

pub(crate) struct Cell {
    state: Mutex<State>,
    changed: Condvar,
}

fn wait_until<'a, T>(
    changed: &Condvar,
    guard: MutexGuard<'a, T>,
    deadline: Instant,
) -> (MutexGuard<'a, T>, bool) {
    let now = Instant::now();
    if now >= deadline {
        return (guard, true);
    }
    let guard = changed
        .wait_timeout(guard, deadline - now)
        .unwrap_or_else(|e| e.into_inner())
        .0;
    (guard, false)
}

impl Cell {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Cell {
            state: Mutex::new(State {
                whole: None,
                parts: BTreeMap::new(),
                closed: false,
                pieces: VecDeque::new(),
                queued: 0,
                limit: usize::MAX,
                bounded: false,
                discard: false,
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

    /// The whole input (ignored once any input came).
    pub(crate) fn put_whole(&self, input: Part) {
        let mut state = self.lock();
        if state.whole.is_none() && state.parts.is_empty() && !state.closed {
            state.whole = Some(input);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Step `step`'s input (the first one given for a step counts).
    pub(crate) fn put_step(&self, step: usize, input: Part) {
        let mut state = self.lock();
        if state.whole.is_none() && !state.closed {
            state.parts.entry(step).or_insert(input);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// No more input will be provided.
    pub(crate) fn close_input(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Blocks the engine until step `step`'s input (or the whole input)
    /// is there, the result end gives up, the input is closed, or
    /// `deadline` passes.
    pub(crate) fn wait_input(&self, step: usize, deadline: Instant) -> InputWait {
        let mut state = self.lock();
        loop {
            if let Some(whole) = state.whole.take() {
                return InputWait::Whole(whole);
            }
            if let Some(part) = state.parts.remove(&step) {
                return InputWait::Step(part);
            }
            if state.cancelled {
                return InputWait::Cancelled;
            }
            if state.closed {
                return InputWait::Closed;
            }
            let (next, late) = wait_until(&self.changed, state, deadline);
            if late {
                return InputWait::TimedOut;
            }
            state = next;
        }
    }

    /// At most `limit` bytes of pieces wait to be taken (one piece always
    /// may), once the consumer said it takes them as they come.
    pub(crate) fn set_queue_limit(&self, limit: usize) {
        self.lock().limit = limit.max(1);
    }

    /// The consumer takes pieces as they come: bound the queue.
    pub(crate) fn bound_queue(&self) {
        self.lock().bounded = true;
    }

    /// Queues a piece of the output, waiting while the queue is full.
    pub(crate) fn offer(&self, offset: usize, bytes: Bytes, deadline: Instant) -> Offered {
        let mut state = self.lock();
        loop {
            if state.cancelled {
                return Offered::Cancelled;
            }
            if state.discard {
                return Offered::Taken;
            }
            if !state.bounded
                || state.pieces.is_empty()
                || state.queued + bytes.len() <= state.limit
            {
                state.queued += bytes.len();
                state.pieces.push_back((offset, bytes));
                let waker = state.waker.take();
                drop(state);
                self.changed.notify_all();
                wake(waker);
                return Offered::Taken;
            }
            let (next, late) = wait_until(&self.changed, state, deadline);
            if late {
                return Offered::TimedOut;
            }
            state = next;
        }
    }

    /// Stores the outcome unless one is already there; wakes every waiter,
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
        wake(waker);
        for callback in callbacks {
            // A panicking callback must not take the engine thread with it.
            if catch_unwind(AssertUnwindSafe(callback)).is_err() {
                tracing::error!("a collective on_ready callback panicked");
            }
        }
        true
    }

    /// The next piece, or the outcome once every piece was taken, without
    /// blocking; with a waker to call when there is more.
    pub(crate) fn poll_next(&self, waker: Option<&Waker>) -> Delivered {
        let mut state = self.lock();
        let next = Self::next_locked(&mut state);
        if matches!(next, Delivered::Pending) {
            state.waker = waker.cloned();
        } else {
            drop(state);
            self.changed.notify_all();
        }
        next
    }

    fn next_locked(state: &mut State) -> Delivered {
        if let Some((offset, bytes)) = state.pieces.pop_front() {
            state.queued -= bytes.len();
            return Delivered::Piece { offset, bytes };
        }
        match std::mem::replace(&mut state.output, Output::Taken) {
            Output::Ready(result) => Delivered::Done(result),
            Output::Taken => Delivered::Done(Err(ServerError::CollectiveState {
                fault: CollectiveFault::Misuse("the result of this call was already taken"),
            })),
            Output::Pending => {
                state.output = Output::Pending;
                Delivered::Pending
            }
        }
    }

    /// Blocks until a piece or the outcome is there, at most `timeout`
    /// (then `Pending`).
    pub(crate) fn wait_next(&self, timeout: Duration) -> Delivered {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        loop {
            let next = Self::next_locked(&mut state);
            if !matches!(next, Delivered::Pending) {
                drop(state);
                self.changed.notify_all();
                return next;
            }
            let deadline = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let (s, late) = wait_until(&self.changed, state, deadline);
            if late {
                return Delivered::Pending;
            }
            state = s;
        }
    }

    /// Whether the outcome is in (pieces may still wait to be taken).
    pub(crate) fn is_complete(&self) -> bool {
        !matches!(self.lock().output, Output::Pending)
    }

    /// Whether a piece or the outcome is there to take.
    pub(crate) fn has_next(&self) -> bool {
        let state = self.lock();
        !state.pieces.is_empty() || matches!(state.output, Output::Ready(_))
    }

    /// Runs `callback` once the outcome is in (at once if it is).
    pub(crate) fn on_ready(&self, callback: Callback) {
        let mut state = self.lock();
        if matches!(state.output, Output::Pending) {
            state.callbacks.push(callback);
        } else {
            drop(state);
            callback();
        }
    }

    /// The result end gave up: the engine stops waiting for input and
    /// pieces.
    pub(crate) fn cancel(&self) {
        self.lock().cancelled = true;
        self.changed.notify_all();
    }

    /// Nobody will take pieces: drop the queued ones and later ones.
    pub(crate) fn discard_pieces(&self) {
        let mut state = self.lock();
        state.discard = true;
        state.pieces.clear();
        state.queued = 0;
        drop(state);
        self.changed.notify_all();
    }
}

fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker
        && catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err()
    {
        tracing::error!("a collective result's waker panicked");
    }
}
