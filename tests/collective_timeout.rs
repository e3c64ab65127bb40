//! Collectives that cannot complete fail on the collective timeout, on
//! every rank that took part, and never hang: a rank that never arrives,
//! ranks that name different rank lists, unmatched messages, a ring where
//! every rank sends first. Its own test binary: it sets
//! `COMPUTE_COLLECTIVE_TIMEOUT_MS`, which `comm_init` reads, and the
//! environment is process-global; one test, whose cases run in turn.

// The GPU tests' helpers; this binary uses a few of them.
#[path = "gpu/common.rs"]
#[allow(dead_code, unused_imports)]
mod common;
#[path = "gpu/collective/group.rs"]
mod group;

use std::time::{Duration, Instant};

use common::*;
use compute_runtime::{
    ComputeWait, CubeCount, DType, DeviceId, Handle, Reduction, ServerCommunication, ServerError,
};
use group::*;

/// The communicators' timeout in this binary.
const TIMEOUT: Duration = Duration::from_millis(400);

/// How long a failure may take to be reported: a few timeouts (a call may
/// wait at each of its steps), plus room for a slow CI machine.
const BOUND: Duration = Duration::from_secs(15);

/// A read of `h` fails with a timeout (or the abort a timeout leaves),
/// within [`BOUND`].
fn assert_times_out(s: &mut TestServer, h: &Handle, what: &str) {
    let start = Instant::now();
    let e = read(s, h, S0).map(|_| ()).expect_err(what);
    assert!(is_timeout(&e), "{what}: {e}");
    assert!(
        start.elapsed() < BOUND,
        "{what}: took {:?}",
        start.elapsed()
    );
}

fn assert_sync_times_out(s: &mut TestServer, what: &str) {
    let start = Instant::now();
    let e = s.sync_collective(S0).expect_err(what);
    assert!(is_timeout(&e), "{what}: {e}");
    assert!(
        start.elapsed() < BOUND,
        "{what}: took {:?}",
        start.elapsed()
    );
}

fn settle(g: &mut Group) {
    for s in &mut g.s {
        let _ = s.sync_collective(S0);
        let _ = sync(s, S0);
    }
}

/// `all_reduce` (sum of u32, 4 elements) of `r + 1` on `s`, over `ids`.
fn all_reduce(
    s: &mut TestServer,
    r: usize,
    ids: &[DeviceId],
    mode: ComputeWait,
) -> (Result<(), ServerError>, Handle, Handle) {
    let x = upload(s, u32_bytes(&[r as u32 + 1; 4]), S0);
    let y = alloc(s, 16, S0);
    let called = s.all_reduce(
        x.binding(),
        y.binding(),
        Reduction::sum(DType::U32),
        S0,
        ids.to_vec(),
        mode,
    );
    (called, x, y)
}

/// Rank 2 of 3 never calls: ranks 0 and 1 fail with a timeout (both modes;
/// the work queued after the `Wait` one runs once the timeout is known).
/// When rank 2 makes the call late, it fails at once (aborted). The next
/// calls of every rank pair as usual.
fn a_rank_that_never_arrives() {
    let mut g = Group::new(3);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate().take(2) {
        let (called, x, y) = all_reduce(s, r, &g.ids, ComputeWait::Wait);
        called.expect("posted");
        let w = upload(s, u32_bytes(&[5; 4]), S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&w], S0);
        outs.push((x, y, w));
    }
    for (r, (s, (_, y, w))) in g.s.iter_mut().zip(&outs).enumerate() {
        assert_times_out(s, y, &format!("rank {r}: dst"));
        let got = read(s, w, S0).expect("work queued after it runs");
        assert_eq!(bytes_u32(&got), [6; 4], "rank {r}: work queued after it");
    }
    let (called, _x, y) = all_reduce(&mut g.s[2], 2, &g.ids, ComputeWait::Wait);
    called.expect("posted");
    let start = Instant::now();
    let e = read(&mut g.s[2], &y, S0).expect_err("late");
    assert!(is_timeout(&e), "the late rank: {e}");
    assert!(start.elapsed() < BOUND);
    settle(&mut g);
    g.assert_still_works(S0, "after the timeout");

    // The same with `Overlap`: sync_collective reports it.
    let mut keep = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate().take(2) {
        let (called, x, y) = all_reduce(s, r, &g.ids, ComputeWait::Overlap);
        called.expect("posted");
        keep.push((x, y));
    }
    for (r, s) in g.s.iter_mut().enumerate().take(2) {
        assert_sync_times_out(s, &format!("overlap: rank {r}"));
    }
}

