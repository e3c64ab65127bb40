//! Broken promises the random-program model (`model`) found, one test
//! each, on 3 ranks driven from one thread. Ignored until the server keeps
//! them: run with `-- --ignored`.

use compute_runtime::{
    ComputeWait, CubeCount, DType, Handle, Reduction, Server, ServerCommunication, StreamId,
};

use super::group::*;
use crate::common::*;
use crate::streams::copy_kernel;

/// Keeps `s`'s stream busy for a while, so that what is queued after it
/// (a collective's staged input) is late.
fn busy(s: &mut TestServer, stream: StreamId) -> Handle {
    let big = alloc(s, 4 << 22, stream);
    for _ in 0..8 {
        launch(s, inc_kernel(), CubeCount::x(65535), &[&big], stream);
    }
    big
}

/// `sync` of a stream waits for everything issued on it, a `Wait`
/// collective included, and reports its failure. It did not once another
/// stream's work on the collective's `dst` had handed the stream's held
/// batch to the applier: the stream had no pending task, so `sync`
/// returned at once, `Ok`, and the failure came with a later `sync`.
#[test]
#[ignore = "server bug found by the model: sync skips a handed-off held batch"]
fn sync_waits_for_a_wait_collective_whose_held_batch_was_handed_off() {
    let mut g = Group::new(3);
    let ids = g.ids.clone();
    let mut ys = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let keep = (r == 2).then(|| busy(s, S0));
        let x = upload(s, u32_bytes(&[1; 64]), S0);
        let y = alloc(s, 256, S0);
        let dtype = if r == 0 { DType::I32 } else { DType::U32 };
        let red = Reduction::sum(dtype);
        s.all_reduce(x.binding(), y.binding(), red, S0, ids.clone(), ComputeWait::Wait)
            .expect("posted");
        // Reads `dst` on another stream: the held batch of S0 is handed off.
        let q = alloc(s, 256, StreamId(1));
        launch(s, copy_kernel(), CubeCount::x(1), &[&y, &q], StreamId(1));
        ys.push((x, y, q, keep));
    }
    for (r, (s, (_, y, _, _))) in g.s.iter_mut().zip(&ys).enumerate() {
        let e = sync(s, S0).expect_err("sync reports the failed collective");
        assert!(is_mismatch(&e), "rank {r}: {e}");
        let e = s.check(vec![y.binding()], S0).expect_err("dst poisoned");
        assert!(is_mismatch(&e), "rank {r}: {e}");
    }
}

/// Work on any stream that touches a `Wait` collective's `dst` is ordered
/// after the result. It was not once a second stream's work on `dst` had
/// handed the held batch to the applier: the collective's use of `dst`
/// counted as submitted, so a read on a third stream returned the bytes
/// from before the result, as trusted.
#[test]
#[ignore = "server bug found by the model: a handed-off held batch no longer orders other streams"]
fn a_read_on_a_third_stream_sees_a_wait_result_after_a_hand_off() {
    let mut g = Group::new(3);
    let ids = g.ids.clone();
    let mut ys = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let keep = (r == 2).then(|| busy(s, S0));
        let x = upload(s, u32_bytes(&[r as u32 + 1; 64]), S0);
        let y = upload(s, u32_bytes(&[7; 64]), S0);
        let red = Reduction::sum(DType::U32);
        s.all_reduce(x.binding(), y.binding(), red, S0, ids.clone(), ComputeWait::Wait)
            .expect("posted");
        let q = alloc(s, 256, StreamId(1));
        launch(s, copy_kernel(), CubeCount::x(1), &[&y, &q], StreamId(1));
        ys.push((x, y, q, keep));
    }
    for (r, (s, (_, y, _, _))) in g.s.iter_mut().zip(&ys).enumerate() {
        let got = read(s, y, StreamId(2)).unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert_eq!(bytes_u32(&got), [6; 64], "rank {r}: the bytes before the result");
    }
}
