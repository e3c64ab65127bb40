//! # compute-ir
//!
//! A backend-neutral, typed kernel IR; a builder that reads like the kernel
//! it builds; a validator; and a CPU reference interpreter that is the oracle
//! of the tests.
//!
//! **Owns:** the meaning of a kernel. Its types ([`Scalar`], [`Type`]: bool,
//! i32, u32, f32; f16, i64, u64 and f64 behind device features; vectors of
//! 2 to 4), its interface (global buffers read or read-write, of any
//! non-bool scalar or of its 2- or 4-lane vectors (`input_vec`: one 16-byte
//! access per `vec4<f32>`), 8-byte lanes for the 64-bit types; atomic buffers of
//! i32/u32; scalar arguments, 4-byte i32/u32/f32 only, packed into one
//! uniform block by [`pack_scalars`]' rule; workgroup-shared arrays, plain
//! or of atomic i32/u32; per-invocation arrays (registers);
//! invocation builtins, subgroup ones included), its operations
//! (arithmetic, bitwise, comparison, logic, select, casts and bitcasts,
//! lanes of vectors by constant or run-time index,
//! math: [`UnOp`] has `exp`/`exp2`, `log`/`log2`, roots, `tanh`, `sin`,
//! `cos`, `floor`, `ceil`, `trunc`, `round` (ties to even), `fract`,
//! `sign`, and bit counts and reversal on 32-bit integers; atomics on
//! buffers and workgroup arrays, compare-exchange among them (its old value
//! and whether it exchanged, as a `vec2`), array length, subgroup
//! collectives: [`SubgroupOp`]) and
//! its structured control flow (if/else, range loops over i32/u32,
//! loop/break/continue, return, barriers, and uniform loads: a barrier,
//! then one workgroup element every invocation reads, so a loop with a
//! barrier inside may end on it; and branches on a device feature, chosen
//! when the kernel is compiled: [`Stmt::IfFeature`]). The semantics are WGSL's where
//! WGSL defines them (integer wrap, `x / 0 == x`, `x % 0 == 0`, saturating
//! float-to-int casts), written down in [`interp`], which executes them on
//! the host: every invocation of a workgroup in lockstep between barriers,
//! and every invocation of a subgroup in lockstep at subgroup operations, so
//! shared memory, barriers and collectives behave as on a GPU.
//!
//! **Feature-gated parts** (the kernel builds and interprets anywhere;
//! `compute-wgsl` refuses to compile it, `ServerError::Unsupported`, on a
//! device without the feature): f16 (`SHADER_F16`), i64 and u64
//! (`SHADER_INT64`), f64 (`SHADER_F64`; only the math Vulkan defines on
//! doubles: no `exp`, `exp2`, `log`, `log2`, `pow`, `tanh`, `sin`, `cos`),
//! and subgroup
//! builtins and operations (`SUBGROUP`: reductions, scans, votes,
//! broadcasts, ballots and shuffles, [`SubgroupOp`] and [`ShuffleOp`], on
//! i32/u32/f32 and their vectors, `subgroup_invocation_id`,
//! `subgroup_size`), and cooperative matrices (square 8x8 or 16x16 tiles
//! of f16 or f32 a subgroup holds together: load, store, multiply-add,
//! zero; the `matrix` module; `compute-wgsl` checks the configuration
//! against the adapter's).
//!
//! **Leaves to the layers below:** code generation (`compute-wgsl` turns a
//! [`Kernel`] into WGSL that naga validates), pipelines, buffers and dispatch
//! (`wgpu-server`). A [`Kernel`] is a [`compute_runtime::CubeKernel`]; its id
//! hashes the IR and the workgroup size, and [`Kernel::info`] gives the
//! binding layout without compiling anything. This crate names no wgpu or
//! naga type.
//!
//! **Deliberately absent:** functions and calls (a kernel is one entry
//! point; the builder's host-side Rust functions are the abstraction),
//! 64-bit atomics, 64-bit scalar arguments and loop indices, 64-bit bit
//! counts and `reverseBits` (lavapipe dies compiling the latter), 16-bit
//! integers, `subgroupElect` and `subgroupBarrier`, and subgroup operations
//! on f16 or 64-bit values, non-square cooperative matrices and a
//! matrix's elements addressed one by one (which lane holds what is the
//! device's business),
//! textures, pointers, structs, and optimisation passes (the IR is emitted
//! as written; the driver optimises). Out-of-bounds accesses are an
//! interpreter error rather than WGSL's implementation-defined clamping, so
//! tests never depend on them.

mod builder;
mod error;
pub mod interp;
pub mod ir;
mod kernel;
mod length;
mod matrix;
mod subgroup;
mod typeck;
mod types;
mod uniformity;
mod unop;
mod uses;
mod validate;

pub use builder::{
    ArrayLike, AtomicBuf, AtomicLike, AtomicShared, Buf, BufferLike, KernelBuilder, Local, Matrix,
    Operand, Shared, Val, Var,
};
pub use error::{IrError, RunError};
pub use ir::{
    Access, AtomicOp, BinOp, Builtin, Feature, KernelDef, Layout, MatrixDecl, MatrixId, MatrixRole,
    MatrixStmt, Op, ShuffleOp, Stmt, SubgroupOp, UnOp, ValueId, VarId,
};
pub use kernel::{Kernel, KernelInfo, is_scalar_arg, pack_scalars, scalar_block_size};
pub use length::{DeclaredLen, Len, check_lengths};
pub use typeck::{op_name, op_type};
pub use types::{Lit, Scalar, Type};
pub use validate::{operands, validate};