/// Rank 2 of 3 never calls, and ranks 0 and 1 queue many calls: a read
/// behind all of them fails within a few timeouts, not one timeout per call
/// (it waited `CALLS` x the timeout: each call waited for the missing rank
/// in turn). The first call times out; the calls posted before that are
/// aborted at once, naming it, on every rank that reaches them, the late
/// rank included; calls posted after it pair as usual.
fn many_calls_behind_a_rank_that_never_arrives() {
    const CALLS: usize = 50;
    let mut g = Group::new(3);
    let mut outs: Vec<Vec<Handle>> = vec![Vec::new(); 2];
    for (r, s) in g.s.iter_mut().enumerate().take(2) {
        for _ in 0..CALLS {
            let (called, _x, y) = all_reduce(s, r, &g.ids, ComputeWait::Wait);
            called.expect("posted");
            outs[r].push(y);
        }
    }
    for (r, s) in g.s.iter_mut().enumerate().take(2) {
        assert_times_out(s, &outs[r][CALLS - 1], &format!("rank {r}: the last call"));
        let e = read(s, &outs[r][0], S0).map(|_| ()).expect_err("the first");
        assert!(is_timeout(&e), "rank {r}: the first call: {e}");
        for (i, y) in outs[r].iter().enumerate().skip(1) {
            let e = read(s, y, S0).map(|_| ()).expect_err("aborted");
            assert!(
                matches!(e.root_cause(), ServerError::CollectiveAborted { .. }),
                "rank {r}: call {i}: {e}"
            );
        }
    }
    // The late rank reaches every call, aborted at once.
    let start = Instant::now();
    let mut late = Vec::new();
    for _ in 0..CALLS {
        let (called, _x, y) = all_reduce(&mut g.s[2], 2, &g.ids, ComputeWait::Wait);
        called.expect("posted");
        late.push(y);
    }
    for y in &late {
        let e = read(&mut g.s[2], y, S0).map(|_| ()).expect_err("aborted");
        assert!(is_timeout(&e), "the late rank: {e}");
    }
    assert!(start.elapsed() < BOUND, "took {:?}", start.elapsed());
    settle(&mut g);
    g.assert_still_works(S0, "after the aborted calls");
}

/// Ranks that name the same devices in different orders name different
/// communicators, which no rank of the other list ever calls: both time
/// out. So does every rank but the one whose list names no communicator
/// at all (that one is refused at once).
fn ranks_that_name_different_rank_lists() {
    let mut g = Group::new(2);
    let reversed: Vec<DeviceId> = g.ids.iter().rev().copied().collect();
    for s in &mut g.s {
        s.comm_init(reversed.clone()).expect("comm_init reversed");
    }
    let (called, _x0, y0) = all_reduce(&mut g.s[0], 0, &g.ids.clone(), ComputeWait::Wait);
    called.expect("posted");
    let (called, _x1, y1) = all_reduce(&mut g.s[1], 1, &reversed, ComputeWait::Wait);
    called.expect("posted");
    assert_times_out(&mut g.s[0], &y0, "rank 0 (its list)");
    assert_times_out(&mut g.s[1], &y1, "rank 1 (the reversed list)");

    let mut g = Group::new(3);
    let (called, _x0, y0) = all_reduce(&mut g.s[0], 0, &g.ids.clone(), ComputeWait::Wait);
    called.expect("posted");
    let (called, _x1, y1) = all_reduce(&mut g.s[1], 1, &g.ids.clone(), ComputeWait::Wait);
    called.expect("posted");
    let fewer = g.ids[1..].to_vec();
    let (called, _x2, _y2) = all_reduce(&mut g.s[2], 2, &fewer, ComputeWait::Wait);
    let e = called.expect_err("no communicator for that list");
    assert!(
        matches!(e, ServerError::CollectiveState { .. }),
        "rank 2: {e}"
    );
    assert_times_out(&mut g.s[0], &y0, "rank 0");
    assert_times_out(&mut g.s[1], &y1, "rank 1");
}

