//! Promises a user found broken (issue 19), one test each, on 3 ranks in
//! both threading patterns ([`both_ways`]).

use compute_runtime::{
    ComputeWait, CubeCount, DType, DeviceId, Handle, KernelArguments, LaunchMode, Reduction,
    Server, ServerCommunication, ServerError, StreamId,
};
use wgpu_server::{BindingAccess, WgslKernel};

use super::group::*;
use crate::common::*;

const N: usize = 3;

/// A `Wait` collective is ordered after everything issued before it on
/// its stream, whether or not its rank stages input: a host write of `x`
/// before a broadcast into `x` never lands after the result (it did on the
/// ranks with nothing to stage, and on every rank for a write of 1 MiB or
/// more, which goes through the mapped upload path).
#[test]
fn a_host_write_before_a_wait_collective_never_lands_after_its_result() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> Vec<(Handle, u8)> {
        let mut out = Vec::new();
        // Small, through `write_buffer`; a reused slice (its old bytes are
        // the freed buffer's); large, through the mapped upload path.
        for (len, root, reuse) in [(16usize, 1usize, false), (16, 1, true), (2 << 20, 0, false)] {
            if reuse {
                let old = upload(s, vec![0xAB; len], S0);
                drop(old);
            }
            let x = upload(s, vec![7u8; len], S0);
            let src = (r == root).then(|| upload(s, vec![9u8; len], S0));
            s.broadcast(
                src.as_ref().map(Handle::binding),
                x.binding(),
                S0,
                ids[root],
                ids.to_vec(),
            )
            .expect("broadcast");
            out.push((x, 9));
        }
        out
    }
    fn check(r: usize, s: &mut TestServer, xs: Vec<(Handle, u8)>) {
        for (i, (x, want)) in xs.into_iter().enumerate() {
            let got = read(s, &x, S0).unwrap_or_else(|e| panic!("rank {r}, case {i}: {e}"));
            let right = got.iter().filter(|b| **b == want).count();
            assert_eq!(
                right,
                got.len(),
                "rank {r}, case {i}: {right} of {} bytes are {want}: {:?}",
                got.len(),
                &got[..4]
            );
        }
    }
    both_ways(N, issue, check);
}

/// A collective refused on one rank at the call (here: inside a capture
/// window) still reaches the others as a failed call: their call fails
/// naming that rank, and the next calls of every rank pair as usual (they
/// paired with the refusing rank's next call, and every rank read Ok bytes
/// of the wrong call).
#[test]
fn a_call_refused_on_one_rank_fails_on_every_rank_and_takes_its_turn() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 4] {
        let red = Reduction::sum(DType::U32);
        let x = upload(s, u32_bytes(&[10; 4]), S0);
        let y = alloc(s, 16, S0);
        if r == 1 {
            s.begin_capture(S0).expect("begin_capture");
        }
        let called = s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        );
        if r == 1 {
            let e = called.expect_err("refused inside a capture");
            assert!(matches!(e, ServerError::CaptureState { .. }), "{e}");
            let _ = s.end_capture(S0);
        } else {
            called.expect("posted");
        }
        let x2 = upload(s, u32_bytes(&[r as u32 + 1; 4]), S0);
        let y2 = alloc(s, 16, S0);
        s.all_reduce(
            x2.binding(),
            y2.binding(),
            red,
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        )
        .expect("the next call");
        [x, y, x2, y2]
    }
    fn check(r: usize, s: &mut TestServer, [_, y, _, y2]: [Handle; 4]) {
        if r != 1 {
            let e = read(s, &y, S0)
                .map(|_| ())
                .expect_err("the refused call failed here too");
            assert_eq!(input_rank(&e), Some(1), "rank {r}: {e}");
            assert!(
                matches!(e.root_cause(), ServerError::CaptureState { .. }),
                "rank {r}: {e}"
            );
        }
        let got = read(s, &y2, S0).unwrap_or_else(|e| panic!("rank {r}: the next call: {e}"));
        assert_eq!(
            bytes_u32(&got),
            [6; 4],
            "rank {r}: the next call paired with the right one"
        );
    }
    both_ways(N, issue, check);
}

