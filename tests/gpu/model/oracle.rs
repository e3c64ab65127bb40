//! The oracle: an independent CPU model of every rank's buffers (values and
//! trust), of the verdicts still to come, and of the failures each stream
//! has yet to be told. It knows the operations and the documented
//! semantics, nothing of the server's code.
//!
//! A verdict still to come (an indirect count over the limit, a collective
//! that will fail) puts buffers *at risk*: the model knows the cause they
//! will carry, not when the server will know it. A `check` may answer
//! either way until the model knows the verdict has arrived: a read of a
//! buffer at risk (it waits for the work that wrote it), or a `sync` of a
//! stream that waits for the work it judges. Where the outcome of an
//! operation would depend on when a verdict arrives, the run settles first
//! (`settle_before`): a buffer at risk is at risk from one verdict only.

use std::collections::HashMap;
use std::rc::Rc;

use super::cause::Cause;
use super::ops::Count;
use super::{COUNTS, FAR, FAR_BYTES, INITIAL_COUNTS, RANKS, VALUES, initial};

/// A verdict's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vid(usize);

#[derive(Debug)]
struct Verdict {
    rank: usize,
    stream: u64,
    /// A collective's, and its place among the rank's collective calls: a
    /// rank judges its collectives in call order.
    seq: Option<u64>,
    arrived: bool,
    /// Streams with work that read its bytes: their syncs wait for it.
    waiters: Vec<u64>,
}

/// What the model says of one buffer's bytes.
#[derive(Clone, Debug)]
pub enum Trust {
    Trusted,
    Poisoned(Rc<Cause>),
    /// Poisoned with this cause once verdict `Vid` arrives.
    AtRisk(Vid, Rc<Cause>),
}

/// A failure its stream has not been told of.
#[derive(Debug)]
pub struct Failure {
    pub cause: Rc<Cause>,
    /// Known to the server when this verdict arrives (else at once).
    pub arrives: Option<Vid>,
    /// It may not exist, or may have been reported already.
    pub maybe: bool,
}

/// An `Overlap` collective waiting for `sync_collective`.
#[derive(Debug)]
pub struct Overlap {
    pub dst: usize,
    pub outcome: Result<Vec<u32>, Rc<Cause>>,
}

/// One rank's buffers and streams.
#[derive(Debug)]
pub struct RankState {
    pub values: Vec<Vec<u32>>,
    pub counts: Vec<Count>,
    /// Every buffer, under any `Overlap` pending on it.
    pub trust: Vec<Trust>,
    /// `Overlap` collectives into each buffer not synced yet.
    pub pending: Vec<u32>,
    pub overlaps: HashMap<u64, Vec<Overlap>>,
    pub unreported: HashMap<u64, Vec<Failure>>,
    /// Collective calls accepted so far.
    pub next_seq: u64,
    /// Per stream, one past the seq of its last `Wait` collective / any.
    pub last_wait: HashMap<u64, u64>,
    pub last_any: HashMap<u64, u64>,
    /// Streams whose batch is held behind a `Wait` collective (until a
    /// `sync` or `sync_collective` of the stream).
    pub held: Vec<u64>,
}

/// What a `check` (or a `sync` naming the buffer) may answer.
#[derive(Debug)]
pub enum Expect {
    Trusted,
    Untrusted(Rc<Cause>),
    /// A verdict may not have arrived: trusted, or this.
    TrustedOr(Rc<Cause>),
}

/// What a read must answer.
#[derive(Debug)]
pub enum ReadExpect {
    Bytes(Vec<u32>),
    Untrusted(Rc<Cause>),
}

/// What a `sync` or `sync_collective` may report.
#[derive(Debug)]
pub struct Reports {
    pub causes: Vec<Rc<Cause>>,
    pub at_least: usize,
    pub at_most: usize,
    /// The first reported must be `causes[0]` (every failure was known at
    /// once, in this order).
    pub ordered: bool,
}

#[derive(Debug)]
pub struct Oracle {
    pub max: u32,
    pub ranks: Vec<RankState>,
    verdicts: Vec<Verdict>,
}

