//! The graph calls on the server: `graph_prepare`, `begin_capture`,
//! `end_capture`, `replay`, `graph_destroy`, over the part
//! [`Graphs`](crate::graph::Graphs).

use std::sync::Arc;

use compute_runtime::{GraphId, ServerError, StreamId};
use compute_wgsl::WgpuCompiler;

use crate::server::WgpuServer;
use crate::server::dispatch::{dispatch, encode};

/// `graph_prepare`: the stream enters `Prepared`; from now on its
/// allocations are persistent (see [`Graphs::allocation_mode`]).
///
/// [`Graphs::allocation_mode`]: crate::graph::Graphs::allocation_mode
pub(crate) fn prepare<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    s.graphs.prepare(stream_id)
}

/// `begin_capture`: launches on the stream are recorded from now on.
pub(crate) fn begin<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    s.graphs.begin(stream_id)
}

/// `end_capture`: stores the recording as a graph (or reports the failure
/// that spoiled it); the stream allocates as the device says again.
pub(crate) fn end<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<GraphId, ServerError> {
    s.enter()?;
    let tasks_max = s.streams.tasks_max();
    s.graphs.end(stream_id, s.gpu.device(), tasks_max)
}

/// `replay`: re-encodes every recorded launch on `stream_id`, inside one
/// write scope over the graph's write set, outside the registry's lock.
///
/// The launch path's per-launch work is done per graph or per segment
/// instead: the whole graph's ranges are ordered once (which may submit
/// other streams, and a refused batch poisons what it wrote), its inputs'
/// trust is checked once (any untrusted input refuses the whole replay),
/// and each segment of at most `tasks_max` launches records its ranges and
/// writes once and is encoded in one run. Only while launches are stamped
/// (a timeline, an at-launch window) does each go through `dispatch`.
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
    let g = s.graphs.get(graph, s.gpu.device())?;
    let g = g.recorded();
    s.scoped(stream_id, &g.writes, |s| {
        if s.timing.profiler_mut().stamps_launches(stream_id) {
            return g
                .launches
                .iter()
                .try_for_each(|launch| dispatch(s, stream_id, launch));
        }
        s.streams.prepare(stream_id, &g.pages);
        s.check_inputs(&g.reads)?;
        let device = s.gpu.device().clone();
        let late = Arc::clone(s.streams.trust().late());
        for seg in &g.segments {
            s.streams.prepare(stream_id, &seg.pages);
            let (_, ws) = s.streams.encoder(stream_id);
            for launch in &g.launches[seg.launches.clone()] {
                late.depend(stream_id, &launch.reads, &launch.writes);
                encode(ws, &device, launch, None, &late);
            }
            ws.batch().wrote(&seg.writes);
            s.streams.tasks_done(stream_id, seg.launches.len());
        }
        Ok(())
    })
}

/// `graph_destroy`: drops the graph, unpinning its slices. A replay already
/// encoded or submitted is ordered before any later user of those pages by
/// the scheduler (the wgpu guarantee the seed names), so no sync is needed.
/// An unknown id, or a graph of another device in a shared registry, is left
/// alone.
pub(crate) fn destroy<C: WgpuCompiler>(s: &mut WgpuServer<C>, graph: GraphId) {
    s.graphs.destroy(graph, s.gpu.device());
}
