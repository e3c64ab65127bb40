//! The value-computing half of [`KernelBuilder`]: constants, builtins,
//! subgroup operations, vectors, and arithmetic, logic and math. Each binds
//! a fresh value at the call (see the parent module).

use super::{KernelBuilder, Val};
use crate::ir::{BinOp, Builtin, Op, SubgroupOp, UnOp};
use crate::{Lit, Scalar};

impl KernelBuilder {
    // ---- constants and builtins -------------------------------------------

    /// A constant.
    pub fn lit(&mut self, v: impl Into<Lit>) -> Val {
        self.emit(Op::Lit(v.into()))
    }
    /// A `u32` constant.
    pub fn u32(&mut self, v: u32) -> Val {
        self.lit(v)
    }
    /// An `i32` constant.
    pub fn i32(&mut self, v: i32) -> Val {
        self.lit(v)
    }
    /// An `f32` constant.
    pub fn f32(&mut self, v: f32) -> Val {
        self.lit(v)
    }
    /// An `i64` constant (needs `SHADER_INT64` to compile).
    pub fn i64(&mut self, v: i64) -> Val {
        self.lit(v)
    }
    /// A `u64` constant (needs `SHADER_INT64` to compile).
    pub fn u64(&mut self, v: u64) -> Val {
        self.lit(v)
    }
    /// An `f64` constant (needs `SHADER_F64` to compile).
    pub fn f64(&mut self, v: f64) -> Val {
        self.lit(v)
    }
    /// A `bool` constant.
    pub fn bool(&mut self, v: bool) -> Val {
        self.lit(v)
    }

    /// `global_invocation_id`.
    pub fn global_id(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::GlobalId))
    }
    /// `local_invocation_id`.
    pub fn local_id(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::LocalId))
    }
    /// `workgroup_id`.
    pub fn workgroup_id(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::WorkgroupId))
    }
    /// `num_workgroups`.
    pub fn num_workgroups(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::NumWorkgroups))
    }
    /// `local_invocation_index`.
    pub fn local_index(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::LocalIndex))
    }

    /// `subgroup_invocation_id` (needs `SUBGROUP`).
    pub fn subgroup_invocation_id(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::SubgroupInvocationId))
    }
    /// `subgroup_size` (needs `SUBGROUP`).
    pub fn subgroup_size(&mut self) -> Val {
        self.emit(Op::Builtin(Builtin::SubgroupSize))
    }

    // ---- subgroups ------------------------------------------------------------

    /// A subgroup collective (needs `SUBGROUP`); see [`SubgroupOp`].
    pub fn subgroup(&mut self, op: SubgroupOp, x: Val) -> Val {
        self.emit(Op::Subgroup(op, x.id))
    }
    /// `subgroupAdd(x)`.
    pub fn subgroup_add(&mut self, x: Val) -> Val {
        self.subgroup(SubgroupOp::Add, x)
    }
    /// `subgroupMin(x)`.
    pub fn subgroup_min(&mut self, x: Val) -> Val {
        self.subgroup(SubgroupOp::Min, x)
    }
    /// `subgroupMax(x)`.
    pub fn subgroup_max(&mut self, x: Val) -> Val {
        self.subgroup(SubgroupOp::Max, x)
    }
    /// `subgroupBroadcastFirst(x)`.
    pub fn subgroup_broadcast_first(&mut self, x: Val) -> Val {
        self.subgroup(SubgroupOp::BroadcastFirst, x)
    }
    /// `subgroupBallot(pred)`: a `vec4<u32>` mask of the active invocations
    /// where `pred` holds.
    pub fn subgroup_ballot(&mut self, pred: Val) -> Val {
        self.subgroup(SubgroupOp::Ballot, pred)
    }

    // ---- vectors ------------------------------------------------------------

    /// Lane `lane` of a vector.
    pub fn extract(&mut self, v: Val, lane: u8) -> Val {
        self.emit(Op::Extract(v.id, lane))
    }
    /// Lane 0.
    pub fn x(&mut self, v: Val) -> Val {
        self.extract(v, 0)
    }
    /// Lane 1.
    pub fn y(&mut self, v: Val) -> Val {
        self.extract(v, 1)
    }
    /// Lane 2.
    pub fn z(&mut self, v: Val) -> Val {
        self.extract(v, 2)
    }
    /// A vector of `lanes` copies of a scalar.
    pub fn splat(&mut self, v: Val, lanes: u8) -> Val {
        self.emit(Op::Splat(v.id, lanes))
    }
    /// A vector from scalars.
    pub fn vec(&mut self, lanes: &[Val]) -> Val {
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
    }

    /// `cond ? on_true : on_false` (WGSL `select(on_false, on_true, cond)`).
    pub fn select(&mut self, cond: Val, on_true: Val, on_false: Val) -> Val {
        self.emit(Op::Select {
            cond: cond.id,
            on_true: on_true.id,
            on_false: on_false.id,
        })
    }
    /// `clamp(x, lo, hi)`.
    pub fn clamp(&mut self, x: Val, lo: Val, hi: Val) -> Val {
        self.emit(Op::Clamp(x.id, lo.id, hi.id))
    }
    /// `fma(a, b, c)`.
    pub fn fma(&mut self, a: Val, b: Val, c: Val) -> Val {
        self.emit(Op::Fma(a.id, b.id, c.id))
    }
    /// Value conversion (`f32(x)`, `u32(x)`, ...).
    pub fn cast(&mut self, x: Val, to: Scalar) -> Val {
        self.emit(Op::Cast(x.id, to))
    }
    /// `bitcast<to>(x)`.
    pub fn bitcast(&mut self, x: Val, to: Scalar) -> Val {
        self.emit(Op::Bitcast(x.id, to))
    }
}
