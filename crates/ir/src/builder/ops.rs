//! The value-computing half of [`KernelBuilder`]: constants, builtins,
//! subgroup operations, vectors, and arithmetic, logic and math. Each binds
//! a fresh value at the call (see the parent module).

use super::{KernelBuilder, Operand, Val};
use crate::ir::{BinOp, Builtin, Op, ShuffleOp, SubgroupOp, UnOp};
use crate::{Lit, Scalar, Type};

impl KernelBuilder {
    // ---- constants and builtins -------------------------------------------

    /// A constant.
    #[track_caller]
    pub fn lit(&self, v: impl Into<Lit>) -> Val {
        self.emit(Op::Lit(v.into()))
    }
    /// A `u32` constant.
    #[track_caller]
    pub fn u32(&self, v: u32) -> Val {
        self.lit(v)
    }
    /// An `i32` constant.
    #[track_caller]
    pub fn i32(&self, v: i32) -> Val {
        self.lit(v)
    }
    /// An `f32` constant.
    #[track_caller]
    pub fn f32(&self, v: f32) -> Val {
        self.lit(v)
    }
    /// An `i64` constant (needs `SHADER_INT64` to compile).
    #[track_caller]
    pub fn i64(&self, v: i64) -> Val {
        self.lit(v)
    }
    /// A `u64` constant (needs `SHADER_INT64` to compile).
    #[track_caller]
    pub fn u64(&self, v: u64) -> Val {
        self.lit(v)
    }
    /// An `f64` constant (needs `SHADER_F64` to compile).
    #[track_caller]
    pub fn f64(&self, v: f64) -> Val {
        self.lit(v)
    }
    /// A `bool` constant.
    #[track_caller]
    pub fn bool(&self, v: bool) -> Val {
        self.lit(v)
    }

    /// `global_invocation_id`.
    #[track_caller]
    pub fn global_id(&self) -> Val {
        self.emit(Op::Builtin(Builtin::GlobalId))
    }
    /// `local_invocation_id`.
    #[track_caller]
    pub fn local_id(&self) -> Val {
        self.emit(Op::Builtin(Builtin::LocalId))
    }
    /// `workgroup_id`.
    #[track_caller]
    pub fn workgroup_id(&self) -> Val {
        self.emit(Op::Builtin(Builtin::WorkgroupId))
    }
    /// `num_workgroups`.
    #[track_caller]
    pub fn num_workgroups(&self) -> Val {
        self.emit(Op::Builtin(Builtin::NumWorkgroups))
    }
    /// `local_invocation_index`.
    #[track_caller]
    pub fn local_index(&self) -> Val {
        self.emit(Op::Builtin(Builtin::LocalIndex))
    }

    /// `subgroup_invocation_id` (needs `SUBGROUP`).
    #[track_caller]
    pub fn subgroup_invocation_id(&self) -> Val {
        self.emit(Op::Builtin(Builtin::SubgroupInvocationId))
    }
    /// `subgroup_size` (needs `SUBGROUP`).
    #[track_caller]
    pub fn subgroup_size(&self) -> Val {
        self.emit(Op::Builtin(Builtin::SubgroupSize))
    }
    /// `subgroup_id`: this invocation's subgroup in its workgroup (needs
    /// `SUBGROUP`).
    #[track_caller]
    pub fn subgroup_id(&self) -> Val {
        self.emit(Op::Builtin(Builtin::SubgroupId))
    }
    /// `num_subgroups`: the workgroup's subgroups (needs `SUBGROUP`).
    #[track_caller]
    pub fn num_subgroups(&self) -> Val {
        self.emit(Op::Builtin(Builtin::NumSubgroups))
    }

    // ---- subgroups ------------------------------------------------------------

