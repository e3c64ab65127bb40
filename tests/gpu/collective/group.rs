//! A group of ranks for the collective tests: one server per rank, each on
//! its own wgpu device of the one adapter, with process-unique device ids.
//! Shared with the `collective_timeout` binary (through `#[path]`).

#![allow(dead_code)] // Each binary uses its own share of the helpers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use compute_runtime::{
    Bytes, ComputeWait, DType, DeviceId, Handle, Reduction, Server, ServerCommunication,
    ServerError, StreamId,
};
use wgpu_server::{WgpuServerOptions, WgslPassthrough};

use crate::common::*;

/// Device ids are how the in-process transport pairs the ranks of one
/// communicator (by the exact device list), process-wide: tests running in
/// parallel threads must never name the same devices, or their ranks would
/// meet in one communicator (or be refused as joined twice).
static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1000);

/// `n` device ids no other test of the process names.
pub fn device_ids(n: usize) -> Vec<DeviceId> {
    let first = NEXT_DEVICE.fetch_add(n as u64, Ordering::Relaxed);
    (0..n as u64).map(|i| DeviceId(first + i)).collect()
}

/// `n` ranks: `s[r]` is rank `r`'s server, `ids[r]` its device.
pub struct Group {
    pub s: Vec<TestServer>,
    pub ids: Vec<DeviceId>,
}

impl Group {
    /// `n` servers on fresh device ids, without a communicator.
    pub fn open(n: usize) -> Self {
        Self::open_with(n, |o| o)
    }

    /// As [`open`](Self::open), each server's options passed through `f`.
    pub fn open_with(n: usize, f: impl Fn(WgpuServerOptions) -> WgpuServerOptions) -> Self {
        let ids = device_ids(n);
        let s = ids
            .iter()
            .map(|id| {
                f(WgpuServerOptions::new().device_id(*id).adapter(0))
                    .open::<WgslPassthrough>()
                    .expect("server")
            })
            .collect();
        Group { s, ids }
    }

    /// `n` ranks whose calls move in steps of `chunk` bytes per block.
    pub fn stepped(n: usize, chunk: usize) -> Self {
        let mut g = Self::open_with(n, |o| o.collective_chunk_bytes(chunk));
        g.init();
        g
    }

    /// `n` ranks with `comm_init(ids)` called on every one, rank 0 first.
    pub fn new(n: usize) -> Self {
        let mut g = Self::open(n);
        g.init();
        g
    }

    /// `comm_init(ids)` on every rank.
    pub fn init(&mut self) {
        for s in &mut self.s {
            s.comm_init(self.ids.clone()).expect("comm_init");
        }
    }

    pub fn n(&self) -> usize {
        self.s.len()
    }

    /// A fresh all-reduce (sum of `u32`) on `stream` of every rank, checked:
    /// the communicator still pairs the ranks' calls after whatever the test
    /// did before.
    pub fn assert_still_works(&mut self, stream: StreamId, what: &str) {
        let n = self.n();
        let len = 5;
        let mut dsts = Vec::new();
        for (r, s) in self.s.iter_mut().enumerate() {
            let src = upload(s, u32_bytes(&vec![r as u32 + 1; len]), stream);
            let dst = alloc(s, 4 * len as u64, stream);
            s.all_reduce(
                src.binding(),
                dst.binding(),
                Reduction::sum(DType::U32),
                stream,
                self.ids.clone(),
                ComputeWait::Wait,
            )
            .unwrap_or_else(|e| panic!("{what}: rank {r}: the next all_reduce: {e}"));
            dsts.push(dst);
        }
        let want = vec![(n * (n + 1) / 2) as u32; len];
        for (r, (s, dst)) in self.s.iter_mut().zip(&dsts).enumerate() {
            let got = read(s, dst, stream)
                .unwrap_or_else(|e| panic!("{what}: rank {r}: the next all_reduce's dst: {e}"));
            assert_eq!(
                bytes_u32(&got),
                want,
                "{what}: rank {r}: the next all_reduce"
            );
        }
    }
}

/// Every handle's bytes, in one read.
pub fn read_all(s: &mut TestServer, hs: &[Handle], stream: StreamId) -> Vec<Bytes> {
    if hs.is_empty() {
        return Vec::new();
    }
    let fut = s.read(hs.iter().map(Handle::copy_descriptor).collect(), stream);
    futures::executor::block_on(fut).expect("read")
}

