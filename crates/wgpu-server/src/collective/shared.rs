//! Ranks whose devices share memory (devices of one GPU, in one process):
//! the group's one decision of where its calls' data moves, and each
//! rank's exchange buffer, which the other ranks import.
//!
//! A [`Group`] is attached to the communicator's in-process hub
//! (`Communicator::local_shared`), so every rank of one communicator finds
//! the same one, and a communicator formed again gets a new one. Each rank
//! registers its device at `comm_init` ([`Member`]). The group's [`Path`]
//! is fixed once, by whichever comes first: the last rank's registration
//! (device memory when every rank can export and import it, their devices
//! have equal device and driver UUIDs, and none asked for the host path),
//! or a call made before every rank registered (host staging, for good).
//! Every rank reads the same fixed answer, so every rank of a call takes
//! the same path.
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
}

impl Path {
    const HOST: Path = Path {
        on_device: false,
        exact_floats: false,
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
    path: Option<Path>,
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
                    path: None,
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

    /// Registers `rank`'s device; the last registration fixes the path.
    pub fn register(&self, rank: usize, member: Member) {
        let mut state = self.lock();
        if let Some(slot) = state.members.get_mut(rank) {
            *slot = Some(member);
        }
        if state.path.is_none() && state.members.iter().all(Option::is_some) {
            let members: Vec<Member> = state.members.iter().flatten().copied().collect();
            state.path = Some(decide(&members));
        }
    }

    /// The group's path: fixed now (host staging) if not every rank has
    /// registered yet.
    pub fn path(&self) -> Path {
        *self.lock().path.get_or_insert(Path::HOST)
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

/// The path of a group whose every rank registered.
fn decide(members: &[Member]) -> Path {
    let first = members.first().and_then(|m| m.uuids);
    let on_device = first.is_some() && members.iter().all(|m| m.wants_device && m.uuids == first);
    Path {
        on_device,
        exact_floats: on_device && members.iter().all(|m| m.exact_floats),
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
}
