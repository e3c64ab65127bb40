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
//! The per-stream recording ([`StreamCapture`]) lives here too, type-erased,
//! so the stream layer's `WriteScoped` trait can name it.

mod capture;
mod registry;
mod state;

pub use capture::StreamCapture;
pub use registry::DeviceCaptures;
pub use state::CaptureState;
