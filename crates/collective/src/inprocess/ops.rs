//! What each group operation gives every rank from every rank's input,
//! computed once, by a round's last arrival.

use std::time::Instant;

use bytes::Bytes;
use compute_runtime::{Reduction, ServerError};

use super::InProcessTransport;
use crate::call::{CallId, CollectiveCall, describe};
use crate::outbuf::OutputPool;
use crate::reduce::reduce;

/// The data operation of a group step.
#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    AllReduce(Reduction),
    AllGather,
    ReduceScatter(Reduction),
    Broadcast { root: usize, len: usize },
    AllToAll,
}

impl Op {
    /// The operation of a group call (`None` for messages).
    pub(super) fn of(call: CollectiveCall) -> Option<Op> {
        match call {
            CollectiveCall::AllReduce { reduction, .. } => Some(Op::AllReduce(reduction)),
            CollectiveCall::AllGather { .. } => Some(Op::AllGather),
            CollectiveCall::ReduceScatter { reduction, .. } => Some(Op::ReduceScatter(reduction)),
            CollectiveCall::Broadcast { root, len, .. } => Some(Op::Broadcast { root, len }),
            CollectiveCall::AllToAll { .. } => Some(Op::AllToAll),
            CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } | CollectiveCall::Refused => {
                None
            }
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Op::AllReduce(_) => "all_reduce",
            Op::AllGather => "all_gather",
            Op::ReduceScatter(_) => "reduce_scatter",
            Op::Broadcast { .. } => "broadcast",
            Op::AllToAll => "all_to_all",
        }
    }
}

impl InProcessTransport {
    fn reduced(
        &self,
        reduction: Reduction,
        inputs: &[Bytes],
        what: &str,
    ) -> Result<Bytes, ServerError> {
        let len = same_len(inputs, what)?;
        let refs: Vec<&[u8]> = inputs.iter().map(|b| b.as_ref()).collect();
        let pool = OutputPool::global();
        let mut out = pool.take(len);
        reduce(reduction, &refs, &mut out, self.parallelism)?;
        Ok(pool.freeze(out))
    }

    /// A data round of group call `seq`: `op` over every rank's input.
    pub(super) fn group_step(
        &self,
        seq: u64,
        step: usize,
        op: Op,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let id = CallId::Group { seq };
        let what = describe(op.name(), id);
        self.data(id, step, op.name(), input, deadline, |inputs| {
            self.outputs(op, &what, inputs)
        })
    }

    /// Every rank's output of `op` from every rank's input, computed once
    /// (by the last arrival): shared `Bytes` where the output is the same
    /// for every rank.
    pub(super) fn outputs(
        &self,
        op: Op,
        what: &str,
        inputs: Vec<Bytes>,
    ) -> Result<Vec<Bytes>, ServerError> {
        let n = inputs.len();
        match op {
            Op::AllReduce(reduction) => {
                let out = self.reduced(reduction, &inputs, what)?;
                Ok(vec![out; n])
            }
            Op::AllGather => {
                let pool = OutputPool::global();
                let mut out = pool.take_empty(inputs.iter().map(Bytes::len).sum());
                inputs.iter().for_each(|b| out.extend_from_slice(b));
                Ok(vec![pool.freeze(out); n])
            }
            Op::ReduceScatter(reduction) => {
                let full = self.reduced(reduction, &inputs, what)?;
                if !full.len().is_multiple_of(n.max(1)) {
                    return Err(ServerError::CollectiveMismatch {
                        reason: format!(
                            "{what}: {} bytes do not split into {n} chunks",
                            full.len()
                        ),
                    });
                }
                Ok((0..n).map(|r| chunk(&full, r, n)).collect())
            }
            Op::Broadcast { root, len } => match inputs.get(root) {
                Some(src) if src.len() == len => Ok(vec![src.clone(); n]),
                other => Err(ServerError::SizeMismatch {
                    expected: len as u64,
                    actual: other.map_or(0, Bytes::len) as u64,
                }),
            },
            Op::AllToAll => {
                let len = same_len(&inputs, what)?;
                if !len.is_multiple_of(n.max(1)) {
                    return Err(ServerError::CollectiveMismatch {
                        reason: format!("{what}: {len} bytes do not split into {n} chunks"),
                    });
                }
                Ok((0..n)
                    .map(|r| {
                        let pool = OutputPool::global();
                        let mut out = pool.take_empty(len);
                        inputs
                            .iter()
                            .for_each(|src| out.extend_from_slice(&chunk(src, r, n)));
                        pool.freeze(out)
                    })
                    .collect())
            }
        }
    }
}

/// The common length of `inputs` (the exchange agreed on it; checked again
/// so a broken invariant is an error, not a panic).
fn same_len(inputs: &[Bytes], what: &str) -> Result<usize, ServerError> {
    let len = inputs.first().map_or(0, Bytes::len);
    match inputs.iter().find(|b| b.len() != len) {
        Some(other) => Err(ServerError::CollectiveMismatch {
            reason: format!("{what}: inputs of {len} and {} bytes", other.len()),
        }),
        None => Ok(len),
    }
}

/// Chunk `index` of `len / parts` bytes of `bytes`.
fn chunk(bytes: &Bytes, index: usize, parts: usize) -> Bytes {
    let size = bytes.len() / parts.max(1);
    bytes.slice(index * size..(index + 1) * size)
}
