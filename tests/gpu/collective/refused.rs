//! A call one rank's `Communicator` refuses still takes its place: the
//! refusing rank gets the error at the call and keeps its bytes, the other
//! ranks' call fails naming it, and every rank's next calls pair as usual
//! (they paired with the refusing rank's next call, and read `Ok` bytes of
//! the wrong call). One test per method, on 3 ranks, rank 1 refusing, in
//! both threading patterns (one thread for every rank; one thread per
//! rank). The 0-byte cases and the refused `send` inside a capture are here
//! too.

use std::time::Duration;

use wgpu_server::prelude::*;

use super::group::*;

const N: usize = 3;
/// The rank that refuses.
const BAD: usize = 1;

type Comm = Communicator<DefaultServer>;

/// One rank: its client and its communicator over every rank.
struct Rank {
    c: DefaultClient,
    comm: Comm,
}

fn ranks_with(f: impl Fn(WgpuServerOptions) -> WgpuServerOptions) -> Vec<Rank> {
    let ids = device_ids(N);
    ids.iter()
        .map(|d| {
            let c = f(WgpuServerOptions::new().device_id(*d).adapter(0))
                .client()
                .expect("adapter");
            let comm = c.communicator(&ids).expect("join");
            Rank { c, comm }
        })
        .collect()
}

/// What a handle must hold once every rank has made its calls.
enum Want {
    /// These values, trusted.
    Values(Vec<u32>),
    /// Untrusted: the call failed because rank `BAD` refused it.
    FailedByBad,
}

/// What one rank's calls returned: the first call (refused on `BAD`) and
/// the handles to check.
struct Issued {
    first: Result<(), ServerError>,
    handles: Vec<(Handle, Want)>,
}

/// Runs `issue` on every rank, then `check`s every rank, in both threading
/// patterns; `check` also makes sure every failure is reported once.
fn both_ways(issue: fn(usize, &Rank) -> Issued, local: fn(&ServerError) -> bool) {
    both_ways_with(|o| o, issue, local);
}

fn both_ways_with(
    options: fn(WgpuServerOptions) -> WgpuServerOptions,
    issue: fn(usize, &Rank) -> Issued,
    local: fn(&ServerError) -> bool,
) {
    let ranks = ranks_with(options);
    let (ranks, issued) = within(NO_WAIT, "one thread for every rank", move || {
        let issued: Vec<Issued> = ranks.iter().enumerate().map(|(r, k)| issue(r, k)).collect();
        (ranks, issued)
    });
    for (r, (k, i)) in ranks.iter().zip(issued).enumerate() {
        check(r, k, i, local);
    }
    let threads: Vec<_> = ranks_with(options)
        .into_iter()
        .enumerate()
        .map(|(r, k)| {
            std::thread::spawn(move || {
                let i = issue(r, &k);
                check(r, &k, i, local);
                k
            })
        })
        .collect();
    for t in threads {
        if let Err(e) = t.join() {
            std::panic::resume_unwind(e);
        }
    }
}

fn check(r: usize, k: &Rank, issued: Issued, local: fn(&ServerError) -> bool) {
    match (&issued.first, r == BAD) {
        (Err(e), true) => assert!(local(e), "rank {r}: refused with {e}"),
        (Ok(()), false) => {}
        (got, _) => panic!("rank {r}: the first call returned {got:?}"),
    }
    // An overlapped communicator's results are in place after `sync`; it
    // reports the failure it wrote, if any (once).
    let synced = k.comm.sync();
    for (i, (h, want)) in issued.handles.iter().enumerate() {
        let got = k.c.read_vec::<u32>(h);
        match (want, got) {
            (Want::Values(v), Ok(got)) => assert_eq!(&got, v, "rank {r}, handle {i}"),
            (Want::FailedByBad, Err(e)) => {
                assert!(
                    matches!(e, ServerError::Untrusted { .. }),
                    "rank {r}, handle {i}: {e}"
                );
                assert_eq!(input_rank(&e), Some(BAD), "rank {r}, handle {i}: {e}");
            }
            (Want::Values(_), Err(e)) => panic!("rank {r}, handle {i}: {e}"),
            (Want::FailedByBad, Ok(got)) => panic!("rank {r}, handle {i}: Ok {got:?}"),
        }
    }
    if let Err(e) = synced {
        assert_eq!(input_rank(&e), Some(BAD), "rank {r}: sync: {e}");
    }
    // What the stream still had to report, then nothing more.
    let _ = k.c.sync();
    k.c.sync()
        .unwrap_or_else(|e| panic!("rank {r}: reported twice: {e}"));
    k.comm
        .sync()
        .unwrap_or_else(|e| panic!("rank {r}: reported twice: {e}"));
}

