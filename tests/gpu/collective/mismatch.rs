//! Calls that disagree fail on every rank, never hang, and leave the
//! communicator usable: each case runs on 3 ranks, one thread calling rank
//! 0, 1, 2 in turn, then checks every rank (its call's error, or the error
//! its read of `dst` reports: `dst` is poisoned), clears the stream's
//! deferred errors, and runs a fresh all-reduce on every rank.
//!
//! Two kinds of failure: a disagreement the ranks see when they exchange
//! descriptors (kind, dtype, op, sizes, root, a call that cannot be valid),
//! which is [`ServerError::CollectiveMismatch`] on every rank; and an operand
//! error only one rank can see (its `src` or `dst` has the wrong size or
//! alignment), which is that rank's own error, while the others' results are
//! poisoned with [`ServerError::CollectiveInput`] naming it.

use compute_runtime::{
    ComputeWait, DType, DeviceId, Handle, Reduction, ServerCommunication, ServerError,
};

use super::group::*;
use crate::common::*;

/// What one rank's call returned, and the `dst` it wrote (if any).
struct Posted {
    called: Result<(), ServerError>,
    dst: Option<Handle>,
    /// Handles the call reads, kept alive until the case is checked.
    _keep: Vec<Handle>,
}

/// What every rank must see.
#[derive(Clone, Copy)]
enum Expect {
    /// `CollectiveMismatch` on every rank.
    Mismatch,
    /// Rank `bad`'s own call fails with an error `local` accepts; every
    /// other rank's result is poisoned with `CollectiveInput` naming `bad`.
    Local {
        bad: usize,
        local: fn(&ServerError) -> bool,
    },
    /// Every rank's own call fails with an error `local` accepts.
    LocalEverywhere(fn(&ServerError) -> bool),
}

fn size_mismatch(e: &ServerError) -> bool {
    matches!(e, ServerError::SizeMismatch { .. })
}

fn invalid_argument(e: &ServerError) -> bool {
    matches!(e, ServerError::InvalidArgument { .. })
}

const U32: Reduction = Reduction {
    op: compute_runtime::ReduceOp::Sum,
    dtype: DType::U32,
};

fn done(called: Result<(), ServerError>, dst: Handle, keep: Vec<Handle>) -> Posted {
    Posted {
        called,
        dst: Some(dst),
        _keep: keep,
    }
}

/// `all_reduce` of `src` bytes into `dst` bytes.
fn all_reduce(
    s: &mut TestServer,
    ids: &[DeviceId],
    red: Reduction,
    src: usize,
    dst: usize,
) -> Posted {
    let x = upload(s, vec![1; src], S0);
    let y = alloc(s, dst as u64, S0);
    let called = s.all_reduce(
        x.binding(),
        y.binding(),
        red,
        S0,
        ids.to_vec(),
        ComputeWait::Wait,
    );
    done(called, y, vec![x])
}

fn all_gather(s: &mut TestServer, ids: &[DeviceId], src: usize, dst: usize) -> Posted {
    let x = upload(s, vec![2; src], S0);
    let y = alloc(s, dst as u64, S0);
    let called = s.all_gather(x.binding(), y.binding(), S0, ids.to_vec());
    done(called, y, vec![x])
}

fn reduce_scatter(
    s: &mut TestServer,
    ids: &[DeviceId],
    red: Reduction,
    src: usize,
    dst: usize,
) -> Posted {
    let x = upload(s, vec![3; src], S0);
    let y = alloc(s, dst as u64, S0);
    let called = s.reduce_scatter(x.binding(), y.binding(), red, S0, ids.to_vec());
    done(called, y, vec![x])
}

fn all_to_all(s: &mut TestServer, ids: &[DeviceId], src: usize, dst: usize) -> Posted {
    let x = upload(s, vec![4; src], S0);
    let y = alloc(s, dst as u64, S0);
    let called = s.all_to_all(x.binding(), y.binding(), S0, ids.to_vec());
    done(called, y, vec![x])
}

