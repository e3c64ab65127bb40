//! # compute-graph
//!
//! Graph capture, as far as it can be said without a GPU API: the per-stream
//! capture state machine ([`CaptureState`]) and the device-wide registry of
//! recorded graphs ([`DeviceCaptures`]).
//!
//! **Owns:** which capture calls are legal in which state, and graph ids.
//! **Leaves to the server:** what a recording holds (resolved pipelines, bind
//! groups, dispatch sizes) and how it is replayed; the registry stores it as
//! an opaque, type-erased value so this crate never names wgpu.
//!
//! Replay itself is not built yet: the wgpu server answers capture calls with
//! `ServerError::Unsupported` (see `docs/status.md`).

mod registry;
mod state;

pub use registry::DeviceCaptures;
pub use state::CaptureState;
