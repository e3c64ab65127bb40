//! [`MpiTransport`]: one rank per process, over an MPI communicator of the
//! owners of the rank list's devices.
//!
//! Every MPI call of a transport runs on its own worker thread (blocking
//! MPI: the same algorithms a plain `MPI_Allreduce` gets); the engine
//! thread waits for it until the step's deadline. Calls reach the worker in
//! the rank's order: group calls by sequence, messages per link, and a call
//! this rank abandoned before it could take part (its input never came, its
//! waiter gave up) still takes its place, as an exchange carrying the abort,
//! so every other rank fails it with the same
//! [`ServerError::CollectiveAborted`] at once.
//!
//! **Broken.** A step that times out (a peer died, or never calls) or fails
//! in MPI leaves the worker blocked in MPI, maybe for good, and the
//! communicator's sequence unknown: the transport is broken, and every later
//! call on it fails at once with [`ServerError::CollectiveAborted`] naming
//! the first failure; the process's MPI is marked broken too, so
//! [`super::finalize`] refuses (`MPI_Finalize` would wait for the dead
//! peer) and the process exits without it.

use std::os::raw::c_int;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_runtime::{DeviceId, Reduction, ServerError};
use hashbrown::HashMap;
use mpi::ffi;

use super::ops;
use super::pool::Pool;
use super::worker::{Fail, Slot, Worker, run_until};
use super::world::{self, Comm, World, byte, check, comm_world, count};
use crate::call::{CallId, Descriptor, Link, describe};
use crate::communicator::CommConfig;
use crate::transport::Transport;
use crate::wire::{self, Entry, HEADER_LEN, JOIN_LEN, Join};

/// Message tags on a transport's communicator (its collectives do not use
/// tags; messages pair per link in order, as MPI's do per source and tag).
const TAG_DESC_FROM_SENDER: c_int = 1;
const TAG_DESC_FROM_RECEIVER: c_int = 2;
const TAG_TEXT_FROM_SENDER: c_int = 3;
const TAG_TEXT_FROM_RECEIVER: c_int = 4;
const TAG_DATA: c_int = 5;

/// Which step of a call is in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Exchange,
    Data,
}

#[derive(Debug, Default)]
struct State {
    /// The next group call to hand to the worker.
    next_group: u64,
    /// The next message of each link (from, to) to hand to the worker.
    next_link: HashMap<(usize, usize), u64>,
    /// The call whose step the engine waits on.
    inflight: Option<(CallId, Step, Arc<dyn Fail>)>,
    /// Exchanges of abandoned calls, handed to the worker by `abort`.
    abandoned_groups: HashMap<u64, Arc<Slot<Vec<Entry>>>>,
    abandoned_links: HashMap<Link, (Arc<Slot<Entry>>, Entry)>,
    /// Why the transport cannot be used any more.
    broken: Option<String>,
}

/// One rank's endpoint of a communicator whose ranks are processes of an
/// MPI job; see the module doc and `docs/mpi.md`.
#[derive(Debug)]
pub struct MpiTransport {
    rank: usize,
    size: usize,
    device_ids: Vec<DeviceId>,
    comm: Comm,
    world: &'static World,
    worker: Worker,
    state: Mutex<State>,
    /// Output buffers, reused across calls.
    pool: Arc<Pool>,
}

