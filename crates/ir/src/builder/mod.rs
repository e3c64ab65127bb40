//! [`KernelBuilder`]: writes a kernel the way it reads.
//!
//! ```
//! use compute_ir::{KernelBuilder, Scalar};
//!
//! // c[i] = a[i] + b[i] for i < n
//! let k = KernelBuilder::new("add", [64, 1, 1]);
//! let (a, b, c) = (k.input(Scalar::F32), k.input(Scalar::F32), k.output(Scalar::F32));
//! let n = k.scalar_arg(Scalar::U32);
//! let i = k.x(k.global_id());
//! k.if_(k.lt(i, n), |k| k.store(c, i, k.add(k.load(a, i), k.load(b, i))));
//! let kernel = k.build().expect("well-typed");
//! assert_eq!(kernel.info().buffers.len(), 3);
//! ```
//!
//! Every method that computes something binds a fresh value where it is
//! called ([`Val`]), so the order of calls is the order of evaluation
//! (nested calls evaluate inside out, as Rust does). Methods take `&self`,
//! so calls nest; an operand may be a [`Val`] or a Rust literal, which
//! takes the type of the value it meets (`k.add(x, 1.0)` for an `f32` `x`,
//! `k.lt(i, 4)` for a `u32` `i`; see [`Operand`]). Types are checked at each
//! call; the first error is kept, with the place in the caller's source
//! where it was built, and returned by [`KernelBuilder::build`], which also
//! runs the full validator.

use std::cell::RefCell;
use std::panic::Location;

use crate::ir::{ArrayRef, KernelDef, Op, Stmt, ValueId, VarId};
use crate::typeck::op_type;
use crate::{IrError, Kernel, Scalar, Type};

pub use matrix::Matrix;
pub use operand::Operand;

/// A value computed by the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Val {
    /// Its id in the IR.
    pub id: ValueId,
    /// Its type.
    pub ty: Type,
}

/// A (non-atomic) global buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buf {
    /// Its binding.
    pub binding: u32,
    /// Element type (of each lane, for a buffer of vectors).
    pub elem: Scalar,
    /// 1 for scalars; 2 or 4 for a buffer of vectors
    /// ([`KernelBuilder::input_vec`]).
    pub lanes: u8,
}

/// A global buffer of `atomic<i32|u32>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AtomicBuf {
    /// Its binding.
    pub binding: u32,
    /// Element type.
    pub elem: Scalar,
}

/// A workgroup array of `atomic<i32|u32>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AtomicShared {
    /// Its index among the kernel's shared arrays.
    pub index: u32,
    /// Element type.
    pub elem: Scalar,
    /// Number of elements.
    pub len: u32,
}

/// Something the atomics address: an atomic buffer or workgroup array.
pub trait AtomicLike: Copy {
    /// The IR reference.
    fn array_ref(self) -> ArrayRef;
    /// The element type (`i32` or `u32`).
    fn elem(self) -> Scalar;
}
impl AtomicLike for AtomicBuf {
    fn array_ref(self) -> ArrayRef {
        ArrayRef::Global(self.binding)
    }
    fn elem(self) -> Scalar {
        self.elem
    }
}
impl AtomicLike for AtomicShared {
    fn array_ref(self) -> ArrayRef {
        ArrayRef::Shared(self.index)
    }
    fn elem(self) -> Scalar {
        self.elem
    }
}

/// A workgroup-shared array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shared {
    /// Its index among the kernel's shared arrays.
    pub index: u32,
    /// Element type (of each lane).
    pub elem: Scalar,
    /// Lanes per element: 1, 2 or 4.
    pub lanes: u8,
    /// Number of elements.
    pub len: u32,
}

/// A per-invocation array ([`KernelBuilder::local_array`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Local {
    /// Its index among the kernel's local arrays.
    pub index: u32,
    /// Element type.
    pub ty: Type,
    /// Number of elements.
    pub len: u32,
}

/// A mutable variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Var {
    /// Its id in the IR.
    pub id: VarId,
    /// Its type.
    pub ty: Type,
}

/// Something `load` and `store` can address.
pub trait ArrayLike: Copy {
    /// The IR reference.
    fn array_ref(self) -> ArrayRef;
}
impl ArrayLike for Buf {
    fn array_ref(self) -> ArrayRef {
        ArrayRef::Global(self.binding)
    }
}
impl ArrayLike for Shared {
    fn array_ref(self) -> ArrayRef {
        ArrayRef::Shared(self.index)
    }
}
impl ArrayLike for Local {
    fn array_ref(self) -> ArrayRef {
        ArrayRef::Local(self.index)
    }
}

/// A buffer whose length `array_length` can take.
pub trait BufferLike: Copy {
    /// Its binding.
    fn binding(self) -> u32;
}
impl BufferLike for Buf {
    fn binding(self) -> u32 {
        self.binding
    }
}
impl BufferLike for AtomicBuf {
    fn binding(self) -> u32 {
        self.binding
    }
}

/// Builds a [`Kernel`]; see the module docs.
#[derive(Debug)]
pub struct KernelBuilder {
    state: RefCell<State>,
}

/// What the builder has so far; borrowed for one step at a time, never
/// across a caller's closure, so calls nest.
#[derive(Debug)]
struct State {
    def: KernelDef,
    blocks: Vec<Vec<Stmt>>,
    error: Option<IrError>,
    /// Declared buffer lengths (`lengths.rs`).
    lengths: Vec<crate::DeclaredLen>,
    /// Whether workgroup reductions use subgroup operations
    /// ([`KernelBuilder::with_subgroups`], `without_subgroups`).
    subgroups: workgroup::SubgroupUse,
}

