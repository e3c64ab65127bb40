//! The kernel's interface and memory for [`KernelBuilder`]: buffers,
//! scalar arguments, variables, loads, stores and atomics (the arrays
//! themselves are declared in `arrays.rs`).

use super::{
    ArrayLike, AtomicBuf, AtomicLike, Buf, BufferLike, KernelBuilder, Operand, Shared, Val, Var,
};
use crate::ir::{Access, AtomicOp, BufferDecl, Op, Stmt, VarId};
use crate::{IrError, Lit, Scalar, Type};

impl KernelBuilder {
    // ---- interface ------------------------------------------------------

    fn buffer(&self, elem: Scalar, lanes: u8, access: Access, atomic: bool) -> u32 {
        self.with(|s| {
            let binding = s.def.buffers.len() as u32;
            s.def.buffers.push(BufferDecl {
                elem,
                lanes,
                access,
                atomic,
            });
            binding
        })
    }

    /// A buffer the kernel only reads, at the next binding.
    pub fn input(&self, elem: Scalar) -> Buf {
        self.input_vec(elem, 1)
    }

    /// A buffer the kernel writes (and may read), at the next binding.
    pub fn output(&self, elem: Scalar) -> Buf {
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
    /// let k = KernelBuilder::new("add4", [64, 1, 1]);
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
    pub fn input_vec(&self, elem: Scalar, lanes: u8) -> Buf {
        Buf {
            binding: self.buffer(elem, lanes, Access::Read, false),
            elem,
            lanes,
        }
    }

    /// A buffer of `vec{lanes}<elem>` the kernel writes (and may read); see
    /// [`input_vec`](Self::input_vec).
    pub fn output_vec(&self, elem: Scalar, lanes: u8) -> Buf {
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
    /// let k = KernelBuilder::new("hist", [8, 1, 1]);
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
    pub fn atomic_buffer(&self, elem: Scalar) -> AtomicBuf {
        AtomicBuf {
            binding: self.buffer(elem, 1, Access::ReadWrite, true),
            elem,
        }
    }

    /// The next scalar argument of the uniform block (`i32`, `u32` or `f32`),
    /// read where this is called. A launch passes them packed:
    /// [`Kernel::pack_scalars`](crate::Kernel::pack_scalars).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Lit, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // x[i] = x[i] * scale + shift
    /// let k = KernelBuilder::new("affine", [4, 1, 1]);
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
    #[track_caller]
    pub fn scalar_arg(&self, ty: Scalar) -> Val {
        let index = self.with(|s| {
            s.def.scalars.push(ty);
            s.def.scalars.len() as u32 - 1
        });
        self.emit(Op::Arg(index))
    }

    // ---- variables and memory ---------------------------------------------------

    /// A mutable variable holding `init`: a value, or a Rust literal of the
    /// variable's type (`k.var(0u32)`, `k.var(0.0f32)`; an unsuffixed
    /// literal has Rust's default type, `i32` or `f64`).
    #[track_caller]
    pub fn var(&self, init: impl Operand) -> Var {
        let init = self.operand(init, None);
        let id = self.with(|s| {
            s.def.vars.push(init.ty);
            VarId(s.def.vars.len() as u32 - 1)
        });
        self.push(Stmt::Var(id, init.id));
        Var { id, ty: init.ty }
    }
    /// The variable's current value.
    #[track_caller]
    pub fn get(&self, var: Var) -> Val {
        self.emit(Op::Get(var.id))
    }
    /// Assigns the variable (a literal takes its type).
    #[track_caller]
    pub fn set(&self, var: Var, value: impl Operand) {
        let value = self.operand(value, Some(var.ty));
        if var.ty != value.ty {
            self.fail(IrError::ty(
                "set",
                format!("variable is {}, assigned {}", var.ty, value.ty),
            ));
        }
        self.push(Stmt::Set(var.id, value.id));
    }

    /// The type of one element of `array`.
    fn elem_type(&self, array: impl ArrayLike) -> Type {
        self.with(|s| match array.array_ref() {
            crate::ir::ArrayRef::Global(b) => {
                s.def.buffers.get(b as usize).map_or(Type::U32, |d| d.ty())
            }
            crate::ir::ArrayRef::Shared(i) => {
                s.def.shared.get(i as usize).map_or(Type::U32, |d| d.ty())
            }
            crate::ir::ArrayRef::Local(i) => {
                s.def.locals.get(i as usize).map_or(Type::U32, |d| d.ty)
            }
        })
    }

    /// `array[index]`.
    #[track_caller]
    pub fn load(&self, array: impl ArrayLike, index: impl Operand) -> Val {
        let index = self.operand(index, Some(Type::U32));
        self.emit(Op::Load(array.array_ref(), index.id))
    }
    /// `array[index]` when `index` is inside the bound slice, else
    /// `default`: a read that never depends on what lies past the end.
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // out[i] = a[i + 1] - a[i], with a[len] taken as 0.
    /// let k = KernelBuilder::new("diff", [4, 1, 1]);
    /// let (a, out) = (k.input(Scalar::F32), k.output(Scalar::F32));
    /// let i = k.x(k.global_id());
    /// k.store(out, i, k.sub(k.load_or(a, k.add(i, 1), 0.0), k.load(a, i)));
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[1f32, 3., 6., 10.]), vec![0; 16]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<f32>(&buffers[1])?, [2., 3., 4., -10.]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn load_or(&self, buffer: Buf, index: impl Operand, default: impl Operand) -> Val {
        let index = self.operand(index, Some(Type::U32));
        let default = self.operand(default, Some(self.elem_type(buffer)));
        let inside = self.lt(index, self.array_length(buffer));
        let out = self.var(default);
        self.if_(inside, |k| k.set(out, k.load(buffer, index)));
        self.get(out)
    }
    /// `array[index] = value` (a literal takes the element type).
    #[track_caller]
    pub fn store(&self, array: impl ArrayLike, index: impl Operand, value: impl Operand) {
        let index = self.operand(index, Some(Type::U32));
        let value = self.operand(value, Some(self.elem_type(array)));
        self.push(Stmt::Store(array.array_ref(), index.id, value.id));
    }
    /// `arrayLength(&buffer)`: elements in the bound slice.
    #[track_caller]
    pub fn array_length(&self, buffer: impl BufferLike) -> Val {
        self.emit(Op::ArrayLength(buffer.binding()))
    }

    /// `workgroupUniformLoad(&array[index])`: a workgroup barrier, then the
    /// element every invocation reads, a value uniform across the
    /// workgroup. Control flow that depends on it stays uniform, so a loop
    /// with a barrier inside may end on it (one invocation decides, the
    /// workgroup follows). Call in uniform control flow, with the same
    /// `index` in every invocation.
    #[track_caller]
    pub fn uniform_load(&self, array: Shared, index: impl Operand) -> Val {
        let index = self.operand(index, Some(Type::U32));
        let zero = self.lit(Lit::zero(array.elem));
        let zero = if array.lanes > 1 {
            self.splat(zero, array.lanes)
        } else {
            zero
        };
        let var = self.var(zero);
        self.push(Stmt::UniformLoad(var.id, array.index, index.id));
        self.get(var)
    }

    /// `atomicLoad(&array[index])` (an atomic buffer or workgroup array).
    #[track_caller]
    pub fn atomic_load(&self, array: impl AtomicLike, index: impl Operand) -> Val {
        let index = self.operand(index, Some(Type::U32));
        self.emit(Op::AtomicLoad(array.array_ref(), index.id))
    }
    /// `atomicStore(&array[index], value)`.
    #[track_caller]
    pub fn atomic_store(&self, array: impl AtomicLike, index: impl Operand, value: impl Operand) {
        let index = self.operand(index, Some(Type::U32));
        let value = self.operand(value, Some(Type::scalar(array.elem())));
        self.push(Stmt::AtomicStore(array.array_ref(), index.id, value.id));
    }
    /// A read-modify-write atomic; returns the old value.
    #[track_caller]
    pub fn atomic(
        &self,
        op: AtomicOp,
        array: impl AtomicLike,
        index: impl Operand,
        value: impl Operand,
    ) -> Val {
        let index = self.operand(index, Some(Type::U32));
        let value = self.operand(value, Some(Type::scalar(array.elem())));
        self.emit(Op::Atomic(op, array.array_ref(), index.id, value.id))
    }

    /// `atomicCompareExchangeWeak(&array[index], cmp, value)`: a `vec2` of
    /// the element type, the old value and 1 where `value` was stored (0
    /// where not; see [`Op::CompareExchange`]: retry on 0).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // A float sum across invocations, by compare-exchange on the bits.
    /// let k = KernelBuilder::new("fsum", [8, 1, 1]);
    /// let x = k.input(Scalar::F32);
    /// let sum = k.atomic_buffer(Scalar::U32);
    /// let gid = k.global_id();
    /// let v = k.load(x, k.x(gid));
    /// k.loop_(|k| {
    ///     let old = k.atomic_load(sum, k.u32(0));
    ///     let new = k.add(k.bitcast(old, Scalar::F32), v);
    ///     let r = k.compare_exchange(sum, k.u32(0), old, k.bitcast(new, Scalar::U32));
    ///     let done = k.eq(k.y(r), k.u32(1));
    ///     k.if_(done, |k| k.break_());
    /// });
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[0.5f32; 8]), vec![0; 4]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<f32>(&buffers[1])?, [4.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn compare_exchange(
        &self,
        array: impl AtomicLike,
        index: impl Operand,
        cmp: impl Operand,
        value: impl Operand,
    ) -> Val {
        let elem = Some(Type::scalar(array.elem()));
        let index = self.operand(index, Some(Type::U32));
        let cmp = self.operand(cmp, elem);
        let value = self.operand(value, elem);
        self.emit(Op::CompareExchange(
            array.array_ref(),
            index.id,
            cmp.id,
            value.id,
        ))
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
}