/// `broadcast` into `dst` bytes from `root`, with a `src` of `src` bytes
/// when `src` is `Some`.
fn broadcast(
    s: &mut TestServer,
    ids: &[DeviceId],
    root: DeviceId,
    src: Option<usize>,
    dst: usize,
) -> Posted {
    let x = src.map(|len| upload(s, vec![5; len], S0));
    let y = alloc(s, dst as u64, S0);
    let called = s.broadcast(
        x.as_ref().map(Handle::binding),
        y.binding(),
        S0,
        root,
        ids.to_vec(),
    );
    done(called, y, x.into_iter().collect())
}

/// The broadcast of rank `r` from rank `root`, `len` bytes, `src` given
/// exactly on the root.
fn broadcast_from(
    s: &mut TestServer,
    ids: &[DeviceId],
    r: usize,
    root: usize,
    len: usize,
) -> Posted {
    broadcast(s, ids, ids[root], (r == root).then_some(len), len)
}

type Call = fn(&mut TestServer, usize, &[DeviceId]) -> Posted;

/// Every case: its name, what every rank must see, and rank `r`'s call.
fn cases() -> Vec<(&'static str, Expect, Call)> {
    use Expect::*;
    vec![
        (
            "kind: rank 2 all_gathers, the others all_reduce",
            Mismatch,
            |s, r, ids| match r {
                2 => all_gather(s, ids, 4, 12),
                _ => all_reduce(s, ids, U32, 4, 4),
            },
        ),
        (
            "kind: rank 0 all_to_alls, the others reduce_scatter",
            Mismatch,
            |s, r, ids| match r {
                0 => all_to_all(s, ids, 12, 12),
                _ => reduce_scatter(s, ids, U32, 12, 4),
            },
        ),
        (
            "dtype: rank 1 sums i32, the others f32",
            Mismatch,
            |s, r, ids| {
                let dtype = if r == 1 { DType::I32 } else { DType::F32 };
                all_reduce(s, ids, Reduction::sum(dtype), 16, 16)
            },
        ),
        (
            "dtype: rank 0 reduce_scatters u64, the others f64",
            Mismatch,
            |s, r, ids| {
                let dtype = if r == 0 { DType::U64 } else { DType::F64 };
                reduce_scatter(s, ids, Reduction::sum(dtype), 24, 8)
            },
        ),
        (
            "op: rank 0 takes the max, the others sum",
            Mismatch,
            |s, r, ids| {
                let red = if r == 0 {
                    Reduction::max(DType::U32)
                } else {
                    U32
                };
                all_reduce(s, ids, red, 8, 8)
            },
        ),
        (
            "op: rank 2 takes the mean, the others the product",
            Mismatch,
            |s, r, ids| {
                let red = match r {
                    2 => Reduction::mean(DType::BF16),
                    _ => Reduction::prod(DType::BF16),
                };
                reduce_scatter(s, ids, red, 12, 4)
            },
        ),
        (
            "size: rank 2 all_reduces 32 B, the others 16 B",
            Mismatch,
            |s, r, ids| {
                let len = if r == 2 { 32 } else { 16 };
                all_reduce(s, ids, U32, len, len)
            },
        ),
        (
            "size: rank 1 all_gathers 8 B, the others 4 B",
            Mismatch,
            |s, r, ids| {
                let len = if r == 1 { 8 } else { 4 };
                all_gather(s, ids, len, 3 * len)
            },
        ),
        (
            "size: rank 0 reduce_scatters 8 B per rank, the others 4 B",
            Mismatch,
            |s, r, ids| {
                let len = if r == 0 { 8 } else { 4 };
                reduce_scatter(s, ids, U32, 3 * len, len)
            },
        ),
        (
            "size: rank 1 broadcasts 8 B, the others 4 B",
            Mismatch,
            |s, r, ids| broadcast_from(s, ids, r, 0, if r == 1 { 8 } else { 4 }),
        ),
        (
            "size: rank 2 all_to_alls 24 B, the others 12 B",
            Mismatch,
            |s, r, ids| {
                let len = if r == 2 { 24 } else { 12 };
                all_to_all(s, ids, len, len)
            },
        ),
        (
            "root: rank 1 names itself, the others rank 0",
            Mismatch,
            |s, r, ids| broadcast_from(s, ids, r, if r == 1 { 1 } else { 0 }, 8),
        ),
        (
            "root: rank 2, not the root, gives a src",
            Mismatch,
            |s, r, ids| {
                let src = (r == 0 || r == 2).then_some(8);
                broadcast(s, ids, ids[0], src, 8)
            },
        ),
        (
            "root: the root (rank 1) gives no src",
            Mismatch,
            |s, _, ids| broadcast(s, ids, ids[1], None, 8),
        ),
        (
            "root: rank 1 names a device that is not a rank",
            Mismatch,
            |s, r, ids| match r {
                1 => broadcast(s, ids, DeviceId(u64::MAX), None, 8),
                _ => broadcast_from(s, ids, r, 0, 8),
            },
        ),
        (
            "elements: 12 B is not a whole number of f64, on every rank",
            Mismatch,
            |s, _, ids| all_reduce(s, ids, Reduction::sum(DType::F64), 12, 12),
        ),
        (
            "elements: rank 1's 6 B reduce_scatter chunk is not whole f32",
            Mismatch,
            |s, r, ids| {
                let len = if r == 1 { 6 } else { 8 };
                reduce_scatter(s, ids, Reduction::sum(DType::F32), 3 * len, len)
            },
        ),
        (
            "divisible: 10 B all_to_all on 3 ranks, every rank",
            Mismatch,
            |s, _, ids| all_to_all(s, ids, 10, 10),
        ),
        (
            "divisible: rank 0's 10 B all_to_all on 3 ranks",
            Mismatch,
            |s, r, ids| {
                let len = if r == 0 { 10 } else { 12 };
                all_to_all(s, ids, len, len)
            },
        ),
        (
            "divisible: reduce_scatter src of 20 B is not 3 x 8 B, every rank",
            LocalEverywhere(size_mismatch),
            |s, _, ids| reduce_scatter(s, ids, U32, 20, 8),
        ),
        (
            "divisible: rank 1's reduce_scatter src is not 3 x its dst",
            Local {
                bad: 1,
                local: size_mismatch,
            },
            |s, r, ids| reduce_scatter(s, ids, U32, if r == 1 { 20 } else { 24 }, 8),
        ),
        (
            "operand: rank 2's all_reduce dst is smaller than its src",
            Local {
                bad: 2,
                local: size_mismatch,
            },
            |s, r, ids| all_reduce(s, ids, U32, 16, if r == 2 { 8 } else { 16 }),
        ),
        (
            "operand: rank 0's all_gather dst is not 3 x its src",
            Local {
                bad: 0,
                local: size_mismatch,
            },
            |s, r, ids| all_gather(s, ids, 4, if r == 0 { 8 } else { 12 }),
        ),
        (
            "operand: the root's (rank 2) broadcast src is larger than dst",
            Local {
                bad: 2,
                local: size_mismatch,
            },
            |s, r, ids| broadcast(s, ids, ids[2], (r == 2).then_some(12), 8),
        ),
        (
            "operand: rank 1's all_reduce dst does not start on a 4-byte boundary",
            Local {
                bad: 1,
                local: invalid_argument,
            },
            |s, r, ids| {
                let x = upload(s, vec![1; 8], S0);
                let y = alloc(s, 12, S0);
                let dst = sub(&y, if r == 1 { 2 } else { 4 }, 8);
                let called = s.all_reduce(
                    x.binding(),
                    dst.binding(),
                    U32,
                    S0,
                    ids.to_vec(),
                    ComputeWait::Wait,
                );
                done(called, dst, vec![x, y])
            },
        ),
    ]
}

