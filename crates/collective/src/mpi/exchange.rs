//! The MPI calls of a transport's worker that are not one collective: the
//! communicator's creation (with the join check) and the exchange of call
//! descriptors, for groups (`MPI_Allgather` + `MPI_Allgatherv` of error
//! texts) and for a link (`MPI_Sendrecv`).

use std::os::raw::c_int;

use compute_runtime::CollectiveFault;
use compute_runtime::{DeviceId, ServerError};
use mpi::ffi;

use super::world::{Comm, byte, check, comm_world, count};
use crate::wire::{self, Entry, HEADER_LEN, JOIN_LEN, Join};

/// Message tags on a transport's communicator (its collectives do not use
/// tags; messages pair per link in order, as MPI's do per source and tag).
pub(super) const TAG_DESC_FROM_SENDER: c_int = 1;
pub(super) const TAG_DESC_FROM_RECEIVER: c_int = 2;
pub(super) const TAG_TEXT_FROM_SENDER: c_int = 3;
pub(super) const TAG_TEXT_FROM_RECEIVER: c_int = 4;
pub(super) const TAG_DATA: c_int = 5;

/// On the worker: the communicator of `owners` (in rank order), checked
/// with every rank's join header, and the chunk size rank 0 asked for
/// (every rank's steps are cut by it).
pub(super) fn create(
    list: &[DeviceId],
    owners: &[usize],
    join: Join,
) -> Result<(Comm, usize), ServerError> {
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
        wire::check_joins(list, owners, &joins)?;
        let chunk = joins
            .first()
            .and_then(|j| j.as_ref())
            .map_or(join.chunk_bytes, |j| j.chunk_bytes);
        Ok(crate::plan::normalize_chunk(
            usize::try_from(chunk).unwrap_or(usize::MAX),
        ))
    });
    match checked {
        Ok(chunk) => Ok((comm, chunk)),
        Err(e) => {
            let mut c = comm;
            // SAFETY: the communicator was created above and is not used again.
            unsafe { ffi::MPI_Comm_free(&mut c.0) };
            Err(e)
        }
    }
}

/// On the worker: every rank's entry of a group call (`MPI_Allgather` of
/// the headers, then `MPI_Allgatherv` of their texts when any has some).
pub(super) fn gather_entries(
    comm: Comm,
    size: usize,
    entry: Entry,
) -> Result<Vec<Entry>, ServerError> {
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
            Entry::decode(h, t).map_err(wire)
        })
        .collect()
}

/// On the worker: the peer's entry of a message (`MPI_Sendrecv` of the
/// headers, then of the texts when either has some).
pub(super) fn swap_entries(
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
    Entry::decode(&theirs, &their_texts).map_err(wire)
}

/// A message from another process that could not be read.
fn wire(problem: String) -> ServerError {
    ServerError::CollectiveState {
        fault: CollectiveFault::Wire { problem },
    }
}