impl Oracle {
    pub fn new(max: u32) -> Self {
        let rank = |r| RankState {
            values: (0..VALUES).map(|b| initial(r, b)).collect(),
            counts: INITIAL_COUNTS.to_vec(),
            trust: vec![Trust::Trusted; VALUES + COUNTS],
            pending: vec![0; VALUES + COUNTS],
            overlaps: HashMap::new(),
            unreported: HashMap::new(),
            next_seq: 0,
            last_wait: HashMap::new(),
            last_any: HashMap::new(),
            held: Vec::new(),
        };
        Oracle {
            max,
            ranks: (0..RANKS).map(rank).collect(),
            verdicts: Vec::new(),
        }
    }

    pub fn new_verdict(&mut self, rank: usize, stream: u64, seq: Option<u64>) -> Vid {
        self.verdicts.push(Verdict {
            rank,
            stream,
            seq,
            arrived: false,
            waiters: Vec::new(),
        });
        Vid(self.verdicts.len() - 1)
    }

    pub fn wait_for(&mut self, v: Vid, stream: u64) {
        self.verdicts[v.0].waiters.push(stream);
    }

    /// Verdict `v` is known to the server: what it puts at risk is
    /// poisoned; a collective's means every earlier one of its rank's.
    pub fn arrive(&mut self, v: Vid) {
        let mut todo = vec![v];
        while let Some(v) = todo.pop() {
            let verdict = &mut self.verdicts[v.0];
            if verdict.arrived {
                continue;
            }
            verdict.arrived = true;
            let (rank, seq) = (verdict.rank, verdict.seq);
            for t in &mut self.ranks[rank].trust {
                if let Trust::AtRisk(u, c) = t
                    && *u == v
                {
                    *t = Trust::Poisoned(Rc::clone(c));
                }
            }
            if let Some(seq) = seq {
                todo.extend(self.matching(|w| w.rank == rank && w.seq.is_some_and(|q| q < seq)));
            }
        }
    }

    fn matching(&self, f: impl Fn(&Verdict) -> bool) -> Vec<Vid> {
        let unarrived = self.verdicts.iter().enumerate();
        unarrived
            .filter(|(_, v)| !v.arrived && f(v))
            .map(|(i, _)| Vid(i))
            .collect()
    }

    /// What a wait on `stream` of `rank` makes known: the collectives
    /// before `upto` (seq), and, when `batches`, the verdicts on the
    /// stream's batches and on the bytes its work read.
    fn arrive_for(&mut self, rank: usize, stream: u64, upto: u64, batches: bool) {
        let due = self.matching(|v| {
            let waited = match v.seq {
                Some(q) => q < upto,
                None => batches && v.stream == stream,
            };
            v.rank == rank && (waited || batches && v.waiters.contains(&stream))
        });
        for v in due {
            self.arrive(v);
        }
    }

    pub fn is_at_risk(&self, rank: usize, b: usize) -> Option<Vid> {
        match &self.ranks[rank].trust[b] {
            Trust::AtRisk(v, _) => Some(*v),
            Trust::Trusted | Trust::Poisoned(_) => None,
        }
    }

    /// The trust a check sees now: an `Overlap` pending hides the rest.
    pub fn visible(&self, rank: usize, b: usize) -> Trust {
        let r = &self.ranks[rank];
        match r.pending[b] {
            0 => r.trust[b].clone(),
            _ => Trust::Poisoned(Rc::new(Cause::Pending)),
        }
    }

    pub fn check(&self, rank: usize, b: usize) -> Expect {
        match self.visible(rank, b) {
            Trust::Trusted => Expect::Trusted,
            Trust::Poisoned(c) => Expect::Untrusted(c),
            Trust::AtRisk(_, c) => Expect::TrustedOr(c),
        }
    }

    /// A read, which waits for the work that wrote `b`.
    pub fn read(&mut self, rank: usize, b: usize) -> ReadExpect {
        match self.visible(rank, b) {
            Trust::Trusted => ReadExpect::Bytes(self.bytes(rank, b)),
            Trust::Poisoned(c) => ReadExpect::Untrusted(c),
            Trust::AtRisk(v, c) => {
                self.arrive(v);
                ReadExpect::Untrusted(c)
            }
        }
    }

    fn bytes(&self, rank: usize, b: usize) -> Vec<u32> {
        let r = &self.ranks[rank];
        if b < VALUES {
            return r.values[b].clone();
        }
        let mut words = r.counts[b - VALUES].words(self.max).to_vec();
        if b - VALUES == FAR {
            words.resize(FAR_BYTES / 4, 0);
        }
        words
    }