/// `y = 3x + 7`, bounded by `arrayLength`.
fn affine_kernel() -> WgslKernel {
    WgslKernel::new(
        "affine",
        r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) { y[id.x] = 3u * x[id.x] + 7u; }
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    )
}

/// `inc(x)` over an indirect count past the device's limit: wgpu skips it
/// without a word, and the server's audit poisons `x` once the batch ran (a
/// late verdict).
fn inc_late(s: &mut TestServer, x: &Handle, stream: StreamId) {
    let max = s.device().limits().max_compute_workgroups_per_dimension;
    let count = upload(s, u32_bytes(&[max + 1, 1, 1]), stream);
    let args = KernelArguments::buffers(vec![x.binding()]);
    // SAFETY: the kernel bounds its accesses with arrayLength.
    unsafe {
        s.launch(
            Box::new(inc_kernel()),
            CubeCount::Dynamic(count.binding()),
            args,
            stream,
            LaunchMode::Execute,
        )
    };
}

fn is_late(e: &ServerError) -> bool {
    matches!(e.root_cause(), ServerError::LimitExceeded { .. })
}

/// A late verdict poisons what read the bytes before it arrived, on any
/// stream and transitively: `y = 3x + 7` over a late-poisoned `x` (on
/// another stream), then `z = 3y + 7`, read `Ok(22)` and `Ok(73)`.
#[test]
fn a_late_verdict_poisons_what_read_the_bytes_before_it_arrived() {
    let mut s = server();
    let x = upload(&mut s, u32_bytes(&[5; 4]), S0);
    let (y, z) = (alloc(&mut s, 16, S0), alloc(&mut s, 16, S0));
    sync(&mut s, S0).expect("setup");
    inc_late(&mut s, &x, S0);
    launch(
        &mut s,
        affine_kernel(),
        CubeCount::x(1),
        &[&x, &y],
        StreamId(1),
    );
    launch(
        &mut s,
        affine_kernel(),
        CubeCount::x(1),
        &[&y, &z],
        StreamId(2),
    );
    for (what, h, input, stream) in [("y", &y, &x, StreamId(1)), ("z", &z, &y, StreamId(2))] {
        let e = read(&mut s, h, stream).map(|_| ()).expect_err(what);
        assert!(is_late(&e), "{what}: {e}");
        let ServerError::Untrusted { cause, .. } = &e else {
            panic!("{what}: {e}");
        };
        assert!(
            matches!(&**cause, ServerError::UntrustedInput { input: i, .. } if *i == input.memory.id()),
            "{what} names its input: {e}"
        );
    }
    // Each reader's stream is told its work read bad bytes.
    for stream in [S0, StreamId(1), StreamId(2)] {
        let e = sync(&mut s, stream).expect_err("reported");
        assert!(is_late(&e), "{stream}: {e}");
    }
}

/// A late verdict on one rank's `src` poisons the collective's result on
/// every rank (an all_reduce over it read `Ok(15)` on all three).
#[test]
fn a_late_verdict_on_one_rank_s_src_poisons_the_result_on_every_rank() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 2] {
        let x = upload(s, u32_bytes(&[r as u32 + 4; 4]), S0);
        if r == 1 {
            inc_late(s, &x, S0);
        }
        let y = alloc(s, 16, S0);
        let red = Reduction::sum(DType::U32);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        )
        .expect("posted");
        [x, y]
    }
    fn check(r: usize, s: &mut TestServer, [_, y]: [Handle; 2]) {
        let e = read(s, &y, S0).map(|_| ()).expect_err("poisoned");
        assert_eq!(input_rank(&e), Some(1), "rank {r}: {e}");
        assert!(is_late(&e), "rank {r}: {e}");
    }
    both_ways(N, issue, check);
}

