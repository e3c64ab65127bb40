//! The engine: one thread per rank that runs the rank's posted calls in
//! order. For each call it waits for the first step's input, exchanges
//! descriptors, draws the verdict (run, poisoned, or fail: the same on
//! every rank), then runs the call's steps ([`Plan`]): each step's input
//! through the transport, each step's output handed to the result end as
//! pieces. A call of several steps closes with a second exchange, in which
//! every rank says whether all of its input arrived: a step whose input
//! failed after the data started moving poisons the call on every rank
//! that depends on it, as a failed first step would have.
//!
//! **Buys:** the callers never do collective work: `post` only queues,
//! `provide` only stores, so a GPU callback or a single thread driving every
//! rank in turn cannot deadlock the communicator; a blocking transport (MPI)
//! gets the thread it needs. A large call holds a few steps of input and
//! output at a time, and its steps overlap the server's copies of the
//! others. Every wait is bounded by the communicator's timeout, so every
//! posted call completes. **Doesn't buy:** overlap of one rank's calls with
//! each other (a rank's calls run in post order, like work on a stream: a
//! `send` waits for its `recv` before the rank's next call).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::CollectiveFault;
use compute_runtime::ServerError;

mod device;

use crate::call::{
    CallId, CollectiveCall, Descriptor, Verdict, agree, agree_pair, describe, invalid_call,
};
use crate::cell::{Cell, InputWait, Offered, Part};
use crate::device::DeviceData;
use crate::plan::Plan;
use crate::result::Outcome;
use crate::transport::{Round, Transport};

/// Steps of output a call may have queued and not taken.
const QUEUED_STEPS: usize = 4;

/// One posted call, queued for the engine.
pub(crate) struct Job {
    pub(crate) id: CallId,
    pub(crate) call: CollectiveCall,
    /// Why the call cannot be valid (it still takes part in the exchange).
    pub(crate) invalid: Option<String>,
    pub(crate) cell: Arc<Cell>,
    /// When the call was posted.
    pub(crate) posted: Instant,
    /// Where its data moves when not through the transport.
    pub(crate) device: Option<Arc<dyn DeviceData>>,
}

/// Starts the engine thread of `transport`'s rank; it stops once the
/// returned sender is dropped and the queue is empty, and then leaves the
/// transport.
pub(crate) fn spawn(
    transport: Arc<dyn Transport>,
    timeout: Duration,
) -> Result<mpsc::Sender<Job>, ServerError> {
    let (jobs, queue) = mpsc::channel::<Job>();
    let name = format!("collective-rank-{}", transport.rank());
    thread::Builder::new()
        .name(name)
        .spawn(move || run(transport, queue, timeout))
        .map_err(|e| ServerError::CollectiveState {
            fault: CollectiveFault::ThreadStart {
                thread: "collective engine",
                error: e.to_string(),
            },
        })?;
    Ok(jobs)
}

fn run(transport: Arc<dyn Transport>, queue: mpsc::Receiver<Job>, timeout: Duration) {
    // When a call timed out here, a rank was missing then: the calls posted
    // before that moment come after the one it never reached, and would each
    // wait out the timeout again, one after the other. They are aborted at
    // once instead, naming the timeout, on every rank that reaches them (the
    // other ranks waiting in them see the abort at once); calls posted
    // later run as usual. Only this engine's own deadline counts: a call
    // aborted by another rank (or by a caller that stopped waiting) was cut
    // short at a moment this engine does not know.
    let mut broken: Option<(Instant, Arc<ServerError>)> = None;
    while let Ok(job) = queue.recv() {
        let result = match &broken {
            Some((at, first)) if job.posted < *at => {
                let error = ServerError::CollectiveAborted {
                    call: describe(job.call.name(), job.id),
                    reason: format!("a call posted before it timed out: {first}"),
                };
                transport.abort(job.id, error.clone());
                Err(error)
            }
            _ => catch_unwind(AssertUnwindSafe(|| execute(&*transport, &job, timeout)))
                .unwrap_or_else(|_| {
                    Err(ServerError::CollectiveState {
                        fault: CollectiveFault::Panicked {
                            part: "the collective engine",
                        },
                    })
                }),
        };
        if let Err(error) = &result {
            tracing::debug!(rank = transport.rank(), call = %job.call, %error, "collective failed");
            if matches!(error, ServerError::CollectiveTimeout { .. }) {
                broken = Some((Instant::now(), Arc::new(error.clone())));
            }
        }
        job.cell.complete(result);
    }
    transport.leave();
}