    /// `sync` of `stream`, naming `target`: it waits for the stream's work
    /// (and what that work waited for), then reports every failure of the
    /// stream not reported yet, else `target`'s trust.
    pub fn sync(&mut self, rank: usize, stream: u64, target: usize) -> (Reports, Expect) {
        let upto = self.ranks[rank].last_wait.get(&stream).copied();
        self.arrive_for(rank, stream, upto.unwrap_or(0), true);
        self.ranks[rank].held.retain(|s| *s != stream);
        let failures = self.ranks[rank].unreported.remove(&stream);
        let reports = Reports::of(&failures.unwrap_or_default(), |_| true);
        (reports, self.check(rank, target))
    }

    /// `sync_collective` of `stream`: waits for the stream's collectives,
    /// writes (or poisons) the `Overlap` results, and reports the failures
    /// the server knows of; those of batches still running may or may not
    /// be among them.
    pub fn sync_collective(&mut self, rank: usize, stream: u64) -> Reports {
        let upto = self.ranks[rank].last_any.get(&stream).copied();
        self.arrive_for(rank, stream, upto.unwrap_or(0), false);
        self.ranks[rank].held.retain(|s| *s != stream);
        let overlaps = self.ranks[rank].overlaps.remove(&stream);
        for o in overlaps.unwrap_or_default() {
            self.ranks[rank].pending[o.dst] -= 1;
            match o.outcome {
                Ok(values) => {
                    let r = &mut self.ranks[rank];
                    r.values[o.dst] = values;
                    r.trust[o.dst] = Trust::Trusted;
                }
                Err(cause) => {
                    self.poison(rank, o.dst, &cause);
                    self.fail(rank, stream, cause, None);
                }
            }
        }
        let failures = self.ranks[rank].unreported.remove(&stream);
        let failures = failures.unwrap_or_default();
        let known = |f: &Failure| f.arrives.is_none_or(|v| self.verdicts[v.0].arrived);
        let reports = Reports::of(&failures, known);
        let left: Vec<Failure> = failures
            .into_iter()
            .filter(|f| !known(f))
            .map(|f| Failure { maybe: true, ..f })
            .collect();
        self.ranks[rank].unreported.insert(stream, left);
        reports
    }

    pub fn write(&mut self, rank: usize, b: usize, value: u32) {
        let r = &mut self.ranks[rank];
        r.values[b].fill(value);
        r.trust[b] = Trust::Trusted;
    }

    pub fn write_half(&mut self, rank: usize, b: usize, value: u32) {
        let values = &mut self.ranks[rank].values[b];
        let half = values.len() / 2;
        values[..half].fill(value);
    }

    pub fn write_count(&mut self, rank: usize, c: usize, count: Count) {
        let r = &mut self.ranks[rank];
        r.counts[c] = count;
        r.trust[VALUES + c] = Trust::Trusted;
    }

    /// Poisons `b` now; the first cause wins. A buffer at risk must have
    /// been settled: which cause would win depends on when its verdict
    /// arrives.
    pub fn poison(&mut self, rank: usize, b: usize, cause: &Rc<Cause>) {
        let t = &mut self.ranks[rank].trust[b];
        match t {
            Trust::Trusted => *t = Trust::Poisoned(Rc::clone(cause)),
            Trust::Poisoned(_) => {}
            Trust::AtRisk(..) => panic!("model: rank {rank} buffer {b} poisoned while at risk"),
        }
    }

    pub fn fail(&mut self, rank: usize, stream: u64, cause: Rc<Cause>, arrives: Option<Vid>) {
        self.fail_maybe(rank, stream, cause, arrives, false);
    }

    pub fn fail_maybe(
        &mut self,
        rank: usize,
        stream: u64,
        cause: Rc<Cause>,
        arrives: Option<Vid>,
        maybe: bool,
    ) {
        let failure = Failure {
            cause,
            arrives,
            maybe,
        };
        let r = &mut self.ranks[rank];
        r.unreported.entry(stream).or_default().push(failure);
    }
}

impl Reports {
    /// What reporting `failures` may look like, when those `known` to the
    /// server are certainly among what it reports.
    fn of(failures: &[Failure], known: impl Fn(&Failure) -> bool) -> Reports {
        Reports {
            causes: failures.iter().map(|f| Rc::clone(&f.cause)).collect(),
            at_least: failures.iter().filter(|f| !f.maybe && known(f)).count(),
            at_most: failures.len(),
            ordered: failures.iter().all(|f| f.arrives.is_none() && !f.maybe),
        }
    }
}
