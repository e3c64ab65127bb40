//! What a program is made of, and how three random numbers stand for each
//! step (proptest shrinks them towards zero: towards plain writes of small
//! values on rank 0, stream 0).

use super::{COUNTS, DATA, GATHER, RANKS, STREAMS, VALUES};

/// Counts an indirect launch may read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Count {
    Zero,
    One,
    Three,
    OverX,
    OverZ,
}

impl Count {
    /// The three words of the count, for a device whose per-dimension
    /// limit is `max`.
    pub fn words(self, max: u32) -> [u32; 3] {
        match self {
            Count::Zero => [0, 1, 1],
            Count::One => [1, 1, 1],
            Count::Three => [3, 1, 1],
            Count::OverX => [max + 1, 1, 1],
            Count::OverZ => [1, 1, max + 1],
        }
    }
}

/// One operation on one rank's stream. Buffers are `0..VALUES` (data,
/// then the gather buffer) then `VALUES..` (counts).
#[derive(Clone, Copy, Debug)]
pub enum Local {
    /// Host write of `value` to all of value buffer `dst`.
    Write { dst: usize, value: u32 },
    /// Host write of `value` to the first half of `dst` (does not restore
    /// trust).
    WriteHalf { dst: usize, value: u32 },
    /// Host write whose data is shorter than its descriptor: refused at
    /// the call, reported (`SizeMismatch`) at the stream's next sync; `dst`
    /// (value or count) is untouched and keeps its trust.
    BadWrite { dst: usize },
    /// Host write of count buffer `c`.
    WriteCount { c: usize, count: Count },
    /// `dst[i] += 1` over one workgroup (the first 64 elements).
    Inc { dst: usize },
    /// `dst[i] = src[i] * 2 + 1` over `dst` (a data buffer).
    Copy { src: usize, dst: usize },
    /// `dst[i] += 1` over the workgroups count buffer `c` says.
    IndirectInc { c: usize, dst: usize },
    /// `inc` with two buffers: `InvalidArgument`, poisons both.
    BadArity { a: usize, b: usize },
    /// A fixed `array<u32, 64>` bound with 16 bytes of `dst`:
    /// `BindingTooSmall`, poisons `dst`.
    TooSmall { dst: usize },
    /// The copy kernel declaring `src` read-write, which its module says is
    /// read-only: `LayoutMismatch`, poisons both.
    Mismatch { src: usize, dst: usize },
    /// Read buffer `src` back.
    Read { src: usize },
    /// `check` of buffer `target`.
    Check { target: usize },
    /// `sync` of the stream, naming `target`.
    Sync { target: usize },
    /// `sync_collective` of the stream.
    SyncCollective,
}

/// A collective, issued on every rank in turn (rank 0 first), each on its
/// own stream.
#[derive(Clone, Copy, Debug)]
pub struct Coll {
    pub kind: CollKind,
    pub streams: [u64; RANKS],
    pub fault: Fault,
    /// Every rank first writes its `src` whole (`value + rank`), so that
    /// not every collective meets poison from earlier steps.
    pub refresh: Option<u32>,
}

/// Which collective, over which data buffers.
#[derive(Clone, Copy, Debug)]
pub enum CollKind {
    /// Sum of `u32`; `Overlap` when `overlap`, else `Wait`.
    AllReduce {
        src: usize,
        dst: usize,
        overlap: bool,
    },
    /// From `root`'s `src` into every rank's `dst`.
    Broadcast { root: usize, src: usize, dst: usize },
    /// Every rank's `src`, in rank order, into its gather buffer.
    AllGather { src: usize },
}

impl CollKind {
    pub fn src(&self) -> usize {
        match *self {
            CollKind::AllReduce { src, .. }
            | CollKind::Broadcast { src, .. }
            | CollKind::AllGather { src } => src,
        }
    }

    pub fn overlap(&self) -> bool {
        match *self {
            CollKind::AllReduce { overlap, .. } => overlap,
            CollKind::Broadcast { .. } | CollKind::AllGather { .. } => false,
        }
    }
}

/// What one rank does wrong in a collective, if anything.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    None,
    /// All-reduce of `i32` instead of `u32`: the ranks disagree.
    Dtype {
        rank: usize,
    },
    /// Half of the buffer where the whole is meant: the `dst` of an
    /// all-reduce or broadcast, the `src` of an all-gather.
    Short {
        rank: usize,
    },
    /// The call is made inside a capture window of its stream.
    Capture {
        rank: usize,
    },
    /// Broadcast: a source on a non-root rank, none on the root.
    Invalid {
        rank: usize,
    },
}

/// Part of a buffer a call names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Part {
    pub buf: usize,
    pub half: bool,
}

/// What one rank passes to a collective.
#[derive(Clone, Copy, Debug)]
pub struct RankCall {
    pub src: Option<Part>,
    pub dst: Part,
    pub i32: bool,
    pub capture: bool,
}

