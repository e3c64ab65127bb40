//! The oracle's collectives, over every rank at once.
//!
//! A call is refused on its rank alone (it returns the error there, and its
//! `dst` is untouched) when it cannot be valid (a broadcast source on the
//! wrong rank), inside a capture window, or when its buffers do not fit
//! it. Then, from what every rank posted: ranks that disagree (or a call
//! that cannot be valid) fail on every accepted rank (`Mismatch`); else a
//! bad input (a refused call, an untrusted or at-risk `src`; for a
//! broadcast, the root's only) poisons every accepted rank's result naming
//! the lowest such rank; else the result lands. A `Wait` call trusts a
//! `dst` it covers whole at once (like a host write), and puts it at risk
//! behind its verdict when it will fail; an `Overlap` call's `dst` is
//! pending until `sync_collective`.

use std::rc::Rc;

use super::cause::Cause;
use super::ops::{Coll, CollKind, Part, RankCall};
use super::oracle::{Oracle, Overlap, Trust};
use super::{RANKS, len};

/// What must happen on a rank before a collective, so that its outcome
/// does not depend on when a verdict arrives.
#[derive(Clone, Copy, Debug)]
pub enum Settle {
    Read(usize),
    SyncCollective(u64),
}

/// How a collective went, for the long run's counters.
#[derive(Clone, Copy, Debug)]
pub enum Went {
    Ran,
    Poisoned,
    Failed,
}

/// What every rank posts, as the ranks compare it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    AllReduce { i32: bool, bytes: usize },
    AllGather { bytes: usize },
    Broadcast { root: usize, bytes: usize },
}

fn bytes(p: Part) -> usize {
    4 * len(p.buf) / if p.half { 2 } else { 1 }
}

fn shape(kind: &CollKind, call: &RankCall) -> Shape {
    match *kind {
        CollKind::AllReduce { .. } => Shape::AllReduce {
            i32: call.i32,
            bytes: call.src.map_or(0, bytes),
        },
        CollKind::AllGather { .. } => Shape::AllGather {
            bytes: call.src.map_or(0, bytes),
        },
        CollKind::Broadcast { root, .. } => Shape::Broadcast {
            root,
            bytes: bytes(call.dst),
        },
    }
}

/// A call that cannot be valid: a broadcast source exactly off the root.
fn invalid(kind: &CollKind, r: usize, call: &RankCall) -> bool {
    match *kind {
        CollKind::Broadcast { root, .. } => call.src.is_some() != (r == root),
        CollKind::AllReduce { .. } | CollKind::AllGather { .. } => false,
    }
}

/// Why rank `r`'s call is refused there, if it is (in the order the call
/// is checked).
fn refusal(kind: &CollKind, r: usize, call: &RankCall) -> Option<Rc<Cause>> {
    if invalid(kind, r, call) {
        return Some(Rc::new(Cause::Mismatch));
    }
    if call.capture {
        return Some(Rc::new(Cause::Capture));
    }
    let src = call.src.map_or(0, bytes);
    let fits = match *kind {
        CollKind::AllReduce { .. } => bytes(call.dst) == src,
        CollKind::AllGather { .. } => bytes(call.dst) == RANKS * src,
        CollKind::Broadcast { .. } => call.src.is_none() || src == bytes(call.dst),
    };
    (!fits).then(|| Rc::new(Cause::SizeMismatch))
}

impl Oracle {
    pub fn settle_before_collective(&self, op: &Coll) -> Vec<(usize, Settle)> {
        let mut settle = Vec::new();
        for r in 0..RANKS {
            let call = op.call(r);
            if refusal(&op.kind, r, &call).is_some() {
                continue;
            }
            let dst = call.dst.buf;
            let overlap = op.kind.overlap();
            for (s, overlaps) in &self.ranks[r].overlaps {
                if overlaps.iter().any(|o| o.dst == dst) {
                    settle.push((r, Settle::SyncCollective(*s)));
                }
            }
            // A verdict and a failure known at `sync_collective` (or a
            // partial `dst`'s) would race for the first cause.
            if (overlap || call.dst.half) && self.is_at_risk(r, dst).is_some() {
                settle.push((r, Settle::Read(dst)));
            }
        }
        settle
    }

