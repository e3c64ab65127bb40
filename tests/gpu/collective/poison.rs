//! Trust across ranks: what runs, and what is trusted, after a failed
//! collective.

use compute_runtime::{
    ComputeWait, CubeCount, DType, Reduction, Server, ServerCommunication, StreamId,
};

use super::group::*;
use crate::common::*;

/// Clears what each rank's stream has to report.
fn settle(g: &mut Group) {
    for s in &mut g.s {
        let _ = s.sync_collective(S0);
        let _ = sync(s, S0);
    }
}

/// After a failed `Wait` collective (a dtype mismatch), the work queued on
/// its stream does not run: a launch's and a host write's targets are
/// poisoned with the collective's error. Another stream is not affected.
/// The stream works again once the failure is reported.
#[test]
fn work_after_a_failed_wait_collective_does_not_run_and_its_writes_are_poisoned() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let dtype = if r == 0 { DType::F32 } else { DType::I32 };
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        let y = alloc(s, 16, S0);
        let w = upload(s, u32_bytes(&[5; 4]), S0);
        let v = upload(s, u32_bytes(&[5; 4]), S0);
        let u = upload(s, u32_bytes(&[5; 4]), StreamId(1));
        sync(s, S0).expect("uploaded");
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(dtype),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
        launch(s, inc_kernel(), CubeCount::x(1), &[&w], S0);
        s.write(vec![(v.copy_descriptor(), u32_bytes(&[6; 4]).into())], S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&u], StreamId(1));
        outs.push((x, y, w, v, u));
    }
    for (r, (s, (_, y, w, v, u))) in g.s.iter_mut().zip(&outs).enumerate() {
        for (what, h) in [("dst", y), ("launch target", w), ("write target", v)] {
            let e = read(s, h, S0).expect_err("poisoned");
            assert!(is_mismatch(&e), "{what}: rank {r}: {e}");
        }
        assert_eq!(
            bytes_u32(&read(s, u, StreamId(1)).expect("other stream")),
            [6; 4]
        );
    }
    settle(&mut g);
    for (s, (_, _, w, _, _)) in g.s.iter_mut().zip(&outs) {
        s.write(vec![(w.copy_descriptor(), u32_bytes(&[1; 4]).into())], S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[w], S0);
        assert_eq!(bytes_u32(&read(s, w, S0).expect("runs again")), [2; 4]);
    }
    g.assert_still_works(S0, "after the failure");
}

/// A read queued after a failed `Wait` collective, on its stream, never
/// returns stale bytes (it did: the batch holding the read's copy was
/// dropped with the stream's held work, and the read mapped its staging
/// buffer anyway). Bytes written before the collective read back as
/// written; bytes the dropped work wrote are untrusted.
#[test]
fn a_read_after_a_failed_wait_collective_never_returns_stale_bytes() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let dtype = if r == 0 { DType::F32 } else { DType::I32 };
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        let y = alloc(s, 16, S0);
        let before = upload(s, u32_bytes(&[5; 4]), S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(dtype),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
        let after = alloc(s, 16, S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&after], S0);
        outs.push((x, y, before, after));
    }
    for (r, (s, (_, y, before, after))) in g.s.iter_mut().zip(&outs).enumerate() {
        // Wait until the failure is known here (no read: it would submit).
        let start = std::time::Instant::now();
        while s.check(vec![y.binding()], S0).is_ok() {
            assert!(
                start.elapsed() < NO_WAIT,
                "rank {r}: the failure never arrived"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let got = read(s, before, S0).expect("written before the collective");
        assert_eq!(bytes_u32(&got), [5; 4], "rank {r}: stale bytes");
        let e = read(s, after, S0).expect_err("written by dropped work");
        assert!(is_mismatch(&e), "rank {r}: {e}");
    }
}