impl Coll {
    /// The arguments of rank `r`'s call.
    pub fn call(&self, r: usize) -> RankCall {
        let whole = |buf| Part { buf, half: false };
        let faulty = |f: fn(usize) -> Fault| self.fault == f(r);
        let short = faulty(|rank| Fault::Short { rank });
        let (src, dst) = match self.kind {
            CollKind::AllReduce { src, dst, .. } => (
                Some(whole(src)),
                Part {
                    buf: dst,
                    half: short,
                },
            ),
            CollKind::Broadcast { root, src, dst } => {
                let has_src = (r == root) != faulty(|rank| Fault::Invalid { rank });
                let dst = Part {
                    buf: dst,
                    half: short,
                };
                (has_src.then_some(whole(src)), dst)
            }
            CollKind::AllGather { src } => (
                Some(Part {
                    buf: src,
                    half: short,
                }),
                whole(GATHER),
            ),
        };
        RankCall {
            src,
            dst,
            i32: faulty(|rank| Fault::Dtype { rank }),
            capture: faulty(|rank| Fault::Capture { rank }),
        }
    }
}

/// One step of a program.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    Local { rank: usize, stream: u64, op: Local },
    Collective(Coll),
}

impl Step {
    /// The step `sel` and `code` stand for: `sel` picks the stream and the
    /// rank of a local operation, `code` the operation.
    pub fn from_code(sel: u64, [k, a, b]: [u32; 3]) -> Step {
        let (stream, rank) = (sel % STREAMS, (sel / STREAMS) as usize % RANKS);
        let local = |op| Step::Local { rank, stream, op };
        match k % 100 {
            84..86 => local(Local::SyncCollective),
            86..100 => Step::Collective(collective(k % 100, a, b)),
            k => local(local_op(k, a, b)),
        }
    }
}

/// Local operation `k` (below 84) over `a` and `b`.
fn local_op(k: u32, a: u32, b: u32) -> Local {
    let v = |x: u32| x as usize % VALUES;
    let any = |x: u32| x as usize % (VALUES + COUNTS);
    let c = |x: u32| x as usize % COUNTS;
    let value = b % 1000;
    match k {
        0..14 => Local::Write { dst: v(a), value },
        14..17 => Local::WriteHalf { dst: v(a), value },
        17..19 => Local::BadWrite { dst: any(a) },
        19..25 => Local::WriteCount {
            c: c(a),
            count: COUNT_MIX[b as usize % COUNT_MIX.len()],
        },
        25..35 => Local::Inc { dst: v(a) },
        35..43 => {
            // The copy writes as many elements as `dst` has: a data buffer,
            // never longer than its source.
            let (src, dst) = (v(a), b as usize % DATA);
            let dst = if src == dst { (dst + 1) % DATA } else { dst };
            Local::Copy { src, dst }
        }
        43..53 => Local::IndirectInc { c: c(a), dst: v(b) },
        53..55 => Local::BadArity { a: v(a), b: v(b) },
        55..57 => Local::TooSmall { dst: v(a) },
        57..58 => {
            let (src, dst) = (v(a), v(b));
            let dst = if src == dst { (dst + 1) % VALUES } else { dst };
            Local::Mismatch { src, dst }
        }
        58..70 => Local::Read { src: any(a) },
        70..79 => Local::Check { target: any(a) },
        _ => Local::Sync { target: any(a) },
    }
}

const COUNT_MIX: [Count; 8] = [
    Count::One,
    Count::Three,
    Count::Zero,
    Count::One,
    Count::OverX,
    Count::Three,
    Count::OverZ,
    Count::One,
];

/// Collective `k` (86..100): buffers from `a`, the fault from `a`'s high
/// bits, the streams and the mode from `b`.
fn collective(k: u32, a: u32, b: u32) -> Coll {
    let d = |x: u32| x as usize % DATA;
    let (src, dst, root) = (d(a), d(a >> 4), (a >> 8) as usize % RANKS);
    let rank = (a >> 12) as usize % RANKS;
    let kind = match k {
        86..92 => CollKind::AllReduce {
            src,
            dst,
            overlap: (b >> 12).is_multiple_of(4),
        },
        92..96 => CollKind::Broadcast { root, src, dst },
        _ => CollKind::AllGather { src },
    };
    let refresh = (b >> 14).is_multiple_of(2).then_some((b >> 15) % 1000);
    let fault = match ((a >> 16) % 12, kind) {
        (9, CollKind::AllReduce { .. }) => Fault::Dtype { rank },
        (9, CollKind::Broadcast { .. }) => Fault::Invalid { rank },
        (10, _) => Fault::Short { rank },
        (11, _) => Fault::Capture { rank },
        _ => Fault::None,
    };
    let streams = if b.is_multiple_of(4) {
        [(b as u64 >> 2) % STREAMS; RANKS]
    } else {
        let digits = b as u64 >> 2;
        std::array::from_fn(|r| (digits / STREAMS.pow(r as u32)) % STREAMS)
    };
    Coll {
        kind,
        streams,
        fault,
        refresh,
    }
}
