//! Profile windows on the real adapter: each method reports itself and
//! resolves, nested windows are accepted and all resolve, misuse is an
//! error, abandoned windows do not grow anything, failures invalidate, the
//! timeline is a Chrome trace.
//!
//! Nothing here compares durations: other tests of this binary run
//! meanwhile, and lavapipe runs their kernels on the same CPU, inside these
//! windows. What a window measures is the benchmarks' business
//! (`cargo xtask bench`).

use crate::common::*;
use compute_runtime::{
    CubeCount, Handle, KernelArguments, LaunchMode, ProfileError, ProfilingToken, Server,
    ServerError, StreamId, TimingMethod,
};
use std::time::Duration;
use wgpu_server::{BindingAccess, WgslKernel};

const SPIN: &str = r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var acc = f32(id.x);
    for (var i = 0u; i < p.n; i = i + 1u) { acc = acc * 0.999 + 1.0; }
    x[id.x] = acc;
}
"#;

fn spin(s: &mut TestServer, x: &Handle, n: u32, stream: StreamId) {
    let kernel = WgslKernel::new(
        "spin",
        SPIN,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let mut p = n.to_le_bytes().to_vec();
    p.resize(16, 0);
    let args = KernelArguments::buffers(vec![x.binding()]).with_scalars(p);
    // SAFETY: 64 workgroups of 64 write x[0..4096], which x holds.
    unsafe {
        s.launch(
            Box::new(kernel),
            CubeCount::x(64),
            args,
            stream,
            LaunchMode::Execute,
        )
    };
}

fn with_timing(method: TimingMethod) -> TestServer {
    wgpu_server::WgpuServerOptions::new()
        .timing(method)
        .open()
        .expect("server")
}

#[test]
fn device_and_system_windows_report_their_method_and_resolve_to_a_nonzero_duration() {
    let mut dev = server();
    let mut sys = with_timing(TimingMethod::System);
    assert_eq!(sys.timing_method(), TimingMethod::System);
    let xs = alloc(&mut sys, 4096 * 4, S0);
    for n in [16, 2_000] {
        let t = sys.start_profile(S0).expect("start");
        spin(&mut sys, &xs, n, S0);
        let d = sys.end_profile(S0, t).expect("end");
        assert_eq!(d.timing_method(), TimingMethod::System);
        let d = futures::executor::block_on(d.resolve()).expect("resolve");
        assert!(d > Duration::ZERO, "system window of zero length");
    }
    if dev.timing_method() != TimingMethod::Device {
        eprintln!("adapter has no timestamp queries: device timing not tested here");
        return;
    }
    let xd = alloc(&mut dev, 4096 * 4, S0);
    for n in [16, 2_000] {
        let t = dev.start_profile(S0).expect("start");
        spin(&mut dev, &xd, n, S0);
        let d = dev.end_profile(S0, t).expect("end");
        assert_eq!(d.timing_method(), TimingMethod::Device);
        let d = futures::executor::block_on(d.resolve()).expect("resolve");
        assert!(d > Duration::ZERO, "device window of zero length");
    }
}

#[test]
fn per_launch_windows_nest_inside_a_larger_window_and_all_resolve() {
    let mut s = server();
    if s.timing_method() != TimingMethod::Device {
        return;
    }
    let x = alloc(&mut s, 4096 * 4, S0);
    let outer = s.start_profile(S0).expect("outer");
    let mut inner = Vec::new();
    for n in [2_000, 4_000, 8_000] {
        let t = s.start_profile_at_launch(S0).expect("at launch");
        spin(&mut s, &x, n, S0);
        inner.push(s.end_profile(S0, t).expect("inner end"));
    }
    let outer = s.end_profile(S0, outer).expect("outer end");
    assert_eq!(outer.timing_method(), TimingMethod::Device);
    let total = futures::executor::block_on(outer.resolve()).expect("outer");
    assert!(total > Duration::ZERO, "outer window of zero length");
    for d in inner {
        assert_eq!(d.timing_method(), TimingMethod::Device);
        let d = futures::executor::block_on(d.resolve()).expect("inner");
        assert!(d > Duration::ZERO, "per-launch window of zero length");
    }
}

#[test]
fn token_misuse_is_a_profile_error() {
    let mut s = server();
    let err = s
        .end_profile(S0, ProfilingToken { id: 12345 })
        .expect_err("unknown token");
    assert!(
        matches!(err, ProfileError::UnknownToken { token: 12345, .. }),
        "{err}"
    );
    // A token belongs to its stream.
    let t = s.start_profile(S0).expect("start");
    let id = t.id;
    let err = s.end_profile(StreamId(9), t).expect_err("other stream");
    assert!(matches!(err, ProfileError::UnknownToken { .. }), "{err}");
    // Ending twice (the same id again) is unknown the second time.
    s.end_profile(S0, ProfilingToken { id }).expect("first end");
    let err = s.end_profile(S0, ProfilingToken { id }).expect_err("twice");
    assert!(matches!(err, ProfileError::UnknownToken { .. }), "{err}");
    if s.timing_method() == TimingMethod::Device {
        // An at-launch window with no launch, and two armed at once.
        let t = s.start_profile_at_launch(S0).expect("armed");
        let err = s.start_profile_at_launch(S0).expect_err("two armed");
        assert!(matches!(err, ServerError::ProfileState { .. }), "{err}");
        let err = s.end_profile(S0, t).expect_err("no launch");
        assert!(
            matches!(err, ProfileError::Server(ServerError::ProfileState { .. })),
            "{err}"
        );
    }
    // Abandoning an unknown token is harmless.
    s.abandon_profile(S0, ProfilingToken { id: 999_999 });
    assert_eq!(s.open_profile_windows(), 0);
}

#[test]
fn abandoned_windows_do_not_grow_the_pool() {
    let mut s = server();
    for i in 0..100_000u64 {
        let stream = StreamId(i % 3);
        let t = if i % 2 == 0 {
            s.start_profile(stream)
        } else {
            s.start_profile_at_launch(stream)
                .or_else(|_| s.start_profile(stream))
        }
        .expect("start");
        s.abandon_profile(stream, t);
    }
    assert_eq!(s.open_profile_windows(), 0);
    assert!(
        s.profile_slots_created() <= 2,
        "{} slots for 100,000 abandoned windows",
        s.profile_slots_created()
    );
    sync(&mut s, S0).expect("sync");
}

#[test]
fn a_failure_inside_a_window_invalidates_it() {
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[0; 64]), S0);
    let t = s.start_profile(S0).expect("start");
    let other = s.start_profile(StreamId(5)).expect("other stream");
    launch(
        &mut s,
        inc_kernel(),
        CubeCount::Static(u32::MAX, 1, 1),
        &[&h],
        S0,
    );
    let err = s.end_profile(S0, t).expect_err("invalidated");
    let ProfileError::Invalidated { cause } = &err else {
        panic!("expected Invalidated, got {err}");
    };
    assert!(
        matches!(cause, ServerError::LimitExceeded { .. }),
        "{cause}"
    );
    // The window on another stream is untouched.
    let d = s.end_profile(StreamId(5), other).expect("other window");
    futures::executor::block_on(d.resolve()).expect("resolves");
}

