//! `launch.*` and `sync.*`: the per-launch CPU cost of the launch path, and
//! a sync with nothing pending.

use std::cell::RefCell;
use std::time::Instant;

use compute_runtime::{Bytes, CubeCount, KernelArguments, LaunchMode, Server, ServerError};
use wgpu_server::{BindingAccess, WgslKernel};

use crate::harness::{Options, STREAM, alloc, interleaved, sync, us};
use crate::report::Figure;
use crate::shaders::TINY;
use crate::{S, raw};

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let launches = 10_000;
    let rounds = o.rounds(3, 9);
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
    let device = s.device().clone();
    let queue = s.queue().clone();
    let (pipeline, group) = raw::tiny(&device);
    sync(s)?;

    let ours = |s: &mut S, with_sync: bool| -> f64 {
        let t = Instant::now();
        for _ in 0..launches {
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
        let _ = s.flush(STREAM);
        if with_sync {
            let _ = sync(s);
        }
        let e = us(t.elapsed(), launches);
        if !with_sync {
            let _ = sync(s);
        }
        e
    };
    let raw =
        |with_wait: bool| raw::enqueue_us(&device, &queue, &pipeline, &group, launches, with_wait);
    let cell = RefCell::new(&mut *s);
    let (v, b) = interleaved(
        rounds,
        || ours(&mut cell.borrow_mut(), false),
        || raw(false),
    );
    out.push(Figure::new(
        "launch.enqueue_us",
        v,
        "us/launch (lower is better)",
        "raw.enqueue_us",
        b,
    ));
    let (v, b) = interleaved(rounds, || ours(&mut cell.borrow_mut(), true), || raw(true));
    out.push(Figure::new(
        "launch.e2e_us",
        v,
        "us/launch (lower is better)",
        "raw.e2e_us",
        b,
    ));
    Ok(())
}

/// `sync.roundtrip_us`: a sync with nothing pending.
pub fn sync_figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let n = if o.quick { 200 } else { 1000 };
    let rounds = o.rounds(3, 9);
    let device = s.device().clone();
    let cell = RefCell::new(s);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..n {
                let _ = sync(&mut s);
            }
            us(t.elapsed(), n)
        },
        || {
            let t = Instant::now();
            for _ in 0..n {
                raw::sync_poll(&device);
            }
            us(t.elapsed(), n)
        },
    );
    out.push(Figure::new(
        "sync.roundtrip_us",
        v,
        "us (lower is better)",
        "raw.sync_roundtrip_us",
        b,
    ));
    Ok(())
}
