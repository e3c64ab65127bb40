//! What a rank asks for ([`CollectiveCall`]), how calls are named
//! ([`CallId`], [`Link`]), the small [`Descriptor`] the ranks exchange before
//! any data moves, and the verdict every rank draws from the exchanged
//! descriptors.
//!
//! **Buys:** agreement is a pure function of the descriptors, evaluated by
//! every rank on the same inputs, so every rank reaches the same verdict
//! with the same words (one mismatch, one reason, on every rank), and no rank
//! starts moving data that another rank will refuse. **Doesn't buy:** a
//! check of the bytes themselves (a rank that provides the right length of
//! wrong values is not detected).

use std::fmt;
use std::sync::Arc;

use compute_runtime::{CollectiveFault, RoundProblem};
use compute_runtime::{Reduction, ServerError};

/// One rank's side of a collective. Lengths are in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveCall {
    /// Every rank gives `len` bytes and gets the element-wise reduction.
    AllReduce {
        /// Operation and element type.
        reduction: Reduction,
        /// Bytes per rank, in and out.
        len: usize,
    },
    /// Every rank gives `src_len` bytes and gets every rank's, concatenated
    /// in rank order (`ranks * src_len` bytes).
    AllGather {
        /// Bytes each rank gives.
        src_len: usize,
    },
    /// Every rank gives `ranks * dst_len` bytes; rank r gets chunk r of the
    /// element-wise reduction (`dst_len` bytes).
    ReduceScatter {
        /// Operation and element type.
        reduction: Reduction,
        /// Bytes each rank gets.
        dst_len: usize,
    },
    /// Rank `root` gives `len` bytes; every rank gets them.
    Broadcast {
        /// The rank whose bytes are broadcast.
        root: usize,
        /// Bytes broadcast.
        len: usize,
        /// Whether this rank gives a source: exactly the root does.
        has_src: bool,
    },
    /// Every rank gives `len` bytes (divisible by the rank count), chunk r
    /// going to rank r; rank r gets chunk r of every rank, in rank order.
    AllToAll {
        /// Bytes per rank, in and out.
        len: usize,
    },
    /// This rank sends `len` bytes to rank `peer`.
    Send {
        /// The receiving rank.
        peer: usize,
        /// Bytes sent.
        len: usize,
    },
    /// This rank receives `len` bytes from rank `peer`.
    Recv {
        /// The sending rank.
        peer: usize,
        /// Bytes received.
        len: usize,
    },
    /// A group call this rank refused before it could say what it was (a
    /// check of its client's own failed: a reduction over an untyped
    /// buffer, a root that is not a rank). It takes its place in the
    /// sequence, so every rank's call at that place fails, naming this rank
    /// and the refusal (its input), and the ranks' next calls pair as
    /// usual. It gives no bytes and gets none.
    Refused,
}