#[test]
fn timeline_is_a_chrome_trace_with_one_slice_per_launch() {
    let mut s = server();
    if s.timing_method() != TimingMethod::Device {
        assert!(s.start_timeline().is_err(), "no timestamps: unsupported");
        return;
    }
    let a = upload(&mut s, u32_bytes(&[0; 4096]), StreamId(1));
    let b = upload(&mut s, u32_bytes(&[0; 4096]), StreamId(2));
    s.start_timeline().expect("timeline");
    for _ in 0..5 {
        launch(
            &mut s,
            inc_kernel(),
            compute_runtime::CubeCount::x(64),
            &[&a],
            StreamId(1),
        );
        launch(
            &mut s,
            inc_kernel(),
            compute_runtime::CubeCount::x(64),
            &[&b],
            StreamId(2),
        );
    }
    let t = futures::executor::block_on(s.finish_timeline()).expect("finish");
    assert_eq!(t.events.len(), 10);
    let json: serde_json::Value = serde_json::from_str(&t.to_chrome_trace()).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(slices.len(), 10, "one slice per launch");
    assert!(
        slices
            .iter()
            .all(|e| e["name"] == "inc" && e["dur"].as_f64().is_some())
    );
    let tracks: std::collections::BTreeSet<_> = slices.iter().map(|e| e["tid"].as_u64()).collect();
    assert_eq!(tracks.len(), 2, "one track per stream");
    let names = events.iter().filter(|e| e["ph"] == "M").count();
    assert_eq!(names, 2);
    // Launches after the timeline ends are not stamped; results stay right.
    launch(
        &mut s,
        inc_kernel(),
        compute_runtime::CubeCount::x(64),
        &[&a],
        StreamId(1),
    );
    assert_eq!(
        bytes_u32(&read(&mut s, &a, StreamId(1)).expect("read")),
        vec![6; 4096]
    );
}

/// A device-timed server, or `None` (with a message) on an adapter without
/// timestamp queries.
fn device_timed() -> Option<TestServer> {
    let s = server();
    if s.timing_method() != TimingMethod::Device {
        eprintln!("adapter has no timestamp queries: device windows not tested here");
        return None;
    }
    Some(s)
}

