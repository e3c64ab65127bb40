//! The oracle's local operations: host writes, and launches with what they
//! read and write. Poison follows data: a launch reading a buffer the
//! server knows is untrusted is refused (its writes poisoned naming that
//! input); one reading a buffer at risk runs, and its writes are at risk
//! behind the same verdict, with the cause they would have had if refused.

use std::rc::Rc;

use super::cause::Cause;
use super::ops::Local;
use super::oracle::{Oracle, Trust, Vid};
use super::{N, VALUES};

/// What a launch reads and writes (binding order), and does when it runs.
#[derive(Debug)]
struct Shape {
    inputs: Vec<usize>,
    writes: Vec<usize>,
    effect: Effect,
    /// Its indirect count is over the limit: skipped, judged late.
    late: bool,
    /// It fails whatever its inputs, with this.
    fails: Option<Cause>,
}

#[derive(Debug)]
enum Effect {
    /// `dst[i] += 1` for `i < upto`.
    Inc {
        dst: usize,
        upto: usize,
    },
    /// `dst[i] = src[i] * 2 + 1` over `dst`.
    Copy {
        src: usize,
        dst: usize,
    },
    Nothing,
}

/// What an operation did, for the long run's counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Applied {
    Wrote,
    Ran,
    Failed,
    Refused,
    Late,
    /// It read bytes at risk: its writes are at risk too.
    Propagated,
}

impl Oracle {
    fn shape(&self, rank: usize, op: &Local) -> Option<Shape> {
        let failing = |writes: Vec<usize>, cause| Shape {
            inputs: Vec::new(),
            writes,
            effect: Effect::Nothing,
            late: false,
            fails: Some(cause),
        };
        let runs = |inputs, dst, effect, late| Shape {
            inputs,
            writes: vec![dst],
            effect,
            late,
            fails: None,
        };
        Some(match *op {
            Local::Write { .. } | Local::WriteHalf { .. } | Local::WriteCount { .. } => {
                return None;
            }
            Local::Read { .. } | Local::Check { .. } | Local::Sync { .. } => return None,
            Local::SyncCollective => return None,
            // Refused at the call: the target is untouched, the refusal reported.
            Local::BadWrite { .. } => failing(Vec::new(), Cause::SizeMismatch),
            Local::BadArity { a, b } => failing(vec![a, b], Cause::InvalidArgument),
            Local::TooSmall { dst } => failing(vec![dst], Cause::BindingTooSmall),
            Local::Mismatch { src, dst } => failing(vec![src, dst], Cause::LayoutMismatch),
            Local::Inc { dst } => runs(vec![dst], dst, Effect::Inc { dst, upto: N }, false),
            Local::Copy { src, dst } => runs(vec![src, dst], dst, Effect::Copy { src, dst }, false),
            Local::IndirectInc { c, dst } => {
                let words = self.ranks[rank].counts[c].words(self.max);
                let late = words.iter().any(|w| *w > self.max);
                let effect = match late || words.contains(&0) {
                    true => Effect::Nothing,
                    false => Effect::Inc {
                        dst,
                        upto: N * words[0] as usize,
                    },
                };
                runs(vec![dst, VALUES + c], dst, effect, late)
            }
        })
    }

    /// Buffers to read before `op`, so that its outcome does not depend on
    /// when a verdict arrives: what a failure would poison now, the inputs
    /// of a refusal (which one it names), and inputs at risk from more than
    /// one verdict (which one arrives first).
    pub fn settle_before(&self, rank: usize, op: &Local) -> Vec<usize> {
        let Some(shape) = self.shape(rank, op) else {
            return Vec::new();
        };
        let risky = |bs: &[usize]| -> Vec<usize> {
            let at_risk = bs.iter().filter(|b| self.is_at_risk(rank, **b).is_some());
            at_risk.copied().collect()
        };
        if shape.fails.is_some() {
            return risky(&shape.writes);
        }
        let refused = shape
            .inputs
            .iter()
            .any(|b| self.poisoned(rank, *b).is_some());
        let mut verdicts: Vec<Vid> = shape
            .inputs
            .iter()
            .filter_map(|b| self.is_at_risk(rank, *b))
            .collect();
        verdicts.dedup();
        match refused || verdicts.len() > 1 {
            true => risky(&[shape.inputs, shape.writes].concat()),
            false => Vec::new(),
        }
    }