    /// A subgroup collective (needs `SUBGROUP`); see [`SubgroupOp`].
    #[track_caller]
    pub fn subgroup(&self, op: SubgroupOp, x: Val) -> Val {
        self.emit(Op::Subgroup(op, x.id))
    }
    /// `subgroupAdd(x)`.
    #[track_caller]
    pub fn subgroup_add(&self, x: Val) -> Val {
        self.subgroup(SubgroupOp::Add, x)
    }
    /// `subgroupMin(x)`.
    #[track_caller]
    pub fn subgroup_min(&self, x: Val) -> Val {
        self.subgroup(SubgroupOp::Min, x)
    }
    /// `subgroupMax(x)`.
    #[track_caller]
    pub fn subgroup_max(&self, x: Val) -> Val {
        self.subgroup(SubgroupOp::Max, x)
    }
    /// `subgroupBroadcastFirst(x)`.
    #[track_caller]
    pub fn subgroup_broadcast_first(&self, x: Val) -> Val {
        self.subgroup(SubgroupOp::BroadcastFirst, x)
    }
    /// `subgroupBallot(pred)`: a `vec4<u32>` mask of the active invocations
    /// where `pred` holds.
    #[track_caller]
    pub fn subgroup_ballot(&self, pred: Val) -> Val {
        self.subgroup(SubgroupOp::Ballot, pred)
    }
    /// `subgroupBroadcast(x, lane)`: invocation `lane`'s `x` (a constant).
    #[track_caller]
    pub fn subgroup_broadcast(&self, x: Val, lane: u32) -> Val {
        self.subgroup(SubgroupOp::Broadcast(lane), x)
    }
    /// `subgroupInclusiveAdd(x)`: the prefix sum up to this invocation.
    #[track_caller]
    pub fn subgroup_inclusive_add(&self, x: Val) -> Val {
        self.subgroup(SubgroupOp::InclusiveAdd, x)
    }
    /// `subgroupExclusiveAdd(x)`: the prefix sum before this invocation.
    #[track_caller]
    pub fn subgroup_exclusive_add(&self, x: Val) -> Val {
        self.subgroup(SubgroupOp::ExclusiveAdd, x)
    }
    /// `subgroupAll(pred)`.
    #[track_caller]
    pub fn subgroup_all(&self, pred: Val) -> Val {
        self.subgroup(SubgroupOp::All, pred)
    }
    /// `subgroupAny(pred)`.
    #[track_caller]
    pub fn subgroup_any(&self, pred: Val) -> Val {
        self.subgroup(SubgroupOp::Any, pred)
    }
    /// A subgroup shuffle (needs `SUBGROUP`): the `x` of the invocation
    /// `lane` names; see [`ShuffleOp`].
    #[track_caller]
    pub fn subgroup_shuffle_op(&self, op: ShuffleOp, x: Val, lane: impl Operand) -> Val {
        let lane = self.operand(lane, Some(crate::Type::U32));
        self.emit(Op::SubgroupShuffle(op, x.id, lane.id))
    }
    /// `subgroupShuffle(x, id)`.
    #[track_caller]
    pub fn subgroup_shuffle(&self, x: Val, id: impl Operand) -> Val {
        self.subgroup_shuffle_op(ShuffleOp::Shuffle, x, id)
    }
    /// `subgroupShuffleXor(x, mask)`.
    #[track_caller]
    pub fn subgroup_shuffle_xor(&self, x: Val, mask: impl Operand) -> Val {
        self.subgroup_shuffle_op(ShuffleOp::Xor, x, mask)
    }

    // ---- vectors ------------------------------------------------------------

    /// Lane `lane` of a vector.
    #[track_caller]
    pub fn extract(&self, v: Val, lane: u8) -> Val {
        self.emit(Op::Extract(v.id, lane))
    }
    /// `v[i]`: the lane a run-time index names (`u32` or `i32`).
    #[track_caller]
    pub fn index(&self, v: Val, i: impl Operand) -> Val {
        let i = self.operand(i, Some(Type::U32));
        self.emit(Op::Index(v.id, i.id))
    }
    /// `v` with lane `i` (run-time) set to `x`.
    #[track_caller]
    pub fn with_lane(&self, v: Val, i: impl Operand, x: impl Operand) -> Val {
        let i = self.operand(i, Some(Type::U32));
        let x = self.operand(x, Some(Type::scalar(v.ty.scalar)));
        self.emit(Op::WithLane(v.id, i.id, x.id))
    }
    /// Lane 0.
    #[track_caller]
    pub fn x(&self, v: Val) -> Val {
        self.extract(v, 0)
    }
    /// Lane 1.
    #[track_caller]
    pub fn y(&self, v: Val) -> Val {
        self.extract(v, 1)
    }
    /// Lane 2.
    #[track_caller]
    pub fn z(&self, v: Val) -> Val {
        self.extract(v, 2)
    }
    /// A vector of `lanes` copies of a scalar.
    #[track_caller]
    pub fn splat(&self, v: Val, lanes: u8) -> Val {
        self.emit(Op::Splat(v.id, lanes))
    }
    /// A vector from scalars.
    #[track_caller]
    pub fn vec(&self, lanes: &[Val]) -> Val {
        self.emit(Op::Compose(lanes.iter().map(|v| v.id).collect()))
    }

    // ---- arithmetic, logic, math ---------------------------------------------

