//! Software graphs: capture records instead of running, replay re-runs the
//! recording, the state machine refuses misuse, destroy unpins.

use crate::common::*;
use compute_runtime::{CubeCount, GraphId, Server, ServerError, StreamId};
use wgpu_server::{BindingAccess, WgslKernel};

/// `c = a + b` on `u32`: the graphs here count in integers. (The common f32
/// add would see their small integers as subnormal floats, which NVIDIA
/// flushes to zero, as WGSL allows.)
fn add_u32_kernel() -> WgslKernel {
    WgslKernel::new(
        "add_u32",
        ADD_WGSL.replace("f32", "u32"),
        "main",
        [64, 1, 1],
        vec![
            BindingAccess::ReadOnly,
            BindingAccess::ReadOnly,
            BindingAccess::ReadWrite,
        ],
    )
}

#[test]
fn capture_records_without_running_and_replay_runs_the_recording() {
    let mut s = server();
    let a = upload(&mut s, u32_bytes(&[0; 256]), S0);
    let b = upload(&mut s, u32_bytes(&[0; 256]), S0);
    s.graph_prepare(S0).expect("prepare");
    // Warm-up: compiles and fills the caches.
    launch(&mut s, inc_kernel(), CubeCount::x(4), &[&a], S0);
    launch(&mut s, add_u32_kernel(), CubeCount::x(4), &[&a, &a, &b], S0);
    sync(&mut s, S0).expect("warm-up");
    // a = 1, b = 2 now.
    s.begin_capture(S0).expect("begin");
    launch(&mut s, inc_kernel(), CubeCount::x(4), &[&a], S0);
    launch(&mut s, add_u32_kernel(), CubeCount::x(4), &[&a, &a, &b], S0);
    let g = s.end_capture(S0).expect("end");
    assert_eq!(
        bytes_u32(&read(&mut s, &a, S0).expect("read")),
        vec![1; 256],
        "not run"
    );
    for _ in 0..10 {
        s.replay(g, S0).expect("replay");
    }
    // Each replay: a += 1; b = 2a.
    assert_eq!(
        bytes_u32(&read(&mut s, &a, S0).expect("read")),
        vec![11; 256]
    );
    assert_eq!(
        bytes_u32(&read(&mut s, &b, S0).expect("read")),
        vec![22; 256]
    );
    // Replay on another stream is ordered after the first stream's work.
    s.replay(g, StreamId(4)).expect("replay elsewhere");
    assert_eq!(
        bytes_u32(&read(&mut s, &b, StreamId(5)).expect("read")),
        vec![24; 256]
    );
    assert_eq!(s.graph_count(), 1);
    s.graph_destroy(g, S0);
    assert_eq!(s.graph_count(), 0);
    let err = s.replay(g, S0).expect_err("destroyed");
    assert!(matches!(err, ServerError::UnknownGraph { .. }), "{err}");
    s.graph_destroy(GraphId(999), S0); // unknown: no-op
}

#[test]
fn the_capture_state_machine_refuses_misuse() {
    let mut s = server();
    let a = upload(&mut s, u32_bytes(&[0; 64]), S0);
    assert!(matches!(
        s.end_capture(S0),
        Err(ServerError::CaptureState { .. })
    ));
    s.begin_capture(S0).expect("begin");
    assert!(matches!(
        s.begin_capture(S0),
        Err(ServerError::CaptureState { .. })
    ));
    assert!(matches!(
        s.graph_prepare(S0),
        Err(ServerError::CaptureState { .. })
    ));
    let err = read(&mut s, &a, S0).expect_err("read while capturing");
    assert!(matches!(err, ServerError::CaptureState { .. }), "{err}");
    let err = sync(&mut s, S0).expect_err("sync while capturing");
    assert!(matches!(err, ServerError::CaptureState { .. }), "{err}");
    assert!(matches!(
        s.start_profile(S0),
        Err(ServerError::CaptureState { .. })
    ));
    assert!(matches!(
        s.replay(GraphId(1), S0),
        Err(ServerError::CaptureState { .. })
    ));
    // Another stream is not capturing.
    assert_eq!(
        bytes_u32(&read(&mut s, &a, StreamId(2)).expect("other stream")),
        vec![0; 64]
    );
    // A host write cannot be recorded: refused at the call, reported, and
    // its target, which it never touched, stays trusted with its bytes.
    s.write(vec![(a.copy_descriptor(), u32_bytes(&[9; 64]).into())], S0);
    let g = s.end_capture(S0).expect("end");
    let err = s.flush(S0).expect_err("deferred write refusal");
    assert!(
        matches!(err.root_cause(), ServerError::CaptureState { .. }),
        "{err}"
    );
    s.check(vec![a.binding()], S0).expect("untouched, trusted");
    assert_eq!(bytes_u32(&read(&mut s, &a, S0).expect("a")), vec![0; 64]);
    s.replay(g, S0).expect("an empty graph replays");
    let err = s.replay(GraphId(12345), S0).expect_err("unknown");
    assert!(matches!(err, ServerError::UnknownGraph { .. }), "{err}");
}