/// Checks rank `r`'s side of a failed case. A call refused on this rank
/// (it returned the error) never touched its `dst`, which stays as it was,
/// like the target of a refused write; on the other ranks the failure
/// arrives later and poisons `dst`.
fn check(what: &str, expect: Expect, r: usize, s: &mut TestServer, posted: &Posted) {
    let refused_here = posted.called.is_err();
    let from_dst = posted.dst.as_ref().and_then(|dst| {
        let read = read(s, dst, S0).map(|_| ());
        if refused_here {
            assert!(
                read.is_ok(),
                "{what}: rank {r}: a refused call's dst: {read:?}"
            );
            return None;
        }
        let e = read.expect_err("the dst of a failed collective is poisoned");
        assert!(
            matches!(e, ServerError::Untrusted { .. }),
            "{what}: rank {r}: the read of dst: {e}"
        );
        Some(e)
    });
    let (err, own) = match (&posted.called, from_dst) {
        (Err(e), _) => (e.clone(), true),
        (Ok(()), Some(e)) => (e, false),
        (Ok(()), None) => panic!("{what}: rank {r}: no error"),
    };
    match expect {
        Expect::Mismatch => assert!(is_mismatch(&err), "{what}: rank {r}: {err}"),
        Expect::Local { bad, local } if r == bad => {
            assert!(own, "{what}: rank {r}: the call itself fails");
            assert!(local(err.root_cause()), "{what}: rank {r}: {err}");
        }
        Expect::Local { bad, .. } => {
            assert_eq!(input_rank(&err), Some(bad), "{what}: rank {r}: {err}");
        }
        Expect::LocalEverywhere(local) => {
            assert!(own, "{what}: rank {r}: the call itself fails");
            assert!(local(err.root_cause()), "{what}: rank {r}: {err}");
        }
    }
}

