//! The program: declarations, flat let-bound operations and structured
//! statements.
//!
//! Every operation is bound to a fresh [`ValueId`] by a [`Stmt::Let`] at the
//! point it runs, so evaluation order is the statement order (a load bound
//! before a store sees the old value, as in the kernel source). A value is
//! visible from its `Let` to the end of the enclosing block.

use crate::{Lit, Scalar, Type};

/// An SSA value: the result of one [`Stmt::Let`] (or a loop index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// A mutable function-local variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VarId(pub u32);

/// Whether a global buffer is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only read by the kernel.
    Read,
    /// Read and written (part of the launch's write set).
    ReadWrite,
}

/// A storage buffer at `@binding(index)`: a runtime-sized array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferDecl {
    /// Element type (never `bool`).
    pub elem: Scalar,
    /// 1 for an array of scalars; 2 or 4 for an array of vectors
    /// (`array<vec4<f32>>`): one element is `lanes` consecutive scalars,
    /// loaded or stored at once (a 16-byte access for `vec4<f32>`, what
    /// bandwidth-bound kernels need). Never 3: a `vec3` in a storage array
    /// is padded to the size of a `vec4`, so its bytes would not be
    /// consecutive scalars.
    pub lanes: u8,
    /// Whether the kernel writes it.
    pub access: Access,
    /// An array of `atomic<i32|u32>`: accessed only through atomics.
    pub atomic: bool,
}

impl BufferDecl {
    /// The type of one element (a scalar or a vector).
    pub const fn ty(&self) -> Type {
        Type::vec(self.elem, self.lanes)
    }

    /// Bytes per element in a host buffer.
    pub const fn elem_size(&self) -> usize {
        self.elem.size() * self.lanes as usize
    }
}

/// A `var<workgroup>` array, zero-initialised at the start of each workgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedDecl {
    /// Element type (of each lane).
    pub elem: Scalar,
    /// Lanes per element: 1 (a scalar), 2 or 4 (a vector; no `vec3`, whose
    /// array stride would pad each element).
    pub lanes: u8,
    /// Number of elements.
    pub len: u32,
    /// An array of `atomic<i32|u32>`: accessed only through atomics.
    pub atomic: bool,
}

impl SharedDecl {
    /// The type of one element (a scalar or a vector).
    pub const fn ty(&self) -> Type {
        Type::vec(self.elem, self.lanes)
    }

    /// Bytes the array takes in workgroup memory.
    pub const fn bytes(&self) -> u64 {
        self.len as u64 * self.lanes as u64 * self.elem.size() as u64
    }
}

/// A per-invocation array (`var<function>`), zero at the start of each
/// invocation: registers a kernel indexes (a register tile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalDecl {
    /// Element type (a scalar or a vector; not bool).
    pub ty: Type,
    /// Number of elements.
    pub len: u32,
}

/// An array a load or store addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayRef {
    /// Global buffer `index`.
    Global(u32),
    /// Workgroup array `index`.
    Shared(u32),
    /// Per-invocation array `index`.
    Local(u32),
}

/// Invocation ids and counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `global_invocation_id`, `vec3<u32>`.
    GlobalId,
    /// `local_invocation_id`, `vec3<u32>`.
    LocalId,
    /// `workgroup_id`, `vec3<u32>`.
    WorkgroupId,
    /// `num_workgroups`, `vec3<u32>`.
    NumWorkgroups,
    /// `local_invocation_index`, `u32`.
    LocalIndex,
    /// `subgroup_invocation_id`, `u32`: the invocation's lane in its
    /// subgroup (needs the device's `SUBGROUP` feature).
    SubgroupInvocationId,
    /// `subgroup_size`, `u32` (needs `SUBGROUP`).
    SubgroupSize,
    /// `subgroup_id`, `u32`: the invocation's subgroup among its
    /// workgroup's (needs `SUBGROUP`). Which invocations share a subgroup is
    /// the device's choice; the interpreter groups consecutive local indices.
    SubgroupId,
    /// `num_subgroups`, `u32`: the workgroup's subgroups (needs `SUBGROUP`),
    /// emitted as the invocations divided by `subgroup_size`, rounded up
    /// (lavapipe's builtin rounds down), as the interpreter counts them.
    NumSubgroups,
}

