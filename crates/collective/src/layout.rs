//! [`MpiLayout`]: which process owns which [`DeviceId`] when ranks live in
//! separate processes (the MPI transport).
//!
//! **The rule.** Every process of an MPI job (`mpirun -np P`) drives the
//! same number of devices, `devices_per_process` (`D`, from
//! [`MpiLayout::DEVICES_PER_PROCESS_ENV`], default 1), and device ids are
//! numbered process by process:
//!
//! ```text
//! DeviceId = world_rank * D + local_index        (local_index < D)
//! owner(DeviceId(d)) = d / D   when d < P * D, else no process
//! ```
//!
//! So with `mpirun -np 3` and `D = 1`, process 0 owns `DeviceId(0)`,
//! process 1 `DeviceId(1)`, process 2 `DeviceId(2)`; with `D = 2`, process 1
//! owns `DeviceId(2)` and `DeviceId(3)`. A process opens its servers with
//! those ids (`MpiLayout::device`, or `compute_collective::mpi::local_device`).
//!
//! **Checked.** At MPI start every process announces its `D` (an
//! `MPI_Allgather` over `MPI_COMM_WORLD`): processes that disagree all fail
//! with the same [`ServerError::CollectiveMismatch`]. At `comm_init` every
//! rank checks the whole list with [`MpiLayout::plan`] before any MPI call,
//! so a list naming a device no process owns (or naming one twice, or two
//! devices of one process) is the same error on every rank, at once, never a
//! hang; then the ranks meet in `MPI_Comm_create_group` and exchange a join
//! header (device, process, list hash) that must agree.
//!
//! **Buys:** no communication to find a device's owner: every rank computes
//! it, the same way. **Doesn't buy:** two devices of one communicator in one
//! process (an MPI rank is a process; a communicator mixing in-process and
//! cross-process ranks is not built), or processes with different device
//! counts.

use compute_runtime::{CollectiveFault, RankListProblem};
use compute_runtime::{DeviceId, ServerError};

/// How device ids map to (process, local device); see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiLayout {
    /// Processes in the MPI job (`MPI_COMM_WORLD`'s size).
    pub processes: usize,
    /// Devices each process drives.
    pub devices_per_process: usize,
}

impl MpiLayout {
    /// The environment variable that sets `devices_per_process` (default 1).
    pub const DEVICES_PER_PROCESS_ENV: &'static str = "COMPUTE_MPI_DEVICES_PER_PROCESS";