impl CollectiveCall {
    /// The call's name as the server API spells it (`"all_reduce"`, ...).
    pub const fn name(&self) -> &'static str {
        match self {
            CollectiveCall::AllReduce { .. } => "all_reduce",
            CollectiveCall::AllGather { .. } => "all_gather",
            CollectiveCall::ReduceScatter { .. } => "reduce_scatter",
            CollectiveCall::Broadcast { .. } => "broadcast",
            CollectiveCall::AllToAll { .. } => "all_to_all",
            CollectiveCall::Send { .. } => "send",
            CollectiveCall::Recv { .. } => "recv",
            CollectiveCall::Refused => "refused call",
        }
    }

    /// Whether every rank takes part (everything but `Send` and `Recv`).
    pub const fn is_group(&self) -> bool {
        !matches!(
            self,
            CollectiveCall::Send { .. } | CollectiveCall::Recv { .. }
        )
    }

    /// Bytes this rank must provide among `ranks`, or `None` when it
    /// provides nothing (`Recv`, a non-root `Broadcast`). `None` also when
    /// the size overflows (the call is then invalid, see [`Self::problem`]).
    pub fn input_len(&self, ranks: usize) -> Option<usize> {
        match *self {
            CollectiveCall::AllReduce { len, .. }
            | CollectiveCall::AllToAll { len }
            | CollectiveCall::Send { len, .. } => Some(len),
            // The refusal is its input: what every rank's verdict names.
            CollectiveCall::Refused => Some(0),
            CollectiveCall::AllGather { src_len } => Some(src_len),
            CollectiveCall::ReduceScatter { dst_len, .. } => dst_len.checked_mul(ranks),
            CollectiveCall::Broadcast { len, has_src, .. } => has_src.then_some(len),
            CollectiveCall::Recv { .. } => None,
        }
    }

    /// Bytes this rank gets back among `ranks` (0 for `Send`).
    pub fn output_len(&self, ranks: usize) -> usize {
        match *self {
            CollectiveCall::AllReduce { len, .. }
            | CollectiveCall::AllToAll { len }
            | CollectiveCall::Broadcast { len, .. }
            | CollectiveCall::Recv { len, .. } => len,
            CollectiveCall::AllGather { src_len } => src_len.saturating_mul(ranks),
            CollectiveCall::ReduceScatter { dst_len, .. } => dst_len,
            CollectiveCall::Send { .. } | CollectiveCall::Refused => 0,
        }
    }

    /// Why this call cannot be valid on rank `rank` of `ranks`, whatever the
    /// other ranks post; `None` when it can.
    pub fn problem(&self, rank: usize, ranks: usize) -> Option<String> {
        let whole = |len: usize, reduction: &Reduction| {
            let size = reduction.dtype.size();
            (!len.is_multiple_of(size)).then(|| {
                format!(
                    "{len} bytes is not a whole number of {} elements ({size} bytes each)",
                    reduction.dtype
                )
            })
        };
        match self {
            CollectiveCall::AllReduce { reduction, len } => whole(*len, reduction),
            CollectiveCall::ReduceScatter { reduction, dst_len } => {
                if dst_len.checked_mul(ranks).is_none() {
                    return Some(format!("{ranks} chunks of {dst_len} bytes overflow"));
                }
                whole(*dst_len, reduction)
            }
            CollectiveCall::AllGather { src_len } => src_len
                .checked_mul(ranks)
                .is_none()
                .then(|| format!("{ranks} chunks of {src_len} bytes overflow")),
            CollectiveCall::AllToAll { len } => (!len.is_multiple_of(ranks.max(1)))
                .then(|| format!("{len} bytes do not divide into {ranks} equal chunks")),
            CollectiveCall::Broadcast { root, has_src, .. } => {
                if *root >= ranks {
                    Some(format!(
                        "root {root} is not a rank (the communicator has {ranks})"
                    ))
                } else if *has_src != (*root == rank) {
                    Some(if *has_src {
                        format!("rank {rank} gave a source but the root is rank {root}")
                    } else {
                        format!("rank {rank} is the root but gave no source")
                    })
                } else {
                    None
                }
            }
            CollectiveCall::Send { peer, .. } | CollectiveCall::Recv { peer, .. } => {
                if *peer >= ranks {
                    Some(format!(
                        "peer {peer} is not a rank (the communicator has {ranks})"
                    ))
                } else if *peer == rank {
                    Some(format!("rank {rank} cannot {} itself", self.name()))
                } else {
                    None
                }
            }
            CollectiveCall::Refused => None,
        }
    }

    /// The call with what may legitimately differ between ranks erased (a
    /// broadcast's `has_src`): what every rank of a group call must agree on.
    fn shape(&self) -> CollectiveCall {
        match *self {
            CollectiveCall::Broadcast { root, len, .. } => CollectiveCall::Broadcast {
                root,
                len,
                has_src: false,
            },
            other => other,
        }
    }
}