    /// Applies `op`, issued on every rank; what each rank's call returns.
    pub fn collective(&mut self, op: &Coll) -> (Vec<Option<Rc<Cause>>>, Went) {
        let calls: Vec<RankCall> = (0..RANKS).map(|r| op.call(r)).collect();
        let refusals: Vec<_> = (0..RANKS)
            .map(|r| refusal(&op.kind, r, &calls[r]))
            .collect();
        let (outcome, went) = self.outcome(op, &calls, &refusals);
        for r in 0..RANKS {
            if refusals[r].is_none() {
                self.accept(r, op, &calls[r], &outcome);
            }
        }
        (refusals, went)
    }

    fn outcome(
        &self,
        op: &Coll,
        calls: &[RankCall],
        refusals: &[Option<Rc<Cause>>],
    ) -> (Result<Vec<u32>, Rc<Cause>>, Went) {
        let shapes: Vec<Shape> = calls.iter().map(|c| shape(&op.kind, c)).collect();
        let any_invalid = (0..RANKS).any(|r| invalid(&op.kind, r, &calls[r]));
        if any_invalid || shapes.iter().any(|s| *s != shapes[0]) {
            return (Err(Rc::new(Cause::Mismatch)), Went::Failed);
        }
        let inputs: Vec<usize> = match op.kind {
            CollKind::Broadcast { root, .. } => vec![root],
            CollKind::AllReduce { .. } | CollKind::AllGather { .. } => (0..RANKS).collect(),
        };
        for r in inputs {
            let bad = match &refusals[r] {
                Some(refused) => Some(Rc::clone(refused)),
                None => calls[r].src.and_then(|src| self.input_cause(r, src.buf)),
            };
            if let Some(cause) = bad {
                let cause = Rc::new(Cause::CollectiveInput { rank: r, cause });
                return (Err(cause), Went::Poisoned);
            }
        }
        (Ok(self.result(op, calls)), Went::Ran)
    }

    /// Why rank `r`'s input is bad, if it is. One at risk is bad, with the
    /// same cause whenever its verdict arrives.
    fn input_cause(&self, r: usize, src: usize) -> Option<Rc<Cause>> {
        match self.visible(r, src) {
            Trust::Trusted => None,
            Trust::Poisoned(c) | Trust::AtRisk(_, c) => Some(c),
        }
    }

    fn result(&self, op: &Coll, calls: &[RankCall]) -> Vec<u32> {
        let src = |r: usize| {
            let part = calls[r].src.expect("a contributing rank has a source");
            &self.ranks[r].values[part.buf]
        };
        match op.kind {
            CollKind::AllReduce { .. } => {
                let mut sum = vec![0u32; src(0).len()];
                for r in 0..RANKS {
                    for (s, v) in sum.iter_mut().zip(src(r)) {
                        *s = s.wrapping_add(*v);
                    }
                }
                sum
            }
            CollKind::Broadcast { root, .. } => src(root).clone(),
            CollKind::AllGather { .. } => (0..RANKS).flat_map(|r| src(r).clone()).collect(),
        }
    }

    /// Rank `r`'s accepted call: ordered after its stream's earlier work,
    /// judged in call order.
    fn accept(
        &mut self,
        r: usize,
        op: &Coll,
        call: &RankCall,
        outcome: &Result<Vec<u32>, Rc<Cause>>,
    ) {
        let stream = op.streams[r];
        let rank = &mut self.ranks[r];
        let seq = rank.next_seq;
        rank.next_seq += 1;
        rank.last_any.insert(stream, seq + 1);
        let dst = call.dst.buf;
        if op.kind.overlap() {
            rank.pending[dst] += 1;
            let outcome = outcome.clone();
            rank.overlaps
                .entry(stream)
                .or_default()
                .push(Overlap { dst, outcome });
            return;
        }
        rank.last_wait.insert(stream, seq + 1);
        if !rank.held.contains(&stream) {
            rank.held.push(stream);
        }
        if !call.dst.half {
            rank.trust[dst] = Trust::Trusted;
        }
        match outcome {
            Ok(values) => rank.values[dst] = values.clone(),
            Err(cause) => {
                let v = self.new_verdict(r, stream, Some(seq));
                let t = &mut self.ranks[r].trust[dst];
                match t {
                    Trust::Trusted => *t = Trust::AtRisk(v, Rc::clone(cause)),
                    Trust::Poisoned(_) => {}
                    Trust::AtRisk(..) => panic!("model: a partial dst at risk was not settled"),
                }
                self.fail(r, stream, Rc::clone(cause), Some(v));
            }
        }
    }
}
