//! [`KernelBuilder`]: writes a kernel the way it reads.
//!
//! ```
//! use compute_ir::{KernelBuilder, Scalar};
//!
//! // c[i] = a[i] + b[i] for i < n
//! let mut k = KernelBuilder::new("add", [64, 1, 1]);
//! let a = k.input(Scalar::F32);
//! let b = k.input(Scalar::F32);
//! let c = k.output(Scalar::F32);
//! let n = k.scalar_arg(Scalar::U32);
//! let gid = k.global_id();
//! let i = k.x(gid);
//! let inside = k.lt(i, n);
//! k.if_(inside, |k| {
//!     let x = k.load(a, i);
//!     let y = k.load(b, i);
//!     let s = k.add(x, y);
//!     k.store(c, i, s);
//! });
//! let kernel = k.build().expect("well-typed");
//! assert_eq!(kernel.info().buffers.len(), 3);
//! ```
//!
//! Every method that computes something binds a fresh value where it is
//! called ([`Val`]), so the order of calls is the order of evaluation. Types
//! are checked at each call; the first error is kept and returned by
//! [`KernelBuilder::build`], which also runs the full validator.

use crate::ir::{
    Access, ArrayRef, AtomicOp, BufferDecl, KernelDef, Op, SharedDecl, Stmt, ValueId, VarId,
};
use crate::typeck::op_type;
use crate::{IrError, Kernel, Scalar, Type};

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

/// A workgroup-shared array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shared {
    /// Its index among the kernel's shared arrays.
    pub index: u32,
    /// Element type.
    pub elem: Scalar,
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
    def: KernelDef,
    blocks: Vec<Vec<Stmt>>,
    error: Option<IrError>,
}

macro_rules! unary {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        pub fn $name(&mut self, x: Val) -> Val {
            self.emit(Op::Unary(UnOp::$op, x.id))
        }
    )*};
}

macro_rules! binary {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        pub fn $name(&mut self, x: Val, y: Val) -> Val {
            self.emit(Op::Binary(BinOp::$op, x.id, y.id))
        }
    )*};
}

