//! The bytes a cross-process transport exchanges before any data moves: a
//! fixed-size header per rank (what `MPI_Allgather` gathers), then the
//! header's texts (an `MPI_Allgatherv`, only when some rank has any), and
//! the join header of `comm_init`.
//!
//! A header carries the call id (so ranks at different calls are told, not
//! paired), the call, whether the rank's input arrived, and the lengths of
//! its texts: why the call is invalid, why the input failed, and — for a
//! call this rank abandoned before it could take part (its input never
//! came, or its waiter gave up) — the abort's call and reason, so every
//! other rank fails with the same [`ServerError::CollectiveAborted`] at
//! once instead of timing out. All integers are little-endian.

use std::sync::Arc;

use compute_runtime::{DType, DeviceId, ReduceOp, Reduction, ServerError};

use crate::call::{CallId, CollectiveCall, Descriptor, Link};

/// Bytes of one header.
pub(crate) const HEADER_LEN: usize = 80;
/// Bytes of one join header.
pub(crate) const JOIN_LEN: usize = 56;

const MAGIC: u32 = u32::from_le_bytes(*b"COL1");
const JOIN_MAGIC: u32 = u32::from_le_bytes(*b"JON2");
const NO_CALL: u8 = 0xff;

const HAS_SRC: u8 = 1;
const INPUT_FAILED: u8 = 2;
const ON_DEVICE: u8 = 4;

/// One rank's header, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub rank: usize,
    pub id: CallId,
    /// `None` for an abandoned call (this rank never had its descriptor).
    pub call: Option<CollectiveCall>,
    pub invalid: Option<String>,
    pub input: Result<(), String>,
    /// The abort's call and reason, for an abandoned call.
    pub aborted: Option<(String, String)>,
    /// The call's data moves on the devices.
    pub on_device: bool,
}

impl Entry {
    /// The entry of a call this rank takes part in.
    pub fn of(id: CallId, d: &Descriptor) -> Self {
        Entry {
            rank: d.rank,
            id,
            call: Some(d.call),
            invalid: d.invalid.clone(),
            input: d.input.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            aborted: None,
            on_device: d.on_device,
        }
    }

    /// The entry of a call this rank abandoned with `error`.
    pub fn abandoned(rank: usize, id: CallId, error: &ServerError) -> Self {
        let (call, reason) = match error {
            ServerError::CollectiveAborted { call, reason } => (call.clone(), reason.clone()),
            other => (crate::call::describe("call", id), other.to_string()),
        };
        Entry {
            rank,
            id,
            call: None,
            invalid: None,
            input: Ok(()),
            aborted: Some((call, reason)),
            on_device: false,
        }
    }

    /// The descriptor the engine sees (an input error as
    /// [`ServerError::CollectiveRemote`], which reads as it did where it
    /// happened). `None` for an abandoned call.
    pub fn descriptor(&self) -> Option<Descriptor> {
        Some(Descriptor {
            rank: self.rank,
            call: self.call?,
            invalid: self.invalid.clone(),
            input: self.input.clone().map_err(|message| {
                Arc::new(ServerError::CollectiveRemote {
                    rank: self.rank,
                    message,
                })
            }),
            on_device: self.on_device,
        })
    }

    /// The error of an abandoned call, the same on every rank.
    pub fn abort_error(&self) -> Option<ServerError> {
        self.aborted
            .as_ref()
            .map(|(call, reason)| ServerError::CollectiveAborted {
                call: call.clone(),
                reason: reason.clone(),
            })
    }

    fn texts(&self) -> [&str; 4] {
        let (call, reason) = self
            .aborted
            .as_ref()
            .map_or(("", ""), |(c, r)| (c.as_str(), r.as_str()));
        [
            self.invalid.as_deref().unwrap_or(""),
            self.input.as_ref().err().map_or("", String::as_str),
            call,
            reason,
        ]
    }

