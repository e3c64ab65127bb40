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

use compute_graph::{CaptureState, StreamCapture};
use compute_runtime::{
    BufferBinding, GraphId, MemoryAllocationMode, MemoryId, ServerError, StorageHandle, StreamId,
};
use compute_stream::Access;
use compute_wgsl::WgpuCompiler;
use hashbrown::HashMap;

use crate::launch::dispatch::{dispatch, encode};
use crate::launch::path::ResolvedLaunch;
use crate::{DeviceCaptures, WgpuServer};

/// A server's graph state: the device's registry, and each stream's
/// capture state and recording.
#[derive(Debug)]
pub(crate) struct Graphs {
    pub registry: DeviceCaptures,
    /// Streams not `Idle`.
    pub states: HashMap<StreamId, CaptureState>,
    /// Recordings of the streams that are capturing.
    pub recordings: HashMap<StreamId, StreamCapture<ResolvedLaunch>>,
}

impl Graphs {
    pub fn new(registry: DeviceCaptures) -> Self {
        Self {
            registry,
            states: HashMap::new(),
            recordings: HashMap::new(),
        }
    }

    pub fn state(&self, stream: StreamId) -> CaptureState {
        self.states.get(&stream).copied().unwrap_or_default()
    }

    fn set_state(&mut self, stream: StreamId, state: CaptureState) {
        if state == CaptureState::Idle {
            self.states.remove(&stream);
        } else {
            self.states.insert(stream, state);
        }
    }

    /// How `initialize_memory` on `stream` allocates: persistently from
    /// `graph_prepare` to `end_capture`, so the capture window reuses what
    /// the warm-up freed; otherwise as the device's mode says. Only that
    /// stream's allocations change pools: the others keep sliced pages.
    pub fn allocation_mode(
        &self,
        stream: StreamId,
        device_mode: MemoryAllocationMode,
    ) -> MemoryAllocationMode {
        match self.state(stream) {
            CaptureState::Idle => device_mode,
            CaptureState::Prepared | CaptureState::Capturing => MemoryAllocationMode::Persistent,
        }
    }
}

/// A recorded graph: the launches of one capture window, resolved. Opaque;
/// it lives in the device's [`DeviceCaptures`](crate::DeviceCaptures).
#[derive(Debug)]
pub struct WgpuGraph {
    /// The device its pipelines and bind groups belong to: a registry
    /// shared by mistake between devices still never replays it elsewhere.
    device: wgpu::Device,
    launches: Vec<ResolvedLaunch>,
    /// A replay's write set.
    writes: Vec<BufferBinding>,
    /// Keeps every touched slice out of the pool.
    _pins: Vec<BufferBinding>,
    /// Every slice the graph reads, once.
    reads: Vec<MemoryId>,
    /// The byte ranges of the whole graph, merged per page.
    pages: Vec<(StorageHandle, Access)>,
    /// The launches in runs of at most `tasks_max`, each with its merged
    /// ranges and writes: what a replay orders and records per batch.
    segments: Vec<Segment>,
}

/// A run of consecutive recorded launches, replayed into one batch.
#[derive(Debug)]
struct Segment {
    launches: std::ops::Range<usize>,
    pages: Vec<(StorageHandle, Access)>,
    writes: Vec<MemoryId>,
}

/// `ranges` merged per page: one range from the lowest start to the highest
/// end, written if any use writes. Over-approximates (never misses a
/// hazard); a replay's ordering then costs one entry per page.
fn merge(
    ranges: impl IntoIterator<Item = (StorageHandle, Access)>,
) -> Vec<(StorageHandle, Access)> {
    let mut merged: Vec<(StorageHandle, Access)> = Vec::new();
    for (r, a) in ranges {
        match merged.iter_mut().find(|(m, _)| m.id == r.id) {
            Some((m, ma)) => {
                let end = (m.offset + m.size).max(r.offset + r.size);
                m.offset = m.offset.min(r.offset);
                m.size = end - m.offset;
                if a == Access::Write {
                    *ma = Access::Write;
                }
            }
            None => merged.push((r, a)),
        }
    }
    merged
}

