//! The two ends of one posted call: [`Contribution`] (the input goes in,
//! whole or step by step through a [`Feed`]) and [`PendingResult`] (the
//! outcome comes out, whole or as pieces), joined by a shared cell
//! (`cell.rs`) that the rank's engine thread reads and fills.
//!
//! **Buys:** neither end ever runs collective work: `provide` stores bytes
//! and wakes the engine, so it is safe from a GPU map callback; the result
//! end can block ([`PendingResult::wait`]), poll ([`PendingResult::try_take`]),
//! be awaited (it is a `Future`), ask for a callback
//! ([`PendingResult::on_ready`]), or take the output piece by piece as the
//! steps of the call finish ([`PendingResult::next`]), so a server writes a
//! large result while the rest is still being combined. **Doesn't buy:**
//! cancellation of work already running: a timed-out wait aborts the
//! rendezvous, but a step that had every input finishes (bounded work) and
//! its result is dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::CollectiveFault;
use compute_runtime::ServerError;

use crate::call::{CallId, CollectiveCall, describe};
use crate::cell::{Cell, Delivered};
use crate::plan::Plan;
use crate::transport::Transport;

/// What one rank gets from a completed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// This rank's destination bytes ([`CollectiveCall::output_len`] of
    /// them); empty for `Send`, and empty when `poisoned` is set. Taken
    /// piece by piece ([`PendingResult::next`]), the pieces were the bytes
    /// and this is empty.
    pub bytes: Bytes,
    /// Set when the result depends on a rank's failed input
    /// ([`ServerError::CollectiveInput`]): the server marks the destination
    /// untrusted with this error (pieces already taken are not the result).
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

/// This rank's input to a posted call: give it once, whole, from any
/// thread, with [`provide`](Self::provide), or step by step through
/// [`feed`](Self::feed). Calls with no input (`Recv`, a non-root
/// `Broadcast`) get an inert contribution: [`needs_input`](Self::needs_input)
/// is false, and providing or dropping it does nothing. Dropping a
/// contribution (or every clone of its feed) that needs input before all
/// of it came counts as a failed input ([`ServerError::CollectiveState`]),
/// so no rank waits for it.
pub struct Contribution {
    cell: Option<Arc<Cell>>,
    expected: Option<usize>,
    plan: Plan,
    /// A device call's: any bytes (only whether the input is ready and
    /// trusted counts), needed from every rank.
    status_only: bool,
}

impl Contribution {
    pub(crate) fn new(cell: Arc<Cell>, expected: Option<usize>, plan: Plan) -> Self {
        Contribution {
            cell: expected.is_some().then_some(cell),
            expected,
            plan,
            status_only: false,
        }
    }

    /// A device call's contribution (see [`Self::status_only`]).
    pub(crate) fn status(cell: Arc<Cell>, plan: Plan) -> Self {
        Contribution {
            cell: Some(cell),
            expected: Some(0),
            plan,
            status_only: true,
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

    /// The call's steps: what each step takes from this rank's input
    /// ([`Plan::input_pieces`]), for a [`Feed`].
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Gives this rank's whole input: the bytes, or why they cannot be
    /// trusted. An `Err` (or bytes of the wrong length, reported as
    /// [`ServerError::SizeMismatch`]) poisons every result that depends on
    /// this input with [`ServerError::CollectiveInput`]. Never blocks and runs
    /// no collective work: callable from a GPU callback.
    pub fn provide(mut self, input: Result<Bytes, Arc<ServerError>>) {
        let (Some(cell), Some(expected)) = (self.cell.take(), self.expected) else {
            return;
        };
        let input = match self.status_only {
            true => input,
            false => input.and_then(|bytes| checked_len(bytes, expected)),
        };
        cell.put_whole(input);
        cell.close_input();
    }

    /// The input step by step: a [`Feed`] that takes each step's bytes as
    /// they arrive (inert when the call needs no input).
    pub fn feed(mut self) -> Feed {
        Feed(Arc::new(FeedEnd {
            cell: self.cell.take(),
            plan: self.plan,
        }))
    }
}

fn checked_len(bytes: Bytes, expected: usize) -> Result<Bytes, Arc<ServerError>> {
    if bytes.len() == expected {
        Ok(bytes)
    } else {
        Err(Arc::new(ServerError::SizeMismatch {
            expected: expected as u64,
            actual: bytes.len() as u64,
        }))
    }
}

impl Drop for Contribution {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            cell.put_whole(Err(dropped()));
            cell.close_input();
        }
    }
}