impl fmt::Display for CollectiveCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name();
        match self {
            CollectiveCall::AllReduce { reduction, len } => {
                write!(f, "{name}({reduction}, {len} B)")
            }
            CollectiveCall::ReduceScatter { reduction, dst_len } => {
                write!(f, "{name}({reduction}, {dst_len} B per rank)")
            }
            CollectiveCall::AllGather { src_len } => write!(f, "{name}({src_len} B per rank)"),
            CollectiveCall::Broadcast { root, len, .. } => {
                write!(f, "{name}(root {root}, {len} B)")
            }
            CollectiveCall::AllToAll { len } => write!(f, "{name}({len} B)"),
            CollectiveCall::Send { peer, len } => write!(f, "{name}(to rank {peer}, {len} B)"),
            CollectiveCall::Recv { peer, len } => write!(f, "{name}(from rank {peer}, {len} B)"),
            CollectiveCall::Refused => f.write_str(name),
        }
    }
}

/// The `seq`-th message from rank `from` to rank `to` (point-to-point calls
/// pair per ordered pair of ranks, in order, as in NCCL and MPI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    /// The sending rank.
    pub from: usize,
    /// The receiving rank.
    pub to: usize,
    /// How many messages `from` sent `to` before this one.
    pub seq: u64,
}

/// Which rendezvous a call takes part in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallId {
    /// The `seq`-th group call of the communicator (every rank's `seq`-th
    /// group call pairs with every other rank's).
    Group {
        /// Group calls posted on this communicator before this one.
        seq: u64,
    },
    /// A point-to-point message.
    P2p(Link),
}

impl CallId {
    /// The ranks taking part, in slot order: every rank for a group call;
    /// sender then receiver for a message.
    pub fn participants(&self, ranks: usize) -> Vec<usize> {
        match self {
            CallId::Group { .. } => (0..ranks).collect(),
            CallId::P2p(link) => vec![link.from, link.to],
        }
    }
}

/// The call in words, for errors: `all_reduce #3`, `send #0 from rank 1 to rank 2`.
pub fn describe(name: &str, id: CallId) -> String {
    match id {
        CallId::Group { seq } => format!("{name} #{seq}"),
        CallId::P2p(Link { from, to, seq }) => {
            format!("{name} #{seq} from rank {from} to rank {to}")
        }
    }
}

/// What a rank tells the others about its call before any data moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The rank describing its call.
    pub rank: usize,
    /// The call it posted.
    pub call: CollectiveCall,
    /// Why the call cannot be valid, when it cannot (it still takes part, so
    /// the others learn of the failure instead of waiting for it).
    pub invalid: Option<String>,
    /// Whether its input arrived and can be trusted; the error otherwise.
    pub input: Result<(), Arc<ServerError>>,
    /// Whether its data moves on the devices ([`crate::DeviceData`]) rather
    /// than through the transport: ranks that disagree fail the call as a
    /// mismatch instead of waiting in different rounds.
    pub on_device: bool,
}

/// What every rank concludes from the exchanged descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Move the data.
    Run,
    /// Move nothing; the result is poisoned with this error
    /// ([`ServerError::CollectiveInput`]).
    Poisoned(ServerError),
    /// Move nothing; the call fails with this error on every rank.
    Fail(ServerError),
}

/// The error a rank posting an invalid call gets, and every other rank of it.
pub fn invalid_call(id: CallId, rank: usize, call: &CollectiveCall, reason: &str) -> ServerError {
    ServerError::CollectiveMismatch {
        reason: format!(
            "{}: rank {rank} posted an invalid call {call}: {reason}",
            describe(call.name(), id)
        ),
    }
}

fn poisoned(rank: usize, cause: &Arc<ServerError>) -> Verdict {
    Verdict::Poisoned(ServerError::CollectiveInput {
        rank,
        cause: Arc::clone(cause),
    })
}

