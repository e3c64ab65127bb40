//! The engine's flow for a call whose data moves on the devices (see
//! `device.rs` at the crate root for the design).

use std::sync::Arc;

use bytes::Bytes;
use compute_runtime::{CollectiveFault, ServerError};

use super::{Lost, Run, after};
use crate::call::{CallId, Descriptor, Verdict, agree};
use crate::cell::InputWait;
use crate::device::DeviceData;
use crate::result::Outcome;
use crate::transport::Round;

/// Runs `run`'s call with its data on the devices, and tells `data` when
/// it is done, however it ends.
pub(super) fn execute(run: &Run<'_>, data: &dyn DeviceData) -> Result<Outcome, ServerError> {
    struct Done<'a>(&'a dyn DeviceData);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.done();
        }
    }
    let _done = Done(data);
    steps(run, data)
}

fn steps(run: &Run<'_>, data: &dyn DeviceData) -> Result<Outcome, ServerError> {
    let (t, job) = (run.t, run.job);
    let CallId::Group { seq } = job.id else {
        return Err(ServerError::CollectiveState {
            fault: CollectiveFault::NotAGroupCall {
                call: job.call.to_string(),
            },
        });
    };
    // Every rank of a device call says when it is ready (one without an
    // input too: its output waits for its earlier work).
    let input = if job.invalid.is_none() {
        status(run).map_err(|e| run.input_lost(e))?
    } else {
        Ok(())
    };
    let mine = Descriptor {
        rank: t.rank(),
        call: job.call,
        invalid: job.invalid.clone(),
        input,
        on_device: true,
    };
    // The opening a host call of the same shape takes (fused where the
    // transport fuses), so ranks that disagree meet and fail as a mismatch.
    let opening = match t.exchange_and_run(seq, mine.clone(), Bytes::new(), after(run.timeout)) {
        Some(met) => met.map(|(all, _)| agree(seq, t.size(), &all))?,
        None => run.open(&mine)?,
    };
    if let Some(end) = stop(opening) {
        return end;
    }
    let ready = Descriptor {
        input: Ok(()),
        ..mine
    };
    // This rank's own failure to combine: its output only (its peers read
    // its input, which it still fills).
    let mut failed = None;
    let pieces = data.pieces();
    for piece in 0..pieces {
        let filled = Descriptor {
            input: data.fill(piece).map_err(Arc::new),
            ..ready.clone()
        };
        if let Some(end) = stop(run.exchange(Round::Filled(piece), &filled)?) {
            return end;
        }
        if failed.is_none() {
            failed = data.combine(piece).err();
        }
        if piece + 1 < pieces
            && let Some(end) = stop(run.exchange(Round::Read(piece), &ready)?)
        {
            return end;
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(Outcome::ok(Bytes::new())),
    }
}

/// The call's end for a verdict that is not `Run`.
fn stop(verdict: Verdict) -> Option<Result<Outcome, ServerError>> {
    match verdict {
        Verdict::Run => None,
        Verdict::Poisoned(error) => Some(Ok(Outcome::poisoned(error))),
        Verdict::Fail(error) => Some(Err(error)),
    }
}

/// Whether this rank's input is ready and trusted: its contribution's
/// bytes are not the data (the data is on the device), only its status.
fn status(run: &Run<'_>) -> Result<Result<(), Arc<ServerError>>, Lost> {
    let started = std::time::Instant::now();
    match run.job.cell.wait_input(0, after(run.timeout)) {
        InputWait::Whole(part) | InputWait::Step(part) => Ok(part.map(|_| ())),
        InputWait::Closed => Ok(Err(Arc::new(ServerError::CollectiveState {
            fault: CollectiveFault::Misuse("the contribution was dropped without an input"),
        }))),
        InputWait::Cancelled => Err(Lost::Cancelled),
        InputWait::TimedOut => Err(Lost::TimedOut(started.elapsed())),
    }
}