    /// `devices_per_process` from [`Self::DEVICES_PER_PROCESS_ENV`]: 1 when
    /// unset; an error when it is not a positive integer.
    pub fn devices_per_process_from_env() -> Result<usize, ServerError> {
        match std::env::var(Self::DEVICES_PER_PROCESS_ENV) {
            Err(_) => Ok(1),
            Ok(text) => match text.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(ServerError::InvalidConfiguration {
                    reason: format!(
                        "{}={text:?}: expected a positive integer",
                        Self::DEVICES_PER_PROCESS_ENV
                    ),
                }),
            },
        }
    }

    /// The process that owns `device`, if any.
    pub fn owner(&self, device: DeviceId) -> Option<usize> {
        let d = usize::try_from(device.0).ok()?;
        let process = d / self.devices_per_process.max(1);
        (process < self.processes).then_some(process)
    }

    /// `device`'s index among its owner's devices, if a process owns it.
    pub fn local_index(&self, device: DeviceId) -> Option<usize> {
        self.owner(device)?;
        usize::try_from(device.0)
            .ok()
            .map(|d| d % self.devices_per_process.max(1))
    }

    /// The id of process `process`'s `local`-th device, if both exist.
    pub fn device(&self, process: usize, local: usize) -> Option<DeviceId> {
        if process >= self.processes || local >= self.devices_per_process {
            return None;
        }
        let d = process
            .checked_mul(self.devices_per_process)?
            .checked_add(local)?;
        Some(DeviceId(u64::try_from(d).ok()?))
    }

    /// The owning process of each device of `device_ids`, in rank order,
    /// for the rank of `me` in process `my_process`.
    ///
    /// The checks of the list itself come first and depend on the list
    /// alone, so every rank that names the same list gets the same error
    /// ([`ServerError::CollectiveState`]): an empty list, a device named
    /// twice, a device no process owns, two devices of one process. Then the
    /// checks of this rank: `me` in the list, `me` owned by `my_process`.
    pub fn plan(
        &self,
        device_ids: &[DeviceId],
        me: DeviceId,
        my_process: usize,
    ) -> Result<Vec<usize>, ServerError> {
        let state = |problem: RankListProblem| ServerError::CollectiveState {
            fault: CollectiveFault::RankList {
                devices: device_ids.to_vec(),
                problem,
            },
        };
        if device_ids.is_empty() {
            return Err(state(RankListProblem::Empty));
        }
        for (i, id) in device_ids.iter().enumerate() {
            if device_ids[..i].contains(id) {
                return Err(state(RankListProblem::Twice { device: *id }));
            }
        }
        let unowned: Vec<DeviceId> = device_ids
            .iter()
            .copied()
            .filter(|d| self.owner(*d).is_none())
            .collect();
        if !unowned.is_empty() {
            return Err(state(RankListProblem::Unowned {
                unowned,
                processes: self.processes,
                per_process: self.devices_per_process,
            }));
        }
        let owners: Vec<usize> = device_ids.iter().filter_map(|d| self.owner(*d)).collect();
        for (i, p) in owners.iter().enumerate() {
            if let Some(j) = owners[..i].iter().position(|q| q == p) {
                return Err(state(RankListProblem::SameProcess {
                    first: device_ids[j],
                    second: device_ids[i],
                    process: *p,
                }));
            }
        }
        if !device_ids.contains(&me) {
            return Err(state(RankListProblem::NotIn { device: me }));
        }
        match self.owner(me) {
            Some(p) if p == my_process => Ok(owners),
            _ => Err(state(RankListProblem::ForeignDevice {
                device: me,
                process: my_process,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u64]) -> Vec<DeviceId> {
        v.iter().map(|d| DeviceId(*d)).collect()
    }

    #[test]
    fn devices_are_numbered_process_by_process() {
        let l = MpiLayout {
            processes: 3,
            devices_per_process: 2,
        };
        assert_eq!(l.owner(DeviceId(0)), Some(0));
        assert_eq!(l.owner(DeviceId(3)), Some(1));
        assert_eq!(l.owner(DeviceId(5)), Some(2));
        assert_eq!(l.owner(DeviceId(6)), None);
        assert_eq!(l.local_index(DeviceId(5)), Some(1));
        assert_eq!(l.device(1, 1), Some(DeviceId(3)));
        assert_eq!(l.device(3, 0), None);
        assert_eq!(l.device(0, 2), None);
    }

    #[test]
    fn plan_names_the_owners_and_refuses_the_same_way_on_every_rank() {
        let l = MpiLayout {
            processes: 3,
            devices_per_process: 1,
        };
        assert_eq!(
            l.plan(&ids(&[2, 0, 1]), DeviceId(0), 0).expect("plan"),
            vec![2, 0, 1]
        );
        // A device no process owns: the same words for every rank.
        let list = ids(&[0, 1, 7]);
        let e0 = l.plan(&list, DeviceId(0), 0).expect_err("unowned");
        let e1 = l.plan(&list, DeviceId(1), 1).expect_err("unowned");
        assert_eq!(e0, e1);
        assert!(
            e0.to_string().contains("no process owns [DeviceId(7)]"),
            "{e0}"
        );
        let two = MpiLayout {
            processes: 2,
            devices_per_process: 2,
        };
        let e = two
            .plan(&ids(&[0, 1]), DeviceId(0), 0)
            .expect_err("one process");
        assert!(e.to_string().contains("one rank per process"), "{e}");
        assert!(l.plan(&ids(&[0, 0]), DeviceId(0), 0).is_err());
        assert!(l.plan(&ids(&[]), DeviceId(0), 0).is_err());
        // This rank's own checks.
        assert!(l.plan(&ids(&[1, 2]), DeviceId(0), 0).is_err());
        assert!(l.plan(&ids(&[0, 1]), DeviceId(1), 0).is_err());
    }
}
