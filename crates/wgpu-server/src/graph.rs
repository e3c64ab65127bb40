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

use compute_graph::StreamCapture;
use compute_runtime::{BufferBinding, ServerError, StreamId};

use compute_runtime::{GraphId, MemoryAllocationMode};
use compute_wgsl::WgpuCompiler;

use crate::WgpuServer;
use crate::launch::ResolvedLaunch;

/// A recorded graph: the launches of one capture window, resolved. Opaque;
/// it lives in the device's [`DeviceCaptures`](crate::DeviceCaptures).
#[derive(Debug)]
pub struct WgpuGraph {
    launches: Vec<ResolvedLaunch>,
    /// A replay's write set.
    writes: Vec<BufferBinding>,
    /// Keeps every touched slice out of the pool.
    _pins: Vec<BufferBinding>,
}

impl WgpuGraph {
    /// The graph of a finished capture, or why there is none.
    pub(crate) fn from_capture(
        stream: StreamId,
        capture: StreamCapture<ResolvedLaunch>,
    ) -> Result<Self, ServerError> {
        if let Some(e) = capture.failure() {
            return Err(ServerError::CaptureState {
                stream,
                reason: format!("a launch inside the capture window failed: {e}"),
            });
        }
        let (launches, pins, writes) = capture.into_parts();
        Ok(Self {
            launches,
            writes,
            _pins: pins,
        })
    }
}

/// `graph_prepare`: the stream enters `Prepared`, and the device's pools
/// switch to persistent mode for the warm-up and the capture.
pub(crate) fn prepare<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    let next = s.capture_state(stream_id).prepare(stream_id)?;
    s.capture_states.insert(stream_id, next);
    // The warm-up that follows frees into the persistent pool, so the
    // capture window reuses it instead of allocating.
    s.mode_before_capture.get_or_insert(s.memory.mode());
    s.memory.set_mode(MemoryAllocationMode::Persistent);
    Ok(())
}

/// `begin_capture`: launches on the stream are recorded from now on.
pub(crate) fn begin<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    let next = s.capture_state(stream_id).begin(stream_id)?;
    s.capture_states.insert(stream_id, next);
    s.recordings.insert(stream_id, StreamCapture::default());
    Ok(())
}

/// `end_capture`: stores the recording as a graph (or reports the failure
/// that spoiled it) and restores the allocation mode.
pub(crate) fn end<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<GraphId, ServerError> {
    s.enter()?;
    let next = s.capture_state(stream_id).end(stream_id)?;
    s.capture_states.insert(stream_id, next);
    if let Some(mode) = s.mode_before_capture.take() {
        s.memory.set_mode(mode);
    }
    let capture = s.recordings.remove(&stream_id).unwrap_or_default();
    let graph = WgpuGraph::from_capture(stream_id, capture)?;
    Ok(s.captures.insert(graph))
}

/// `replay`: re-encodes every recorded launch on `stream_id`, inside one
/// write scope over the graph's write set.
pub(crate) fn replay<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    graph: GraphId,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    if s.is_capturing(stream_id) {
        return Err(ServerError::CaptureState {
            stream: stream_id,
            reason: "replay inside a capture window is not recorded".into(),
        });
    }
    let registry = s.captures.clone();
    let writes = registry
        .with(graph, |g| g.writes.clone())
        .ok_or(ServerError::UnknownGraph { graph })?;
    s.scoped(stream_id, &writes, |s| {
        registry
            .with(graph, |g| {
                for launch in &g.launches {
                    crate::launch::dispatch(s, stream_id, launch);
                }
            })
            .ok_or(ServerError::UnknownGraph { graph })
    })
}