/// Every case, on every rank; the communicator keeps working after each.
#[test]
fn every_disagreement_fails_on_every_rank_and_the_communicator_goes_on() {
    let mut g = Group::new(3);
    for (what, expect, call) in cases() {
        let ids = g.ids.clone();
        let g2 = g;
        let (g3, posted) = within(NO_WAIT, what, move || {
            let mut g = g2;
            let posted: Vec<Posted> =
                g.s.iter_mut()
                    .enumerate()
                    .map(|(r, s)| call(s, r, &ids))
                    .collect();
            (g, posted)
        });
        g = g3;
        for (r, (s, p)) in g.s.iter_mut().zip(&posted).enumerate() {
            check(what, expect, r, s, p);
            // Clear what the stream still has to report.
            let _ = s.sync_collective(S0);
            let _ = sync(s, S0);
            sync(s, S0).unwrap_or_else(|e| panic!("{what}: rank {r}: reported twice: {e}"));
        }
        g.assert_still_works(S0, what);
    }
}

/// A `send` and its `recv` that disagree on the size fail on both ranks: the
/// receiver's handle is poisoned, the sender's `sync_collective` reports
/// it. The ranks' next messages pair as usual.
#[test]
fn a_send_and_recv_of_different_sizes_fail_on_both_ranks() {
    let mut g = Group::new(2);
    let (to, from) = (g.ids[1], g.ids[0]);
    let x = upload(&mut g.s[0], vec![7; 8], S0);
    g.s[0].send(x.copy_descriptor(), S0, to).expect("send");
    let y = alloc(&mut g.s[1], 12, S0);
    g.s[1].recv(y.clone(), S0, from).expect("recv");
    let e = g.s[0].sync_collective(S0).expect_err("sender");
    assert!(is_mismatch(&e), "sender: {e}");
    let e = read(&mut g.s[1], &y, S0).expect_err("receiver");
    assert!(is_mismatch(&e), "receiver: {e}");
    for s in &mut g.s {
        let _ = s.sync_collective(S0);
        let _ = sync(s, S0);
    }
    // The next message of the pair is #1 on both sides.
    g.s[0].send(x.copy_descriptor(), S0, to).expect("send");
    let z = alloc(&mut g.s[1], 8, S0);
    g.s[1].recv(z.clone(), S0, from).expect("recv");
    g.s[0].sync_collective(S0).expect("sender");
    assert_eq!(
        read(&mut g.s[1], &z, S0).expect("receiver").to_vec(),
        vec![7; 8]
    );
    g.assert_still_works(S0, "after the messages");
}