macro_rules! atomics {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {$(
        $(#[$m])*
        pub fn $name(&mut self, buf: AtomicBuf, index: Val, value: Val) -> Val {
            self.emit(Op::Atomic(AtomicOp::$op, buf.binding, index.id, value.id))
        }
    )*};
}

mod control;
mod ops;

impl KernelBuilder {
    /// A kernel named `name` with the given `@workgroup_size`.
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        KernelBuilder {
            def: KernelDef {
                name: name.into(),
                workgroup_size,
                buffers: Vec::new(),
                scalars: Vec::new(),
                shared: Vec::new(),
                values: Vec::new(),
                vars: Vec::new(),
                body: Vec::new(),
            },
            blocks: vec![Vec::new()],
            error: None,
        }
    }

    fn fail(&mut self, e: IrError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn push(&mut self, s: Stmt) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(s);
        }
    }

    fn fresh(&mut self, ty: Type) -> ValueId {
        let id = ValueId(self.def.values.len() as u32);
        self.def.values.push(ty);
        id
    }

    /// Binds `op` to a fresh value (the escape hatch under every method).
    pub fn emit(&mut self, op: Op) -> Val {
        match op_type(&self.def, &op) {
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

    fn block(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Stmt> {
        self.open_block();
        f(self);
        self.close_block()
    }

    // ---- raw statements (for generators that cannot use closures) ---------

    /// Starts a block: statements go there until [`close_block`](Self::close_block).
    pub fn open_block(&mut self) {
        self.blocks.push(Vec::new());
    }

    /// Ends the block [`open_block`](Self::open_block) started, returning its
    /// statements (to put in a [`Stmt::If`], [`Stmt::For`] or [`Stmt::Loop`]).
    pub fn close_block(&mut self) -> Vec<Stmt> {
        if self.blocks.len() > 1 {
            self.blocks.pop().unwrap_or_default()
        } else {
            self.fail(IrError::structure("close_block", "no block is open"));
            Vec::new()
        }
    }

    /// Appends a statement to the current block as is (checked by `build`).
    pub fn push_stmt(&mut self, s: Stmt) {
        self.push(s);
    }

    /// A fresh value no statement binds yet: the index of a raw [`Stmt::For`].
    pub fn fresh_value(&mut self, ty: Type) -> Val {
        Val {
            id: self.fresh(ty),
            ty,
        }
    }

    // ---- interface ------------------------------------------------------

    fn buffer(&mut self, elem: Scalar, lanes: u8, access: Access, atomic: bool) -> u32 {
        let binding = self.def.buffers.len() as u32;
        self.def.buffers.push(BufferDecl {
            elem,
            lanes,
            access,
            atomic,
        });
        binding
    }

    /// A buffer the kernel only reads, at the next binding.
    pub fn input(&mut self, elem: Scalar) -> Buf {
        self.input_vec(elem, 1)
    }

    /// A buffer the kernel writes (and may read), at the next binding.
    pub fn output(&mut self, elem: Scalar) -> Buf {
        self.output_vec(elem, 1)
    }

    /// A read-only buffer of `vec{lanes}<elem>` (`lanes` 2 or 4; 1 is
    /// [`input`](Self::input)): element `i` is the scalars `lanes * i ..
    /// lanes * (i + 1)` of the bound bytes, and a [`load`](Self::load) reads
    /// all of them at once, the 16-byte loads a bandwidth-bound kernel
    /// wants. [`array_length`](Self::array_length) counts vectors.
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // c[i] = a[i] + b[i], four f32 at a time.
    /// let mut k = KernelBuilder::new("add4", [64, 1, 1]);
    /// let a = k.input_vec(Scalar::F32, 4);
    /// let b = k.input_vec(Scalar::F32, 4);
    /// let c = k.output_vec(Scalar::F32, 4);
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let n = k.array_length(c);
    /// let inside = k.lt(i, n);
    /// k.if_(inside, |k| {
    ///     let x = k.load(a, i);
    ///     let y = k.load(b, i);
    ///     let s = k.add(x, y);
    ///     k.store(c, i, s);
    /// });
    /// let kernel = k.build()?;
    /// let mut buffers = vec![
    ///     pod::to_bytes(&[1f32, 2., 3., 4., 5., 6., 7., 8.]),
    ///     pod::to_bytes(&[10f32; 8]),
    ///     vec![0; 32],
    /// ];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<f32>(&buffers[2])?, [11., 12., 13., 14., 15., 16., 17., 18.]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn input_vec(&mut self, elem: Scalar, lanes: u8) -> Buf {
        Buf {
            binding: self.buffer(elem, lanes, Access::Read, false),
            elem,
            lanes,
        }
    }

    /// A buffer of `vec{lanes}<elem>` the kernel writes (and may read); see
    /// [`input_vec`](Self::input_vec).
    pub fn output_vec(&mut self, elem: Scalar, lanes: u8) -> Buf {
        Buf {
            binding: self.buffer(elem, lanes, Access::ReadWrite, false),
            elem,
            lanes,
        }
    }

    /// A read-write buffer of `atomic<elem>` (`i32` or `u32`), at the next
    /// binding, accessed with the `atomic_*` methods.
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // A histogram of 4 bins: hist[v % 4] += 1 for every value.
    /// let mut k = KernelBuilder::new("hist", [8, 1, 1]);
    /// let values = k.input(Scalar::U32);
    /// let hist = k.atomic_buffer(Scalar::U32);
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let v = k.load(values, i);
    /// let four = k.u32(4);
    /// let bin = k.rem(v, four);
    /// let one = k.u32(1);
    /// k.atomic_add(hist, bin, one);
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[0u32, 1, 2, 3, 4, 5, 9, 13]), vec![0; 16]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<u32>(&buffers[1])?, [2, 4, 1, 1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn atomic_buffer(&mut self, elem: Scalar) -> AtomicBuf {
        AtomicBuf {
            binding: self.buffer(elem, 1, Access::ReadWrite, true),
            elem,
        }
    }

    /// The next scalar argument of the uniform block (`i32`, `u32` or `f32`),
    /// read where this is called. A launch passes them packed:
    /// [`Kernel::pack_scalars`].
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Lit, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // x[i] = x[i] * scale + shift
    /// let mut k = KernelBuilder::new("affine", [4, 1, 1]);
    /// let x = k.output(Scalar::F32);
    /// let (scale, shift) = (k.scalar_arg(Scalar::F32), k.scalar_arg(Scalar::F32));
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let v = k.load(x, i);
    /// let v = k.fma(v, scale, shift);
    /// k.store(x, i, v);
    /// let kernel = k.build()?;
    /// let scalars = kernel.pack_scalars(&[Lit::F32(2.0), Lit::F32(0.5)])?;
    /// assert_eq!(scalars.len(), 16); // one 16-byte uniform block
    /// let mut buffers = vec![pod::to_bytes(&[1.0f32, 2.0, 3.0, 4.0])];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &scalars)?;
    /// assert_eq!(pod::from_bytes::<f32>(&buffers[0])?, [2.5, 4.5, 6.5, 8.5]);
    /// // Arguments of the wrong type are refused.
    /// assert!(kernel.pack_scalars(&[Lit::U32(2), Lit::F32(0.5)]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scalar_arg(&mut self, ty: Scalar) -> Val {
        let index = self.def.scalars.len() as u32;
        self.def.scalars.push(ty);
        self.emit(Op::Arg(index))
    }

    /// A workgroup-shared array of `len` elements, zero at workgroup start.
    /// Invocations of a workgroup see each other's stores after a
    /// [`barrier`](Self::barrier).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // out[0] = sum of a[0..4], through shared memory.
    /// let mut k = KernelBuilder::new("sum4", [4, 1, 1]);
    /// let (a, out) = (k.input(Scalar::U32), k.output(Scalar::U32));
    /// let tile = k.shared(Scalar::U32, 4);
    /// let l = k.local_index();
    /// let v = k.load(a, l);
    /// k.store(tile, l, v);
    /// k.barrier();
    /// let zero = k.u32(0);
    /// let first = k.eq(l, zero);
    /// k.if_(first, |k| {
    ///     let acc = k.var(zero);
    ///     let four = k.u32(4);
    ///     k.for_range(zero, four, |k, i| {
    ///         let (s, x) = (k.get(acc), k.load(tile, i));
    ///         let s = k.add(s, x);
    ///         k.set(acc, s);
    ///     });
    ///     let s = k.get(acc);
    ///     k.store(out, zero, s);
    /// });
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[1u32, 2, 3, 4]), vec![0; 4]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<u32>(&buffers[1])?, [10]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shared(&mut self, elem: Scalar, len: u32) -> Shared {
        let index = self.def.shared.len() as u32;
        self.def.shared.push(SharedDecl { elem, len });
        Shared { index, elem, len }
    }

    // ---- variables and memory ---------------------------------------------------

    /// A mutable variable holding `init`.
    pub fn var(&mut self, init: Val) -> Var {
        let id = VarId(self.def.vars.len() as u32);
        self.def.vars.push(init.ty);
        self.push(Stmt::Var(id, init.id));
        Var { id, ty: init.ty }
    }
    /// The variable's current value.
    pub fn get(&mut self, var: Var) -> Val {
        self.emit(Op::Get(var.id))
    }
    /// Assigns the variable.
    pub fn set(&mut self, var: Var, value: Val) {
        if var.ty != value.ty {
            self.fail(IrError::ty(
                "set",
                format!("variable is {}, assigned {}", var.ty, value.ty),
            ));
        }
        self.push(Stmt::Set(var.id, value.id));
    }

    /// `array[index]`.
    pub fn load(&mut self, array: impl ArrayLike, index: Val) -> Val {
        self.emit(Op::Load(array.array_ref(), index.id))
    }
    /// `array[index] = value`.
    pub fn store(&mut self, array: impl ArrayLike, index: Val, value: Val) {
        self.push(Stmt::Store(array.array_ref(), index.id, value.id));
    }
    /// `arrayLength(&buffer)`: elements in the bound slice.
    pub fn array_length(&mut self, buffer: impl BufferLike) -> Val {
        self.emit(Op::ArrayLength(buffer.binding()))
    }

    /// `atomicLoad(&buf[index])`.
    pub fn atomic_load(&mut self, buf: AtomicBuf, index: Val) -> Val {
        self.emit(Op::AtomicLoad(buf.binding, index.id))
    }
    /// `atomicStore(&buf[index], value)`.
    pub fn atomic_store(&mut self, buf: AtomicBuf, index: Val, value: Val) {
        self.push(Stmt::AtomicStore(buf.binding, index.id, value.id));
    }
    /// A read-modify-write atomic; returns the old value.
    pub fn atomic(&mut self, op: AtomicOp, buf: AtomicBuf, index: Val, value: Val) -> Val {
        self.emit(Op::Atomic(op, buf.binding, index.id, value.id))
    }

    atomics! {
        /// `atomicAdd`; the old value.
        atomic_add => Add,
        /// `atomicSub`; the old value.
        atomic_sub => Sub,
        /// `atomicMax`; the old value.
        atomic_max => Max,
        /// `atomicMin`; the old value.
        atomic_min => Min,
        /// `atomicAnd`; the old value.
        atomic_and => And,
        /// `atomicOr`; the old value.
        atomic_or => Or,
        /// `atomicXor`; the old value.
        atomic_xor => Xor,
        /// `atomicExchange`; the old value.
        atomic_exchange => Exchange,
    }

    /// The kernel, or the first type or structure error (the operation
    /// named, as the builder method is).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar};
    ///
    /// let mut k = KernelBuilder::new("bad", [1, 1, 1]);
    /// let out = k.output(Scalar::F32);
    /// let i = k.u32(0);
    /// let one = k.u32(1);
    /// let half = k.f32(0.5);
    /// let mixed = k.add(one, half); // u32 + f32
    /// k.store(out, i, mixed);
    /// let err = k.build().unwrap_err();
    /// assert_eq!(err.op(), "add");
    /// ```
    pub fn build(mut self) -> Result<Kernel, IrError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.def.body = self.blocks.pop().unwrap_or_default();
        Kernel::new(self.def)
    }
}
