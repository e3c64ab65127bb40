//! What a timeline holds while it records: per launch, its stream, its
//! kernel's name (shared between launches of one kernel) and its count,
//! with its two stamps in a query set shared by [`LAUNCHES_PER_SET`]
//! launches. About 50 bytes of host memory a launch, and 16 on the device;
//! at most its capacity of launches, after which the newest are dropped
//! (not stamped, so they cost nothing) and counted.

use std::sync::Arc;

use compute_runtime::StreamId;
use hashbrown::HashSet;

use crate::device::stamps::{PAIR_BYTES, StampAt};
use crate::launch::resolve::ResolvedCount;

/// Launches one query set holds: two stamps each, and wgpu's largest query
/// set holds 4,096 queries.
pub(crate) const LAUNCHES_PER_SET: u32 = 2048;

/// A launch's count, kept as numbers until the timeline is finished.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Count {
    Static([u32; 3]),
    Indirect(u64),
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Count::Static([x, y, z]) => write!(f, "({x}, {y}, {z})"),
            Count::Indirect(offset) => write!(f, "indirect@{offset}"),
        }
    }
}

impl From<&ResolvedCount> for Count {
    fn from(count: &ResolvedCount) -> Self {
        match count {
            ResolvedCount::Static(x, y, z) => Count::Static([*x, *y, *z]),
            ResolvedCount::Indirect { offset, .. } => Count::Indirect(*offset),
            ResolvedCount::Copied { src_offset, .. } => Count::Indirect(*src_offset),
        }
    }
}

/// One recorded launch; its stamps are pair `i` of the recording, `i` its
/// index.
#[derive(Debug)]
pub(crate) struct Recorded {
    pub stream: StreamId,
    pub kernel: Arc<str>,
    pub count: Count,
}

/// A query set of [`LAUNCHES_PER_SET`] stamp pairs and the buffer it
/// resolves into.
#[derive(Debug)]
struct StampSet {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
}

/// A timeline being recorded.
#[derive(Debug)]
pub(crate) struct Recording {
    capacity: usize,
    sets: Vec<StampSet>,
    events: Vec<Recorded>,
    dropped: u64,
    /// Kernel names, shared by every launch of the kernel.
    names: HashSet<Arc<str>>,
}

impl Recording {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            sets: Vec::new(),
            events: Vec::new(),
            dropped: 0,
            names: HashSet::new(),
        }
    }

    /// Where a launch of `kernel` on `stream` writes its stamps, recording
    /// it; `None` (counted) once the timeline is full.
    pub fn stamp(
        &mut self,
        device: &wgpu::Device,
        stream: StreamId,
        kernel: &str,
        count: &ResolvedCount,
    ) -> Option<StampAt> {
        if self.events.len() >= self.capacity {
            self.dropped = self.dropped.saturating_add(1);
            return None;
        }
        let index = self.events.len() as u32;
        let (set, pair) = (index / LAUNCHES_PER_SET, index % LAUNCHES_PER_SET);
        if set as usize == self.sets.len() {
            self.sets.push(StampSet::new(device));
        }
        let query_set = self.sets.get(set as usize)?.query_set.clone();
        let kernel = match self.names.get(kernel) {
            Some(name) => Arc::clone(name),
            None => {
                let name: Arc<str> = Arc::from(kernel);
                self.names.insert(Arc::clone(&name));
                name
            }
        };
        self.events.push(Recorded {
            stream,
            kernel,
            count: count.into(),
        });
        Some(StampAt {
            query_set,
            base: 2 * pair,
        })
    }

    /// Query sets made so far.
    #[cfg(feature = "testing")]
    pub fn query_sets(&self) -> usize {
        self.sets.len()
    }

    /// Encodes the resolve of every recorded stamp into `readback`, pair
    /// `i` at `16 * i`; returns the launches and how many were dropped.
    pub fn resolve_into(
        self,
        encoder: &mut wgpu::CommandEncoder,
        readback: &wgpu::Buffer,
    ) -> (Vec<Recorded>, u64) {
        let mut left = self.events.len() as u64;
        for (i, set) in self.sets.iter().enumerate() {
            let pairs = left.min(u64::from(LAUNCHES_PER_SET));
            left -= pairs;
            encoder.resolve_query_set(&set.query_set, 0..2 * pairs as u32, &set.resolve, 0);
            let at = i as u64 * u64::from(LAUNCHES_PER_SET) * PAIR_BYTES;
            encoder.copy_buffer_to_buffer(&set.resolve, 0, readback, at, pairs * PAIR_BYTES);
        }
        (self.events, self.dropped)
    }

    /// Launches recorded.
    pub fn len(&self) -> usize {
        self.events.len()
    }
}

impl StampSet {
    fn new(device: &wgpu::Device) -> Self {
        Self {
            query_set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("timeline"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * LAUNCHES_PER_SET,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timeline resolve"),
                size: u64::from(LAUNCHES_PER_SET) * PAIR_BYTES,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
        }
    }
}