/// `now + timeout`, saturating far in the future.
fn after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(86_400 * 365)))
        .unwrap_or(now)
}

/// One call on this rank: what every step needs.
struct Run<'a> {
    t: &'a dyn Transport,
    job: &'a Job,
    plan: Plan,
    timeout: Duration,
}

fn execute(t: &dyn Transport, job: &Job, timeout: Duration) -> Result<Outcome, ServerError> {
    let plan = Plan::new(job.call, t.size(), t.chunk_bytes());
    job.cell
        .set_queue_limit(QUEUED_STEPS.saturating_mul(plan.output_len(0)));
    let run = Run {
        t,
        job,
        plan,
        timeout,
    };
    if let Some(data) = &job.device {
        return device::execute(&run, &**data);
    }
    let needs_input = job.invalid.is_none() && job.call.input_len(t.size()).is_some();
    let mut input = Input::new(&job.cell, plan, needs_input);
    let first = input
        .step(0, after(timeout))
        .map_err(|e| run.input_lost(e))?;
    let mine = Descriptor {
        rank: t.rank(),
        call: job.call,
        invalid: job.invalid.clone(),
        input: first.as_ref().map(|_| ()).map_err(Arc::clone),
        on_device: false,
    };
    // The opening: the exchange, and where the transport meets once for
    // both (in-process), the first step's data with it. Whether it does is
    // the transport's, so every rank opens the same way whatever it posted.
    let status = match run.open_fused(&mine, &first) {
        Some(verdict) => match verdict? {
            Verdict::Fail(error) => return Err(error),
            Verdict::Poisoned(error) => return Ok(Outcome::poisoned(error)),
            Verdict::Run => run.steps(1, None, &mut input)?,
        },
        None => match run.open(&mine)? {
            Verdict::Fail(error) => return Err(error),
            Verdict::Poisoned(error) => return Ok(Outcome::poisoned(error)),
            Verdict::Run => run.steps(0, Some(first), &mut input)?,
        },
    };
    if plan.steps() == 1 {
        return Ok(Outcome::ok(Bytes::new()));
    }
    let closing = Descriptor {
        input: status.map(|_| ()),
        ..mine
    };
    match run.close(&closing)? {
        Verdict::Fail(error) => Err(error),
        Verdict::Poisoned(error) => Ok(Outcome::poisoned(error)),
        Verdict::Run => Ok(Outcome::ok(Bytes::new())),
    }
}

/// How a wait for a step's input failed the call.
enum Lost {
    /// The result end gave up.
    Cancelled,
    /// The input did not arrive before the deadline, after `waited`.
    TimedOut(Duration),
}