fn is_pending(e: &ServerError) -> bool {
    matches!(e.root_cause(), ServerError::CollectivePending { .. })
}

/// What `Overlap` promises: until `sync_collective` writes `dst`, every use
/// of it is refused with `CollectivePending` (a read returned the old bytes
/// as trusted; on a `dst` poisoned by an earlier call it reported that old,
/// unrelated error); a launch reading it is refused, its writes poisoned;
/// after `sync_collective`, `dst` holds the result, trusted.
#[test]
fn an_overlap_dst_is_refused_until_sync_collective_writes_it() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 4] {
        let x = upload(s, u32_bytes(&[r as u32 + 1; 4]), S0);
        let y = upload(s, u32_bytes(&[9; 4]), S0);
        let old = upload(s, u32_bytes(&[9; 4]), S0);
        if r == 2 {
            // An earlier failure on `dst`: not what a read reports now.
            launch(s, inc_kernel(), CubeCount::x(1), &[&y, &y], S0);
            assert!(s.check(vec![y.binding()], S0).is_err());
        }
        let red = Reduction::sum(DType::U32);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.to_vec(),
            ComputeWait::Overlap,
        )
        .expect("posted");
        let e = read(s, &y, S0).map(|_| ()).expect_err("pending");
        assert!(
            is_pending(&e),
            "rank {r}: a read before sync_collective: {e}"
        );
        let e = s
            .check(vec![y.binding()], StreamId(1))
            .expect_err("pending");
        assert!(is_pending(&e), "rank {r}: check: {e}");
        let q = alloc(s, 16, StreamId(1));
        launch(s, affine_kernel(), CubeCount::x(1), &[&y, &q], StreamId(1));
        let e = read(s, &q, StreamId(1)).map(|_| ()).expect_err("refused");
        assert!(is_pending(&e), "rank {r}: a launch reading dst: {e}");
        [x, y, old, q]
    }
    fn check(r: usize, s: &mut TestServer, [_, y, old, _]: [Handle; 4]) {
        let _ = s.sync_collective(S0);
        let got =
            read(s, &y, S0).unwrap_or_else(|e| panic!("rank {r}: after sync_collective: {e}"));
        assert_eq!(bytes_u32(&got), [6; 4], "rank {r}");
        assert_eq!(bytes_u32(&read(s, &old, S0).expect("untouched")), [9; 4]);
    }
    both_ways(N, issue, check);
}

/// With one thread driving every rank, work on another stream that touches
/// a pending `Wait` collective's `dst` does not wait for the other ranks
/// (it blocked the thread until the collective timed out, then poisoned
/// every rank): it is held behind the result, and sees it.
#[test]
fn work_on_another_stream_touching_a_pending_dst_waits_for_no_rank() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 5] {
        let x = upload(s, u32_bytes(&[r as u32 + 1; 4]), S0);
        let y = alloc(s, 16, S0);
        let red = Reduction::sum(DType::U32);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        )
        .expect("posted");
        let q = alloc(s, 16, StreamId(1));
        launch(s, affine_kernel(), CubeCount::x(1), &[&y, &q], StreamId(1));
        let w = alloc(s, 16, StreamId(2));
        launch(s, affine_kernel(), CubeCount::x(1), &[&y, &w], StreamId(2));
        let v = upload(s, u32_bytes(&[1; 4]), StreamId(3));
        launch(s, inc_kernel(), CubeCount::x(1), &[&v], StreamId(3));
        [x, y, q, w, v]
    }
    fn check(r: usize, s: &mut TestServer, [_, y, q, w, v]: [Handle; 5]) {
        assert_eq!(
            bytes_u32(&read(s, &q, StreamId(1)).expect("q")),
            [25; 4],
            "rank {r}"
        );
        assert_eq!(
            bytes_u32(&read(s, &w, StreamId(2)).expect("w")),
            [25; 4],
            "rank {r}"
        );
        assert_eq!(bytes_u32(&read(s, &y, S0).expect("y")), [6; 4], "rank {r}");
        assert_eq!(
            bytes_u32(&read(s, &v, StreamId(3)).expect("v")),
            [2; 4],
            "rank {r}"
        );
    }
    both_ways(N, issue, check);
}

