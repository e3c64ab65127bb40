//! # compute-ir
//!
//! A backend-neutral, typed kernel IR; a builder that reads like the kernel
//! it builds; a validator; and a CPU reference interpreter that is the oracle
//! of the tests.
//!
//! **Owns:** the meaning of a kernel. Its types ([`Scalar`], [`Type`]: bool,
//! i32, u32, f32, f16, vectors of 2 to 4), its interface (global buffers read
//! or read-write, atomic buffers, scalar arguments packed into one uniform
//! block by [`pack_scalars`]' rule, workgroup-shared arrays, invocation
//! builtins), its operations (arithmetic, bitwise, comparison, logic, select,
//! casts and bitcasts, math, atomics, array length) and its structured
//! control flow (if/else, range loops, loop/break/continue, return,
//! barriers). The semantics are WGSL's where WGSL defines them (integer
//! wrap, `x / 0 == x`, `x % 0 == 0`, saturating float-to-int casts), written
//! down in [`interp`], which executes them on the host: every invocation of a
//! workgroup in lockstep between barriers, so shared memory and barriers
//! behave as on a GPU.
//!
//! **Leaves to the layers below:** code generation (`compute-wgsl` turns a
//! [`Kernel`] into WGSL that naga validates), pipelines, buffers and dispatch
//! (`wgpu-server`). A [`Kernel`] is a [`compute_runtime::CubeKernel`]; its id
//! hashes the IR and the workgroup size, and [`Kernel::info`] gives the
//! binding layout without compiling anything. This crate names no wgpu or
//! naga type.
//!
//! **Deliberately absent:** functions and calls (a kernel is one entry
//! point; the builder's host-side Rust functions are the abstraction), i64,
//! u64 and f64, subgroup operations, textures, pointers, structs, and
//! optimisation passes (the IR is emitted as written; the driver optimises).
//! Out-of-bounds accesses are an interpreter error rather than WGSL's
//! implementation-defined clamping, so tests never depend on them.

mod builder;
mod error;
pub mod interp;
pub mod ir;
mod kernel;
pub mod kernels;
pub mod random;
mod typeck;
mod types;
mod validate;

pub use builder::{ArrayLike, AtomicBuf, Buf, BufferLike, KernelBuilder, Shared, Val, Var};
pub use error::{IrError, RunError};
pub use ir::{Access, AtomicOp, BinOp, Builtin, KernelDef, Op, Stmt, UnOp, ValueId, VarId};
pub use kernel::{Kernel, KernelInfo, is_scalar_arg, pack_scalars, scalar_block_size};
pub use typeck::{op_name, op_type};
pub use types::{Lit, Scalar, Type};
pub use validate::{operands, validate};
