//! The GPU integration tests: every test that needs a real adapter (lavapipe
//! on CI), one module per area, in one binary so the device stack is built
//! and linked once. `common` holds the shared helpers.
//!
//! Two kinds of test get a binary of their own instead: those that change
//! process-global state (`sync_timing.rs` sets `COMPUTE_LOG`,
//! `collective_timeout.rs` sets `COMPUTE_COLLECTIVE_TIMEOUT_MS`), and the
//! profile tests (`profile.rs`), whose timing assertions need the device to
//! themselves: lavapipe runs kernels on the CPU, so other tests' work in the
//! same process lands inside their measurement windows.

mod collective;
mod common;

mod bad_input;
mod end_to_end;
mod graph;
mod ir;
mod memory;
mod queued;
mod streams;
