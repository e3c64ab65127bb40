//! [`Transport`] for [`MpiTransport`]: every call first exchanges its
//! descriptor (so a mismatch or an abort reads the same on every rank),
//! then moves data with the matching MPI collective.

use std::os::raw::c_int;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use compute_runtime::{CollectiveFault, RoundProblem};
use compute_runtime::{Reduction, ServerError};
use mpi::ffi;

use super::ops;
use super::worker::Fail;
use super::world::{byte, check, count};
use crate::call::{CallId, Descriptor, Link, describe};
use crate::transport::{Round, Transport};
use crate::wire::Entry;

use super::exchange::TAG_DATA;
use super::transport::{MpiTransport, Stage};

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn exchange(
        &self,
        seq: u64,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Vec<Descriptor>, ServerError> {
        let id = CallId::Group { seq };
        let name = mine.call.name();
        let started = Instant::now();
        let slot = {
            let mut st = self.lock();
            self.refuse_if_broken(&st, id, name)?;
            let slot = match round {
                // The call's place in the sequence is taken by its opening.
                Round::Close | Round::Filled(_) | Round::Read(_) => {
                    self.submit_exchange(Entry::of(id, &mine))
                }
                Round::Open => {
                    self.catch_up_group(&mut st, seq);
                    st.abandoned_groups.retain(|s, _| *s >= seq);
                    match st.abandoned_groups.remove(&seq) {
                        Some(slot) => slot,
                        None => {
                            st.next_group = seq + 1;
                            self.submit_exchange(Entry::of(id, &mine))
                        }
                    }
                }
            };
            let stage = match round {
                Round::Open => Stage::Exchange,
                Round::Close | Round::Filled(_) | Round::Read(_) => Stage::Data,
            };
            st.inflight = Some((id, stage, Arc::clone(&slot) as Arc<dyn Fail>));
            slot
        };
        let entries = self.wait(id, name, &slot, started, deadline)?;
        self.aligned(id, name, &entries)?;
        if let Some(error) = entries.iter().find_map(Entry::abort_error) {
            return Err(error);
        }
        let mut all = Vec::with_capacity(entries.len());
        for e in &entries {
            if e.rank == self.rank {
                // This rank's own, with its errors as they are.
                all.push(mine.clone());
            } else {
                all.push(e.descriptor().ok_or_else(|| ServerError::CollectiveState {
                    fault: CollectiveFault::Round {
                        call: describe(name, id),
                        problem: RoundProblem::NoCall { rank: Some(e.rank) },
                    },
                })?);
            }
        }
        Ok(all)
    }

    fn exchange_pair(
        &self,
        link: Link,
        round: Round,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Descriptor, ServerError> {
        let id = CallId::P2p(link);
        let name = mine.call.name();
        let started = Instant::now();
        let (slot, own) = {
            let mut st = self.lock();
            self.refuse_if_broken(&st, id, name)?;
            let (slot, own, stage) = if round != Round::Open {
                let own = Entry::of(id, &mine);
                (self.submit_pair(link, own.clone()), own, Stage::Data)
            } else {
                self.catch_up_link(&mut st, link);
                st.abandoned_links
                    .retain(|l, _| (l.from, l.to) != (link.from, link.to) || l.seq >= link.seq);
                let (slot, own) = match st.abandoned_links.remove(&link) {
                    // This rank abandoned it already: its exchange carries the
                    // abort.
                    Some(pair) => pair,
                    None => {
                        st.next_link.insert((link.from, link.to), link.seq + 1);
                        let own = Entry::of(id, &mine);
                        (self.submit_pair(link, own.clone()), own)
                    }
                };
                (slot, own, Stage::Exchange)
            };
            st.inflight = Some((id, stage, Arc::clone(&slot) as Arc<dyn Fail>));
            (slot, own)
        };
        let theirs = self.wait(id, name, &slot, started, deadline)?;
        self.aligned(id, name, std::slice::from_ref(&theirs))?;
        // The lower rank's abort first: the error both sides report.
        let mut both = [&own, &theirs];
        both.sort_by_key(|e| e.rank);
        if let Some(error) = both.iter().find_map(|e| e.abort_error()) {
            return Err(error);
        }
        theirs
            .descriptor()
            .ok_or_else(|| ServerError::CollectiveState {
                fault: CollectiveFault::Round {
                    call: describe(name, id),
                    problem: RoundProblem::NoCall { rank: None },
                },
            })
    }

    fn all_reduce(
        &self,
        seq: u64,
        _step: usize,
        reduction: Reduction,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let (world, comm, size) = (self.world, self.comm, self.size);
        let pool = Arc::clone(&self.pool);
        self.data(CallId::Group { seq }, "all_reduce", deadline, move || {
            ops::all_reduce(world, &pool, comm, size, reduction, input)
        })
    }

    fn all_gather(
        &self,
        seq: u64,
        _step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let (comm, size) = (self.comm, self.size);
        let pool = Arc::clone(&self.pool);
        self.data(CallId::Group { seq }, "all_gather", deadline, move || {
            let mut out = pool.take(input.len() * size);
            let n = count(input.len())?;
            // SAFETY: `n` bytes sent, `n` per rank received into `out`.
            let rc = unsafe {
                ffi::MPI_Allgather(
                    input.as_ptr().cast(),
                    n,
                    byte().0,
                    out.as_mut_ptr().cast(),
                    n,
                    byte().0,
                    comm.raw(),
                )
            };
            check(rc, "MPI_Allgather")?;
            Ok(pool.bytes(out))
        })
    }

    fn reduce_scatter(
        &self,
        seq: u64,
        _step: usize,
        reduction: Reduction,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let (world, comm, size) = (self.world, self.comm, self.size);
        let pool = Arc::clone(&self.pool);
        self.data(
            CallId::Group { seq },
            "reduce_scatter",
            deadline,
            move || ops::reduce_scatter(world, &pool, comm, size, reduction, input),
        )
    }

    fn broadcast(
        &self,
        seq: u64,
        _step: usize,
        root: usize,
        input: Bytes,
        len: usize,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let (comm, rank) = (self.comm, self.rank);
        let pool = Arc::clone(&self.pool);
        self.data(CallId::Group { seq }, "broadcast", deadline, move || {
            let n = count(len)?;
            let root_c = count(root)?;
            if rank == root {
                if input.len() != len {
                    return Err(ServerError::SizeMismatch {
                        expected: len as u64,
                        actual: input.len() as u64,
                    });
                }
                // SAFETY: MPI only reads the root's buffer of a broadcast.
                let rc = unsafe {
                    ffi::MPI_Bcast(input.as_ptr() as *mut _, n, byte().0, root_c, comm.raw())
                };
                check(rc, "MPI_Bcast")?;
                Ok(input)
            } else {
                let mut out = pool.take(len);
                // SAFETY: `out` holds `n` bytes.
                let rc = unsafe {
                    ffi::MPI_Bcast(out.as_mut_ptr().cast(), n, byte().0, root_c, comm.raw())
                };
                check(rc, "MPI_Bcast")?;
                Ok(pool.bytes(out))
            }
        })
    }

    fn all_to_all(
        &self,
        seq: u64,
        _step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let (comm, size) = (self.comm, self.size);
        let pool = Arc::clone(&self.pool);
        self.data(CallId::Group { seq }, "all_to_all", deadline, move || {
            let chunk = input.len() / size.max(1);
            let n = count(chunk)?;
            let mut out = pool.take(input.len());
            // SAFETY: `size` chunks of `n` bytes each way.
            let rc = unsafe {
                ffi::MPI_Alltoall(
                    input.as_ptr().cast(),
                    n,
                    byte().0,
                    out.as_mut_ptr().cast(),
                    n,
                    byte().0,
                    comm.raw(),
                )
            };
            check(rc, "MPI_Alltoall")?;
            Ok(pool.bytes(out))
        })
    }

    fn send(
        &self,
        link: Link,
        _step: usize,
        input: Bytes,
        deadline: Instant,
    ) -> Result<(), ServerError> {
        let comm = self.comm;
        self.data(CallId::P2p(link), "send", deadline, move || {
            let (n, to) = (count(input.len())?, count(link.to)?);
            // SAFETY: `n` bytes of `input`.
            let rc = unsafe {
                ffi::MPI_Send(input.as_ptr().cast(), n, byte().0, to, TAG_DATA, comm.raw())
            };
            check(rc, "MPI_Send")
        })
    }

    fn recv(
        &self,
        link: Link,
        _step: usize,
        len: usize,
        deadline: Instant,
    ) -> Result<Bytes, ServerError> {
        let comm = self.comm;
        let pool = Arc::clone(&self.pool);
        self.data(CallId::P2p(link), "recv", deadline, move || {
            let (n, from) = (count(len)?, count(link.from)?);
            let mut out = pool.take(len);
            // SAFETY: an out-parameter.
            let mut status = unsafe { std::mem::zeroed::<ffi::MPI_Status>() };
            // SAFETY: `out` holds `n` bytes.
            let rc = unsafe {
                ffi::MPI_Recv(
                    out.as_mut_ptr().cast(),
                    n,
                    byte().0,
                    from,
                    TAG_DATA,
                    comm.raw(),
                    &mut status,
                )
            };
            check(rc, "MPI_Recv")?;
            let mut got: c_int = 0;
            // SAFETY: the status of the receive above.
            check(
                unsafe { ffi::MPI_Get_count(&status, byte().0, &mut got) },
                "MPI_Get_count",
            )?;
            if usize::try_from(got).ok() != Some(len) {
                return Err(ServerError::SizeMismatch {
                    expected: len as u64,
                    actual: got.max(0) as u64,
                });
            }
            Ok(pool.bytes(out))
        })
    }

    fn abort(&self, call: CallId, error: ServerError) {
        let mut st = self.lock();
        if st.broken.is_some() {
            return;
        }
        if let Some((id, step, slot)) = &st.inflight
            && *id == call
        {
            // Once every rank's descriptor arrived, the call completes
            // (or times out by the engine's deadline): nothing to do.
            if *step == Stage::Exchange && slot.fail(error.clone()) {
                let reason = format!(
                    "{} was abandoned mid-exchange: {error}",
                    describe("call", call)
                );
                self.break_with(&mut st, reason);
            }
            return;
        }
        match call {
            CallId::Group { seq } if seq >= st.next_group => {
                self.catch_up_group(&mut st, seq);
                let slot = self.submit_exchange(Entry::abandoned(self.rank, call, &error));
                st.abandoned_groups.insert(seq, slot);
                st.next_group = seq + 1;
            }
            CallId::P2p(link)
                if link.seq
                    >= st
                        .next_link
                        .get(&(link.from, link.to))
                        .copied()
                        .unwrap_or(0) =>
            {
                self.catch_up_link(&mut st, link);
                let entry = Entry::abandoned(self.rank, call, &error);
                let slot = self.submit_pair(link, entry.clone());
                st.abandoned_links.insert(link, (slot, entry));
                st.next_link.insert((link.from, link.to), link.seq + 1);
            }
            // Already exchanged: the call completes or fails by itself.
            _ => {}
        }
    }

    fn missing(&self, call: CallId) -> Vec<usize> {
        // MPI does not say who has not arrived; for a message it is the
        // peer, whichever side waits.
        match call {
            CallId::P2p(link) if link.from == self.rank => vec![link.to],
            CallId::P2p(link) => vec![link.from],
            CallId::Group { .. } => Vec::new(),
        }
    }

    fn leave(&self) {}
}