/// A handle on `size` bytes at `offset` of `h`'s slice.
pub fn sub(h: &Handle, offset: u64, size: u64) -> Handle {
    Handle {
        memory: h.memory.clone(),
        offset,
        size,
    }
}

/// The rank a [`ServerError::CollectiveInput`] inside `e` names, through the
/// reports that wrap it.
pub fn input_rank(e: &ServerError) -> Option<usize> {
    match e {
        ServerError::CollectiveInput { rank, .. } => Some(*rank),
        ServerError::Untrusted { cause, .. }
        | ServerError::Deferred { cause, .. }
        | ServerError::UntrustedInput { cause, .. } => input_rank(cause),
        _ => None,
    }
}

pub fn is_mismatch(e: &ServerError) -> bool {
    matches!(e.root_cause(), ServerError::CollectiveMismatch { .. })
}

/// A timeout, or the abort a timeout leaves for the other ranks.
pub fn is_timeout(e: &ServerError) -> bool {
    matches!(
        e.root_cause(),
        ServerError::CollectiveTimeout { .. } | ServerError::CollectiveAborted { .. }
    )
}

/// A handle on `data`; empty data (a slice cannot be empty) is a 0-byte
/// range of a 4-byte slice.
pub fn put_bytes(s: &mut TestServer, data: Vec<u8>, stream: StreamId) -> Handle {
    match data.is_empty() {
        true => sub(&alloc(s, 4, stream), 0, 0),
        false => upload(s, data, stream),
    }
}

/// A handle on `len` uninitialized bytes (0 bytes: a range of a 4-byte
/// slice).
pub fn dst_bytes(s: &mut TestServer, len: usize, stream: StreamId) -> Handle {
    match len {
        0 => sub(&alloc(s, 4, stream), 0, 0),
        _ => alloc(s, len as u64, stream),
    }
}

/// Runs `f` on a thread of its own and returns what it returns, failing the
/// test if it takes longer than `limit`: calls that must not wait for another
/// rank are checked this way, so a regression fails fast instead of hanging
/// until the collective timeout.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {limit:?}: a call waited for another rank")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// How long a phase that waits for no other rank may take (generous: debug
/// builds on a CPU adapter).
pub const NO_WAIT: Duration = Duration::from_secs(30);

/// Runs a per-rank script in both threading patterns on fresh groups of
/// `n` ranks: one thread calling every rank's `issue` in turn and then
/// every rank's `check`, and one thread per rank running its own `issue`
/// then `check` (which may wait for the others). `issue` returns what
/// `check` needs.
pub fn both_ways<T: Send + 'static>(
    n: usize,
    issue: fn(usize, &mut TestServer, &[DeviceId]) -> T,
    check: fn(usize, &mut TestServer, T),
) {
    both_ways_on(|| Group::new(n), issue, check);
}

/// [`both_ways`] on groups `group` makes.
pub fn both_ways_on<T: Send + 'static>(
    group: impl Fn() -> Group,
    issue: fn(usize, &mut TestServer, &[DeviceId]) -> T,
    check: fn(usize, &mut TestServer, T),
) {
    // One thread driving every rank: nothing in `issue` may wait for
    // another rank.
    let mut g = group();
    let n = g.n();
    let ids = g.ids.clone();
    let (mut g, state) = within(NO_WAIT, "one thread for every rank", move || {
        let state: Vec<T> = (0..n).map(|r| issue(r, &mut g.s[r], &ids)).collect();
        (g, state)
    });
    for (r, t) in state.into_iter().enumerate() {
        check(r, &mut g.s[r], t);
    }
    // One thread per rank.
    let g = group();
    let ids = g.ids.clone();
    let threads: Vec<_> =
        g.s.into_iter()
            .enumerate()
            .map(|(r, mut s)| {
                let ids = ids.clone();
                std::thread::spawn(move || {
                    let t = issue(r, &mut s, &ids);
                    check(r, &mut s, t);
                    s
                })
            })
            .collect();
    for t in threads {
        if let Err(e) = t.join() {
            std::panic::resume_unwind(e);
        }
    }
}
