//! A run: one program on fresh ranks, every step issued on the servers and
//! applied to the oracle, every answer compared.

use compute_runtime::ServerError;

use super::collective::Settle;
use super::compare::Ids;
use super::device::Device;
use super::ops::{Coll, Local, Step};
use super::oracle::{Expect, Oracle, ReadExpect};
use super::seen::Seen;
use super::{COUNTS, RANKS, STREAMS, VALUES};

/// The servers, the oracle, and what disagreed.
#[derive(Debug)]
pub struct Run {
    dev: Device,
    oracle: Oracle,
    ids: Ids,
    pub ops: u64,
    pub disagreements: Vec<String>,
    pub seen: Seen,
    /// The step being run, for messages.
    at: String,
}

/// Runs `program` ((selector, code) pairs, see `Step::from_code`) on fresh
/// ranks, then reads and syncs everything.
pub fn run_program(tasks_max: usize, program: &[(u64, [u32; 3])]) -> Run {
    let mut run = Run::new(tasks_max);
    for (i, (sel, code)) in program.iter().enumerate() {
        run.step(i, &Step::from_code(*sel, *code));
    }
    run.finish();
    run
}

impl Run {
    pub fn new(tasks_max: usize) -> Self {
        let dev = Device::open(tasks_max);
        let oracle = Oracle::new(dev.max);
        let ids = Ids(dev.memory_ids());
        Run {
            dev,
            oracle,
            ids,
            ops: 0,
            disagreements: Vec::new(),
            seen: Seen::default(),
            at: String::new(),
        }
    }

    fn disagree(&mut self, what: String) {
        self.disagreements.push(format!("{}: {what}", self.at));
    }

    pub fn step(&mut self, index: usize, step: &Step) {
        self.ops += 1;
        self.at = format!("step {index} ({step:?})");
        match step {
            Step::Local { rank, stream, op } => self.local(*rank, *stream, op),
            Step::Collective(op) => self.collective(op),
        }
    }

    fn local(&mut self, r: usize, s: u64, op: &Local) {
        for b in self.oracle.settle_before(r, op) {
            self.seen.settles += 1;
            self.read(r, s, b);
        }
        match *op {
            Local::Read { src } => self.read(r, s, src),
            Local::Check { target } => self.check(r, s, target),
            Local::Sync { target } => self.sync(r, s, target),
            Local::SyncCollective => self.sync_collective(r, s),
            Local::Write { .. }
            | Local::WriteHalf { .. }
            | Local::BadWrite { .. }
            | Local::WriteCount { .. }
            | Local::Inc { .. }
            | Local::Copy { .. }
            | Local::IndirectInc { .. }
            | Local::BadArity { .. }
            | Local::TooSmall { .. }
            | Local::Mismatch { .. } => {
                self.dev.issue(r, s, op);
                let applied = self.oracle.apply(r, s, op);
                self.seen.applied(applied);
            }
        }
    }

    fn collective(&mut self, op: &Coll) {
        for r in 0..RANKS {
            let s = op.streams[r];
            if let Some(value) = op.refresh {
                let dst = op.kind.src();
                self.local(
                    r,
                    s,
                    &Local::Write {
                        dst,
                        value: value + r as u32,
                    },
                );
            }
        }
        for (r, settle) in self.oracle.settle_before_collective(op) {
            self.seen.settles += 1;
            match settle {
                Settle::Read(b) => self.read(r, op.streams[r], b),
                Settle::SyncCollective(s) => self.sync_collective(r, s),
            }
        }
        let got = self.dev.collective(op);
        let (want, went) = self.oracle.collective(op);
        self.seen.went(went);
        self.seen.overlaps += u64::from(op.kind.overlap());
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            self.seen.calls_refused += u64::from(w.is_some());
            let agrees = match (w, g) {
                (None, Ok(())) => true,
                (Some(m), Err(e)) => self.ids.cause(m, e),
                (None, Err(_)) | (Some(_), Ok(())) => false,
            };
            if !agrees {
                self.disagree(format!(
                    "rank {r}'s call: the model says {w:?}, the server {g:?}"
                ));
            }
        }
    }

    fn read(&mut self, r: usize, s: u64, b: usize) {
        let got = self.dev.read(r, s, b);
        let want = self.oracle.read(r, b);
        match &got {
            Ok(_) => self.seen.bytes_read += 1,
            Err(_) => self.seen.untrusted_reads += 1,
        }
        if !self.ids.read(r, b, &want, &got) {
            let want = match want {
                ReadExpect::Bytes(w) => format!("{}", Brief(&w)),
                ReadExpect::Untrusted(c) => format!("{c:?}"),
            };
            let got = match got {
                Ok(g) => format!("{}", Brief(&g)),
                Err(e) => format!("{e:?}"),
            };
            self.disagree(format!(
                "read of rank {r} buffer {b} on stream {s}: the model says {want}, the server {got}"
            ));
        }
    }

    fn check(&mut self, r: usize, s: u64, b: usize) {
        let got = self.dev.check(r, s, b);
        let want = self.oracle.check(r, b);
        if let Expect::TrustedOr(_) = want {
            self.seen.early_checks[usize::from(got.is_err())] += 1;
        }
        self.seen.untrusted_checks += u64::from(got.is_err());
        if !self.ids.trust(r, b, &want, &got) {
            self.disagree(format!(
                "check of rank {r} buffer {b}: the model says {want:?}, the server {got:?}"
            ));
        }
    }

    fn sync(&mut self, r: usize, s: u64, target: usize) {
        let got = self.dev.sync(r, s, target);
        let (reports, want) = self.oracle.sync(r, s, target);
        self.seen.syncs_reporting += u64::from(matches!(got, Err(ServerError::Deferred { .. })));
        let agrees = match self.ids.reports(s, &reports, &got) {
            Some(agrees) => agrees,
            None => self.ids.trust(r, target, &want, &got),
        };
        if !agrees {
            self.disagree(format!(
                "sync of rank {r} stream {s} naming {target}: the model says {reports:?} \
                 then {want:?}, the server {got:?}"
            ));
        }
    }

    fn sync_collective(&mut self, r: usize, s: u64) {
        let got = self.dev.sync_collective(r, s);
        let reports = self.oracle.sync_collective(r, s);
        self.seen.sync_collectives_reporting += u64::from(got.is_err());
        if !self.ids.reports(s, &reports, &got).unwrap_or(got.is_ok()) {
            self.disagree(format!(
                "sync_collective of rank {r} stream {s}: the model says {reports:?}, the server {got:?}"
            ));
        }
    }

    /// Writes every `Overlap` result, reads every buffer of every rank from
    /// a stream of its own, then syncs every stream.
    pub fn finish(&mut self) {
        self.at = "the end".into();
        for r in 0..RANKS {
            for s in 0..STREAMS {
                self.sync_collective(r, s);
            }
        }
        for r in 0..RANKS {
            for b in 0..VALUES + COUNTS {
                self.read(r, 99, b);
            }
        }
        for r in 0..RANKS {
            for s in 0..STREAMS {
                self.sync(r, s, 0);
            }
        }
    }
}

/// A buffer's words, in short.
struct Brief<'a>(&'a [u32]);

impl std::fmt::Display for Brief<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.len();
        let runs = self.0.chunk_by(|a, b| a == b);
        let runs: Vec<String> = runs.map(|r| format!("{}x{}", r[0], r.len())).collect();
        write!(f, "{n} words [{}]", runs.join(", "))
    }
}
