//! cubecl's own test suites, instantiated for this runtime by cubecl's
//! macros, as cubecl-wgpu's `lib.rs` instantiates them for its own.
//!
//! One binary (one link of the cubecl stack); `cargo xtask cubecl` splits
//! its results into suites by module: `core::{f32_ty, i32_ty, u32_ty}` and
//! the untyped tests (`core`), `core::{f16_ty, i64_ty, u64_ty}`
//! (`core-wide`), `test_cubecl_std` (`std`), `profiling`.

#![allow(unexpected_cfgs)]

pub type TestRuntime = cubecl_bridge::BridgeRuntime;

mod core {
    use super::*;
    use half::f16;

    cubecl_core::testgen_all!(f32: [f16, f32], i32: [i32, i64], u32: [u32, u64]);
}

mod std_suite {
    use super::*;
    use cubecl_core::__private::Runtime;

    cubecl_std::testgen!();
}

mod profiling {
    use super::*;
    use cubecl_core::__private::Runtime;

    cubecl_core::testgen_profiling!();
}
