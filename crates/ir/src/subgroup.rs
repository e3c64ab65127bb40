//! The subgroup operations: collectives of one operand and shuffles.

/// Subgroup collectives of one operand (need the device's `SUBGROUP`
/// feature). Each is evaluated over the *active* invocations of the
/// subgroup, which must all reach the same operation (the interpreter
/// checks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubgroupOp {
    /// `subgroupAdd`: the sum (wrapping for integers) over the subgroup;
    /// i32, u32, f32 and their vectors.
    Add,
    /// `subgroupMul`: the product.
    Mul,
    /// `subgroupMin`.
    Min,
    /// `subgroupMax`.
    Max,
    /// `subgroupAnd` (i32, u32 and their vectors).
    And,
    /// `subgroupOr`.
    Or,
    /// `subgroupXor`.
    Xor,
    /// `subgroupAll(pred)`: whether `pred` holds on every active invocation.
    All,
    /// `subgroupAny(pred)`: whether it holds on any.
    Any,
    /// `subgroupInclusiveAdd`: the sum over the active invocations up to
    /// this one (by `subgroup_invocation_id`), this one included.
    InclusiveAdd,
    /// `subgroupInclusiveMul`.
    InclusiveMul,
    /// `subgroupExclusiveAdd`: the sum over those before this one (0 for
    /// the first).
    ExclusiveAdd,
    /// `subgroupExclusiveMul` (1 for the first).
    ExclusiveMul,
    /// `subgroupBroadcastFirst`: the value of the lowest active invocation.
    BroadcastFirst,
    /// `subgroupBroadcast(x, lane)`: the value of invocation `lane` (a
    /// constant, as WGSL requires), which must be active.
    Broadcast(u32),
    /// `subgroupBallot(pred)`: `vec4<u32>` with bit `i` set (bit `i % 32`
    /// of lane `i / 32`) when active invocation `i` has `pred` true.
    Ballot,
}

impl SubgroupOp {
    /// The WGSL function name.
    pub const fn wgsl(self) -> &'static str {
        match self {
            SubgroupOp::Add => "subgroupAdd",
            SubgroupOp::Mul => "subgroupMul",
            SubgroupOp::Min => "subgroupMin",
            SubgroupOp::Max => "subgroupMax",
            SubgroupOp::And => "subgroupAnd",
            SubgroupOp::Or => "subgroupOr",
            SubgroupOp::Xor => "subgroupXor",
            SubgroupOp::All => "subgroupAll",
            SubgroupOp::Any => "subgroupAny",
            SubgroupOp::InclusiveAdd => "subgroupInclusiveAdd",
            SubgroupOp::InclusiveMul => "subgroupInclusiveMul",
            SubgroupOp::ExclusiveAdd => "subgroupExclusiveAdd",
            SubgroupOp::ExclusiveMul => "subgroupExclusiveMul",
            SubgroupOp::BroadcastFirst => "subgroupBroadcastFirst",
            SubgroupOp::Broadcast(_) => "subgroupBroadcast",
            SubgroupOp::Ballot => "subgroupBallot",
        }
    }
}

/// Subgroup shuffles: every active invocation reads the operand of another
/// one, named by a `u32` second operand (need `SUBGROUP`). The invocation
/// read must be active and in the subgroup (WGSL leaves the result
/// indeterminate otherwise; the interpreter refuses it), except that a
/// shuffle up or down past the subgroup's end is allowed and its result
/// indeterminate on a device (the interpreter's is the invocation's own
/// operand): discard it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShuffleOp {
    /// `subgroupShuffle(x, id)`: invocation `id`'s.
    Shuffle,
    /// `subgroupShuffleXor(x, mask)`: invocation `self ^ mask`'s (`mask`
    /// the same on every invocation).
    Xor,
    /// `subgroupShuffleUp(x, delta)`: invocation `self - delta`'s (`delta`
    /// the same on every invocation).
    Up,
    /// `subgroupShuffleDown(x, delta)`: invocation `self + delta`'s.
    Down,
}

impl ShuffleOp {
    /// The WGSL function name.
    pub const fn wgsl(self) -> &'static str {
        match self {
            ShuffleOp::Shuffle => "subgroupShuffle",
            ShuffleOp::Xor => "subgroupShuffleXor",
            ShuffleOp::Up => "subgroupShuffleUp",
            ShuffleOp::Down => "subgroupShuffleDown",
        }
    }
}