impl Run<'_> {
    fn what(&self) -> String {
        describe(self.job.call.name(), self.job.id)
    }

    /// The call's end when this rank's input will not come.
    fn input_lost(&self, lost: Lost) -> ServerError {
        let rank = self.t.rank();
        match lost {
            Lost::Cancelled => ServerError::CollectiveState {
                fault: CollectiveFault::GaveUp { rank },
            },
            // An input that never comes is a rank that never arrives: the
            // call fails (timed out here, aborted for the others).
            Lost::TimedOut(waited) => {
                let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
                self.t.abort(
                    self.job.id,
                    ServerError::CollectiveAborted {
                        call: self.what(),
                        reason: format!(
                            "the input of rank {rank} did not arrive within {waited_ms} ms"
                        ),
                    },
                );
                ServerError::CollectiveTimeout {
                    rank,
                    call: self.what(),
                    waited_ms,
                    missing: vec![rank],
                }
            }
        }
    }

    /// The opening of a group call where the transport meets once for the
    /// exchange and the first step's data: its verdict, the first step's
    /// output handed out when it is `Run` (`None`: not offered, or a
    /// message).
    fn open_fused(&self, mine: &Descriptor, first: &Part) -> Option<Result<Verdict, ServerError>> {
        let CallId::Group { seq } = self.job.id else {
            return None;
        };
        let input = first.as_ref().map_or_else(|_| Bytes::new(), Bytes::clone);
        let met = self
            .t
            .exchange_and_run(seq, mine.clone(), input, after(self.timeout))?;
        Some(met.and_then(|(all, out)| {
            let verdict = agree(seq, self.t.size(), &all);
            if verdict == Verdict::Run {
                self.deliver(0, out)?;
            }
            Ok(verdict)
        }))
    }

    /// The verdict of the opening exchange.
    fn open(&self, mine: &Descriptor) -> Result<Verdict, ServerError> {
        self.exchange(Round::Open, mine)
    }

    /// The verdict of the closing exchange: whether every step's input of
    /// every rank arrived.
    fn close(&self, mine: &Descriptor) -> Result<Verdict, ServerError> {
        self.exchange(Round::Close, mine)
    }

    fn exchange(&self, round: Round, mine: &Descriptor) -> Result<Verdict, ServerError> {
        let (t, deadline) = (self.t, after(self.timeout));
        match self.job.id {
            CallId::Group { seq } => {
                let all = t.exchange(seq, round, mine.clone(), deadline)?;
                Ok(agree(seq, t.size(), &all))
            }
            CallId::P2p(link) => {
                if let Some(reason) = &self.job.invalid {
                    // Never queued by the communicator; refuse rather than block.
                    return Err(invalid_call(self.job.id, t.rank(), &self.job.call, reason));
                }
                let theirs = t.exchange_pair(link, round, mine.clone(), deadline)?;
                Ok(if link.from == t.rank() {
                    agree_pair(link, mine, &theirs)
                } else {
                    agree_pair(link, &theirs, mine)
                })
            }
        }
    }

    /// Runs the steps from `from` on (`first`: the input of step `from`,
    /// when it was taken already), handing each step's output to the result
    /// end; returns whether every step's input arrived. A step whose input
    /// failed still takes part (with zeros), so no rank waits for this one.
    fn steps(
        &self,
        from: usize,
        first: Option<Part>,
        input: &mut Input<'_>,
    ) -> Result<Part, ServerError> {
        let mut status: Part = Ok(Bytes::new());
        let mut next = first;
        for step in from..self.plan.steps() {
            let part = match next.take() {
                Some(part) => part,
                None => input
                    .step(step, after(self.timeout))
                    .map_err(|e| self.input_lost(e))?,
            };
            let data = match part {
                Ok(bytes) => bytes,
                Err(cause) => {
                    if status.is_ok() {
                        status = Err(cause);
                    }
                    Bytes::from(vec![0; self.plan.input_len(step)])
                }
            };
            let out = self.data(step, data)?;
            self.deliver(step, out)?;
        }
        Ok(status)
    }

    /// Hands step `step`'s output to the result end, piece by piece.
    fn deliver(&self, step: usize, out: Bytes) -> Result<(), ServerError> {
        let expected = self.plan.output_len(step);
        if out.len() != expected {
            return Err(ServerError::SizeMismatch {
                expected: expected as u64,
                actual: out.len() as u64,
            });
        }
        for piece in self.plan.output_pieces(step) {
            let bytes = out.slice(piece.from..piece.from + piece.len);
            self.offer(piece.to, bytes)?;
        }
        Ok(())
    }

    /// Hands a piece of the output to the result end.
    fn offer(&self, offset: usize, bytes: Bytes) -> Result<(), ServerError> {
        let rank = self.t.rank();
        match self.job.cell.offer(offset, bytes, after(self.timeout)) {
            Offered::Taken => Ok(()),
            Offered::Cancelled => Err(ServerError::CollectiveState {
                fault: CollectiveFault::GaveUp { rank },
            }),
            Offered::TimedOut => {
                let error = ServerError::CollectiveState {
                    fault: CollectiveFault::ResultNotTaken { rank },
                };
                self.t.abort(
                    self.job.id,
                    ServerError::CollectiveAborted {
                        call: self.what(),
                        reason: error.to_string(),
                    },
                );
                Err(error)
            }
        }
    }

    /// Step `step`'s data movement, after every rank agreed to run it.
    fn data(&self, step: usize, data: Bytes) -> Result<Bytes, ServerError> {
        let (t, deadline) = (self.t, after(self.timeout));
        let call = self.job.call;
        let seq = match self.job.id {
            CallId::Group { seq } => seq,
            CallId::P2p(link) => {
                return match call {
                    CollectiveCall::Send { .. } => {
                        t.send(link, step, data, deadline).map(|()| Bytes::new())
                    }
                    _ => t.recv(link, step, self.plan.output_len(step), deadline),
                };
            }
        };
        match call {
            CollectiveCall::AllReduce { reduction, .. } => {
                t.all_reduce(seq, step, reduction, data, deadline)
            }
            CollectiveCall::AllGather { .. } => t.all_gather(seq, step, data, deadline),
            CollectiveCall::ReduceScatter { reduction, .. } => {
                t.reduce_scatter(seq, step, reduction, data, deadline)
            }
            CollectiveCall::Broadcast { root, .. } => {
                let len = self.plan.range(step).len();
                t.broadcast(seq, step, root, data, len, deadline)
            }
            CollectiveCall::AllToAll { .. } => t.all_to_all(seq, step, data, deadline),
            // Never agreed to run (see `agree`).
            CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } | CollectiveCall::Refused => {
                Err(ServerError::CollectiveState {
                    fault: CollectiveFault::NotAGroupCall {
                        call: call.to_string(),
                    },
                })
            }
        }
    }
}