impl MpiTransport {
    /// Joins the communicator over `device_ids` as the rank of `me` (its
    /// position in the list), blocking until every rank of the list has
    /// joined or `config.timeout` has passed.
    ///
    /// Starts the process's MPI first if it is not yet (see
    /// [`super::init`]). The list is checked against the [`MpiLayout`]
    /// before any MPI call ([`MpiLayout::plan`]: a device no process owns is
    /// the same [`ServerError::CollectiveState`] on every rank); then the
    /// owners create a communicator (`MPI_Comm_create_group` over
    /// `MPI_COMM_WORLD`, ranks in list order) and exchange join headers
    /// (device, process, a hash of the list), which must agree
    /// ([`ServerError::CollectiveMismatch`] on every rank otherwise). Ranks
    /// that name different lists never meet: each fails with
    /// [`ServerError::CollectiveTimeout`] at its deadline.
    ///
    /// [`MpiLayout`]: crate::MpiLayout
    /// [`MpiLayout::plan`]: crate::MpiLayout::plan
    pub fn join(
        device_ids: &[DeviceId],
        me: DeviceId,
        config: &CommConfig,
    ) -> Result<Self, ServerError> {
        let started = Instant::now();
        let deadline = after(started, config.timeout);
        let world = world::world(config.timeout)?;
        if let Some(reason) = world.broken() {
            return Err(ServerError::CollectiveState {
                reason: format!("MPI in this process is broken: {reason}"),
            });
        }
        let owners = world.layout.plan(device_ids, me, world.rank)?;
        let rank = device_ids.iter().position(|d| *d == me).unwrap_or(0);
        let size = device_ids.len();
        world.enter();
        let worker = match Worker::spawn(format!("compute-mpi-{}", me.0), || {
            if let Some(Ok(w)) = world::started() {
                w.exit();
            }
        }) {
            Ok(w) => w,
            Err(e) => {
                world.exit();
                return Err(e);
            }
        };
        let list = device_ids.to_vec();
        let join = Join {
            devices_per_process: world.layout.devices_per_process as u64,
            process: world.rank as u64,
            device: me.0,
            list_len: list.len() as u64,
            list_hash: wire::list_hash(&list),
        };
        let what = format!("comm_init over {device_ids:?}");
        let made = run_until(&worker, &what, deadline, move || {
            create(&list, &owners, join)
        });
        match made {
            Ok(comm) => Ok(MpiTransport {
                rank,
                size,
                device_ids: device_ids.to_vec(),
                comm,
                world,
                worker,
                state: Mutex::new(State::default()),
                pool: Arc::default(),
            }),
            Err(Some(e)) => {
                worker.stop();
                Err(e)
            }
            Err(None) => {
                worker.stop();
                let waited_ms = ms(started);
                world.break_with(&format!("{what} did not complete within {waited_ms} ms"));
                Err(ServerError::CollectiveTimeout {
                    rank,
                    call: what,
                    waited_ms,
                    missing: Vec::new(),
                })
            }
        }
    }

    /// The devices of the ranks, in rank order.
    pub fn device_ids(&self) -> &[DeviceId] {
        &self.device_ids
    }

