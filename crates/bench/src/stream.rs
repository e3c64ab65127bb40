//! `stream.*`: launches alternating between two streams, and the CPU the
//! server's own threads spend while a `sync` waits.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use compute_runtime::{
    Bytes, CubeCount, KernelArguments, LaunchMode, Server, ServerError, StreamId,
};
use wgpu_server::{BindingAccess, WgslKernel};

use crate::harness::{Options, STREAM, alloc, interleaved, median, sync, us};
use crate::report::Figure;
use crate::shaders::{SHARED_COPY, SPIN};
use crate::{S, raw};

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    cross_stream(s, o, out)?;
    idle_wait(s, o, out)
}

/// Launches alternate between two streams that read one shared input and
/// write their own outputs (no hazard, so no forced submits); the baseline
/// is the raw single-pass loop of `launch.enqueue_us`.
fn cross_stream(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let launches = 10_000;
    let shared = alloc(s, 256)?;
    let outs = [alloc(s, 256)?, alloc(s, 256)?];
    s.write(
        vec![(shared.copy_descriptor(), Bytes::from(vec![0u8; 256]))],
        STREAM,
    );
    let kernel = WgslKernel::new(
        "shared_copy",
        SHARED_COPY,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    );
    let device = s.device().clone();
    let queue = s.queue().clone();
    let (pipeline, group) = raw::tiny(&device);
    sync(s)?;
    let cell = RefCell::new(&mut *s);
    let (v, b) = interleaved(
        o.rounds(3, 9),
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for i in 0..launches {
                let stream = StreamId(1 + (i % 2) as u64);
                let args = KernelArguments::buffers(vec![shared.binding(), outs[i % 2].binding()]);
                // SAFETY: the kernel bound-checks with arrayLength.
                unsafe {
                    s.launch(
                        Box::new(kernel.clone()),
                        CubeCount::x(1),
                        args,
                        stream,
                        LaunchMode::Execute,
                    )
                };
            }
            let _ = s.flush(StreamId(1));
            let _ = s.flush(StreamId(2));
            let e = us(t.elapsed(), launches);
            let _ = futures::executor::block_on(s.sync(vec![], StreamId(1)));
            let _ = futures::executor::block_on(s.sync(vec![], StreamId(2)));
            e
        },
        || raw::enqueue_us(&device, &queue, &pipeline, &group, launches, false),
    );
    out.push(Figure::new(
        "stream.cross_stream_enqueue_us",
        v,
        "us/launch (lower is better)",
        "raw.enqueue_us",
        b,
    ));
    Ok(())
}

/// CPU nanoseconds of this process's own threads named in `names` (and the
/// calling thread), from /proc: the driver's threads are left out, since on
/// a CPU adapter they are the "GPU".
fn own_cpu_ns(names: &[&str]) -> Option<u64> {
    let field = |path: std::path::PathBuf| -> Option<u64> {
        std::fs::read_to_string(path)
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let mut total = field("/proc/thread-self/schedstat".into())?;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if names.iter().any(|n| comm.trim() == *n) {
            total += field(task.path().join("schedstat")).unwrap_or(0);
        }
    }
    Some(total)
}

/// CPU the server's own threads (caller + poller) spend while a sync waits
/// on ~100 ms of GPU work.
fn idle_wait(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let x = alloc(s, 64 * 4 * 1024)?;
    let spin = WgslKernel::new(
        "spin",
        SPIN,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let mut run_spin = |n: u32| -> Duration {
        let mut p = n.to_le_bytes().to_vec();
        p.resize(16, 0);
        let args = KernelArguments::buffers(vec![x.binding()]).with_scalars(p);
        let t = Instant::now();
        // SAFETY: the kernel writes x[id.x] for 1024 workgroups of 64, which x holds.
        unsafe {
            s.launch(
                Box::new(spin.clone()),
                CubeCount::x(1024),
                args,
                STREAM,
                LaunchMode::Execute,
            )
        };
        let _ = sync(s);
        t.elapsed()
    };
    // Scale the loop count until one launch takes ~100 ms.
    let mut n = 1u32 << 8;
    loop {
        let d = run_spin(n);
        if d >= Duration::from_millis(25) || n >= 1 << 30 {
            let scale = 100.0 / (d.as_secs_f64() * 1e3).max(1e-3);
            n = ((f64::from(n) * scale) as u32).max(1);
            break;
        }
        n = n.saturating_mul(4);
    }
    // One more pass now that everything is warm.
    let d = run_spin(n);
    n = ((f64::from(n) * 100.0 / (d.as_secs_f64() * 1e3).max(1e-3)) as u32).max(1);
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    for _ in 0..o.rounds(2, 5) {
        let before = own_cpu_ns(&["wgpu-server-pol"]);
        let d = run_spin(n);
        let after = own_cpu_ns(&["wgpu-server-pol"]);
        if let (Some(a), Some(b)) = (before, after) {
            cpu.push(b.saturating_sub(a) as f64 / 1e6);
            wall.push(d.as_secs_f64() * 1e3);
        }
    }
    if !cpu.is_empty() {
        out.push(Figure::new(
            "stream.idle_wait_cpu_ms",
            median(cpu),
            "ms CPU of the server's threads (lower is better)",
            "wall_ms_waited",
            median(wall),
        ));
    }
    Ok(())
}