fn dropped() -> Arc<ServerError> {
    Arc::new(ServerError::CollectiveState {
        fault: CollectiveFault::Misuse("the contribution was dropped without an input"),
    })
}

impl fmt::Debug for Contribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contribution")
            .field("needs_input", &self.needs_input())
            .field("expected_len", &self.expected)
            .field("steps", &self.plan.steps())
            .finish()
    }
}

/// A call's input step by step; clones share it, and once the last clone
/// drops, a step never given fails the input.
#[derive(Clone)]
pub struct Feed(Arc<FeedEnd>);

struct FeedEnd {
    cell: Option<Arc<Cell>>,
    plan: Plan,
}

impl Feed {
    /// The call's steps.
    pub fn plan(&self) -> &Plan {
        &self.0.plan
    }

    /// Gives step `step`'s input: [`Plan::input_len`] bytes (the step's
    /// pieces of `src`, concatenated), or why they cannot be trusted. A
    /// failed step fails this rank's input: the call's results are
    /// poisoned on every rank that depends on it. The first input given
    /// for a step counts. Never blocks.
    pub fn provide(&self, step: usize, input: Result<Bytes, Arc<ServerError>>) {
        let Some(cell) = &self.0.cell else {
            return;
        };
        let expected = self.0.plan.input_len(step);
        cell.put_step(step, input.and_then(|b| checked_len(b, expected)));
    }
}

impl Drop for FeedEnd {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            cell.close_input();
        }
    }
}

impl fmt::Debug for Feed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feed")
            .field("steps", &self.0.plan.steps())
            .finish()
    }
}

/// What [`PendingResult::next`] hands out.
#[derive(Debug)]
pub enum Delivery {
    /// `bytes` of the output, from `offset` on (in `dst`).
    Piece {
        /// Offset in the rank's output.
        offset: usize,
        /// The bytes.
        bytes: Bytes,
    },
    /// Every piece was handed out: the outcome (its `bytes` empty).
    Done(Result<Outcome, ServerError>),
}

/// The outcome of a posted call, on this rank. Completes within the
/// communicator's timeout (then with [`ServerError::CollectiveTimeout`]) even
/// if nobody waits for it, so awaiting it never hangs.
pub struct PendingResult {
    cell: Arc<Cell>,
    transport: Arc<dyn Transport>,
    id: CallId,
    call: CollectiveCall,
    /// Pieces taken by the whole-result ends (`wait`, `try_take`, poll).
    assembly: Box<Assembly>,
}

/// The whole output, from pieces.
#[derive(Debug, Default)]
struct Assembly {
    len: usize,
    /// The one piece that is all of it (no copy).
    whole: Option<Bytes>,
    buf: Option<Vec<u8>>,
    /// A piece fell outside the output.
    overflow: bool,
}

impl Assembly {
    fn add(&mut self, offset: usize, bytes: Bytes) {
        if self.whole.is_none() && self.buf.is_none() && offset == 0 && bytes.len() == self.len {
            self.whole = Some(bytes);
            return;
        }
        let len = self.len;
        let buf = self.buf.get_or_insert_with(|| vec![0; len]);
        if let Some(w) = self.whole.take() {
            buf.copy_from_slice(&w);
        }
        match buf.get_mut(offset..offset + bytes.len()) {
            Some(dst) => dst.copy_from_slice(&bytes),
            None => self.overflow = true,
        }
    }

    fn finish(&mut self, outcome: Outcome) -> Result<Outcome, ServerError> {
        if self.overflow {
            return Err(ServerError::CollectiveState {
                fault: CollectiveFault::Misuse("a piece of the result fell outside it"),
            });
        }
        if outcome.poisoned.is_some() || !outcome.bytes.is_empty() {
            return Ok(outcome);
        }
        let bytes = match (self.whole.take(), self.buf.take()) {
            (Some(w), _) => w,
            (None, Some(b)) => Bytes::from(b),
            (None, None) if self.len == 0 => Bytes::new(),
            (None, None) => Bytes::from(vec![0; self.len]),
        };
        Ok(Outcome::ok(bytes))
    }
}