impl Builtin {
    /// The builtin's type.
    pub const fn ty(self) -> Type {
        match self {
            Builtin::LocalIndex
            | Builtin::SubgroupInvocationId
            | Builtin::SubgroupSize
            | Builtin::SubgroupId
            | Builtin::NumSubgroups => Type::U32,
            _ => Type::UVEC3,
        }
    }
}

pub use crate::matrix::{Layout, MatrixDecl, MatrixId, MatrixRole, MatrixStmt};
pub use crate::subgroup::{ShuffleOp, SubgroupOp};
pub use crate::unop::UnOp;

/// Two-operand operations; both operands have the same type except for
/// shifts, whose right operand is `u32` of the same width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+` (numeric, wrapping for integers).
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/` (integers: `x / 0 == x`, `MIN / -1 == MIN`).
    Div,
    /// `%` (integers: `x % 0 == 0`, `MIN % -1 == 0`).
    Rem,
    /// `&`: bitwise on integers, logical on bool.
    And,
    /// `|`: bitwise on integers, logical on bool.
    Or,
    /// `^`: bitwise on integers, inequality on bool.
    Xor,
    /// `<<` by the low log2(bits) bits of the `u32` right operand (5 bits
    /// for 32-bit integers, 6 for 64-bit ones).
    Shl,
    /// `>>`: arithmetic for `i32`/`i64`, logical for `u32`/`u64`.
    Shr,
    /// `==` (result bool of the same width).
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `min` (numeric).
    Min,
    /// `max` (numeric).
    Max,
    /// `pow` (f32 and f16: no `f64` form on Vulkan).
    Pow,
    /// `atan2(y, x)`, the left operand `y` (f32 and f16: no `f64` form on
    /// Vulkan).
    Atan2,
}

impl BinOp {
    /// The operation's name in messages.
    pub const fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
            BinOp::Eq => "eq",
            BinOp::Ne => "ne",
            BinOp::Lt => "lt",
            BinOp::Le => "le",
            BinOp::Gt => "gt",
            BinOp::Ge => "ge",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::Pow => "pow",
            BinOp::Atan2 => "atan2",
        }
    }

    /// Comparisons (result is bool).
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

/// Read-modify-write atomics; each returns the old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `atomicAdd`.
    Add,
    /// `atomicSub`.
    Sub,
    /// `atomicMax`.
    Max,
    /// `atomicMin`.
    Min,
    /// `atomicAnd`.
    And,
    /// `atomicOr`.
    Or,
    /// `atomicXor`.
    Xor,
    /// `atomicExchange`.
    Exchange,
}

impl AtomicOp {
    /// The WGSL function name.
    pub const fn wgsl(self) -> &'static str {
        match self {
            AtomicOp::Add => "atomicAdd",
            AtomicOp::Sub => "atomicSub",
            AtomicOp::Max => "atomicMax",
            AtomicOp::Min => "atomicMin",
            AtomicOp::And => "atomicAnd",
            AtomicOp::Or => "atomicOr",
            AtomicOp::Xor => "atomicXor",
            AtomicOp::Exchange => "atomicExchange",
        }
    }
}

/// An operation producing one value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A constant.
    Lit(Lit),
    /// Scalar argument `index` from the uniform block.
    Arg(u32),
    /// An invocation builtin.
    Builtin(Builtin),
    /// A vector with every lane equal to a scalar.
    Splat(ValueId, u8),
    /// A vector from 2..=4 scalars of one type.
    Compose(Vec<ValueId>),
    /// Lane `1` of a vector.
    Extract(ValueId, u8),
    /// `v[i]`: the lane of a vector a run-time `u32` or `i32` names (a lane
    /// past the vector's is an error in the interpreter and reported under
    /// `BoundsChecks::Reported`).
    Index(ValueId, ValueId),
    /// The vector with lane `i` (run-time) replaced by a scalar.
    WithLane(ValueId, ValueId, ValueId),
    /// A one-operand operation.
    Unary(UnOp, ValueId),
    /// A two-operand operation.
    Binary(BinOp, ValueId, ValueId),
    /// `cond ? on_true : on_false`; `cond` is bool of the same width (or scalar).
    Select {
        /// Condition.
        cond: ValueId,
        /// Value where the condition holds.
        on_true: ValueId,
        /// Value where it does not.
        on_false: ValueId,
    },
    /// `clamp(x, lo, hi)` = `min(max(x, lo), hi)`.
    Clamp(ValueId, ValueId, ValueId),
    /// `fma(a, b, c)` = `a * b + c` (float).
    Fma(ValueId, ValueId, ValueId),
    /// `extractBits(e, offset, count)` on i32/u32 (and their vectors):
    /// `count` bits of `e` from bit `offset`, moved to the bottom
    /// (sign-extended for i32); `offset` and `count` are u32 scalars,
    /// clamped as WGSL does (`o = min(offset, 32)`, `c = min(count, 32 -
    /// o)`; `c == 0` gives 0).
    ExtractBits(ValueId, ValueId, ValueId),
    /// `insertBits(e, newbits, offset, count)`: `e` with bits `o..o + c`
    /// replaced by the low `c` bits of `newbits` (clamped as
    /// [`Op::ExtractBits`]; `c == 0` gives `e`).
    InsertBits(ValueId, ValueId, ValueId, ValueId),
    /// `dot(a, b)` of two vectors of f32, f16, i32 or u32: the sum of the
    /// lane products, a scalar (wrapping for integers; for floats the
    /// order of the sum and any fusing are the device's).
    Dot(ValueId, ValueId),
    /// Value conversion to another scalar type, same number of lanes.
    /// Integer to integer is Rust's `as` (truncate, or extend by the
    /// *source*'s signedness); float to integer saturates (see `interp`).
    Cast(ValueId, Scalar),
    /// Bit reinterpretation between same-size types (i32/u32/f32, or
    /// i64/u64/f64), same number of lanes.
    Bitcast(ValueId, Scalar),
    /// The current value of a variable.
    Get(VarId),
    /// `array[index]` (non-atomic arrays; `index` is `u32` or `i32`).
    Load(ArrayRef, ValueId),
    /// `arrayLength(&buffer)`, `u32`.
    ArrayLength(u32),
    /// `atomicLoad(&array[index])` of an atomic buffer or workgroup array.
    AtomicLoad(ArrayRef, ValueId),
    /// A read-modify-write atomic on `array[index]`; the old value.
    Atomic(AtomicOp, ArrayRef, ValueId, ValueId),
    /// `atomicCompareExchangeWeak(&array[index], cmp, value)`: stores
    /// `value` if the element equals `cmp`. A `vec2` of the element type:
    /// the old value, and 1 where the exchange happened (0 where not). On
    /// a device it may fail even when the old value equals `cmp` (WGSL's
    /// weak exchange; Vulkan's is strong), so a loop that retries on 0 is
    /// the portable use; the interpreter never fails one spuriously.
    CompareExchange(ArrayRef, ValueId, ValueId, ValueId),
    /// A subgroup collective of one operand.
    Subgroup(SubgroupOp, ValueId),
    /// A subgroup shuffle: the operand of the invocation the `u32` names.
    SubgroupShuffle(ShuffleOp, ValueId, ValueId),
}

