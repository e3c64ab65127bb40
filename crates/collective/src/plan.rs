//! [`Plan`]: how one call's bytes move, in steps.
//!
//! A call's input is one block (`all_reduce`, `all_gather`, `broadcast`,
//! `send`) or one block per rank (`reduce_scatter`, `all_to_all`: block `j`
//! is what rank `j` gets). Step `k` moves bytes `range(k)` of every block:
//! its input is those sub-ranges of the rank's blocks, concatenated, and it
//! is the whole call's collective applied to that input (an `all_reduce` of
//! the step's bytes, a `reduce_scatter` of its `ranks` sub-blocks, ...), so
//! a transport runs each step with the same operation it runs a whole call
//! with, and every step's output lands in its own places of `dst`
//! ([`Plan::output_pieces`]).
//!
//! Steps are what a server pipelines: while step `k` is combined on the
//! host, step `k + 1` is copied down from the device and step `k - 1`
//! copied up, and no buffer is larger than a step. A plan depends only on
//! the call's shape, the rank count and the communicator's chunk size, so
//! every rank of a call draws the same steps.
//!
//! **Alignment.** Devices move bytes in 4-byte words, so a step's pieces
//! must start on a word: a call is cut only where every piece of `src` and
//! `dst` starts on one (chunk sizes are multiples of [`CHUNK_ALIGN`]; a
//! multi-block call, or an `all_gather`, whose block is not a whole number
//! of words runs as one step).

use std::ops::Range;

use crate::call::CollectiveCall;

/// Bytes of a block one step moves when the communicator does not say.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Chunk sizes are rounded down to a multiple of this (the largest element
/// size, so no element is split between steps), and are at least this.
pub const CHUNK_ALIGN: usize = 8;

/// A device word: where pieces must start.
const WORD: usize = 4;

/// The steps of one call on one rank; see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    call: CollectiveCall,
    ranks: usize,
    /// Blocks of the input (1, or one per rank).
    blocks: usize,
    /// Bytes of a block.
    block: usize,
    /// Bytes of a block per step (the last step may move fewer).
    chunk: usize,
    steps: usize,
}

/// Where part of a step's output goes: `len` bytes from offset `from` of
/// the step's output to offset `to` of the rank's `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Offset in `dst`.
    pub to: usize,
    /// Offset in the step's output.
    pub from: usize,
    /// Bytes.
    pub len: usize,
}

/// A chunk size as a plan uses it: a multiple of [`CHUNK_ALIGN`], at least
/// one.
pub fn normalize_chunk(chunk: usize) -> usize {
    (chunk / CHUNK_ALIGN).max(1) * CHUNK_ALIGN
}

impl Plan {
    /// The plan of `call` among `ranks`, in steps of at most `chunk` bytes
    /// of each block (normalized with [`normalize_chunk`]).
    pub fn new(call: CollectiveCall, ranks: usize, chunk: usize) -> Plan {
        let n = ranks.max(1);
        let (blocks, block, words_needed) = match call {
            CollectiveCall::AllReduce { len, .. }
            | CollectiveCall::Broadcast { len, .. }
            | CollectiveCall::Send { len, .. }
            | CollectiveCall::Recv { len, .. } => (1, len, false),
            // Rank q's part lands at q * src_len of `dst`.
            CollectiveCall::AllGather { src_len } => (1, src_len, true),
            CollectiveCall::ReduceScatter { dst_len, .. } => (n, dst_len, true),
            CollectiveCall::AllToAll { len } => (n, len / n, true),
            CollectiveCall::Refused => (1, 0, false),
        };
        let chunk = normalize_chunk(chunk);
        let cut = !words_needed || block.is_multiple_of(WORD);
        let (chunk, steps) = if cut && block > chunk {
            (chunk, block.div_ceil(chunk))
        } else {
            (block.max(1), 1)
        };
        Plan {
            call,
            ranks: n,
            blocks,
            block,
            chunk,
            steps,
        }
    }

    /// The call planned.
    pub fn call(&self) -> CollectiveCall {
        self.call
    }

    /// How many steps (at least one, also for 0 bytes).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Bytes of each block step `step` moves.
    pub fn range(&self, step: usize) -> Range<usize> {
        let start = (step * self.chunk).min(self.block);
        start..(start + self.chunk).min(self.block)
    }

    /// Bytes of input the step takes from this rank (0 when it gives none).
    pub fn input_len(&self, step: usize) -> usize {
        if self.call.input_len(self.ranks).is_none() {
            return 0;
        }
        self.blocks * self.range(step).len()
    }

    /// The ranges of `src` whose bytes, concatenated, are the step's input
    /// (none when this rank gives none); adjacent ranges are merged.
    pub fn input_pieces(&self, step: usize) -> Vec<Range<usize>> {
        if self.call.input_len(self.ranks).is_none() {
            return Vec::new();
        }
        let r = self.range(step);
        merge(
            (0..self.blocks).map(|j| j * self.block + r.start..j * self.block + r.end),
            |a: &Range<usize>, b: &Range<usize>| (a.end == b.start).then_some(a.start..b.end),
        )
    }

    /// Bytes of output the step gives this rank.
    pub fn output_len(&self, step: usize) -> usize {
        let l = self.range(step).len();
        match self.call {
            CollectiveCall::AllReduce { .. }
            | CollectiveCall::Broadcast { .. }
            | CollectiveCall::Recv { .. }
            | CollectiveCall::ReduceScatter { .. } => l,
            CollectiveCall::AllGather { .. } | CollectiveCall::AllToAll { .. } => self.ranks * l,
            CollectiveCall::Send { .. } | CollectiveCall::Refused => 0,
        }
    }

