//! # cubecl-bridge
//!
//! This project's wgpu server as a [cubecl] runtime: cubecl kernels
//! compiled to SPIR-V by cubecl-spirv and to WGSL by naga (every
//! instruction checked against an allowlist of what naga reads right), run by
//! `wgpu_server::WgpuServer` with its memory pools, stream ordering and
//! trust rules. cubecl's own test suites judge it (`cargo xtask cubecl`;
//! docs/cubecl.md says how, and where the two contracts differ).
//!
//! ```no_run
//! use cubecl_bridge::BridgeRuntime;
//! use cubecl_runtime::runtime::Runtime;
//!
//! let client = BridgeRuntime::client(&Default::default());
//! let handle = client.create_from_slice(&[1u8, 2, 3, 4]);
//! assert_eq!(&*client.read_one(handle).expect("read"), &[1, 2, 3, 4]);
//! ```
//!
//! [cubecl]: https://github.com/tracel-ai/cubecl

pub mod collective;
mod compile;
pub mod device;
mod errors;
mod launch;
mod layout;
mod memory;
pub mod probe;
mod profile;
pub mod properties;
mod report;
mod runtime;
mod server;
mod spirv;
mod storage;
mod transfer;

pub use runtime::BridgeRuntime;
pub use server::BridgeServer;
pub use storage::BridgeStorage;