    fn poisoned(&self, rank: usize, b: usize) -> Option<Rc<Cause>> {
        match self.visible(rank, b) {
            Trust::Poisoned(c) => Some(c),
            Trust::Trusted | Trust::AtRisk(..) => None,
        }
    }

    /// Applies a host write or a launch issued on `stream` of `rank` (after
    /// `settle_before`'s reads).
    pub fn apply(&mut self, rank: usize, stream: u64, op: &Local) -> Applied {
        match *op {
            Local::Write { dst, value } => self.write(rank, dst, value),
            Local::WriteHalf { dst, value } => self.write_half(rank, dst, value),
            Local::WriteCount { c, count } => self.write_count(rank, c, count),
            Local::Read { .. } | Local::Check { .. } | Local::Sync { .. } => {
                panic!("model: {op:?} is a question, not an operation")
            }
            Local::SyncCollective => panic!("model: {op:?} is a question, not an operation"),
            Local::BadWrite { .. }
            | Local::BadArity { .. }
            | Local::TooSmall { .. }
            | Local::Mismatch { .. }
            | Local::Inc { .. }
            | Local::Copy { .. }
            | Local::IndirectInc { .. } => {
                let shape = self.shape(rank, op).expect("a launch has a shape");
                return self.launch(rank, stream, shape);
            }
        }
        Applied::Wrote
    }

    fn launch(&mut self, rank: usize, stream: u64, shape: Shape) -> Applied {
        if let Some(cause) = shape.fails {
            return self.refuse(rank, stream, &shape.writes, Rc::new(cause), Applied::Failed);
        }
        let refusal = shape
            .inputs
            .iter()
            .find_map(|b| self.poisoned(rank, *b).map(|c| Cause::input(rank, *b, &c)));
        if let Some(cause) = refusal {
            return self.refuse(rank, stream, &shape.writes, cause, Applied::Refused);
        }
        let risk = shape
            .inputs
            .iter()
            .find_map(|b| match &self.ranks[rank].trust[*b] {
                Trust::AtRisk(v, c) => Some((*v, Cause::input(rank, *b, c))),
                Trust::Trusted | Trust::Poisoned(_) => None,
            });
        self.run(rank, &shape.effect);
        match (risk, shape.late) {
            (None, false) => Applied::Ran,
            (None, true) => {
                let v = self.new_verdict(rank, stream, None);
                self.put_at_risk(rank, &shape.writes, v, &Rc::new(Cause::Late));
                self.fail(rank, stream, Rc::new(Cause::Late), Some(v));
                Applied::Late
            }
            (Some((v, cause)), late) => {
                self.put_at_risk(rank, &shape.writes, v, &cause);
                self.wait_for(v, stream);
                self.fail(rank, stream, cause, Some(v));
                if late {
                    // Refused if the verdict it depends on arrived before
                    // it was enqueued; else it ran, over the limit, and is
                    // judged too.
                    let own = self.new_verdict(rank, stream, None);
                    self.fail_maybe(rank, stream, Rc::new(Cause::Late), Some(own), true);
                }
                Applied::Propagated
            }
        }
    }

    fn refuse(
        &mut self,
        rank: usize,
        stream: u64,
        writes: &[usize],
        cause: Rc<Cause>,
        what: Applied,
    ) -> Applied {
        for w in writes {
            self.poison(rank, *w, &cause);
        }
        self.fail(rank, stream, cause, None);
        what
    }

    /// Writes of work behind verdict `v`; the first cause wins.
    fn put_at_risk(&mut self, rank: usize, writes: &[usize], v: Vid, cause: &Rc<Cause>) {
        for w in writes {
            let t = &mut self.ranks[rank].trust[*w];
            match t {
                Trust::Trusted => *t = Trust::AtRisk(v, Rc::clone(cause)),
                Trust::AtRisk(u, _) if *u == v => {}
                Trust::AtRisk(..) | Trust::Poisoned(_) => {
                    panic!("model: rank {rank} buffer {w} put at risk from {t:?}")
                }
            }
        }
    }

    fn run(&mut self, rank: usize, effect: &Effect) {
        let values = &mut self.ranks[rank].values;
        match *effect {
            Effect::Inc { dst, upto } => {
                for v in values[dst].iter_mut().take(upto) {
                    *v = v.wrapping_add(1);
                }
            }
            Effect::Copy { src, dst } => {
                for i in 0..values[dst].len() {
                    values[dst][i] = values[src][i].wrapping_mul(2).wrapping_add(1);
                }
            }
            Effect::Nothing => {}
        }
    }
}