fn invalid_argument(e: &ServerError) -> bool {
    matches!(e, ServerError::InvalidArgument { .. })
}

fn size_mismatch(e: &ServerError) -> bool {
    matches!(e, ServerError::SizeMismatch { .. })
}

/// `values` in a typed `u32` buffer.
fn typed(k: &Rank, values: &[u32]) -> Handle {
    k.c.create_from_slice(values).expect("upload")
}

/// The same bytes with no element type (what a reduction refuses).
fn untyped(k: &Rank, values: &[u32]) -> Handle {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    k.c.create(bytes).expect("upload")
}

/// An all-reduce (sum) of `r + 1` on every rank, after the case's calls:
/// it pairs with the others' and gives exactly `1 + 2 + 3`.
fn next_all_reduce(r: usize, k: &Rank, handles: &mut Vec<(Handle, Want)>) {
    let x = typed(k, &[r as u32 + 1; 4]);
    k.comm.all_reduce(&x, ReduceOp::Sum).expect("the next call");
    handles.push((x, Want::Values(vec![6; 4])));
}

/// In-place `all_reduce` where rank 1's buffer has no element type; then a
/// valid one on every rank.
fn all_reduce_untyped(r: usize, k: &Rank) -> Issued {
    let values = [10 * (r as u32 + 1); 4];
    let (x, want) = match r {
        BAD => (untyped(k, &values), Want::Values(values.to_vec())),
        _ => (typed(k, &values), Want::FailedByBad),
    };
    let first = k.comm.all_reduce(&x, ReduceOp::Sum);
    let mut handles = vec![(x, want)];
    next_all_reduce(r, k, &mut handles);
    Issued { first, handles }
}

#[test]
fn an_all_reduce_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    both_ways(all_reduce_untyped, invalid_argument);
}

/// The same through an overlapped communicator: results and failures land
/// at `sync`.
#[test]
fn an_overlapped_all_reduce_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let k = Rank {
            c: k.c.clone(),
            comm: k.comm.clone().overlapped(),
        };
        all_reduce_untyped(r, &k)
    }
    both_ways(issue, invalid_argument);
}

/// `all_reduce_into` from an untyped `src` on rank 1.
#[test]
fn an_all_reduce_into_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let values = [r as u32; 4];
        let src = match r {
            BAD => untyped(k, &values),
            _ => typed(k, &values),
        };
        let dst = typed(k, &[99; 4]);
        let first = k.comm.all_reduce_into(&src, &dst, ReduceOp::Max);
        let want = match r {
            BAD => Want::Values(vec![99; 4]),
            _ => Want::FailedByBad,
        };
        let mut handles = vec![(dst, want)];
        next_all_reduce(r, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, invalid_argument);
}

/// `reduce_scatter` from an untyped `src` on rank 1.
#[test]
fn a_reduce_scatter_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let values = [1u32; 6];
        let src = match r {
            BAD => untyped(k, &values),
            _ => typed(k, &values),
        };
        let dst = typed(k, &[7; 2]);
        let first = k.comm.reduce_scatter(&src, &dst, ReduceOp::Sum);
        let want = match r {
            BAD => Want::Values(vec![7; 2]),
            _ => Want::FailedByBad,
        };
        // The next reduce_scatter pairs: chunk r of 3 * (r + 1)... summed.
        let src2 = typed(k, &[r as u32 + 1; 6]);
        let dst2 = typed(k, &[0; 2]);
        k.comm
            .reduce_scatter(&src2, &dst2, ReduceOp::Sum)
            .expect("the next call");
        let mut handles = vec![(dst, want), (dst2, Want::Values(vec![6; 2]))];
        next_all_reduce(r, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, invalid_argument);
}