impl PendingResult {
    pub(crate) fn new(
        cell: Arc<Cell>,
        transport: Arc<dyn Transport>,
        id: CallId,
        call: CollectiveCall,
    ) -> Self {
        let len = call.output_len(transport.size());
        PendingResult {
            cell,
            transport,
            id,
            call,
            assembly: Box::new(Assembly {
                len,
                ..Assembly::default()
            }),
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
        self.cell.is_complete()
    }

    /// The outcome if it is there, without blocking (pieces that came are
    /// gathered into its bytes). Once taken, later calls answer
    /// [`ServerError::CollectiveState`].
    pub fn try_take(&mut self) -> Option<Result<Outcome, ServerError>> {
        self.poll_whole(None)
    }

    fn poll_whole(
        &mut self,
        waker: Option<&std::task::Waker>,
    ) -> Option<Result<Outcome, ServerError>> {
        loop {
            match self.cell.poll_next(waker) {
                Delivered::Piece { offset, bytes } => self.assembly.add(offset, bytes),
                Delivered::Done(result) => {
                    return Some(result.and_then(|o| self.assembly.finish(o)));
                }
                Delivered::Pending => return None,
            }
        }
    }

    /// Runs `callback` once the outcome is there: at once, on this thread, if
    /// it already is; else on the thread that completes the call (the
    /// engine's, or a waiter's that timed out). Keep it short: wake the
    /// server's poller, send on a channel.
    pub fn on_ready(&self, callback: impl FnOnce() + Send + 'static) {
        self.cell.on_ready(Box::new(callback));
    }

    /// Says that this result will be taken piece by piece with
    /// [`next`](Self::next), as the pieces come: the engine then keeps at
    /// most a few steps of output queued, waiting (up to the call's
    /// timeout, then failing the call) while they are not taken. Without
    /// it, pieces queue until they are taken, as a whole-result wait wants
    /// (one thread driving every rank in turn must not stall the others).
    pub fn take_as_they_come(self) -> Self {
        self.cell.bound_queue();
        self
    }

    /// Whether [`next`](Self::next) would return at once.
    pub fn has_next(&self) -> bool {
        self.cell.has_next()
    }

    /// The next piece of the output, as soon as its step has finished, or,
    /// once every piece was handed out, the outcome. Blocks at most
    /// `timeout`; then the call is given up as by [`wait`](Self::wait).
    /// Pieces of a call that fails later are not its result: the outcome
    /// says so.
    pub fn next(&mut self, timeout: Duration) -> Delivery {
        let start = Instant::now();
        loop {
            match self.cell.wait_next(timeout) {
                Delivered::Piece { offset, bytes } => return Delivery::Piece { offset, bytes },
                Delivered::Done(result) => return Delivery::Done(result),
                Delivered::Pending => {
                    if let Some(result) = self.give_up(start.elapsed()) {
                        return Delivery::Done(result);
                    }
                }
            }
        }
    }

    /// Blocks until the outcome is there, at most `timeout`. On timeout the
    /// call is aborted on every rank (ranks waiting in it and ranks that
    /// reach it later get [`ServerError::CollectiveAborted`]) and this
    /// answers [`ServerError::CollectiveTimeout`].
    pub fn wait(mut self, timeout: Duration) -> Result<Outcome, ServerError> {
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        loop {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            match self.cell.wait_next(left) {
                Delivered::Piece { offset, bytes } => self.assembly.add(offset, bytes),
                Delivered::Done(result) => return result.and_then(|o| self.assembly.finish(o)),
                Delivered::Pending if deadline.is_some() => {
                    if let Some(result) = self.give_up(start.elapsed()) {
                        return result;
                    }
                }
                Delivered::Pending => {}
            }
        }
    }

    /// Times the call out on this rank: completes the cell with the timeout,
    /// stops the engine waiting for the input, and aborts the rendezvous for
    /// the others. `None` when the engine completed the call first: its
    /// pieces and outcome are there to take.
    fn give_up(&mut self, waited: Duration) -> Option<Result<Outcome, ServerError>> {
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
        if !self.cell.complete(Err(timeout)) {
            return None;
        }
        self.cell.cancel();
        self.cell.discard_pieces();
        self.transport.abort(
            self.id,
            ServerError::CollectiveAborted {
                call: what,
                reason: format!(
                    "rank {rank} timed out after {waited_ms} ms waiting for ranks {missing:?}"
                ),
            },
        );
        match self.cell.poll_next(None) {
            Delivered::Done(result) => Some(result),
            Delivered::Piece { .. } | Delivered::Pending => {
                Some(Err(ServerError::CollectiveState {
                    fault: CollectiveFault::Misuse("the call completed twice"),
                }))
            }
        }
    }
}

impl Drop for PendingResult {
    fn drop(&mut self) {
        // Nobody takes the pieces any more: the engine must not wait for it.
        self.cell.discard_pieces();
    }
}

impl Future for PendingResult {
    type Output = Result<Outcome, ServerError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut().poll_whole(Some(cx.waker())) {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
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
