//! Profile windows: tokens, timestamp slots, and how a window is measured.
//!
//! `TimingMethod::Device` brackets the window with GPU timestamps written by
//! empty compute passes (`timestamp_writes`), which needs only
//! `TIMESTAMP_QUERY`: the start stamp runs after everything submitted before
//! it, the end stamp after everything inside. Timestamps are queue-global, so
//! a window measures the GPU time between its two stamps in queue order, work
//! of other streams submitted in between included; windows on different
//! streams may overlap. A window opened with `start_profile_at_launch` holds
//! exactly the next launch: that launch gets a pass of its own whose
//! timestamp writes bracket it.
//!
//! `TimingMethod::System` drains the queue at both ends and reads the host
//! clock: coarse, but available everywhere.
//!
//! Each window takes a slot (a two-query set and its resolve buffer) from a
//! pool and gives it back when it ends or is abandoned, so abandoned windows
//! never grow the pool. A failure on the stream while a window is open (the
//! write scope's `on_failure`) marks it, and `end_profile` reports why.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use compute_runtime::{ProfileError, ServerError, StreamId, TimingMethod};

use crate::device::stamps::{StampAt, StampPair};
use crate::launch::resolve::ResolvedCount;
use crate::timing::recording::Recording;

/// A window's two stamps.
pub(crate) type Slot = StampPair;

#[derive(Debug)]
pub(crate) enum Measure {
    /// Timestamps at both ends.
    Device(Slot),
    /// The next launch gets its own timestamped pass; `recorded` once it has.
    AtLaunch { slot: Slot, recorded: bool },
    /// Host clock after a drain.
    System(Instant),
}

#[derive(Debug)]
pub(crate) struct Window {
    pub stream: StreamId,
    pub measure: Measure,
    pub invalid: Option<ServerError>,
}

/// Windows a server keeps open at most. A token dropped without
/// `end_profile` or `abandon_profile` keeps its window (and its timestamp
/// slot) until then; past this many, opening a window closes the oldest,
/// whose token then answers `UnknownToken`.
pub const MAX_OPEN_WINDOWS: usize = 4096;

/// Token ids are unique in the process, so a token from another server is
/// unknown here rather than naming one of this server's windows.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Open windows and the slot pool of one server.
#[derive(Debug)]
pub(crate) struct Profiler {
    pub method: TimingMethod,
    /// By token id, so the oldest is the first.
    windows: BTreeMap<u64, Window>,
    pool: Vec<Slot>,
    slots_created: usize,
    /// `Some` while a timeline is being recorded.
    pub timeline: Option<Recording>,
}

impl Profiler {
    pub fn new(method: TimingMethod) -> Self {
        Self {
            method,
            windows: BTreeMap::new(),
            pool: Vec::new(),
            slots_created: 0,
            timeline: None,
        }
    }

    /// Slots ever created (the pool's high-water mark).
    #[cfg(feature = "testing")]
    pub fn slots_created(&self) -> usize {
        self.slots_created
    }

    /// Open windows.
    #[cfg(feature = "testing")]
    pub fn open_windows(&self) -> usize {
        self.windows.len()
    }

    pub fn take_slot(&mut self, device: &wgpu::Device) -> Slot {
        if let Some(s) = self.pool.pop() {
            return s;
        }
        self.slots_created += 1;
        StampPair::new(device, "profile window")
    }

    pub fn give_back(&mut self, slot: Slot) {
        self.pool.push(slot);
    }

    pub fn open(&mut self, stream: StreamId, measure: Measure) -> u64 {
        if self.windows.len() >= MAX_OPEN_WINDOWS
            && let Some((_, oldest)) = self.windows.pop_first()
            && let Measure::Device(slot) | Measure::AtLaunch { slot, .. } = oldest.measure
        {
            self.pool.push(slot);
        }
        let id = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        self.windows.insert(
            id,
            Window {
                stream,
                measure,
                invalid: None,
            },
        );
        id
    }

    /// Removes the window `token` of `stream`.
    pub fn close(&mut self, stream: StreamId, token: u64) -> Result<Window, ProfileError> {
        match self.windows.get(&token) {
            Some(w) if w.stream == stream => {}
            _ => return Err(ProfileError::UnknownToken { token, stream }),
        }
        self.windows
            .remove(&token)
            .ok_or(ProfileError::UnknownToken { token, stream })
    }

    /// Marks every open window of `stream` invalid (first cause wins).
    pub fn invalidate(&mut self, stream: StreamId, error: &ServerError) {
        for w in self.windows.values_mut().filter(|w| w.stream == stream) {
            w.invalid.get_or_insert_with(|| error.clone());
        }
    }

    /// The stamps of an armed at-launch window of `stream`, marking it
    /// recorded: the launch about to be encoded is the one it holds.
    pub fn arm_launch(&mut self, stream: StreamId) -> Option<StampAt> {
        self.windows
            .values_mut()
            .find_map(|w| match &mut w.measure {
                Measure::AtLaunch { slot, recorded } if w.stream == stream && !*recorded => {
                    *recorded = true;
                    Some(StampAt {
                        query_set: slot.query_set.clone(),
                        base: 0,
                    })
                }
                _ => None,
            })
    }

    /// Where the next launch on `stream` writes its stamps: an armed
    /// at-launch window's slot, else (while a timeline records, and until
    /// it is full) the timeline's next pair, recorded under the kernel's
    /// name and count.
    pub fn stamp_launch(
        &mut self,
        device: &wgpu::Device,
        stream: StreamId,
        kernel: &str,
        count: &ResolvedCount,
    ) -> Option<StampAt> {
        if let Some(at) = self.arm_launch(stream) {
            return Some(at);
        }
        self.timeline.as_mut()?.stamp(device, stream, kernel, count)
    }

    /// Whether launches on `stream` are stamped now (a timeline records, or
    /// an at-launch window waits for its launch).
    pub fn stamps_launches(&self, stream: StreamId) -> bool {
        self.timeline.is_some() || self.has_armed(stream)
    }

    /// Whether `stream` already has an at-launch window waiting for a launch.
    pub fn has_armed(&self, stream: StreamId) -> bool {
        self.windows.values().any(|w| {
            w.stream == stream
                && matches!(
                    w.measure,
                    Measure::AtLaunch {
                        recorded: false,
                        ..
                    }
                )
        })
    }
}