/// This rank's input, step by step: from the parts a feed gave, or cut
/// from the whole input.
struct Input<'a> {
    cell: &'a Cell,
    plan: Plan,
    needed: bool,
    whole: Option<Bytes>,
    /// The input failed: every later step is this failure.
    failed: Option<Arc<ServerError>>,
}

impl<'a> Input<'a> {
    fn new(cell: &'a Cell, plan: Plan, needed: bool) -> Self {
        Input {
            cell,
            plan,
            needed,
            whole: None,
            failed: None,
        }
    }

    fn step(&mut self, step: usize, deadline: Instant) -> Result<Part, Lost> {
        if !self.needed {
            return Ok(Ok(Bytes::new()));
        }
        if let Some(cause) = &self.failed {
            return Ok(Err(Arc::clone(cause)));
        }
        if let Some(whole) = &self.whole {
            return Ok(Ok(cut(whole, &self.plan, step)));
        }
        let started = Instant::now();
        match self.cell.wait_input(step, deadline) {
            InputWait::Whole(Ok(whole)) => {
                let part = cut(&whole, &self.plan, step);
                self.whole = Some(whole);
                Ok(Ok(part))
            }
            InputWait::Whole(Err(cause)) => {
                self.failed = Some(Arc::clone(&cause));
                Ok(Err(cause))
            }
            InputWait::Step(part) => Ok(part),
            InputWait::Closed => {
                let cause = Arc::new(ServerError::CollectiveState {
                    fault: CollectiveFault::Misuse("the contribution was dropped without an input"),
                });
                self.failed = Some(Arc::clone(&cause));
                Ok(Err(cause))
            }
            InputWait::Cancelled => Err(Lost::Cancelled),
            InputWait::TimedOut => Err(Lost::TimedOut(started.elapsed())),
        }
    }
}

/// Step `step`'s input from the whole input: its pieces, concatenated.
fn cut(whole: &Bytes, plan: &Plan, step: usize) -> Bytes {
    let pieces = plan.input_pieces(step);
    match pieces.as_slice() {
        [one] => whole.slice(one.clone()),
        many => {
            let mut out = Vec::with_capacity(plan.input_len(step));
            for r in many {
                out.extend_from_slice(&whole[r.clone()]);
            }
            Bytes::from(out)
        }
    }
}
