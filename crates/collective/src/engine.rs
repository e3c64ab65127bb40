//! The engine: one thread per rank that runs the rank's posted calls in
//! order. For each call it waits for the input, exchanges descriptors, draws
//! the verdict (run, poisoned, or fail: the same on every rank), moves the
//! data through the transport when the verdict says so, and completes the
//! call's result.
//!
//! **Buys:** the callers never do collective work: `post` only queues,
//! `provide` only stores, so a GPU callback or a single thread driving every
//! rank in turn cannot deadlock the communicator; a blocking transport (MPI)
//! gets the thread it needs. Every wait is bounded by the communicator's
//! timeout, so every posted call completes. **Doesn't buy:** overlap of one
//! rank's calls with each other (a rank's calls run in post order, like work
//! on a stream: a `send` waits for its `recv` before the rank's next call).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::CollectiveFault;
use compute_runtime::ServerError;

use crate::call::{
    CallId, CollectiveCall, Descriptor, Verdict, agree, agree_pair, describe, invalid_call,
};
use crate::result::{Cell, InputWait, Outcome};
use crate::transport::Transport;

/// One posted call, queued for the engine.
pub(crate) struct Job {
    pub(crate) id: CallId,
    pub(crate) call: CollectiveCall,
    /// Why the call cannot be valid (it still takes part in the exchange).
    pub(crate) invalid: Option<String>,
    pub(crate) cell: Arc<Cell>,
    /// When the call was posted.
    pub(crate) posted: Instant,
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

fn execute(t: &dyn Transport, job: &Job, timeout: Duration) -> Result<Outcome, ServerError> {
    let (rank, ranks) = (t.rank(), t.size());
    let needs_input = job.invalid.is_none() && job.call.input_len(ranks).is_some();
    let input = if needs_input {
        let started = Instant::now();
        match job.cell.wait_input(after(timeout)) {
            InputWait::Ready(input) => input,
            // The result end timed out and aborted the call already.
            InputWait::Cancelled => {
                return Err(ServerError::CollectiveState {
                    fault: CollectiveFault::GaveUp { rank },
                });
            }
            // An input that never comes is a rank that never arrives: the
            // call fails (timed out here, aborted for the others).
            InputWait::TimedOut => {
                let call = describe(job.call.name(), job.id);
                let waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                t.abort(
                    job.id,
                    ServerError::CollectiveAborted {
                        call: call.clone(),
                        reason: format!(
                            "the input of rank {rank} did not arrive within {waited_ms} ms"
                        ),
                    },
                );
                return Err(ServerError::CollectiveTimeout {
                    rank,
                    call,
                    waited_ms,
                    missing: vec![rank],
                });
            }
        }
    } else {
        Ok(Bytes::new())
    };
    let mine = Descriptor {
        rank,
        call: job.call,
        invalid: job.invalid.clone(),
        input: input.as_ref().map(|_| ()).map_err(Arc::clone),
    };
    let data = input.unwrap_or_default();
    let bytes = match job.id {
        CallId::Group { seq } => {
            let all = t.exchange(seq, mine, after(timeout))?;
            match agree(seq, ranks, &all) {
                Verdict::Fail(error) => return Err(error),
                Verdict::Poisoned(error) => return Ok(Outcome::poisoned(error)),
                Verdict::Run => group_data(t, seq, job.call, data, after(timeout))?,
            }
        }
        CallId::P2p(link) => {
            if let Some(reason) = &job.invalid {
                // Never queued by the communicator; refuse rather than block.
                return Err(invalid_call(job.id, rank, &job.call, reason));
            }
            let theirs = t.exchange_pair(link, mine.clone(), after(timeout))?;
            let sending = link.from == rank;
            let verdict = if sending {
                agree_pair(link, &mine, &theirs)
            } else {
                agree_pair(link, &theirs, &mine)
            };
            match verdict {
                Verdict::Fail(error) => return Err(error),
                Verdict::Poisoned(error) => return Ok(Outcome::poisoned(error)),
                Verdict::Run if sending => {
                    t.send(link, data, after(timeout))?;
                    Bytes::new()
                }
                Verdict::Run => t.recv(link, job.call.output_len(ranks), after(timeout))?,
            }
        }
    };
    let expected = job.call.output_len(ranks);
    if bytes.len() != expected {
        return Err(ServerError::SizeMismatch {
            expected: expected as u64,
            actual: bytes.len() as u64,
        });
    }
    Ok(Outcome::ok(bytes))
}

/// The data movement of group call `seq`, after every rank agreed to run it.
fn group_data(
    t: &dyn Transport,
    seq: u64,
    call: CollectiveCall,
    data: Bytes,
    deadline: Instant,
) -> Result<Bytes, ServerError> {
    match call {
        CollectiveCall::AllReduce { reduction, .. } => t.all_reduce(seq, reduction, data, deadline),
        CollectiveCall::AllGather { .. } => t.all_gather(seq, data, deadline),
        CollectiveCall::ReduceScatter { reduction, .. } => {
            t.reduce_scatter(seq, reduction, data, deadline)
        }
        CollectiveCall::Broadcast { root, len, .. } => t.broadcast(seq, root, data, len, deadline),
        CollectiveCall::AllToAll { .. } => t.all_to_all(seq, data, deadline),
        CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } => {
            Err(ServerError::CollectiveState {
                fault: CollectiveFault::NotAGroupCall {
                    call: call.to_string(),
                },
            })
        }
    }
}
