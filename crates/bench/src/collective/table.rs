//! The nccl-tests-like table of `collective.*`: every collective on the
//! ranks at sizes from 4 KiB up, time, algbw, busbw and wrong elements per
//! row (see the parent module's doc).

use compute_runtime::ServerError;
use wgpu_server::testing::collective_on_device;

use super::{GIB, MIB, Op, Ranks};
use std::time::Instant;

use crate::harness::{Options, gbps, median};

/// The table's sizes: 4 KiB to 1 GiB (16 MiB quick), x4 steps.
pub(super) fn sizes(o: &Options) -> Vec<u64> {
    let max = if o.quick { 16 * MIB } else { GIB };
    std::iter::successors(Some(4096u64), |s| Some(s * 4))
        .take_while(|s| *s <= max)
        .collect()
}

/// Warm-up and timed rounds for a row of `size` bytes.
fn iterations(o: &Options, size: u64) -> (usize, usize) {
    if o.quick {
        (1, (64 * MIB / size).clamp(2, 5) as usize)
    } else {
        let warmup = if size >= 16 * MIB { 1 } else { 2 };
        (warmup, (512 * MIB / size).clamp(2, 20) as usize)
    }
}

/// The table for `ranks`, one block per collective, printed as it runs.
pub(super) fn table(ranks: &mut Ranks, o: &Options) -> Result<(), ServerError> {
    let n = ranks.n();
    let path = match collective_on_device(&ranks.servers[0], &ranks.ids) {
        Some(true) => "on the devices from 256 KiB per rank, host-staged below",
        _ => "host-staged",
    };
    for op in Op::ALL {
        println!(
            "\n# {} on {n} ranks ({path}; one thread drives every rank)",
            op.name()
        );
        println!(
            "# {:>10} {:>10} {:>6} {:>6} {:>12} {:>12} {:>12} {:>7}",
            "size", "count", "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"
        );
        for size in sizes(o) {
            let (warmup, iters) = iterations(o, size);
            let (_, dst_len) = op.lens(size, n as u64);
            ranks.reset_dst(dst_len)?;
            for _ in 0..warmup {
                ranks.round(op, size)?;
            }
            let mut times = Vec::with_capacity(iters);
            for _ in 0..iters {
                let t = Instant::now();
                ranks.round(op, size)?;
                times.push(t.elapsed().as_secs_f64());
            }
            let time = std::time::Duration::from_secs_f64(median(times));
            let wrong = ranks.wrong(op, size)?;
            let algbw = gbps(size, time);
            println!(
                "  {:>10} {:>10} {:>6} {:>6} {:>12.1} {:>12.3} {:>12.3} {:>7}",
                size,
                size / 4,
                "float",
                op.redop(),
                time.as_secs_f64() * 1e6,
                algbw,
                algbw * op.bus_factor(n),
                wrong
            );
        }
    }
    Ok(())
}