fn dedup(ids: impl IntoIterator<Item = MemoryId>) -> Vec<MemoryId> {
    let mut v: Vec<MemoryId> = ids.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

impl WgpuGraph {
    /// The graph of a finished capture, or why there is none.
    pub(crate) fn from_capture(
        device: wgpu::Device,
        stream: StreamId,
        capture: StreamCapture<ResolvedLaunch>,
        tasks_max: usize,
    ) -> Result<Self, ServerError> {
        if let Some(e) = capture.failure() {
            return Err(ServerError::CaptureState {
                stream,
                reason: format!("a launch inside the capture window failed: {e}"),
            });
        }
        let (launches, pins, writes) = capture.into_parts();
        let reads = dedup(launches.iter().flat_map(|l| l.reads.iter().copied()));
        let pages = merge(launches.iter().flat_map(|l| l.pages.iter().copied()));
        let segments = (0..launches.len())
            .step_by(tasks_max.max(1))
            .map(|start| {
                let run = start..(start + tasks_max.max(1)).min(launches.len());
                let these = &launches[run.clone()];
                Segment {
                    pages: merge(these.iter().flat_map(|l| l.pages.iter().copied())),
                    writes: dedup(these.iter().flat_map(|l| l.writes.iter().copied())),
                    launches: run,
                }
            })
            .collect();
        Ok(Self {
            device,
            launches,
            writes,
            _pins: pins,
            reads,
            pages,
            segments,
        })
    }
}

/// `graph_prepare`: the stream enters `Prepared`; from now on its
/// allocations are persistent (see [`Graphs::allocation_mode`]).
pub(crate) fn prepare<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    let next = s.graphs.state(stream_id).prepare(stream_id)?;
    s.graphs.set_state(stream_id, next);
    Ok(())
}

/// `begin_capture`: launches on the stream are recorded from now on.
pub(crate) fn begin<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<(), ServerError> {
    s.enter()?;
    let next = s.graphs.state(stream_id).begin(stream_id)?;
    s.graphs.set_state(stream_id, next);
    s.graphs
        .recordings
        .insert(stream_id, StreamCapture::default());
    Ok(())
}

/// `end_capture`: stores the recording as a graph (or reports the failure
/// that spoiled it); the stream allocates as the device says again.
pub(crate) fn end<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream_id: StreamId,
) -> Result<GraphId, ServerError> {
    s.enter()?;
    let next = s.graphs.state(stream_id).end(stream_id)?;
    s.graphs.set_state(stream_id, next);
    let capture = s.graphs.recordings.remove(&stream_id).unwrap_or_default();
    let graph = WgpuGraph::from_capture(
        s.gpu.device.clone(),
        stream_id,
        capture,
        s.streams.tasks_max(),
    )?;
    Ok(s.graphs.registry.insert(graph))
}

/// `replay`: re-encodes every recorded launch on `stream_id`, inside one
/// write scope over the graph's write set.
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
    let registry = s.graphs.registry.clone();
    let device = s.gpu.device.clone();
    registry
        .with(graph, |g| {
            if g.device != device {
                return Err(ServerError::UnknownGraph { graph });
            }
            s.scoped(stream_id, &g.writes, |s| {
                if s.timing.profiler.stamps_launches(stream_id) {
                    return g
                        .launches
                        .iter()
                        .try_for_each(|launch| dispatch(s, stream_id, launch));
                }
                s.streams.prepare(stream_id, &g.pages);
                s.check_inputs(&g.reads)?;
                for seg in &g.segments {
                    s.streams.prepare(stream_id, &seg.pages);
                    let (backend, ws) = s.streams.encoder(stream_id);
                    for launch in &g.launches[seg.launches.clone()] {
                        backend
                            .late
                            .depend(stream_id, &launch.reads, &launch.writes);
                        encode(ws, &device, launch, None, &backend.late);
                    }
                    ws.wrote(&seg.writes);
                    s.streams.tasks_done(stream_id, seg.launches.len());
                }
                Ok(())
            })
        })
        .ok_or(ServerError::UnknownGraph { graph })?
}

/// `graph_destroy`: drops the graph, unpinning its slices. A replay already
/// encoded or submitted is ordered before any later user of those pages by
/// the scheduler (the wgpu guarantee the seed names), so no sync is needed.
/// An unknown id, or a graph of another device in a shared registry, is left
/// alone.
pub(crate) fn destroy<C: WgpuCompiler>(s: &mut WgpuServer<C>, graph: GraphId) {
    let device = &s.gpu.device;
    if s.graphs.registry.with(graph, |g| g.device == *device) == Some(true) {
        let _ = s.graphs.registry.remove(graph);
    }
}