/// A send nobody receives fails its sender's `sync_collective`; a recv
/// nobody sends to fails its read.
fn unmatched_messages() {
    let mut g = Group::new(2);
    let x = upload(&mut g.s[0], u32_bytes(&[1; 4]), S0);
    let to = g.ids[1];
    g.s[0].send(x.copy_descriptor(), S0, to).expect("send");
    assert_sync_times_out(&mut g.s[0], "the sender");
    let y = alloc(&mut g.s[1], 16, S0);
    let from = g.ids[0];
    g.s[1].recv(y.clone(), S0, from).expect("recv");
    // Rank 1's recv #0 from rank 0 pairs with the send #0 above, which timed
    // out: aborted at once, or a timeout of its own.
    assert_times_out(&mut g.s[1], &y, "the receiver");
}

/// Every rank of a ring sends first: a rank's calls run in order and a send
/// completes when its recv is reached, so this is a cycle (as with NCCL
/// outside a group call). Nothing hangs: the first sends to time out free
/// their rank's recv, which may then pair with a send still waiting. Every
/// call ends within the bound, each recv with its predecessor's bytes or a
/// timeout, and some call fails.
fn a_ring_where_every_rank_sends_first() {
    let n = 3;
    let mut g = Group::new(n);
    let mut recvs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, u32_bytes(&[r as u32; 4]), S0);
        let y = alloc(s, 16, S0);
        s.send(x.copy_descriptor(), S0, g.ids[(r + 1) % n])
            .expect("send");
        s.recv(y.clone(), S0, g.ids[(r + n - 1) % n]).expect("recv");
        recvs.push((x, y));
    }
    let start = Instant::now();
    let mut failures = 0;
    for (r, (s, (_, y))) in g.s.iter_mut().zip(&recvs).enumerate() {
        match read(s, y, S0) {
            Ok(got) => assert_eq!(bytes_u32(&got), [((r + n - 1) % n) as u32; 4]),
            Err(e) => {
                assert!(is_timeout(&e), "rank {r}: recv: {e}");
                failures += 1;
            }
        }
        if let Err(e) = s.sync_collective(S0) {
            assert!(is_timeout(&e), "rank {r}: send: {e}");
            failures += 1;
        }
    }
    assert!(failures > 0, "a cycle of sends completed");
    assert!(start.elapsed() < BOUND, "took {:?}", start.elapsed());
}

#[test]
fn collectives_that_cannot_complete_fail_on_the_timeout() {
    // SAFETY: the only test of this binary, and no thread of it reads the
    // environment yet.
    unsafe {
        std::env::set_var(
            "COMPUTE_COLLECTIVE_TIMEOUT_MS",
            TIMEOUT.as_millis().to_string(),
        )
    };
    let cases: [(&str, fn()); 5] = [
        ("a rank that never arrives", a_rank_that_never_arrives),
        (
            "many calls behind a rank that never arrives",
            many_calls_behind_a_rank_that_never_arrives,
        ),
        (
            "ranks that name different rank lists",
            ranks_that_name_different_rank_lists,
        ),
        ("unmatched messages", unmatched_messages),
        (
            "a ring where every rank sends first",
            a_ring_where_every_rank_sends_first,
        ),
    ];
    for (what, case) in cases {
        let start = Instant::now();
        case();
        eprintln!("{what}: {:?}", start.elapsed());
    }
}