#[test]
fn a_failed_launch_spoils_the_capture_and_poisons_nothing() {
    let mut s = server();
    let a = upload(&mut s, u32_bytes(&[3; 64]), S0);
    s.begin_capture(S0).expect("begin");
    launch(
        &mut s,
        inc_kernel(),
        CubeCount::Static(u32::MAX, 1, 1),
        &[&a],
        S0,
    );
    let err = s.end_capture(S0).expect_err("spoiled");
    assert!(
        err.to_string()
            .contains("max_compute_workgroups_per_dimension"),
        "{err}"
    );
    // Nothing ran and nothing was written: the bytes are still trusted.
    assert_eq!(bytes_u32(&read(&mut s, &a, S0).expect("read")), vec![3; 64]);
    // The stream is idle again.
    s.begin_capture(S0).expect("capture again");
    s.end_capture(S0).expect("end");
}

#[test]
fn graphs_pin_their_buffers_until_destroyed() {
    let mut s = server();
    let a = upload(&mut s, u32_bytes(&[0; 1 << 16]), S0);
    s.begin_capture(S0).expect("begin");
    launch(&mut s, inc_kernel(), CubeCount::x(1024), &[&a], S0);
    let g = s.end_capture(S0).expect("end");
    let keep = a.clone();
    drop(a);
    s.replay(g, S0).expect("replay");
    drop(keep);
    s.memory_cleanup(S0).expect("cleanup");
    let pinned = s.memory_report(S0).expect("report").bytes_in_use();
    assert_eq!(pinned, 4 << 16, "the graph keeps its buffer");
    s.graph_destroy(g, S0);
    s.memory_cleanup(S0).expect("cleanup");
    let report = s.memory_report(S0).expect("report");
    assert_eq!(report.bytes_in_use(), 0, "unpinned by destroy");
    assert_eq!(report.bytes_reserved(), 0, "and released by cleanup");
}

#[test]
fn a_prepared_capture_allocates_nothing_new() {
    let mut s = server();
    let input = upload(&mut s, u32_bytes(&[1; 4096]), S0);
    let step = |s: &mut TestServer| {
        // A temporary per step, as a real model would make.
        let tmp = alloc(s, 4 * 4096, S0);
        launch(
            s,
            add_u32_kernel(),
            CubeCount::x(64),
            &[&input, &input, &tmp],
            S0,
        );
        launch(s, inc_kernel(), CubeCount::x(64), &[&tmp], S0);
        tmp
    };
    s.graph_prepare(S0).expect("prepare");
    drop(step(&mut s)); // warm-up, freed into the persistent pool
    sync(&mut s, S0).expect("sync");
    let pages_before: u64 = s
        .memory_report(S0)
        .expect("report")
        .pools
        .iter()
        .map(|p| p.pages)
        .sum();
    s.begin_capture(S0).expect("begin");
    let tmp = step(&mut s);
    let g = s.end_capture(S0).expect("end");
    let pages_after: u64 = s
        .memory_report(S0)
        .expect("report")
        .pools
        .iter()
        .map(|p| p.pages)
        .sum();
    assert_eq!(
        pages_before, pages_after,
        "the capture window allocated a page"
    );
    s.replay(g, S0).expect("replay");
    assert_eq!(
        bytes_u32(&read(&mut s, &tmp, S0).expect("read")),
        vec![3; 4096]
    );
}