    unary! {
        /// `-x`.
        neg => Neg,
        /// `!x` (bool).
        not => Not,
        /// `~x` (integers).
        bit_not => BitNot,
        /// `abs(x)`.
        abs => Abs,
        /// `exp(x)`.
        exp => Exp,
        /// `log(x)`.
        log => Log,
        /// `sqrt(x)`.
        sqrt => Sqrt,
        /// `inverseSqrt(x)`.
        inverse_sqrt => InverseSqrt,
        /// `tanh(x)`.
        tanh => Tanh,
        /// `sin(x)`.
        sin => Sin,
        /// `cos(x)`.
        cos => Cos,
        /// `floor(x)`.
        floor => Floor,
        /// `ceil(x)`.
        ceil => Ceil,
        /// `exp2(x)`.
        exp2 => Exp2,
        /// `log2(x)`.
        log2 => Log2,
        /// `trunc(x)`: toward zero.
        trunc => Trunc,
        /// `round(x)`: to nearest, ties to even.
        round => Round,
        /// `fract(x)`: `x - floor(x)`.
        fract => Fract,
        /// `sign(x)`: -1, 0 or 1 (`i32` and floats).
        sign => Sign,
        /// `countOneBits(x)` (`i32`, `u32`).
        count_one_bits => CountOneBits,
        /// `countLeadingZeros(x)` (`i32`, `u32`).
        count_leading_zeros => CountLeadingZeros,
        /// `countTrailingZeros(x)` (`i32`, `u32`).
        count_trailing_zeros => CountTrailingZeros,
        /// `reverseBits(x)` (`i32`, `u32`).
        reverse_bits => ReverseBits,
    }

    binary! {
        /// `x + y`.
        add => Add,
        /// `x - y`.
        sub => Sub,
        /// `x * y`.
        mul => Mul,
        /// `x / y`.
        div => Div,
        /// `x % y`.
        rem => Rem,
        /// `x & y`.
        and => And,
        /// `x | y`.
        or => Or,
        /// `x ^ y`.
        xor => Xor,
        /// `x << y`.
        shl => Shl,
        /// `x >> y`.
        shr => Shr,
        /// `x == y`.
        eq => Eq,
        /// `x != y`.
        ne => Ne,
        /// `x < y`.
        lt => Lt,
        /// `x <= y`.
        le => Le,
        /// `x > y`.
        gt => Gt,
        /// `x >= y`.
        ge => Ge,
        /// `min(x, y)`.
        min => Min,
        /// `max(x, y)`.
        max => Max,
        /// `pow(x, y)`.
        pow => Pow,
        /// `atan2(y, x)`: the angle of the point `(x, y)`, in radians.
        atan2 => Atan2,
    }

    /// `cond ? on_true : on_false` (WGSL `select(on_false, on_true, cond)`).
    #[track_caller]
    pub fn select(&self, cond: impl Operand, on_true: impl Operand, on_false: impl Operand) -> Val {
        let cond = self.operand(cond, Some(crate::Type::BOOL));
        let (on_true, on_false) = self.operands(on_true, on_false);
        self.emit(Op::Select {
            cond: cond.id,
            on_true: on_true.id,
            on_false: on_false.id,
        })
    }
    /// `clamp(x, lo, hi)`.
    #[track_caller]
    pub fn clamp(&self, x: impl Operand, lo: impl Operand, hi: impl Operand) -> Val {
        let (x, lo) = self.operands(x, lo);
        let hi = self.operand(hi, Some(x.ty));
        self.emit(Op::Clamp(x.id, lo.id, hi.id))
    }
    /// `fma(a, b, c)`.
    #[track_caller]
    pub fn fma(&self, a: impl Operand, b: impl Operand, c: impl Operand) -> Val {
        let (a, b) = self.operands(a, b);
        let c = self.operand(c, Some(a.ty));
        self.emit(Op::Fma(a.id, b.id, c.id))
    }
    /// `extractBits(e, offset, count)` on i32/u32 (see
    /// [`Op::ExtractBits`]); `offset` and `count` are u32.
    #[track_caller]
    pub fn extract_bits(&self, e: Val, offset: impl Operand, count: impl Operand) -> Val {
        let u = Some(Type::scalar(Scalar::U32));
        let (offset, count) = (self.operand(offset, u), self.operand(count, u));
        self.emit(Op::ExtractBits(e.id, offset.id, count.id))
    }
    /// `insertBits(e, newbits, offset, count)` on i32/u32 (see
    /// [`Op::InsertBits`]); `offset` and `count` are u32.
    #[track_caller]
    pub fn insert_bits(
        &self,
        e: Val,
        newbits: impl Operand,
        offset: impl Operand,
        count: impl Operand,
    ) -> Val {
        let newbits = self.operand(newbits, Some(e.ty));
        let u = Some(Type::scalar(Scalar::U32));
        let (offset, count) = (self.operand(offset, u), self.operand(count, u));
        self.emit(Op::InsertBits(e.id, newbits.id, offset.id, count.id))
    }
    /// `dot(a, b)` of two vectors (see [`Op::Dot`]).
    #[track_caller]
    pub fn dot(&self, a: impl Operand, b: impl Operand) -> Val {
        let (a, b) = self.operands(a, b);
        self.emit(Op::Dot(a.id, b.id))
    }
    /// Value conversion (`f32(x)`, `u32(x)`, ...).
    #[track_caller]
    pub fn cast(&self, x: Val, to: Scalar) -> Val {
        self.emit(Op::Cast(x.id, to))
    }
    /// `bitcast<to>(x)`.
    #[track_caller]
    pub fn bitcast(&self, x: Val, to: Scalar) -> Val {
        self.emit(Op::Bitcast(x.id, to))
    }
}