    /// The header and the texts that follow it.
    pub fn encode(&self) -> ([u8; HEADER_LEN], Vec<u8>) {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        let (kind, dtype, op, mut flags, len, arg) = match self.call {
            None => (NO_CALL, 0, 0, 0, 0, 0),
            Some(call) => encode_call(call),
        };
        if self.input.is_err() {
            flags |= INPUT_FAILED;
        }
        if self.on_device {
            flags |= ON_DEVICE;
        }
        h[4] = kind;
        h[5] = dtype;
        h[6] = op;
        h[7] = flags;
        let (a, b, c) = match self.id {
            CallId::Group { seq } => (seq, u64::MAX, 0),
            CallId::P2p(Link { from, to, seq }) => (from as u64, to as u64, seq),
        };
        for (at, v) in [
            (8, self.rank as u64),
            (16, a),
            (24, b),
            (32, c),
            (40, len),
            (48, arg),
        ] {
            h[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        let texts = self.texts();
        let mut blob = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let at = 56 + 4 * i;
            h[at..at + 4].copy_from_slice(&(t.len() as u32).to_le_bytes());
            blob.extend_from_slice(t.as_bytes());
        }
        (h, blob)
    }

    /// Bytes of texts that follow `header`.
    pub fn text_len(header: &[u8]) -> usize {
        (0..4).map(|i| u32_at(header, 56 + 4 * i) as usize).sum()
    }

    /// Decodes a header and its texts.
    pub fn decode(header: &[u8], texts: &[u8]) -> Result<Self, String> {
        if header.len() != HEADER_LEN || u32_at(header, 0) != MAGIC {
            return Err(format!(
                "a peer sent {} bytes that are not a collective header (another program, or \
                 another version, on the other end?)",
                header.len()
            ));
        }
        let rank = u64_at(header, 8) as usize;
        let (a, b, c) = (u64_at(header, 16), u64_at(header, 24), u64_at(header, 32));
        let id = if b == u64::MAX {
            CallId::Group { seq: a }
        } else {
            CallId::P2p(Link {
                from: a as usize,
                to: b as usize,
                seq: c,
            })
        };
        let call = if header[4] == NO_CALL {
            None
        } else {
            Some(decode_call(
                header[4],
                header[5],
                header[6],
                header[7],
                u64_at(header, 40),
                u64_at(header, 48),
            )?)
        };
        let mut parts = Vec::with_capacity(4);
        let mut at = 0usize;
        for i in 0..4 {
            let n = u32_at(header, 56 + 4 * i) as usize;
            let bytes = texts
                .get(at..at + n)
                .ok_or_else(|| format!("rank {rank}'s header names more text than came"))?;
            parts.push(String::from_utf8_lossy(bytes).into_owned());
            at += n;
        }
        let opt = |s: &String| (!s.is_empty()).then(|| s.clone());
        let input = if header[7] & INPUT_FAILED != 0 {
            Err(parts[1].clone())
        } else {
            Ok(())
        };
        let aborted = (call.is_none()).then(|| (parts[2].clone(), parts[3].clone()));
        Ok(Entry {
            rank,
            id,
            call,
            invalid: opt(&parts[0]),
            input,
            aborted,
            on_device: header[7] & ON_DEVICE != 0,
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn index_of<T: PartialEq>(all: &[T], x: &T) -> u8 {
    all.iter().position(|y| y == x).unwrap_or(0) as u8
}

fn reduction_codes(r: Reduction) -> (u8, u8) {
    (
        index_of(&DType::ALL, &r.dtype),
        index_of(&ReduceOp::ALL, &r.op),
    )
}

/// (kind, dtype, op, flags, len, arg) of a call.
fn encode_call(call: CollectiveCall) -> (u8, u8, u8, u8, u64, u64) {
    match call {
        CollectiveCall::AllReduce { reduction, len } => {
            let (d, o) = reduction_codes(reduction);
            (0, d, o, 0, len as u64, 0)
        }
        CollectiveCall::AllGather { src_len } => (1, 0, 0, 0, src_len as u64, 0),
        CollectiveCall::ReduceScatter { reduction, dst_len } => {
            let (d, o) = reduction_codes(reduction);
            (2, d, o, 0, dst_len as u64, 0)
        }
        CollectiveCall::Broadcast { root, len, has_src } => {
            let flags = if has_src { HAS_SRC } else { 0 };
            (3, 0, 0, flags, len as u64, root as u64)
        }
        CollectiveCall::AllToAll { len } => (4, 0, 0, 0, len as u64, 0),
        CollectiveCall::Send { peer, len } => (5, 0, 0, 0, len as u64, peer as u64),
        CollectiveCall::Recv { peer, len } => (6, 0, 0, 0, len as u64, peer as u64),
        CollectiveCall::Refused => (7, 0, 0, 0, 0, 0),
    }
}

fn decode_call(
    kind: u8,
    dtype: u8,
    op: u8,
    flags: u8,
    len: u64,
    arg: u64,
) -> Result<CollectiveCall, String> {
    let reduction = || -> Result<Reduction, String> {
        match (
            DType::ALL.get(dtype as usize),
            ReduceOp::ALL.get(op as usize),
        ) {
            (Some(d), Some(o)) => Ok(Reduction::new(*o, *d)),
            _ => Err(format!("unknown reduction codes {dtype}/{op}")),
        }
    };
    let (len, arg) = (len as usize, arg as usize);
    Ok(match kind {
        0 => CollectiveCall::AllReduce {
            reduction: reduction()?,
            len,
        },
        1 => CollectiveCall::AllGather { src_len: len },
        2 => CollectiveCall::ReduceScatter {
            reduction: reduction()?,
            dst_len: len,
        },
        3 => CollectiveCall::Broadcast {
            root: arg,
            len,
            has_src: flags & HAS_SRC != 0,
        },
        4 => CollectiveCall::AllToAll { len },
        5 => CollectiveCall::Send { peer: arg, len },
        6 => CollectiveCall::Recv { peer: arg, len },
        7 => CollectiveCall::Refused,
        other => return Err(format!("unknown call kind {other}")),
    })
}

/// FNV-1a over the device ids: what the join headers compare, and where the
/// communicator-creation tag comes from.
pub(crate) fn list_hash(device_ids: &[DeviceId]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for d in device_ids {
        for b in d.0.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// What each rank says when it joins a cross-process communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Join {
    pub devices_per_process: u64,
    pub process: u64,
    pub device: u64,
    pub list_len: u64,
    pub list_hash: u64,
    /// The chunk size this rank asks for (rank 0's counts).
    pub chunk_bytes: u64,
}

impl Join {
    pub fn encode(&self) -> [u8; JOIN_LEN] {
        let mut b = [0u8; JOIN_LEN];
        b[0..4].copy_from_slice(&JOIN_MAGIC.to_le_bytes());
        for (at, v) in [
            (8, self.devices_per_process),
            (16, self.process),
            (24, self.device),
            (32, self.list_len),
            (40, self.list_hash),
            (48, self.chunk_bytes),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    pub fn decode(b: &[u8]) -> Option<Self> {
        (b.len() == JOIN_LEN && u32_at(b, 0) == JOIN_MAGIC).then(|| Join {
            devices_per_process: u64_at(b, 8),
            process: u64_at(b, 16),
            device: u64_at(b, 24),
            list_len: u64_at(b, 32),
            list_hash: u64_at(b, 40),
            chunk_bytes: u64_at(b, 48),
        })
    }
}

/// The verdict on every rank's join header, in rank order, for the rank
/// list `device_ids` whose ranks live in processes `owners`: the same
/// error on every rank when they disagree.
pub(crate) fn check_joins(
    device_ids: &[DeviceId],
    owners: &[usize],
    joins: &[Option<Join>],
) -> Result<(), ServerError> {
    let mismatch = |reason: String| ServerError::CollectiveMismatch {
        reason: format!("comm_init over {device_ids:?}: {reason}"),
    };
    let hash = list_hash(device_ids);
    let mut problems = Vec::new();
    for (rank, join) in joins.iter().enumerate() {
        let Some(j) = join else {
            problems.push(format!("rank {rank} sent no join header"));
            continue;
        };
        let want_device = device_ids.get(rank).map(|d| d.0);
        let want_process = owners.get(rank).map(|p| *p as u64);
        if j.list_len != device_ids.len() as u64 || j.list_hash != hash {
            problems.push(format!(
                "rank {rank} (process {}) named another rank list ({} devices)",
                j.process, j.list_len
            ));
        } else if Some(j.device) != want_device || Some(j.process) != want_process {
            problems.push(format!(
                "rank {rank} is DeviceId({}) of process {}, the list says {:?} of process {:?}",
                j.device, j.process, want_device, want_process
            ));
        }
    }
    let dpp: Vec<u64> = joins
        .iter()
        .flatten()
        .map(|j| j.devices_per_process)
        .collect();
    if dpp.windows(2).any(|w| w[0] != w[1]) {
        problems.push(format!("devices per process differ: {dpp:?}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(mismatch(problems.join("; ")))
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