    /// Why this transport cannot be used any more, if it cannot.
    pub fn broken(&self) -> Option<String> {
        self.lock().broken.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn break_with(&self, st: &mut State, reason: String) {
        if st.broken.is_none() {
            tracing::warn!(rank = self.rank, %reason, "MPI transport broken");
            self.world.break_with(&reason);
            st.broken = Some(reason);
        }
    }

    fn refuse_if_broken(&self, st: &State, id: CallId, name: &str) -> Result<(), ServerError> {
        match &st.broken {
            Some(reason) => Err(ServerError::CollectiveAborted {
                call: describe(name, id),
                reason: format!(
                    "the MPI transport of rank {} is broken by an earlier failure: {reason}",
                    self.rank
                ),
            }),
            None => Ok(()),
        }
    }

    /// Hands the worker the exchange of every group call before `seq` that
    /// this rank skipped (abandoned without `abort` reaching the transport
    /// first), so the sequence stays aligned with the other ranks.
    fn catch_up_group(&self, st: &mut State, seq: u64) {
        while st.next_group < seq {
            let skipped = CallId::Group { seq: st.next_group };
            let error = self.skipped(skipped);
            let slot = self.submit_exchange(Entry::abandoned(self.rank, skipped, &error));
            st.abandoned_groups.insert(st.next_group, slot);
            st.next_group += 1;
        }
    }

    fn catch_up_link(&self, st: &mut State, link: Link) {
        let next = st.next_link.entry((link.from, link.to)).or_insert(0);
        while *next < link.seq {
            let skipped = Link { seq: *next, ..link };
            let error = self.skipped(CallId::P2p(skipped));
            let entry = Entry::abandoned(self.rank, CallId::P2p(skipped), &error);
            let slot = self.submit_pair(skipped, entry.clone());
            *next += 1;
            st.abandoned_links.insert(skipped, (slot, entry));
        }
    }

    fn skipped(&self, id: CallId) -> ServerError {
        ServerError::CollectiveAborted {
            call: describe("call", id),
            reason: format!("rank {} abandoned it before taking part", self.rank),
        }
    }

    fn submit_exchange(&self, entry: Entry) -> Arc<Slot<Vec<Entry>>> {
        let (comm, size) = (self.comm, self.size);
        self.worker
            .submit("exchange", move || gather_entries(comm, size, entry))
    }

    fn submit_pair(&self, link: Link, entry: Entry) -> Arc<Slot<Entry>> {
        let comm = self.comm;
        let sending = link.from == self.rank;
        let peer = if sending { link.to } else { link.from };
        self.worker.submit("exchange_pair", move || {
            swap_entries(comm, peer, sending, entry)
        })
    }

    /// Waits for `slot` until `deadline`; a failure or a timeout breaks
    /// the transport.
    fn wait<T>(
        &self,
        id: CallId,
        name: &str,
        slot: &Slot<T>,
        started: Instant,
        deadline: Instant,
    ) -> Result<T, ServerError> {
        let result = slot.wait(deadline);
        let mut st = self.lock();
        if st.inflight.as_ref().is_some_and(|(c, _, _)| *c == id) {
            st.inflight = None;
        }
        match result {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => {
                self.break_with(&mut st, format!("{} failed: {e}", describe(name, id)));
                Err(e)
            }
            None => {
                let waited_ms = ms(started);
                self.break_with(
                    &mut st,
                    format!(
                        "{} did not complete within {waited_ms} ms (a peer died or never called)",
                        describe(name, id)
                    ),
                );
                Err(ServerError::CollectiveTimeout {
                    rank: self.rank,
                    call: describe(name, id),
                    waited_ms,
                    missing: match id {
                        CallId::P2p(link) => vec![if link.from == self.rank {
                            link.to
                        } else {
                            link.from
                        }],
                        CallId::Group { .. } => Vec::new(),
                    },
                })
            }
        }
    }

    /// Runs a data step on the worker and waits for it.
    fn data<T: Send + std::fmt::Debug + 'static>(
        &self,
        id: CallId,
        name: &str,
        deadline: Instant,
        f: impl FnOnce() -> Result<T, ServerError> + Send + 'static,
    ) -> Result<T, ServerError> {
        let started = Instant::now();
        let slot = {
            let mut st = self.lock();
            self.refuse_if_broken(&st, id, name)?;
            let slot = self.worker.submit(name, f);
            st.inflight = Some((id, Step::Data, Arc::clone(&slot) as Arc<dyn Fail>));
            slot
        };
        self.wait(id, name, &slot, started, deadline)
    }

    /// The ids of `entries` must all be `id`: ranks at different calls mean
    /// the sequence is lost (the same error on every rank).
    fn aligned(&self, id: CallId, name: &str, entries: &[Entry]) -> Result<(), ServerError> {
        if entries.iter().all(|e| e.id == id) {
            return Ok(());
        }
        let at: Vec<String> = entries
            .iter()
            .map(|e| format!("rank {} at {}", e.rank, describe("call", e.id)))
            .collect();
        let error = ServerError::CollectiveMismatch {
            reason: format!(
                "{}: the ranks are at different calls ({}); the communicator's sequence is lost",
                describe(name, id),
                at.join(", ")
            ),
        };
        let mut st = self.lock();
        self.break_with(&mut st, error.to_string());
        Err(error)
    }
}

fn after(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .unwrap_or(start + Duration::from_secs(86_400 * 365))
}

