//! Ranks whose devices share memory (devices of one GPU, in one process):
//! the group's one decision of where its calls' data moves, and each
//! rank's exchange buffer, which the other ranks import.
//!
//! A [`Group`] is attached to the communicator's in-process hub
//! (`Communicator::local_shared`), so every rank of one communicator finds
//! the same one, and a communicator formed again gets a new one. Each rank
//! registers its device at `comm_init` ([`Member`]); the last registration
//! settles the group's [`Path`] (device memory when every rank can export
//! and import it, their devices have equal device and driver UUIDs, and
//! none asked for the host path). Every rank of a call must take the same
//! path, so each call's path is decided once, by the first rank to post it
//! ([`Decisions`]): the settled path, or host staging for a call posted
//! before every rank registered. That happens whenever a caller queues a
//! call right behind `comm_init` on ranks served by separate threads (as
//! cubecl's `ClientGroup` does: one rank's first call can come before
//! another rank's `comm_init`, whose float probe waits on its device);
//! only such calls go through the host, the later ones take the device.
//!
//! Each rank's exchange buffer ([`Exchange`]) is exported from its own
//! device and published in the group with a generation; the others import
//! it by fd once per generation. It only grows, and only in a rank's
//! `fill`, which comes after every rank has read the last piece it held
//! (the engine's barriers, `compute_collective::DeviceData`).

use std::any::Any;
use std::sync::{Arc, Mutex};

use compute_runtime::ServerError;

use crate::device::shared_memory::{self, Exported};

/// Where a group's calls move their data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Path {
    /// Through device memory every rank reads (else host staging).
    pub on_device: bool,
    /// Float sums and products on the devices give the host's bits
    /// (denormals kept; measured on every rank's device at registration).
    pub exact_floats: bool,
    /// Host staging because the call was posted before every rank joined
    /// (what the collective log says).
    pub early: bool,
}

impl Path {
    const HOST: Path = Path {
        on_device: false,
        exact_floats: false,
        early: false,
    };
    const EARLY: Path = Path {
        early: true,
        ..Path::HOST
    };
}

/// What a rank's device offers the group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member {
    /// Device and driver UUIDs, where the device shares memory by fd.
    pub uuids: Option<([u8; 16], [u8; 16])>,
    /// The server asked for the device path (not forced onto the host).
    pub wants_device: bool,
    /// Its float fold kernels keep denormals (`fold::exact_floats`).
    pub exact_floats: bool,
}

#[derive(Debug, Default)]
struct State {
    members: Vec<Option<Member>>,
    /// Fixed by the last registration.
    settled: Option<Path>,
    decisions: Decisions,
    /// Each rank's exchange memory: its generation and export.
    slots: Vec<Option<(u64, Exported)>>,
    /// Device calls each rank's engine has finished (whatever their
    /// outcome): a rank's exchange buffer is free once every rank finished
    /// every call before the one about to fill it.
    finished: Vec<u64>,
}

/// The state every rank of one in-process communicator shares.
#[derive(Debug)]
pub(crate) struct Group {
    state: Mutex<State>,
}

