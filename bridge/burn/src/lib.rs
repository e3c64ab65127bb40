//! burn programs and their checks: the same source built against this
//! server (the bridge workspace, where the drop-in `cubecl-wgpu` is patched
//! in) and against upstream burn-wgpu (`bridge/upstream/`, a workspace of
//! its own without the patch), so `cargo xtask burn` can compare the two.

pub mod cli;
pub mod host;
pub mod programs;
pub mod suite;