fn ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// On the worker: the communicator of `owners` (in rank order), checked
/// with every rank's join header.
fn create(list: &[DeviceId], owners: &[usize], join: Join) -> Result<Comm, ServerError> {
    let world = comm_world();
    let ranks: Vec<c_int> = owners.iter().map(|p| *p as c_int).collect();
    // SAFETY: out-parameters and arrays of `ranks.len()` world ranks.
    let comm = unsafe {
        let mut world_group = std::mem::zeroed::<ffi::MPI_Group>();
        check(
            ffi::MPI_Comm_group(world.0, &mut world_group),
            "MPI_Comm_group",
        )?;
        let mut group = std::mem::zeroed::<ffi::MPI_Group>();
        check(
            ffi::MPI_Group_incl(world_group, count(ranks.len())?, ranks.as_ptr(), &mut group),
            "MPI_Group_incl",
        )?;
        // A tag per list keeps concurrent creations of different
        // communicators apart (32767: the least MPI_TAG_UB MPI allows).
        let tag = (wire::list_hash(list) % 32_767) as c_int;
        let mut comm = std::mem::zeroed::<ffi::MPI_Comm>();
        let rc = ffi::MPI_Comm_create_group(world.0, group, tag, &mut comm);
        ffi::MPI_Group_free(&mut group);
        ffi::MPI_Group_free(&mut world_group);
        check(rc, "MPI_Comm_create_group")?;
        check(
            ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
            "MPI_Comm_set_errhandler",
        )?;
        Comm(comm)
    };
    let mine = join.encode();
    let mut all = vec![0u8; JOIN_LEN * owners.len()];
    // SAFETY: JOIN_LEN bytes sent, JOIN_LEN per rank received.
    let rc = unsafe {
        ffi::MPI_Allgather(
            mine.as_ptr().cast(),
            JOIN_LEN as c_int,
            byte().0,
            all.as_mut_ptr().cast(),
            JOIN_LEN as c_int,
            byte().0,
            comm.raw(),
        )
    };
    let checked = check(rc, "MPI_Allgather of the join headers").and_then(|()| {
        let joins: Vec<Option<Join>> = all.chunks(JOIN_LEN).map(Join::decode).collect();
        wire::check_joins(list, owners, &joins)
    });
    if let Err(e) = checked {
        let mut c = comm;
        // SAFETY: the communicator was created above and is not used again.
        unsafe { ffi::MPI_Comm_free(&mut c.0) };
        return Err(e);
    }
    Ok(comm)
}

/// On the worker: every rank's entry of a group call (`MPI_Allgather` of
/// the headers, then `MPI_Allgatherv` of their texts when any has some).
fn gather_entries(comm: Comm, size: usize, entry: Entry) -> Result<Vec<Entry>, ServerError> {
    let (header, texts) = entry.encode();
    let mut headers = vec![0u8; HEADER_LEN * size];
    // SAFETY: HEADER_LEN bytes sent, HEADER_LEN per rank received.
    let rc = unsafe {
        ffi::MPI_Allgather(
            header.as_ptr().cast(),
            HEADER_LEN as c_int,
            byte().0,
            headers.as_mut_ptr().cast(),
            HEADER_LEN as c_int,
            byte().0,
            comm.raw(),
        )
    };
    check(rc, "MPI_Allgather of the descriptors")?;
    let lens: Vec<usize> = headers.chunks(HEADER_LEN).map(Entry::text_len).collect();
    let mut all_texts = vec![0u8; lens.iter().sum()];
    if !all_texts.is_empty() {
        let counts = lens
            .iter()
            .map(|l| count(*l))
            .collect::<Result<Vec<c_int>, _>>()?;
        let mut displs = Vec::with_capacity(size);
        let mut at: c_int = 0;
        for c in &counts {
            displs.push(at);
            at = at.saturating_add(*c);
        }
        // SAFETY: `texts` holds this rank's count; `all_texts` the sum of
        // every rank's, at `displs`.
        let rc = unsafe {
            ffi::MPI_Allgatherv(
                texts.as_ptr().cast(),
                count(texts.len())?,
                byte().0,
                all_texts.as_mut_ptr().cast(),
                counts.as_ptr(),
                displs.as_ptr(),
                byte().0,
                comm.raw(),
            )
        };
        check(rc, "MPI_Allgatherv of the descriptors' texts")?;
    }
    let mut at = 0;
    headers
        .chunks(HEADER_LEN)
        .zip(&lens)
        .map(|(h, len)| {
            let t = &all_texts[at..at + len];
            at += len;
            Entry::decode(h, t).map_err(|reason| ServerError::CollectiveState { reason })
        })
        .collect()
}

