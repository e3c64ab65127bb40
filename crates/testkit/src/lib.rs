//! # compute-testkit
//!
//! Test support for the compute server: one copy of each thing the tests,
//! examples and benchmarks share. A dev-dependency everywhere (the
//! crates' tests and examples, the `compute-tests` package) but
//! `compute-bench`, whose figures run its kernels and trace: no crate of
//! the server's stack depends on it, and nothing here is part of the
//! server's API.
//!
//! **Owns:**
//! - [`Rng`], the one PRNG (xorshift64*), whose sequences the tests and the
//!   benchmarks document;
//! - [`bytes`], typed slices to and from little-endian bytes, as the
//!   interpreter and a GPU buffer hold them;
//! - [`random_ir`], random well-typed, race-free IR programs: the corpus the
//!   WGSL backend, the interpreter and the device are checked on;
//! - [`kernels`], reference IR kernels (elementwise add, workgroup sum,
//!   atomic histogram, tiled matmul);
//! - [`trace`], the documented allocation trace behind the
//!   `memory.peak_reserved_over_peak_live` benchmark.
//!
//! **Leaves to others:** the IR, its builder and interpreter
//! (`compute-ir`), memory management (`compute-memory`), and anything about
//! a device: the GPU helpers of the integration tests live with those tests
//! (`tests/gpu/common.rs`). This crate names no wgpu type.
//!
//! **Dependency rule:** `compute-ir` and `compute-memory` take this crate as
//! a dev-dependency for their integration tests (`tests/`) and examples
//! only; their unit tests inside `src/` must not use it, because there the
//! crate under test and the one this kit links are two copies with
//! different types.

pub mod bytes;
pub mod kernels;
pub mod random_ir;
mod rng;
pub mod trace;

pub use rng::Rng;
