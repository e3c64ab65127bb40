//! `memory.*`: reserve + free on a populated pool, and the peak-to-live
//! ratio of the documented allocation trace.

use std::cell::RefCell;
use std::time::Instant;

use compute_runtime::{Handle, ManagedMemoryHandle, Server, ServerError};

use crate::harness::{Options, STREAM, alloc, interleaved};
use crate::report::Figure;
use crate::{S, raw};

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    // Reserve + free of 1 MiB with 10,000 live handles of mixed small sizes.
    let live: Vec<Handle> = (0..10_000u64)
        .map(|i| alloc(s, 256 + (i % 64) * 256))
        .collect::<Result<_, _>>()?;
    let device = s.device().clone();
    let n = if o.quick { 2_000 } else { 10_000 };
    let cell = RefCell::new(&mut *s);
    let (v, b) = interleaved(
        o.rounds(3, 9),
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..n {
                let m = ManagedMemoryHandle::new();
                let _ = s.initialize_memory(m.clone(), 1 << 20, STREAM);
                drop(m); // freed at the next call's drain
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        },
        || {
            let t = Instant::now();
            for _ in 0..n {
                drop(raw::buffer(
                    &device,
                    1 << 20,
                    wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                ));
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        },
    );
    out.push(Figure::new(
        "memory.reserve_free_ns",
        v,
        "ns per reserve+free (lower is better)",
        "raw.create_buffer_drop_ns",
        b,
    ));
    drop(live);

    let ratio = compute_testkit::trace::peak_trace_ratio(
        compute_testkit::trace::TRACE_SEED,
        compute_testkit::trace::TRACE_OPS,
    );
    out.push(Figure::new(
        "memory.peak_reserved_over_peak_live",
        ratio,
        "ratio (lower is better; target <= 1.25)",
        "ideal (1.0)",
        1.0,
    ));
    Ok(())
}
