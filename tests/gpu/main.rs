//! The GPU integration tests: every test that needs a real adapter (lavapipe
//! on CI), one module per area, in one binary so the device stack is built
//! and linked once. `common` holds the shared helpers.
//!
//! A test that changes process-global state gets a binary of its own
//! instead (`sync_timing.rs` sets `COMPUTE_LOG`, `collective_timeout.rs`
//! sets `COMPUTE_COLLECTIVE_TIMEOUT_MS`). No test here asserts a duration:
//! tests run concurrently, and lavapipe runs every test's kernels on the same
//! CPU.

mod collective;
mod common;

mod bad_input;
mod bounds;
mod chunks;
mod client;
mod comm;
mod end_to_end;
mod graph;
mod host_memory;
mod ir;
mod ir_atomics;
mod ir_kernels;
mod ir_matrices;
mod ir_ops;
mod ir_registers;
mod ir_subgroups;
mod lifetime;
mod loops;
mod memory;
mod misuse;
mod model;
mod oob;
mod profile;
mod queued;
mod scan_policies;
mod shared_memory;
mod streams;
mod trust;
mod typed;
mod workgroup;
