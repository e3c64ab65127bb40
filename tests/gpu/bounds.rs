//! What a long-running program makes the server keep stays bounded: stream
//! state however many stream ids it uses, the pool of a prepared stream
//! that never captures, a timeline however many launches it sees.

use crate::common::*;
use compute_runtime::{CubeCount, Handle, Server, StreamId};
use compute_stream::MAX_IDLE_STREAMS;
use wgpu_server::{BindingAccess, WgslKernel};

fn fill_kernel() -> WgslKernel {
    WgslKernel::new(
        "fill7",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n\
             if (id.x < arrayLength(&x)) { x[id.x] = 7u; }\n\
         }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
}

/// A fresh stream per launch, each left with its launch pending (on bytes
/// of its own, so nothing else submits it): the server keeps a bounded
/// number of streams, and every launch runs.
#[test]
fn twenty_thousand_fresh_streams_with_one_pending_launch_each_stay_bounded() {
    const STREAMS: u64 = 20_000;
    const WORDS: usize = 16;
    let mut s = server();
    let mut handles: Vec<Handle> = Vec::with_capacity(STREAMS as usize);
    for i in 0..STREAMS {
        let h = alloc(&mut s, 4 * WORDS as u64, S0);
        launch(
            &mut s,
            fill_kernel(),
            CubeCount::x(1),
            &[&h],
            StreamId(1 + i),
        );
        handles.push(h);
        if i % 1000 == 999 {
            let kept = s.stream_ids().len();
            assert!(kept <= 2 * MAX_IDLE_STREAMS + 1, "{kept} streams kept");
        }
    }
    for chunk in handles.chunks(1000) {
        let read = s.read(chunk.iter().map(Handle::copy_descriptor).collect(), S0);
        for bytes in futures::executor::block_on(read).expect("read") {
            assert_eq!(bytes_u32(&bytes), vec![7; WORDS], "a launch was lost");
        }
    }
    sync(&mut s, S0).expect("no failure");
}

/// A prepared stream that never captures allocates persistently; a loop of
/// allocate / use / free whose sizes drift keeps a bounded pool (a page per
/// size class seen, four per doubling), not a page per size.
#[test]
fn a_prepared_stream_that_never_captures_keeps_its_pool_bounded() {
    let mut s = server();
    let prepared = StreamId(1);
    s.graph_prepare(prepared).expect("prepare");
    let mut rng = compute_testkit::Rng::new(7);
    let max_words = 2_000;
    for _ in 0..400 {
        let words = 1 + rng.below(max_words) as usize;
        let h = alloc(&mut s, 4 * words as u64, prepared);
        launch(&mut s, fill_kernel(), CubeCount::x(1), &[&h], prepared);
        drop(h);
    }
    let report = s.memory_report(prepared).expect("report");
    let classes = 4 * u64::from((4 * max_words).ilog2() + 1);
    assert!(
        report.pages() <= classes + 1,
        "{} pages kept for sizes of {classes} classes: {report}",
        report.pages()
    );
    sync(&mut s, prepared).expect("no failure");
}

/// A timeline records at most its capacity: the newest launches past it
/// are dropped (not stamped) and counted in the timeline; what it keeps per
/// launch is small (stamps share query sets, 2,048 launches to a set; no
/// profile slot each).
#[test]
fn a_timeline_keeps_at_most_its_capacity_and_counts_what_it_dropped() {
    let mut s = server();
    if s.timing_method() != compute_runtime::TimingMethod::Device {
        assert!(s.start_timeline().is_err(), "no timestamps: unsupported");
        return;
    }
    let a = upload(&mut s, u32_bytes(&[0; 64]), StreamId(1));
    let b = upload(&mut s, u32_bytes(&[0; 64]), StreamId(2));
    let slots = s.profile_slots_created();
    s.start_timeline_with_capacity(5_000).expect("timeline");
    for i in 0..6_000 {
        let (h, stream) = if i % 2 == 0 { (&a, 1) } else { (&b, 2) };
        launch(
            &mut s,
            inc_kernel(),
            CubeCount::x(1),
            &[h],
            StreamId(stream),
        );
    }
    assert!(s.timeline_query_sets() <= 3, "5,000 launches in 3 sets");
    assert_eq!(s.profile_slots_created(), slots, "no slot per launch");
    let t = futures::executor::block_on(s.finish_timeline()).expect("finish");
    assert_eq!((t.events.len(), t.dropped), (5_000, 1_000));
    assert!(
        t.events
            .iter()
            .all(|e| e.kernel == "inc" && e.workgroups == "(1, 1, 1)")
    );
    let first: Vec<u64> = t.events.iter().take(4).map(|e| e.stream.0).collect();
    assert_eq!(first, [1, 2, 1, 2], "the oldest are kept, in order");
    for h in [&a, &b] {
        let got = bytes_u32(&read(&mut s, h, StreamId(1)).expect("read"));
        assert_eq!(got, vec![3_000; 64], "every launch ran, stamped or not");
    }
    // A timeline that records nothing.
    s.start_timeline().expect("timeline");
    let t = futures::executor::block_on(s.finish_timeline()).expect("finish");
    assert_eq!((t.events.len(), t.dropped), (0, 0));
}
