//! Software graphs: recordings of resolved launches, replayed by
//! re-encoding.
//!
//! WebGPU command buffers are submit-once, so a graph cannot be a command
//! buffer kept for later. It is the list of [`ResolvedLaunch`]es the capture
//! window produced: pipeline, bind group and dispatch size already looked up,
//! so replay skips the whole launch path (no compiler, no cache lookups, no
//! bind-group creation, no allocation) and only orders and encodes, O(n) in
//! recorded launches. The graph holds clones of every binding it touches,
//! which pins those slices until `graph_destroy`; freeing them afterwards is
//! safe without a sync because a freed slice's page is ordered by the
//! scheduler like any other.

use std::any::Any;

use compute_graph::StreamCapture;
use compute_runtime::{BufferBinding, ServerError, StreamId};

use crate::launch::ResolvedLaunch;

/// A stored graph.
#[derive(Debug)]
pub(crate) struct Graph {
    pub launches: Vec<ResolvedLaunch>,
    /// A replay's write set.
    pub writes: Vec<BufferBinding>,
    /// Keeps every touched slice out of the pool.
    _pins: Vec<BufferBinding>,
}

impl Graph {
    /// The graph of a finished capture, or why there is none.
    pub fn from_capture(stream: StreamId, capture: StreamCapture) -> Result<Self, ServerError> {
        if let Some(e) = capture.failure() {
            return Err(ServerError::CaptureState {
                stream,
                reason: format!("a launch inside the capture window failed: {e}"),
            });
        }
        let (commands, pins, writes) = capture.into_parts();
        let launches = commands
            .into_iter()
            .map(|c: Box<dyn Any + Send>| c.downcast::<ResolvedLaunch>().map(|b| *b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ServerError::CaptureState {
                stream,
                reason: "the capture holds a command this server did not record".into(),
            })?;
        Ok(Self {
            launches,
            writes,
            _pins: pins,
        })
    }
}