/// The verdict on group call `seq` from every rank's descriptor, in rank
/// order.
pub fn agree(seq: u64, ranks: usize, descs: &[Descriptor]) -> Verdict {
    let id = CallId::Group { seq };
    let first = match descs.first() {
        Some(first) if descs.len() == ranks => first,
        _ => {
            return Verdict::Fail(ServerError::CollectiveState {
                fault: CollectiveFault::Round {
                    call: describe("group call", id),
                    problem: RoundProblem::Parts {
                        got: descs.len(),
                        ranks,
                    },
                },
            });
        }
    };
    for (r, d) in descs.iter().enumerate() {
        if let Some(reason) = &d.invalid {
            return Verdict::Fail(invalid_call(id, r, &d.call, reason));
        }
    }
    // A refused call has no shape to compare: whatever the others posted,
    // their call fails, naming the rank and its refusal.
    if let Some((r, d)) = descs
        .iter()
        .enumerate()
        .find(|(_, d)| d.call == CollectiveCall::Refused)
    {
        return match &d.input {
            Err(cause) => poisoned(r, cause),
            Ok(()) => poisoned(r, &Arc::new(refused_without_cause(id, r))),
        };
    }
    if descs
        .iter()
        .any(|d| d.call.shape() != first.call.shape() || !d.call.is_group())
    {
        let calls: Vec<String> = descs
            .iter()
            .enumerate()
            .map(|(r, d)| format!("rank {r}: {}", d.call))
            .collect();
        return Verdict::Fail(ServerError::CollectiveMismatch {
            reason: format!("group call #{seq}: ranks disagree: {}", calls.join("; ")),
        });
    }
    if descs.iter().any(|d| d.on_device != first.on_device) {
        let paths: Vec<String> = descs
            .iter()
            .enumerate()
            .map(|(r, d)| format!("rank {r}: {}", if d.on_device { "device" } else { "host" }))
            .collect();
        return Verdict::Fail(ServerError::CollectiveMismatch {
            reason: format!(
                "group call #{seq}: ranks disagree on where the data moves: {}",
                paths.join("; ")
            ),
        });
    }
    let failed = |r: usize| descs.get(r).and_then(|d| d.input.as_ref().err());
    // Whose input a result depends on: every rank's, or the root's alone.
    // Spelled out per call, so a call added later must say which.
    let any_rank = || match (0..ranks).find_map(|r| failed(r).map(|c| (r, c))) {
        Some((r, cause)) => poisoned(r, cause),
        None => Verdict::Run,
    };
    match first.call {
        CollectiveCall::Broadcast { root, .. } => match failed(root) {
            Some(cause) => poisoned(root, cause),
            None => Verdict::Run,
        },
        CollectiveCall::AllReduce { .. }
        | CollectiveCall::AllGather { .. }
        | CollectiveCall::ReduceScatter { .. }
        | CollectiveCall::AllToAll { .. } => any_rank(),
        // Not group calls: refused as a mismatch above; a refused call is
        // the verdict above.
        CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } | CollectiveCall::Refused => {
            Verdict::Fail(ServerError::CollectiveState {
                fault: CollectiveFault::NotAGroupCall {
                    call: first.call.to_string(),
                },
            })
        }
    }
}

/// What a refused call names when its refusal did not come with it (a
/// peer's header that says refused and no input error: never sent by this
/// crate).
fn refused_without_cause(id: CallId, rank: usize) -> ServerError {
    ServerError::CollectiveMismatch {
        reason: format!(
            "{}: rank {rank} refused its call and gave no reason",
            describe("group call", id)
        ),
    }
}

/// The verdict on a message from the sender's and the receiver's descriptors.
pub fn agree_pair(link: Link, sender: &Descriptor, receiver: &Descriptor) -> Verdict {
    let what = describe("send", CallId::P2p(link));
    match (sender.call, receiver.call) {
        (
            CollectiveCall::Send {
                peer: to,
                len: sent,
            },
            CollectiveCall::Recv {
                peer: from,
                len: expected,
            },
        ) if to == link.to && from == link.from => {
            if sent != expected {
                return Verdict::Fail(ServerError::CollectiveMismatch {
                    reason: format!(
                        "{what}: the sender sends {sent} B, the receiver expects {expected} B"
                    ),
                });
            }
            match &sender.input {
                Err(cause) => poisoned(link.from, cause),
                Ok(()) => Verdict::Run,
            }
        }
        (s, r) => Verdict::Fail(ServerError::CollectiveMismatch {
            reason: format!(
                "{what}: rank {} posted {s}, rank {} posted {r}",
                link.from, link.to
            ),
        }),
    }
}
