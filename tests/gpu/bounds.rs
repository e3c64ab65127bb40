//! What a long-running program makes the server keep stays bounded: stream
//! state, however many stream ids it uses.

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
