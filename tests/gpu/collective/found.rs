//! Broken promises the random-program model (`model`) found, one test
//! each, on 3 ranks driven from one thread.

use compute_runtime::{
    ComputeWait, CubeCount, DType, Handle, KernelArguments, LaunchMode, Reduction, Server,
    ServerCommunication, ServerError, StreamId,
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
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.clone(),
            ComputeWait::Wait,
        )
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

fn a_read_on_a_third_stream_sees_a_wait_result_after_a_hand_off() {
    let mut g = Group::new(3);
    let ids = g.ids.clone();
    let mut ys = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let keep = (r == 2).then(|| busy(s, S0));
        let x = upload(s, u32_bytes(&[r as u32 + 1; 64]), S0);
        let y = upload(s, u32_bytes(&[7; 64]), S0);
        let red = Reduction::sum(DType::U32);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
        let q = alloc(s, 256, StreamId(1));
        launch(s, copy_kernel(), CubeCount::x(1), &[&y, &q], StreamId(1));
        ys.push((x, y, q, keep));
    }
    for (r, (s, (_, y, _, _))) in g.s.iter_mut().zip(&ys).enumerate() {
        let got = read(s, y, StreamId(2)).unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert_eq!(
            bytes_u32(&got),
            [6; 64],
            "rank {r}: the bytes before the result"
        );
    }
}

/// `inc(x)` over an indirect count past the device's limit: skipped, and
/// `x` poisoned once the batch ran (a late verdict).
fn inc_late(s: &mut TestServer, x: &Handle) {
    let max = s.device().limits().max_compute_workgroups_per_dimension;
    let count = upload(s, u32_bytes(&[max + 1, 1, 1]), S0);
    let args = KernelArguments::buffers(vec![x.binding()]);
    // SAFETY: the kernel bounds its accesses with arrayLength.
    unsafe {
        s.launch(
            Box::new(inc_kernel()),
            CubeCount::Dynamic(count.binding()),
            args,
            S0,
            LaunchMode::Execute,
        )
    };
}

/// What a collective's result carries for rank 1's `src`, late-poisoned,
/// with the verdict known before the call (`settled`: `x` was read) or not.
fn input_cause_of_late_src(settled: bool) -> ServerError {
    let mut g = Group::new(3);
    let ids = g.ids.clone();
    let mut ys = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        if r == 1 {
            inc_late(s, &x);
            if settled {
                read(s, &x, S0).expect_err("late-poisoned");
            }
        }
        let y = alloc(s, 16, S0);
        let red = Reduction::sum(DType::U32);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
        ys.push((x, y));
    }
    let e = read(&mut g.s[0], &ys[0].1, S0).expect_err("poisoned");
    match e {
        ServerError::Untrusted { cause, .. } => match &*cause {
            ServerError::CollectiveInput { rank: 1, cause } => (**cause).clone(),
            other => panic!("not rank 1's input: {other}"),
        },
        other => panic!("not untrusted: {other}"),
    }
}

/// A bad input poisons a collective's result with one cause, whenever the
/// input's late verdict arrives. It did not: known at the call, the cause
/// was the input's (`LimitExceeded`); still to come, it was wrapped as
/// `UntrustedInput { input: x, cause: LimitExceeded }`.
#[test]
fn a_late_poisoned_src_gives_one_cause_whenever_its_verdict_arrives() {
    let known = input_cause_of_late_src(true);
    let pending = input_cause_of_late_src(false);
    assert_eq!(
        std::mem::discriminant(&known),
        std::mem::discriminant(&pending),
        "known at the call: {known:?}; still to come: {pending:?}"
    );
}