    /// Where the step's output goes in `dst`, in output order; adjacent
    /// pieces are merged (a one-step call is one piece).
    pub fn output_pieces(&self, step: usize) -> Vec<Piece> {
        let r = self.range(step);
        let l = r.len();
        let one = |to| Piece {
            to,
            from: 0,
            len: l,
        };
        let pieces: Vec<Piece> = match self.call {
            CollectiveCall::AllReduce { .. }
            | CollectiveCall::Broadcast { .. }
            | CollectiveCall::Recv { .. }
            | CollectiveCall::ReduceScatter { .. } => vec![one(r.start)],
            // Piece q is rank q's bytes: in `dst` at q's block.
            CollectiveCall::AllGather { .. } | CollectiveCall::AllToAll { .. } => (0..self.ranks)
                .map(|q| Piece {
                    to: q * self.block + r.start,
                    from: q * l,
                    len: l,
                })
                .collect(),
            CollectiveCall::Send { .. } | CollectiveCall::Refused => Vec::new(),
        };
        merge(pieces.into_iter().filter(|p| p.len > 0), |a, b| {
            (a.to + a.len == b.to && a.from + a.len == b.from).then_some(Piece {
                len: a.len + b.len,
                ..*a
            })
        })
    }
}

/// `items` with each run that `join` can fuse fused.
fn merge<T>(items: impl Iterator<Item = T>, join: impl Fn(&T, &T) -> Option<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        match out.last().and_then(|last| join(last, &item)) {
            Some(joined) => {
                out.pop();
                out.push(joined);
            }
            None => out.push(item),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use compute_runtime::{DType, Reduction};

    fn sum() -> Reduction {
        Reduction::sum(DType::F32)
    }

    #[test]
    fn a_small_call_is_one_step_of_one_piece() {
        let p = Plan::new(
            CollectiveCall::AllGather { src_len: 12 },
            3,
            DEFAULT_CHUNK_BYTES,
        );
        assert_eq!(p.steps(), 1);
        assert_eq!(p.input_pieces(0), vec![0..12]);
        assert_eq!(
            p.output_pieces(0),
            vec![Piece {
                to: 0,
                from: 0,
                len: 36
            }]
        );
    }

    #[test]
    fn steps_cover_every_block_once() {
        let call = CollectiveCall::ReduceScatter {
            reduction: sum(),
            dst_len: 40,
        };
        let p = Plan::new(call, 2, 16);
        assert_eq!(p.steps(), 3);
        assert_eq!(p.input_pieces(0), vec![0..16, 40..56]);
        assert_eq!(p.input_pieces(2), vec![32..40, 72..80]);
        assert_eq!(p.input_len(2), 16);
        assert_eq!(
            p.output_pieces(2),
            vec![Piece {
                to: 32,
                from: 0,
                len: 8
            }]
        );
    }

    #[test]
    fn all_to_all_pieces_go_to_each_source_block() {
        let p = Plan::new(CollectiveCall::AllToAll { len: 48 }, 3, 8);
        assert_eq!(p.steps(), 2);
        assert_eq!(p.input_pieces(1), vec![8..16, 24..32, 40..48]);
        let to: Vec<(usize, usize)> = p.output_pieces(1).iter().map(|q| (q.to, q.from)).collect();
        assert_eq!(to, vec![(8, 0), (24, 8), (40, 16)]);
    }

    #[test]
    fn blocks_of_odd_words_are_not_cut() {
        // 6-byte blocks: pieces would start mid-word in dst.
        let p = Plan::new(CollectiveCall::AllToAll { len: 12 }, 2, 8);
        assert_eq!(p.steps(), 1);
        let p = Plan::new(CollectiveCall::AllGather { src_len: 18 }, 2, 8);
        assert_eq!(p.steps(), 1);
        // One block: pieces start at multiples of the chunk.
        let p = Plan::new(
            CollectiveCall::AllReduce {
                reduction: Reduction::sum(DType::F16),
                len: 18,
            },
            2,
            8,
        );
        assert_eq!(p.steps(), 3);
        assert_eq!(p.range(2), 16..18);
    }

    #[test]
    fn ranks_without_input_take_none_and_send_gives_none() {
        let recv = Plan::new(CollectiveCall::Recv { peer: 0, len: 20 }, 2, 8);
        assert_eq!((recv.steps(), recv.input_len(0)), (3, 0));
        assert!(recv.input_pieces(0).is_empty());
        let send = Plan::new(CollectiveCall::Send { peer: 1, len: 20 }, 2, 8);
        assert_eq!((send.steps(), send.output_len(0)), (3, 0));
        assert!(send.output_pieces(0).is_empty());
        let zero = Plan::new(CollectiveCall::AllToAll { len: 0 }, 4, 8);
        assert_eq!((zero.steps(), zero.input_len(0)), (1, 0));
    }

    #[test]
    fn chunks_are_whole_elements() {
        assert_eq!(normalize_chunk(0), CHUNK_ALIGN);
        assert_eq!(normalize_chunk(13), 8);
        assert_eq!(normalize_chunk(4 << 20), 4 << 20);
    }
}
