//! `graph.*`: replaying a recorded graph of launches, against the raw loop
//! that encodes the same dispatches.

use std::cell::RefCell;
use std::time::Instant;

use compute_runtime::{Bytes, CubeCount, KernelArguments, LaunchMode, Server, ServerError};
use wgpu_server::{BindingAccess, WgslKernel};

use crate::harness::{Options, STREAM, alloc, interleaved, sync, us};
use crate::report::Figure;
use crate::shaders::TINY;
use crate::{S, raw};

/// Launches in the recorded graph.
const LAUNCHES: usize = 1000;

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let h = alloc(s, 256)?;
    s.write(
        vec![(h.copy_descriptor(), Bytes::from(vec![0u8; 256]))],
        STREAM,
    );
    let kernel = WgslKernel::new(
        "tiny",
        TINY,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let launch_all = |s: &mut S| {
        for _ in 0..LAUNCHES {
            let args = KernelArguments::buffers(vec![h.binding()]);
            // SAFETY: the kernel bound-checks with arrayLength.
            unsafe {
                s.launch(
                    Box::new(kernel.clone()),
                    CubeCount::x(1),
                    args,
                    STREAM,
                    LaunchMode::Execute,
                )
            };
        }
    };
    s.graph_prepare(STREAM)?;
    launch_all(s); // warm-up: compiles, creates the bind group
    sync(s)?;
    s.begin_capture(STREAM)?;
    launch_all(s);
    let graph = s.end_capture(STREAM)?;
    sync(s)?;

    let device = s.device().clone();
    let queue = s.queue().clone();
    let (pipeline, group) = raw::tiny(&device);
    let cell = RefCell::new(&mut *s);
    let replay = |with_sync: bool| -> f64 {
        let mut s = cell.borrow_mut();
        let t = Instant::now();
        let _ = s.replay(graph, STREAM);
        let _ = s.flush(STREAM);
        if with_sync {
            let _ = sync(&mut s);
        }
        let e = us(t.elapsed(), LAUNCHES);
        if !with_sync {
            let _ = sync(&mut s);
        }
        e
    };
    let raw =
        |with_wait: bool| raw::enqueue_us(&device, &queue, &pipeline, &group, LAUNCHES, with_wait);
    let rounds = o.rounds(5, 15);
    let (v, b) = interleaved(rounds, || replay(false), || raw(false));
    out.push(Figure::new(
        "graph.replay_us",
        v,
        "us/launch, replay + flush of 1000 recorded launches (lower is better)",
        "raw.enqueue_us",
        b,
    ));
    let (v, b) = interleaved(rounds, || replay(true), || raw(true));
    out.push(Figure::new(
        "graph.replay_e2e_us",
        v,
        "us/launch, replay + flush + sync (lower is better)",
        "raw.e2e_us",
        b,
    ));
    cell.borrow_mut().graph_destroy(graph, STREAM);
    Ok(())
}