impl Group {
    /// The group attached to `comm`, made by the first rank to ask; `None`
    /// where the ranks are not all in this process.
    pub fn of(comm: &compute_collective::Communicator) -> Option<Arc<Group>> {
        let ranks = comm.size();
        let shared = comm.local_shared(&mut || {
            Arc::new(Group {
                state: Mutex::new(State {
                    members: vec![None; ranks],
                    settled: None,
                    decisions: Decisions::new(ranks),
                    slots: vec![None; ranks],
                    finished: vec![0; ranks],
                }),
            }) as Arc<dyn Any + Send + Sync>
        })?;
        shared.downcast::<Group>().ok()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `rank`'s device; the last registration settles the path.
    pub fn register(&self, rank: usize, member: Member) {
        let mut state = self.lock();
        if let Some(slot) = state.members.get_mut(rank) {
            *slot = Some(member);
        }
        if state.settled.is_none() && state.members.iter().all(Option::is_some) {
            let members: Vec<Member> = state.members.iter().flatten().copied().collect();
            state.settled = Some(decide(&members));
        }
    }

    /// The path of `rank`'s next call (every rank asks once per group call,
    /// in call order; see [`Decisions`]).
    pub fn next_call(&self, rank: usize) -> Path {
        let state = &mut *self.lock();
        state.decisions.next(rank, state.settled)
    }

    /// The settled path; `None` until every rank registered.
    pub fn settled(&self) -> Option<Path> {
        self.lock().settled
    }

    /// `rank`'s engine finished a device call.
    pub fn finished(&self, rank: usize) {
        if let Some(count) = self.lock().finished.get_mut(rank) {
            *count += 1;
        }
    }

    /// Whether every rank's engine has finished its first `calls` device
    /// calls.
    fn all_finished(&self, calls: u64) -> bool {
        self.lock().finished.iter().all(|&c| c >= calls)
    }

    fn publish(&self, rank: usize, generation: u64, exported: Exported) {
        if let Some(slot) = self.lock().slots.get_mut(rank) {
            *slot = Some((generation, exported));
        }
    }

    fn slot(&self, rank: usize) -> Option<(u64, Exported)> {
        self.lock().slots.get(rank).cloned().flatten()
    }
}

/// Each group call's path, decided by the first rank to post it: the
/// settled path once there is one, else host staging. Every rank asks
/// once per group call, in call order, a refused call included (else a
/// rank would read another call's decision: the engine then fails the
/// call on every rank, "ranks disagree on where the data moves"). A
/// call's decision is kept until every rank has asked for it; decisions are only made
/// before the path settles (from then on every rank's answer is the
/// settled path), so what is kept is the calls posted before that which
/// some rank has not reached yet.
#[derive(Debug, Default)]
struct Decisions {
    /// Calls each rank has asked about.
    asked: Vec<u64>,
    /// The call `kept[0]` decides.
    first: u64,
    kept: std::collections::VecDeque<Path>,
}

impl Decisions {
    fn new(ranks: usize) -> Self {
        Decisions {
            asked: vec![0; ranks],
            first: 0,
            kept: std::collections::VecDeque::new(),
        }
    }

