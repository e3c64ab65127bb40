//! Trust across ranks: what runs, and what is trusted, after a failed
//! collective.

use compute_runtime::{ComputeWait, CubeCount, DType, Reduction, Server, ServerCommunication};

use super::group::*;
use crate::common::*;

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