#[test]
fn end_profile_submits_nothing_and_the_window_resolves_when_awaited() {
    let Some(mut s) = device_timed() else { return };
    let x = alloc(&mut s, 4096 * 4, S0);
    sync(&mut s, S0).expect("sync");
    let t = s.start_profile(S0).expect("start");
    spin(&mut s, &x, 64, S0);
    let before = s.queue_submit_count();
    let d = s.end_profile(S0, t).expect("end");
    assert_eq!(s.queue_submit_count(), before, "end_profile submitted");
    // Nothing else submits the stream: the future does.
    let d = futures::executor::block_on(d.resolve()).expect("resolve");
    assert!(d > Duration::ZERO);
    assert_eq!(
        s.queue_submit_count(),
        before + 1,
        "the window's batch went once"
    );
    sync(&mut s, S0).expect("sync after");
}

#[test]
fn a_window_resolves_with_the_streams_next_submit() {
    let Some(mut s) = device_timed() else { return };
    let x = alloc(&mut s, 4096 * 4, S0);
    let t = s.start_profile(S0).expect("start");
    spin(&mut s, &x, 64, S0);
    let d = s.end_profile(S0, t).expect("end");
    spin(&mut s, &x, 64, S0);
    sync(&mut s, S0).expect("sync");
    let count = s.queue_submit_count();
    let d = futures::executor::block_on(d.resolve()).expect("resolve");
    assert!(d > Duration::ZERO);
    assert_eq!(
        s.queue_submit_count(),
        count,
        "the sync took the window's batch"
    );
}

#[test]
fn a_parked_window_keeps_its_place_before_later_writes_and_launches() {
    let Some(mut s) = device_timed() else { return };
    for resolve_first in [false, true] {
        let x = upload(&mut s, u32_bytes(&[0; 256]), S0);
        let t = s.start_profile(S0).expect("start");
        launch(&mut s, inc_kernel(), CubeCount::x(4), &[&x], S0);
        let d = s.end_profile(S0, t).expect("end");
        // The window's future submits its batch on another thread, before
        // or while the host write and the next launch go in behind it.
        let waiter = std::thread::spawn(move || futures::executor::block_on(d.resolve()));
        if resolve_first {
            waiter.join().expect("thread").expect("resolve");
            s.write(
                vec![(x.copy_descriptor(), u32_bytes(&[10; 256]).into())],
                S0,
            );
            launch(&mut s, inc_kernel(), CubeCount::x(4), &[&x], S0);
        } else {
            s.write(
                vec![(x.copy_descriptor(), u32_bytes(&[10; 256]).into())],
                S0,
            );
            launch(&mut s, inc_kernel(), CubeCount::x(4), &[&x], S0);
            waiter.join().expect("thread").expect("resolve");
        }
        let got = bytes_u32(&read(&mut s, &x, S0).expect("read"));
        assert_eq!(got, vec![11; 256], "resolved first: {resolve_first}");
    }
}

#[test]
fn windows_dropped_unresolved_leave_the_stream_intact() {
    let Some(mut s) = device_timed() else { return };
    let x = upload(&mut s, u32_bytes(&[0; 256]), S0);
    for _ in 0..300 {
        let t = s.start_profile(S0).expect("start");
        launch(&mut s, inc_kernel(), CubeCount::x(4), &[&x], S0);
        drop(s.end_profile(S0, t).expect("end"));
    }
    assert_eq!(
        bytes_u32(&read(&mut s, &x, S0).expect("read")),
        vec![300; 256]
    );
    assert_eq!(s.open_profile_windows(), 0);
}

#[test]
fn server_calls_inside_a_callers_executor_do_not_panic() {
    // Error scopes and waits inside a call used to run a nested executor.
    futures::executor::block_on(async {
        let mut s = server();
        let x = upload(&mut s, u32_bytes(&[1; 64]), S0);
        launch(&mut s, inc_kernel(), CubeCount::x(1), &[&x], S0);
        let got = s.read(vec![x.copy_descriptor()], S0).await.expect("read");
        assert_eq!(bytes_u32(&got[0]), vec![2; 64]);
        let mut sys = with_timing(TimingMethod::System);
        let t = sys.start_profile(S0).expect("start");
        let d = sys.end_profile(S0, t).expect("end");
        d.resolve().await.expect("system window");
        if s.timing_method() == TimingMethod::Device {
            let t = s.start_profile(S0).expect("start");
            launch(&mut s, inc_kernel(), CubeCount::x(1), &[&x], S0);
            let d = s.end_profile(S0, t).expect("end");
            d.resolve().await.expect("device window");
        }
    });
}