/// A failing `Wait` collective on a rank that stages nothing (a `recv`, a
/// non-root broadcast) never takes the work issued before it on its stream
/// with it (it dropped and poisoned `inc(x)` issued just before).
#[test]
fn a_failing_collective_never_drops_the_work_before_it() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 4] {
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&x], S0);
        // A recv of 32 bytes on rank 0 from rank 1, which sends 16.
        let got = alloc(s, 32, S0);
        let sent = upload(s, u32_bytes(&[3; 4]), S0);
        match r {
            0 => s.recv(got.clone(), S0, ids[1]).expect("posted"),
            1 => s.send(sent.copy_descriptor(), S0, ids[0]).expect("posted"),
            _ => {}
        }
        // A broadcast whose sizes disagree: the non-roots stage nothing.
        launch(s, inc_kernel(), CubeCount::x(1), &[&x], S0);
        let dst = alloc(s, if r == 2 { 8 } else { 16 }, S0);
        let src = (r == 0).then(|| upload(s, u32_bytes(&[7; 4]), S0));
        s.broadcast(
            src.as_ref().map(Handle::binding),
            dst.binding(),
            S0,
            ids[0],
            ids.to_vec(),
        )
        .expect("posted");
        [x, got, sent, dst]
    }
    fn check(r: usize, s: &mut TestServer, [x, got, _, dst]: [Handle; 4]) {
        let e = read(s, &dst, S0)
            .map(|_| ())
            .expect_err("the broadcast failed");
        assert!(is_mismatch(&e), "rank {r}: {e}");
        if r == 0 {
            let e = read(s, &got, S0).map(|_| ()).expect_err("the recv failed");
            assert!(is_mismatch(&e), "rank {r}: {e}");
        }
        let x = read(s, &x, S0).unwrap_or_else(|e| panic!("rank {r}: x: {e}"));
        assert_eq!(
            bytes_u32(&x),
            [3; 4],
            "rank {r}: both launches before the failures ran"
        );
    }
    both_ways(N, issue, check);
}

/// A failing 0-byte collective poisons nothing of its destination's slice
/// (it poisoned the whole slice later and unordered, so a full host write
/// issued after it could end up untrusted); `sync_collective` does not
/// report again a `Wait` failure `sync` reported.
#[test]
fn failures_are_reported_once_and_a_zero_byte_failure_poisons_nothing() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 3] {
        let empty = sub(&alloc(s, 4, S0), 0, 0);
        let dst = alloc(s, 4, S0);
        let none = sub(&dst, 0, 0);
        let dtype = if r == 0 { DType::F32 } else { DType::U32 };
        s.all_reduce(
            empty.binding(),
            none.binding(),
            Reduction::sum(dtype),
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        )
        .expect("posted");
        s.write(vec![(dst.copy_descriptor(), u32_bytes(&[4]).into())], S0);
        // A failing collective with bytes: reported by `sync`, once.
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        let y = alloc(s, 16, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(dtype),
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        )
        .expect("posted");
        [dst, x, y]
    }
    fn check(r: usize, s: &mut TestServer, [dst, _, y]: [Handle; 3]) {
        let got = read(s, &dst, S0).unwrap_or_else(|e| panic!("rank {r}: written after: {e}"));
        assert_eq!(bytes_u32(&got), [4], "rank {r}");
        let e = read(s, &y, S0).map(|_| ()).expect_err("failed");
        assert!(is_mismatch(&e), "rank {r}: {e}");
        let e = sync(s, S0).expect_err("reported by sync");
        assert!(is_mismatch(&e), "rank {r}: {e}");
        s.sync_collective(S0).expect("not again by sync_collective");
        sync(s, S0).expect("nor by another sync");
    }
    both_ways(N, issue, check);
}
