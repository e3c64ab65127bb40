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

use std::sync::Arc;

use compute_graph::{CaptureState, StreamCapture};
use compute_runtime::{
    BufferBinding, GraphId, MemoryAllocationMode, MemoryId, ServerError, StorageHandle, StreamId,
};
use compute_stream::Access;
use hashbrown::HashMap;

use crate::launch::resolve::ResolvedLaunch;

/// A server's graph state: the device's registry, and each stream's
/// capture state and recording.
#[derive(Debug)]
pub(crate) struct Graphs {
    registry: DeviceCaptures,
    /// Streams not `Idle`.
    states: HashMap<StreamId, CaptureState>,
    /// Recordings of the streams that are capturing.
    recordings: HashMap<StreamId, StreamCapture<ResolvedLaunch>>,
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

    /// `graph_prepare`: `stream` enters `Prepared` (see
    /// [`allocation_mode`](Self::allocation_mode)).
    pub fn prepare(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let next = self.state(stream).prepare(stream)?;
        self.set_state(stream, next);
        Ok(())
    }

    /// `begin_capture`: launches on `stream` are recorded from now on.
    pub fn begin(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let next = self.state(stream).begin(stream)?;
        self.set_state(stream, next);
        self.recordings.insert(stream, StreamCapture::default());
        Ok(())
    }

    /// `end_capture`: stores `stream`'s recording as a graph of `device`
    /// (or reports the failure that spoiled it).
    pub fn end(
        &mut self,
        stream: StreamId,
        device: &wgpu::Device,
        tasks_max: usize,
    ) -> Result<GraphId, ServerError> {
        let next = self.state(stream).end(stream)?;
        self.set_state(stream, next);
        let capture = self.recordings.remove(&stream).unwrap_or_default();
        let graph = WgpuGraph::from_capture(device.clone(), stream, capture, tasks_max)?;
        Ok(self.registry.insert(graph))
    }

    /// The recording of `stream`, while it captures.
    pub fn recording(&mut self, stream: StreamId) -> Option<&mut StreamCapture<ResolvedLaunch>> {
        self.recordings.get_mut(&stream)
    }

    /// Graph `id` of `device`, to replay: a handle taken under the
    /// registry's lock and used outside it, so a replay that waits (for a
    /// collective holding its stream) never blocks other servers sharing
    /// the registry.
    pub fn get(&self, id: GraphId, device: &wgpu::Device) -> Result<WgpuGraph, ServerError> {
        self.registry
            .with(id, |g| g.clone())
            .filter(|g| g.0.device == *device)
            .ok_or(ServerError::UnknownGraph { graph: id })
    }

    /// `graph_destroy`: drops graph `id` if it is `device`'s.
    pub fn destroy(&mut self, id: GraphId, device: &wgpu::Device) {
        if self.registry.with(id, |g| g.0.device == *device) == Some(true) {
            let _ = self.registry.remove(id);
        }
    }

    /// Graphs in the registry.
    #[cfg(feature = "testing")]
    pub fn len(&self) -> usize {
        self.registry.len()
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
/// Clones share it.
#[derive(Clone, Debug)]
pub struct WgpuGraph(Arc<Recorded>);

/// What a graph holds.
#[derive(Debug)]
pub(crate) struct Recorded {
    /// The device its pipelines and bind groups belong to: a registry
    /// shared by mistake between devices still never replays it elsewhere.
    device: wgpu::Device,
    pub launches: Vec<ResolvedLaunch>,
    /// A replay's write set.
    pub writes: Vec<BufferBinding>,
    /// Keeps every touched slice out of the pool.
    _pins: Vec<BufferBinding>,
    /// Every slice the graph reads, once.
    pub reads: Vec<MemoryId>,
    /// The byte ranges of the whole graph, merged per page.
    pub pages: Vec<(StorageHandle, Access)>,
    /// The launches in runs of at most `tasks_max`, each with its merged
    /// ranges and writes: what a replay orders and records per batch.
    pub segments: Vec<Segment>,
}

impl WgpuGraph {
    /// What it recorded.
    pub(crate) fn recorded(&self) -> &Recorded {
        &self.0
    }
}

/// A run of consecutive recorded launches, replayed into one batch.
#[derive(Debug)]
pub(crate) struct Segment {
    pub launches: std::ops::Range<usize>,
    pub pages: Vec<(StorageHandle, Access)>,
    pub writes: Vec<MemoryId>,
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
        Ok(Self(Arc::new(Recorded {
            device,
            launches,
            writes,
            _pins: pins,
            reads,
            pages,
            segments,
        })))
    }
}

/// The device's registry of recorded graphs, as `WgpuServer::new` takes
/// it: `compute_graph`'s registry of this server's [`WgpuGraph`]s. Clone it
/// to share graphs between servers of one device.
pub type DeviceCaptures = compute_graph::DeviceCaptures<WgpuGraph>;
