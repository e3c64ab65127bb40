//! Which group calls move on the devices ([`eligible`], or why not:
//! [`Staged`]) and how such a call's bytes are cut into pieces
//! ([`Layout`]); `device_call.rs` runs them.

use compute_collective::CollectiveCall;

use crate::collective::fold;
use crate::collective::shared::Path;

/// Exchange-buffer offsets of blocks are multiples of this (any device's
/// storage-binding offset alignment).
const BLOCK_ALIGN: u64 = 256;

/// Bytes of exchange memory one piece of a call uses at most
/// (`WGPU_SERVER_DEVICE_PIECE_BYTES` sets it for the whole process, at
/// least 256: tests cut small calls into pieces with it).
fn piece_budget() -> u64 {
    static BUDGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var("WGPU_SERVER_DEVICE_PIECE_BYTES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(64 << 20, |b| b.max(BLOCK_ALIGN))
    })
}

/// Bytes per rank below which a call stays host-staged
/// (`WGPU_SERVER_DEVICE_MIN_BYTES` sets it for the whole process). On the
/// H100 each hop between the ranks' devices (separate Vulkan devices are
/// separate GPU contexts, time-sliced) cost ~160 us
/// (`collective.device_switch_roundtrip_4kib_us` 216 against 57 on one
/// device), so a 4 KiB all-reduce over shared memory took 783 us in a raw
/// loop against 512 host-staged, while 64 MiB ran 53.6 GB/s against 7.1.
fn device_min_bytes() -> u64 {
    static MIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        std::env::var("WGPU_SERVER_DEVICE_MIN_BYTES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(256 << 10)
    })
}

/// What the combine does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Folds every rank's block (`AllReduce`; `ReduceScatter`: block `rank`).
    Fold(compute_runtime::Reduction),
    /// Copies every rank's block to its place (`AllGather`).
    Gather,
    /// Copies the root's block (`Broadcast`).
    Root(usize),
    /// Copies block `rank` of every rank to its place (`AllToAll`).
    Transpose,
}

/// How a call's bytes lie: its input is `blocks` blocks of `block` bytes,
/// cut into pieces of at most `piece` bytes of each block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub combine: Combine,
    pub blocks: u64,
    pub block: u64,
    pub piece: u64,
}

impl Layout {
    pub fn pieces(&self) -> usize {
        self.block.div_ceil(self.piece) as usize
    }

    /// Where a block's piece lies in an exchange buffer.
    pub fn stride(&self) -> u64 {
        self.piece.min(self.block).next_multiple_of(BLOCK_ALIGN)
    }

    /// Piece `k`'s start in each block and its length.
    pub fn piece_range(&self, k: usize) -> (u64, u64) {
        let lo = k as u64 * self.piece;
        (lo, self.piece.min(self.block - lo))
    }
}

/// Why a group call goes through host staging (the collective log's
/// words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Staged {
    /// The group's settled path is the host.
    #[error("the group is on host staging")]
    GroupOnHost,
    /// Decided by a rank that posted it before every rank joined.
    #[error("posted before every rank joined")]
    BeforeEveryRankJoined,
    /// The fold kernels do not give the host's bits for it.
    #[error("the device folds do not cover {reduction:?}")]
    Fold {
        reduction: compute_runtime::Reduction,
    },
    /// An all-to-all whose length does not split into the ranks.
    #[error("an all-to-all of {len} bytes over {ranks} ranks")]
    Uneven { len: u64, ranks: usize },
    /// A message, not a group call.
    #[error("a send or receive")]
    Message,
    /// A call this rank refused (it still takes its place).
    #[error("a refused call")]
    Refused,
    /// A block that is empty or not whole words.
    #[error("a block of {block} bytes (not whole words, or empty)")]
    NotWords { block: u64 },
    /// Smaller than the device path's minimum per rank.
    #[error("{bytes} bytes per rank, under the device path's {min}")]
    Small { bytes: u64, min: u64 },
}