macro_rules! unary {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(&self, x: impl Operand) -> Val {
            let x = self.operand(x, None);
            self.emit(Op::Unary(UnOp::$op, x.id))
        }
    )*};
}

macro_rules! binary {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(&self, x: impl Operand, y: impl Operand) -> Val {
            let (x, y) = self.operands(x, y);
            self.emit(Op::Binary(BinOp::$op, x.id, y.id))
        }
    )*};
}

macro_rules! atomics {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(&self, array: impl AtomicLike, index: impl Operand, value: impl Operand) -> Val {
            self.atomic(AtomicOp::$op, array, index, value)
        }
    )*};
}

mod arrays;
mod control;
mod interface;
mod lengths;
mod matrix;
mod operand;
mod ops;
mod workgroup;

impl KernelBuilder {
    /// A kernel named `name` with the given `@workgroup_size`.
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        KernelBuilder {
            state: RefCell::new(State {
                def: KernelDef {
                    name: name.into(),
                    workgroup_size,
                    buffers: Vec::new(),
                    scalars: Vec::new(),
                    shared: Vec::new(),
                    locals: Vec::new(),
                    matrices: Vec::new(),
                    values: Vec::new(),
                    vars: Vec::new(),
                    body: Vec::new(),
                },
                blocks: vec![Vec::new()],
                error: None,
                lengths: Vec::new(),
                subgroups: workgroup::SubgroupUse::PerDevice,
            }),
        }
    }

    /// Runs `f` on the state (never while a caller's closure runs).
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.borrow_mut())
    }

    /// Keeps `e` as the error `build` returns, unless one came first, with
    /// where the caller built the failing operation.
    #[track_caller]
    fn fail(&self, e: IrError) {
        let at = Location::caller();
        self.with(|s| {
            if s.error.is_none() {
                s.error = Some(IrError::Built {
                    at: format!("{}:{}:{}", at.file(), at.line(), at.column()),
                    error: Box::new(e),
                });
            }
        });
    }

    fn push(&self, stmt: Stmt) {
        self.with(|s| {
            if let Some(b) = s.blocks.last_mut() {
                b.push(stmt);
            }
        });
    }

    fn fresh(&self, ty: Type) -> ValueId {
        self.with(|s| {
            let id = ValueId(s.def.values.len() as u32);
            s.def.values.push(ty);
            id
        })
    }

    /// Binds `op` to a fresh value (the escape hatch under every method).
    #[track_caller]
    pub fn emit(&self, op: Op) -> Val {
        let ty = self.with(|s| op_type(&s.def, &op));
        match ty {
            Ok(ty) => {
                let id = self.fresh(ty);
                self.push(Stmt::Let(id, op));
                Val { id, ty }
            }
            Err(e) => {
                self.fail(e);
                // A placeholder so building can go on; `build` reports the error.
                let id = self.fresh(Type::U32);
                Val { id, ty: Type::U32 }
            }
        }
    }

    /// `x` as a value; a literal takes the type of `like` (see [`Operand`]).
    #[track_caller]
    fn operand(&self, x: impl Operand, like: Option<Type>) -> Val {
        match x.as_val() {
            Some(v) => v,
            None => {
                let lit = x.literal(like);
                self.emit(Op::Lit(lit))
            }
        }
    }

    /// Two operands: a literal takes the other one's type.
    #[track_caller]
    fn operands(&self, x: impl Operand, y: impl Operand) -> (Val, Val) {
        let like = x.as_val().or(y.as_val()).map(|v| v.ty);
        (self.operand(x, like), self.operand(y, like))
    }

    fn block(&self, f: impl FnOnce(&Self)) -> Vec<Stmt> {
        self.open_block();
        f(self);
        self.close_block()
    }

    // ---- raw statements (for generators that cannot use closures) ---------

    /// Starts a block: statements go there until [`close_block`](Self::close_block).
    pub fn open_block(&self) {
        self.with(|s| s.blocks.push(Vec::new()));
    }

    /// Ends the block [`open_block`](Self::open_block) started, returning its
    /// statements (to put in a [`Stmt::If`], [`Stmt::For`] or [`Stmt::Loop`]).
    #[track_caller]
    pub fn close_block(&self) -> Vec<Stmt> {
        let closed = self.with(|s| (s.blocks.len() > 1).then(|| s.blocks.pop()).flatten());
        closed.unwrap_or_else(|| {
            self.fail(IrError::structure("close_block", "no block is open"));
            Vec::new()
        })
    }

    /// Appends a statement to the current block as is (checked by `build`).
    pub fn push_stmt(&self, s: Stmt) {
        self.push(s);
    }

    /// A fresh value no statement binds yet: the index of a raw [`Stmt::For`].
    pub fn fresh_value(&self, ty: Type) -> Val {
        Val {
            id: self.fresh(ty),
            ty,
        }
    }

    /// The kernel, or the first type or structure error (the operation
    /// named, as the builder method is).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar};
    ///
    /// let k = KernelBuilder::new("bad", [1, 1, 1]);
    /// let out = k.output(Scalar::F32);
    /// let mixed = k.add(k.u32(1), k.f32(0.5)); // u32 + f32
    /// k.store(out, 0, mixed);
    /// let err = k.build().unwrap_err();
    /// assert_eq!(err.op(), "add");
    /// // It says where: this file, the line of the `add`.
    /// assert!(err.to_string().contains(".rs:"), "{err}");
    /// ```
    pub fn build(self) -> Result<Kernel, IrError> {
        let mut state = self.state.into_inner();
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        state.def.body = state.blocks.pop().unwrap_or_default();
        Ok(Kernel::new(state.def)?.with_lengths(state.lengths))
    }
}