/// On the worker: the peer's entry of a message (`MPI_Sendrecv` of the
/// headers, then of the texts when either has some).
fn swap_entries(
    comm: Comm,
    peer: usize,
    sending: bool,
    entry: Entry,
) -> Result<Entry, ServerError> {
    let (header, texts) = entry.encode();
    let (my_tag, their_tag, my_text_tag, their_text_tag) = if sending {
        (
            TAG_DESC_FROM_SENDER,
            TAG_DESC_FROM_RECEIVER,
            TAG_TEXT_FROM_SENDER,
            TAG_TEXT_FROM_RECEIVER,
        )
    } else {
        (
            TAG_DESC_FROM_RECEIVER,
            TAG_DESC_FROM_SENDER,
            TAG_TEXT_FROM_RECEIVER,
            TAG_TEXT_FROM_SENDER,
        )
    };
    let peer = count(peer)?;
    let mut theirs = [0u8; HEADER_LEN];
    // SAFETY: HEADER_LEN bytes each way; the status is ignored.
    let rc = unsafe {
        ffi::MPI_Sendrecv(
            header.as_ptr().cast(),
            HEADER_LEN as c_int,
            byte().0,
            peer,
            my_tag,
            theirs.as_mut_ptr().cast(),
            HEADER_LEN as c_int,
            byte().0,
            peer,
            their_tag,
            comm.raw(),
            ffi::RSMPI_STATUS_IGNORE,
        )
    };
    check(rc, "MPI_Sendrecv of the descriptors")?;
    let their_len = Entry::text_len(&theirs);
    let mut their_texts = vec![0u8; their_len];
    if their_len > 0 || !texts.is_empty() {
        // SAFETY: each side sends its texts' length, which the other read
        // from its header.
        let rc = unsafe {
            ffi::MPI_Sendrecv(
                texts.as_ptr().cast(),
                count(texts.len())?,
                byte().0,
                peer,
                my_text_tag,
                their_texts.as_mut_ptr().cast(),
                count(their_len)?,
                byte().0,
                peer,
                their_text_tag,
                comm.raw(),
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        check(rc, "MPI_Sendrecv of the descriptors' texts")?;
    }
    Entry::decode(&theirs, &their_texts).map_err(|reason| ServerError::CollectiveState { reason })
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn exchange(
        &self,
        seq: u64,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Vec<Descriptor>, ServerError> {
        let id = CallId::Group { seq };
        let name = mine.call.name();
        let started = Instant::now();
        let slot = {
            let mut st = self.lock();
            self.refuse_if_broken(&st, id, name)?;
            self.catch_up_group(&mut st, seq);
            st.abandoned_groups.retain(|s, _| *s >= seq);
            let slot = match st.abandoned_groups.remove(&seq) {
                Some(slot) => slot,
                None => {
                    st.next_group = seq + 1;
                    self.submit_exchange(Entry::of(id, &mine))
                }
            };
            st.inflight = Some((id, Step::Exchange, Arc::clone(&slot) as Arc<dyn Fail>));
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
                    reason: format!("{}: rank {} sent no call", describe(name, id), e.rank),
                })?);
            }
        }
        Ok(all)
    }

    fn exchange_pair(
        &self,
        link: Link,
        mine: Descriptor,
        deadline: Instant,
    ) -> Result<Descriptor, ServerError> {
        let id = CallId::P2p(link);
        let name = mine.call.name();
        let started = Instant::now();
        let (slot, own) = {
            let mut st = self.lock();
            self.refuse_if_broken(&st, id, name)?;
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
            st.inflight = Some((id, Step::Exchange, Arc::clone(&slot) as Arc<dyn Fail>));
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
                reason: format!("{}: the peer sent no call", describe(name, id)),
            })
    }

    fn all_reduce(
        &self,
        seq: u64,
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

    fn all_gather(&self, seq: u64, input: Bytes, deadline: Instant) -> Result<Bytes, ServerError> {
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

    fn all_to_all(&self, seq: u64, input: Bytes, deadline: Instant) -> Result<Bytes, ServerError> {
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

    fn send(&self, link: Link, input: Bytes, deadline: Instant) -> Result<(), ServerError> {
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

    fn recv(&self, link: Link, len: usize, deadline: Instant) -> Result<Bytes, ServerError> {
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
            if *step == Step::Exchange && slot.fail(error.clone()) {
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

impl Drop for MpiTransport {
    fn drop(&mut self) {
        let broken = self.lock().broken.is_some();
        if !broken {
            let comm = self.comm;
            // The communicator is freed on the worker, after every call it
            // still has queued.
            drop(self.worker.submit("MPI_Comm_free", move || {
                let mut comm = comm;
                // SAFETY: no call uses the communicator after this one.
                check(unsafe { ffi::MPI_Comm_free(&mut comm.0) }, "MPI_Comm_free")
            }));
        }
        self.worker.stop();
    }
}