/// The layout `call` moves in on the devices of a group on `path`, or
/// why it goes through host staging instead (a function of the call and
/// the group alone, so every rank of the call decides the same).
pub(crate) fn eligible(call: &CollectiveCall, ranks: usize, path: Path) -> Result<Layout, Staged> {
    if !path.on_device || ranks == 0 {
        return Err(if path.early {
            Staged::BeforeEveryRankJoined
        } else {
            Staged::GroupOnHost
        });
    }
    let n = ranks as u64;
    let folded = |reduction| {
        fold::covers(reduction, path.exact_floats)
            .then_some(Combine::Fold(reduction))
            .ok_or(Staged::Fold { reduction })
    };
    let (combine, blocks, block) = match *call {
        CollectiveCall::AllReduce { reduction, len } => (folded(reduction)?, 1, len as u64),
        CollectiveCall::ReduceScatter { reduction, dst_len } => {
            (folded(reduction)?, n, dst_len as u64)
        }
        CollectiveCall::AllGather { src_len } => (Combine::Gather, 1, src_len as u64),
        CollectiveCall::Broadcast { root, len, .. } => (Combine::Root(root), 1, len as u64),
        CollectiveCall::AllToAll { len } => {
            let len = len as u64;
            if !len.is_multiple_of(n) {
                return Err(Staged::Uneven { len, ranks });
            }
            (Combine::Transpose, n, len / n)
        }
        CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } => {
            return Err(Staged::Message);
        }
        CollectiveCall::Refused => return Err(Staged::Refused),
    };
    if block == 0 || !block.is_multiple_of(4) {
        return Err(Staged::NotWords { block });
    }
    let min = device_min_bytes();
    if block * blocks < min {
        return Err(Staged::Small {
            bytes: block * blocks,
            min,
        });
    }
    let piece = (piece_budget() / blocks / BLOCK_ALIGN * BLOCK_ALIGN).max(BLOCK_ALIGN);
    Ok(Layout {
        combine,
        blocks,
        block,
        piece,
    })
}

#[cfg(test)]
mod tests {
    use compute_runtime::{DType, ReduceOp, Reduction};

    use super::*;

    const DEVICE: Path = Path {
        on_device: true,
        exact_floats: false,
        early: false,
    };

    fn all_reduce(op: ReduceOp, dtype: DType, len: usize) -> CollectiveCall {
        CollectiveCall::AllReduce {
            reduction: Reduction::new(op, dtype),
            len,
        }
    }

    #[test]
    fn a_host_staged_call_says_why() {
        let big = 64 << 20;
        let sum = all_reduce(ReduceOp::Sum, DType::F32, big);
        let early = Path {
            on_device: false,
            ..DEVICE
        };
        assert_eq!(eligible(&sum, 2, early).err(), Some(Staged::GroupOnHost));
        let early = Path {
            early: true,
            ..early
        };
        assert_eq!(
            eligible(&sum, 2, early).err(),
            Some(Staged::BeforeEveryRankJoined)
        );
        let mean = Reduction::new(ReduceOp::Mean, DType::F32);
        assert_eq!(
            eligible(&all_reduce(ReduceOp::Mean, DType::F32, big), 2, DEVICE).err(),
            Some(Staged::Fold { reduction: mean })
        );
        let product = all_reduce(ReduceOp::Prod, DType::F32, big);
        assert!(eligible(&product, 2, DEVICE).is_err(), "denormals not kept");
        assert_eq!(
            eligible(&all_reduce(ReduceOp::Sum, DType::F32, 6), 2, DEVICE).err(),
            Some(Staged::NotWords { block: 6 })
        );
        // (Unless a run lowers the minimum: `WGPU_SERVER_DEVICE_MIN_BYTES`.)
        let small = all_reduce(ReduceOp::Sum, DType::F32, 4096);
        if device_min_bytes() > 4096 {
            assert!(matches!(
                eligible(&small, 2, DEVICE),
                Err(Staged::Small { bytes: 4096, .. })
            ));
        }
        let uneven = CollectiveCall::AllToAll { len: big + 4 };
        assert_eq!(
            eligible(&uneven, 3, DEVICE).err(),
            Some(Staged::Uneven {
                len: big as u64 + 4,
                ranks: 3
            })
        );
        assert_eq!(
            eligible(&CollectiveCall::Refused, 2, DEVICE).err(),
            Some(Staged::Refused)
        );
        let layout = eligible(&sum, 2, DEVICE).expect("on the devices");
        assert_eq!((layout.blocks, layout.block), (1, big as u64));
        assert_eq!(
            Staged::BeforeEveryRankJoined.to_string(),
            "posted before every rank joined"
        );
    }
}
