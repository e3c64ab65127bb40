//! # compute-graph
//!
//! Graph capture, as far as it can be said without a GPU API: the per-stream
//! capture state machine ([`CaptureState`]), the per-stream recording
//! ([`StreamCapture`]) and the device-wide registry of recorded graphs
//! ([`DeviceCaptures`]).
//!
//! **Owns:** which capture calls are legal in which state, what a recording
//! keeps besides its commands (the pinned bindings, the write set, the first
//! failure in the window), and graph ids.
//!
//! **Leaves to the server:** what a recorded command and a graph *are*
//! (resolved pipelines, bind groups, dispatch sizes) and how a graph is
//! replayed. [`StreamCapture`] and [`DeviceCaptures`] are generic over those
//! types, so this crate never names wgpu and the server gets its own types
//! back without a downcast. Depends on `compute-runtime` only; the stream
//! layer does not depend on it.

mod capture;
mod registry;
mod state;

pub use capture::StreamCapture;
pub use registry::DeviceCaptures;
pub use state::CaptureState;
