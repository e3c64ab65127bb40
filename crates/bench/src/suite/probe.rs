//! `probe.*` (only with `--filter probe`): the variants of
//! `crate::probe_wgsl`, each on the raw side of its figure's job, so the
//! IR kernel of the figure runs beside it in the same run. A probe's value
//! is the variant's; its baseline the IR kernel's.

use compute_ir::IrError;

use super::Measured;
use super::coop::{matmul_raw, matmul_with};
use super::jobs::{histogram_with, scan_with};
use crate::probe_wgsl as v;

/// The probes this adapter can run.
pub fn all(cpu: bool, subgroups: bool, matrices: bool) -> Result<Vec<Measured>, IrError> {
    let histograms = [
        (
            "probe.histogram_private_counters_gbps",
            v::PRIVATE_COUNTERS_HISTOGRAM.to_string(),
        ),
        ("probe.histogram_4_copies_gbps", v::sub_histograms(4)),
        ("probe.histogram_8_copies_gbps", v::sub_histograms(8)),
        ("probe.histogram_32_copies_gbps", v::sub_histograms(32)),
        ("probe.histogram_padded_8kib_gbps", v::padded_histogram(8)),
        ("probe.histogram_padded_16kib_gbps", v::padded_histogram(16)),
        ("probe.histogram_padded_24kib_gbps", v::padded_histogram(24)),
        ("probe.histogram_padded_31kib_gbps", v::padded_histogram(31)),
        ("probe.histogram_32_lanes_gbps", v::lane_histograms(false)),
        (
            "probe.histogram_32_lanes_packed_gbps",
            v::lane_histograms(true),
        ),
    ];
    let mut out = histograms
        .into_iter()
        .map(|(name, src)| histogram_with(cpu, name, src))
        .collect::<Result<Vec<_>, _>>()?;
    if subgroups {
        for (name, per, limit) in [
            ("probe.scan_single_pass_4_gbps", 4, 256),
            ("probe.scan_single_pass_8_gbps", 8, 256),
            ("probe.scan_single_pass_4_limit_16_gbps", 4, 16),
        ] {
            out.push(scan_with(cpu, name, Some((per, limit)))?);
        }
    }
    if matrices {
        let coop = [
            (
                "probe.coop_b_from_storage_tflops",
                v::coop_matmul_b_global(),
            ),
            (
                "probe.coop_matrix_staged_tflops",
                v::coop_matmul_matrix_staged(),
            ),
            ("probe.coop_unstaged_tflops", v::coop_matmul_global()),
            (
                "probe.coop_prefetched_tflops",
                v::coop_matmul_pipelined(false),
            ),
            (
                "probe.coop_prefetched_double_buffered_tflops",
                v::coop_matmul_pipelined(true),
            ),
        ];
        for (name, src) in coop {
            out.push(matmul_with(name, src)?);
        }
        for (name, v) in crate::probe_coop::variants() {
            out.push(matmul_raw(name, v.wgsl(), Some(v.groups(8192)))?);
        }
    }
    Ok(out)
}