    /// The path of `rank`'s next call, given the group's `settled` path.
    fn next(&mut self, rank: usize, settled: Option<Path>) -> Path {
        let Some(asked) = self.asked.get_mut(rank) else {
            return Path::HOST;
        };
        let call = *asked;
        *asked += 1;
        let kept = (call.checked_sub(self.first)).and_then(|i| self.kept.get(i as usize));
        let path = match (kept, settled) {
            (Some(&decided), _) => decided,
            (None, Some(settled)) => settled,
            // Before the path settles every call's first asker keeps its
            // decision, so this call is the one after the last kept.
            (None, None) => {
                self.kept.push_back(Path::EARLY);
                Path::EARLY
            }
        };
        let everyone = self.asked.iter().copied().min().unwrap_or(0);
        while self.first < everyone && self.kept.pop_front().is_some() {
            self.first += 1;
        }
        path
    }
}

/// The path of a group whose every rank registered.
fn decide(members: &[Member]) -> Path {
    let first = members.first().and_then(|m| m.uuids);
    let on_device = first.is_some() && members.iter().all(|m| m.wants_device && m.uuids == first);
    Path {
        on_device,
        exact_floats: on_device && members.iter().all(|m| m.exact_floats),
        early: false,
    }
}

/// One rank's view of the group's exchange memory: its own buffer (which
/// the others import) and its imports of theirs.
#[derive(Debug)]
pub(crate) struct Exchange {
    group: Arc<Group>,
    rank: usize,
    device: wgpu::Device,
    own: Mutex<Option<(u64, wgpu::Buffer)>>,
    peers: Mutex<Vec<Option<(u64, wgpu::Buffer)>>>,
    /// Device calls this rank has posted (its server thread's count).
    posted: std::sync::atomic::AtomicU64,
}

/// Exchange buffers grow in steps of this many bytes.
const GROW: u64 = 1 << 20;

impl Exchange {
    pub fn new(group: Arc<Group>, rank: usize, ranks: usize, device: wgpu::Device) -> Self {
        Exchange {
            group,
            rank,
            device,
            own: Mutex::new(None),
            peers: Mutex::new(vec![None; ranks]),
            posted: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn group(&self) -> &Group {
        &self.group
    }

    /// Device calls this rank has posted.
    #[cfg(feature = "testing")]
    pub fn posted(&self) -> u64 {
        self.posted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The path of this rank's next group call.
    pub fn next_call(&self) -> Path {
        self.group.next_call(self.rank)
    }

    /// Counts a device call this rank posts; whether its exchange buffer
    /// is free now (every rank's engine finished every earlier call, so
    /// nobody reads it until this call's combine): the call may then fill
    /// it on its stream, at the call.
    pub fn post_call(&self) -> bool {
        let before = self
            .posted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.group.all_finished(before)
    }

    /// This rank's engine finished a device call.
    pub fn finished(&self) {
        self.group.finished(self.rank);
    }

    /// This rank's exchange buffer, at least `len` bytes: a larger one is
    /// exported and published when it is smaller. Only from `fill`.
    pub fn own(&self, len: u64) -> Result<wgpu::Buffer, ServerError> {
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, buffer)) = own.as_ref().filter(|(_, b)| b.size() >= len) {
            return Ok(buffer.clone());
        }
        let generation = own.as_ref().map_or(1, |(g, _)| g + 1);
        let size = len.max(4).next_multiple_of(GROW);
        let (buffer, exported) = shared_memory::export(&self.device, size)?;
        self.group.publish(self.rank, generation, exported);
        *own = Some((generation, buffer.clone()));
        Ok(buffer)
    }

    /// Rank `rank`'s exchange buffer on this device (this rank's own, or an
    /// import of the generation it published last).
    pub fn of_rank(&self, rank: usize) -> Result<wgpu::Buffer, ServerError> {
        if rank == self.rank {
            let own = self.own.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, buffer)) = own.as_ref() {
                return Ok(buffer.clone());
            }
        }
        let (generation, exported) = self.group.slot(rank).ok_or(ServerError::CollectiveState {
            fault: compute_runtime::CollectiveFault::Misuse(
                "a rank's exchange memory was read before it was filled",
            ),
        })?;
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let cached = peers.get(rank).cloned().flatten();
        if let Some((_, buffer)) = cached.filter(|(g, _)| *g == generation) {
            return Ok(buffer);
        }
        let buffer = exported.import(&self.device, exported.size())?;
        if let Some(slot) = peers.get_mut(rank) {
            *slot = Some((generation, buffer.clone()));
        }
        Ok(buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(uuid: u8, wants: bool, exact: bool) -> Member {
        Member {
            uuids: Some(([uuid; 16], [0; 16])),
            wants_device: wants,
            exact_floats: exact,
        }
    }

    #[test]
    fn every_rank_must_share_one_gpu_and_want_the_device_path() {
        let on = |m: &[Member]| decide(m).on_device;
        assert!(on(&[member(1, true, true), member(1, true, true)]));
        assert!(!on(&[member(1, true, true), member(2, true, true)]));
        assert!(!on(&[member(1, true, true), member(1, false, true)]));
        let none = Member {
            uuids: None,
            ..member(1, true, true)
        };
        assert!(!on(&[none, none]));
        let floats = decide(&[member(1, true, true), member(1, true, false)]);
        assert!(floats.on_device && !floats.exact_floats);
    }

    const DEVICE: Path = Path {
        on_device: true,
        exact_floats: true,
        early: false,
    };

    #[test]
    fn a_call_posted_before_the_path_settles_is_host_staged_on_every_rank() {
        let mut d = Decisions::new(2);
        // Rank 0 posts two calls before rank 1 registered.
        assert_eq!(d.next(0, None), Path::EARLY);
        assert_eq!(d.next(0, None), Path::EARLY);
        // Rank 1 registers (the path settles) and posts the same calls.
        assert_eq!(d.next(1, Some(DEVICE)), Path::EARLY);
        assert_eq!(d.next(1, Some(DEVICE)), Path::EARLY);
        assert!(d.kept.is_empty(), "every rank asked: nothing kept");
        for _ in 0..3 {
            assert_eq!(d.next(1, Some(DEVICE)), DEVICE);
            assert_eq!(d.next(0, Some(DEVICE)), DEVICE);
        }
        assert!(d.kept.is_empty());
    }

    #[test]
    fn a_rank_far_behind_reads_the_decisions_made_before_it_joined() {
        let mut d = Decisions::new(3);
        for _ in 0..5 {
            assert_eq!(d.next(2, None), Path::EARLY);
        }
        assert_eq!(d.next(0, None), Path::EARLY);
        // Settled now; rank 0 and 1 still owe calls 1..5 (host) first.
        for call in 1..8 {
            let want = if call < 5 { Path::EARLY } else { DEVICE };
            assert_eq!(d.next(0, Some(DEVICE)), want, "rank 0 call {call}");
        }
        for call in 0..8 {
            let want = if call < 5 { Path::EARLY } else { DEVICE };
            assert_eq!(d.next(1, Some(DEVICE)), want, "rank 1 call {call}");
        }
        assert_eq!(d.next(2, Some(DEVICE)), DEVICE);
        assert!(d.kept.is_empty());
        // A rank outside the group is told the host, and changes nothing.
        assert_eq!(d.next(7, Some(DEVICE)), Path::HOST);
    }
}
