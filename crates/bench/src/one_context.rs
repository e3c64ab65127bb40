//! `probe.one_context_all_reduce_{4kib_us,64mib_busbw_gbps}` (only when
//! asked, `--filter probe.one_context`): the raw loop with every rank on
//! one device (one GPU context, `RawShared::one_context`) against the raw
//! loop over shared memory between the ranks' own devices, in the same
//! run. On NVIDIA separate devices of one GPU are separate contexts the
//! GPU time-slices: this is what ranks sharing one device could reach.

use std::time::Duration;

use crate::harness::{Options, gbps, interleaved};
use crate::raw_collective::RawOp;
use crate::raw_shared::RawShared;
use crate::report::Figure;

/// Bytes of the small call.
const SMALL: u64 = 4096;

/// The two figures on `devices` (one per rank), each rank's `src` of
/// `max` bytes filled by `fill`; none where the devices share no memory.
pub fn probe(
    devices: &[(wgpu::Device, wgpu::Queue)],
    max: u64,
    fill: impl Fn(usize) -> Vec<u8> + Copy,
    o: &Options,
    out: &mut Vec<Figure>,
) {
    let (Some(first), Some(mut shared)) = (devices.first(), RawShared::new(devices, max, fill))
    else {
        return;
    };
    let n = devices.len();
    let mut one = RawShared::one_context(first, n, max, fill);
    // nccl-tests' all-reduce bus factor.
    let factor = 2.0 * (n as f64 - 1.0) / n as f64;
    for (size, name, baseline) in [
        (
            SMALL,
            "probe.one_context_all_reduce_4kib_us",
            "raw.shared_all_reduce_4kib_us",
        ),
        (
            max,
            "probe.one_context_all_reduce_64mib_busbw_gbps",
            "raw.shared_all_reduce_64mib_busbw_gbps",
        ),
    ] {
        let report = |d: Duration| match size {
            SMALL => d.as_secs_f64() * 1e6,
            _ => gbps(size, d) * factor,
        };
        one.run(RawOp::AllReduceSum, size);
        shared.run(RawOp::AllReduceSum, size);
        let (v, b) = interleaved(
            o.rounds(5, 21),
            || report(one.run(RawOp::AllReduceSum, size)),
            || report(shared.run(RawOp::AllReduceSum, size)),
        );
        let unit = "2 ranks, f32 sum, raw: every rank on one device (us, or GB/s busbw)";
        out.push(Figure::new(name, v, unit, baseline, b));
    }
}
