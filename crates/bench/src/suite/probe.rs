//! `probe.*` (only with `--filter probe`): the variants of
//! `crate::probe_wgsl`, each on the raw side of its figure's job, so the
//! IR kernel of the figure runs beside it in the same run. A probe's value
//! is the variant's; its baseline the IR kernel's.

use compute_ir::IrError;

use super::Measured;
use super::coop::matmul_with;
use super::jobs::histogram_with;
use crate::probe_wgsl as v;

/// The probes this adapter can run.
pub fn all(cpu: bool, matrices: bool) -> Result<Vec<Measured>, IrError> {
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
    ];
    let mut out = histograms
        .into_iter()
        .map(|(name, src)| histogram_with(cpu, name, src))
        .collect::<Result<Vec<_>, _>>()?;
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
    }
    Ok(out)
}