/// `broadcast` whose root is not a rank, on rank 1 only.
#[test]
fn a_broadcast_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let buf = typed(k, &[r as u32 + 100; 4]);
        let root = if r == BAD { 7 } else { 0 };
        let first = k.comm.broadcast(&buf, root);
        let want = match r {
            BAD => Want::Values(vec![101; 4]),
            _ => Want::FailedByBad,
        };
        let next = typed(k, &[r as u32 + 200; 4]);
        k.comm.broadcast(&next, 2).expect("the next call");
        let mut handles = vec![(buf, want), (next, Want::Values(vec![202; 4]))];
        next_all_reduce(r, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, invalid_argument);
}

/// `all_gather` whose `dst` has the wrong size on rank 1 (the server
/// refuses it, posted).
#[test]
fn an_all_gather_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let src = typed(k, &[r as u32; 2]);
        let dst = typed(k, &vec![5; if r == BAD { 4 } else { 6 }]);
        let first = k.comm.all_gather(&src, &dst);
        let want = match r {
            BAD => Want::Values(vec![5; 4]),
            _ => Want::FailedByBad,
        };
        let dst2 = typed(k, &[9; 6]);
        k.comm.all_gather(&src, &dst2).expect("the next call");
        let mut handles = vec![(dst, want), (dst2, Want::Values(vec![0, 0, 1, 1, 2, 2]))];
        next_all_reduce(r, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, size_mismatch);
}

/// `all_to_all` whose `dst` has the wrong size on rank 1.
#[test]
fn an_all_to_all_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let src = typed(k, &[r as u32; 3]);
        let dst = typed(k, &vec![5; if r == BAD { 4 } else { 3 }]);
        let first = k.comm.all_to_all(&src, &dst);
        let want = match r {
            BAD => Want::Values(vec![5; 4]),
            _ => Want::FailedByBad,
        };
        let src2 = typed(k, &[10 * r as u32, 10 * r as u32 + 1, 10 * r as u32 + 2]);
        let dst2 = typed(k, &[0; 3]);
        k.comm.all_to_all(&src2, &dst2).expect("the next call");
        let r = r as u32;
        let mut handles = vec![(dst, want), (dst2, Want::Values(vec![r, 10 + r, 20 + r]))];
        next_all_reduce(r as usize, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, size_mismatch);
}

/// A `send` to a rank that does not exist is refused on its rank and takes
/// no place (no rank receives from it): the sender's next message pairs
/// with the receiver's first `recv`.
#[test]
fn a_send_to_no_rank_is_refused_and_the_next_message_pairs() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let mut handles = Vec::new();
        let first = match r {
            BAD => {
                let x = typed(k, &[41; 3]);
                let refused = k.comm.send(&x, 9);
                let y = typed(k, &[42; 3]);
                k.comm.send(&y, 0).expect("send");
                refused
            }
            0 => {
                let got = typed(k, &[0; 3]);
                k.comm.recv(&got, BAD).expect("recv");
                handles.push((got, Want::Values(vec![42; 3])));
                Ok(())
            }
            _ => Ok(()),
        };
        next_all_reduce(r, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, invalid_argument);
}

/// A `recv` from a rank that does not exist, or from itself, is refused
/// on its rank and takes no place.
#[test]
fn a_recv_from_no_rank_is_refused_and_the_next_message_pairs() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let mut handles = Vec::new();
        let first = match r {
            BAD => {
                let x = typed(k, &[0; 3]);
                let refused = k.comm.recv(&x, 5);
                let own = k.comm.recv(&x, BAD).expect_err("from itself");
                assert!(invalid_argument(&own), "{own}");
                let got = typed(k, &[0; 3]);
                k.comm.recv(&got, 2).expect("recv");
                handles.push((x, Want::Values(vec![0; 3])));
                handles.push((got, Want::Values(vec![43; 3])));
                refused
            }
            2 => {
                let y = typed(k, &[43; 3]);
                k.comm.send(&y, BAD).expect("send");
                Ok(())
            }
            _ => Ok(()),
        };
        next_all_reduce(r, k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, invalid_argument);
}