/// Which memory a barrier orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Barrier {
    /// `workgroupBarrier()`: workgroup arrays.
    Workgroup,
    /// `storageBarrier()`: global buffers, within the workgroup.
    Storage,
}

/// A statement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// Binds the result of `op` to `id`.
    Let(ValueId, Op),
    /// Declares variable `var` initialised to a value.
    Var(VarId, ValueId),
    /// Assigns a variable.
    Set(VarId, ValueId),
    /// `array[index] = value`.
    Store(ArrayRef, ValueId, ValueId),
    /// `atomicStore(&array[index], value)`.
    AtomicStore(ArrayRef, ValueId, ValueId),
    /// `if cond { then } else { otherwise }`.
    If {
        /// Scalar bool.
        cond: ValueId,
        /// Taken branch.
        then: Vec<Stmt>,
        /// Other branch (may be empty).
        otherwise: Vec<Stmt>,
    },
    /// `for (i = start; i < end; i += step) { body }` over `i32` or `u32`;
    /// `index` is bound to `i` in the body. A `u32` loop ends where `i +
    /// step` would pass `u32::MAX` (it never wraps; the WGSL backend emits a
    /// constant step's loop as a count of its trips, which ends there, and
    /// a run-time step's as written, which would wrap: such a loop runs
    /// 2^32 / step passes or more before it could, so no test meets it).
    For {
        /// The loop index, visible in the body.
        index: ValueId,
        /// First value.
        start: ValueId,
        /// Exclusive bound.
        end: ValueId,
        /// Increment.
        step: ValueId,
        /// Body.
        body: Vec<Stmt>,
    },
    /// `loop { body }`, left by `Break` or `Return`.
    Loop(Vec<Stmt>),
    /// Leaves the innermost loop.
    Break,
    /// Next iteration of the innermost loop.
    Continue,
    /// Ends the invocation.
    Return,
    /// A barrier (in uniform control flow).
    Barrier(Barrier),
    /// `var = workgroupUniformLoad(&shared[index])`: a workgroup barrier,
    /// then every invocation reads the same element of a (non-atomic)
    /// workgroup array, a value uniform across the workgroup, so control
    /// flow that depends on it stays uniform (a loop with a barrier inside
    /// may end on it). In uniform control flow, with the same `index` in
    /// every invocation.
    UniformLoad(VarId, u32, ValueId),
    /// A cooperative-matrix statement (a subgroup collective).
    Matrix(MatrixStmt),
    /// `then` on a device that has `feature`, `otherwise` on one that
    /// lacks it: chosen when the kernel is compiled for a device (the
    /// interpreter: by how it is run), never at run time, so both are in
    /// the control flow around them (uniform where that is). How one
    /// kernel uses subgroups where the device has them and the same work
    /// without them elsewhere (`KernelBuilder::workgroup_reduce`).
    IfFeature {
        /// What the device must have for `then`.
        feature: Feature,
        /// With the feature.
        then: Vec<Stmt>,
        /// Without it.
        otherwise: Vec<Stmt>,
    },
}

/// A device capability a kernel can take one of two forms on
/// ([`Stmt::IfFeature`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// Subgroup builtins and operations (wgpu's `SUBGROUP`).
    Subgroups,
}

/// A whole kernel, as the builder produced it and the validator accepted it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelDef {
    /// Name for labels and errors (not part of the kernel's identity).
    pub name: String,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Storage buffers, `@binding(0..)`.
    pub buffers: Vec<BufferDecl>,
    /// Scalar arguments in the uniform block, in order.
    pub scalars: Vec<Scalar>,
    /// Workgroup arrays.
    pub shared: Vec<SharedDecl>,
    /// Per-invocation arrays.
    pub locals: Vec<LocalDecl>,
    /// Cooperative matrices, indexed by [`MatrixId`].
    pub matrices: Vec<MatrixDecl>,
    /// The type of every value, indexed by [`ValueId`].
    pub values: Vec<Type>,
    /// The type of every variable, indexed by [`VarId`].
    pub vars: Vec<Type>,
    /// The entry point's body.
    pub body: Vec<Stmt>,
}