/// A failed 0-byte `Overlap` all-reduce poisons nothing around its `dst`
/// (it poisoned the whole slice, on every rank that posted it), and its
/// failure is reported by `sync` (here the overlapped communicator's).
#[test]
fn a_failed_zero_byte_overlap_collective_poisons_nothing() {
    fn issue(r: usize, k: &Rank) -> Issued {
        let k = Rank {
            c: k.c.clone(),
            comm: k.comm.clone().overlapped(),
        };
        let around = typed(&k, &[3; 4]);
        let none = Handle {
            offset: 8,
            size: 0,
            ..around.clone()
        };
        let src = match r {
            BAD => untyped(&k, &[3; 4]),
            _ => typed(&k, &[3; 4]),
        };
        let src = Handle { size: 0, ..src };
        let first = k.comm.all_reduce_into(&src, &none, ReduceOp::Sum);
        let mut handles = vec![(around, Want::Values(vec![3; 4]))];
        next_all_reduce(r, &k, &mut handles);
        Issued { first, handles }
    }
    both_ways(issue, invalid_argument);
}

/// A failed 0-byte `Wait` collective whose peers post after the stream's
/// `sync` started is waited for by that `sync`, which reports it (it
/// returned `Ok`, and the failure came with the next report).
#[test]
fn a_failed_zero_byte_wait_collective_is_reported_by_the_next_sync() {
    let ids = device_ids(N);
    let clients: Vec<DefaultClient> = ids
        .iter()
        .map(|d| {
            WgpuServerOptions::new()
                .device_id(*d)
                .adapter(0)
                .client()
                .expect("adapter")
        })
        .collect();
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(r, c)| {
            let ids = ids.clone();
            std::thread::spawn(move || {
                c.comm_init(&ids).expect("join");
                // The others post late: rank 0's `sync` starts first.
                if r != 0 {
                    std::thread::sleep(Duration::from_millis(300));
                }
                let dtype = if r == BAD { DType::U32 } else { DType::F32 };
                let none = Handle {
                    size: 0,
                    ..c.empty(4).expect("slice")
                };
                c.all_reduce(&none, &none, Reduction::sum(dtype), &ids, ComputeWait::Wait)
                    .expect("posted");
                let e = c.sync().expect_err("the mismatch, reported by this sync");
                assert!(is_mismatch(&e), "rank {r}: {e}");
                c.sync().expect("reported once");
            })
        })
        .collect();
    for t in threads {
        if let Err(e) = t.join() {
            std::panic::resume_unwind(e);
        }
    }
}

/// A `send` refused inside a capture still takes its place in the
/// sender's messages to that peer, so, like any `send`, it waits for the
/// peer's `recv`: with none posted, the sender's next calls wait at most
/// the communicator's timeout, then every rank's next group call fails
/// (aborted by the timeout), and the calls after it pair as usual. This
/// is the bound: a refused message is never dropped, because the peer's
/// `recv` would pair with the sender's next `send`.
#[test]
fn a_send_refused_in_a_capture_with_no_recv_costs_at_most_the_timeout() {
    const TIMEOUT: Duration = Duration::from_millis(500);
    let ranks = ranks_with(|o| o.collective_timeout(TIMEOUT));
    let ids: Vec<DeviceId> = (0..N)
        .map(|r| ranks[0].comm.device(r).expect("rank"))
        .collect();
    let x: Vec<Handle> = ranks.iter().map(|k| typed(k, &[1; 4])).collect();
    let captured = ranks[BAD].c.with_stream(StreamId(7));
    let comm = captured.communicator(&ids).expect("join");
    captured.begin_capture().expect("begin_capture");
    let e = comm.send(&x[BAD], 0).expect_err("refused in a capture");
    assert!(matches!(e, ServerError::CaptureState { .. }), "{e}");
    let _ = captured.end_capture();
    // Nobody receives it: every rank's next all-reduce is aborted by the
    // sender's timeout (not the 60 s default: the call returns).
    for (k, x) in ranks.iter().zip(&x) {
        k.comm.all_reduce(x, ReduceOp::Sum).expect("posted");
    }
    for (r, (k, x)) in ranks.iter().zip(&x).enumerate() {
        let e = k.c.read_vec::<u32>(x).expect_err("aborted");
        assert!(is_timeout(&e), "rank {r}: {e}");
        let _ = k.c.sync();
    }
    // The calls after it pair.
    let mut handles = Vec::new();
    for (r, k) in ranks.iter().enumerate() {
        let mut h = Vec::new();
        next_all_reduce(r, k, &mut h);
        handles.push(h);
    }
    for (r, (k, h)) in ranks.iter().zip(handles).enumerate() {
        for (y, _) in h {
            assert_eq!(k.c.read_vec::<u32>(&y).expect("paired"), [6; 4], "rank {r}");
        }
    }
}
