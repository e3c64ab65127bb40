//! `probe.*` (only with `--filter probe`): the variants of
//! `crate::probe_wgsl`, `crate::probe_coop` and `crate::probe_scan`, each
//! on the raw side of its figure's job, so the IR kernel of the figure
//! runs beside it in the same run. A probe's value is the variant's; its
//! baseline the IR kernel's.

use compute_ir::IrError;

use super::Measured;
use super::coop::{matmul_raw, matmul_with};
use super::jobs::histogram_with;
use super::scan::{ScanRaw, scan_with};
use crate::probe_wgsl as v;

type Make = Box<dyn Fn() -> Result<Measured, IrError>>;
/// A variant's figure name and the generator of its WGSL.
type Source = (&'static str, fn() -> String);

/// The probes this adapter can run that `wants` names; each job is built
/// only when wanted (a coop job alone generates 512 MiB of inputs).
pub fn all(
    cpu: bool,
    subgroups: bool,
    matrices: bool,
    wants: &dyn Fn(&str) -> bool,
) -> Result<Vec<Measured>, IrError> {
    let mut makers: Vec<(&'static str, Make)> = Vec::new();
    let histograms: [Source; 10] = [
        ("probe.histogram_private_counters_gbps", || {
            v::PRIVATE_COUNTERS_HISTOGRAM.to_string()
        }),
        ("probe.histogram_4_copies_gbps", || v::sub_histograms(4)),
        ("probe.histogram_8_copies_gbps", || v::sub_histograms(8)),
        ("probe.histogram_32_copies_gbps", || v::sub_histograms(32)),
        ("probe.histogram_padded_8kib_gbps", || {
            v::padded_histogram(8)
        }),
        ("probe.histogram_padded_16kib_gbps", || {
            v::padded_histogram(16)
        }),
        ("probe.histogram_padded_24kib_gbps", || {
            v::padded_histogram(24)
        }),
        ("probe.histogram_padded_31kib_gbps", || {
            v::padded_histogram(31)
        }),
        ("probe.histogram_32_lanes_gbps", || {
            v::lane_histograms(false)
        }),
        ("probe.histogram_32_lanes_packed_gbps", || {
            v::lane_histograms(true)
        }),
    ];
    for (name, src) in histograms {
        makers.push((name, Box::new(move || histogram_with(cpu, name, src()))));
    }
    if subgroups {
        let three: Make = Box::new(move || {
            scan_with(
                cpu,
                "probe.scan_three_launches_gbps",
                ScanRaw::ThreeLaunches,
            )
        });
        makers.push(("probe.scan_three_launches_gbps", three));
        let copy: Make = Box::new(move || scan_with(cpu, "probe.scan_copy_gbps", ScanRaw::Copy));
        makers.push(("probe.scan_copy_gbps", copy));
        use crate::probe_scan::LookBack::{Serial, Skipped, Window};
        for (name, per, limit, walk) in [
            ("probe.scan_tiles_alone_gbps", 16, 256, Skipped),
            ("probe.scan_serial_look_back_gbps", 16, 256, Serial),
            ("probe.scan_single_pass_8_gbps", 8, 256, Window),
            ("probe.scan_single_pass_32_gbps", 32, 256, Window),
            ("probe.scan_single_pass_16_limit_16_gbps", 16, 16, Window),
            (
                "probe.scan_single_pass_16_limit_4096_gbps",
                16,
                4096,
                Window,
            ),
        ] {
            let raw = ScanRaw::SinglePass { per, limit, walk };
            makers.push((name, Box::new(move || scan_with(cpu, name, raw))));
        }
    }
    if matrices {
        let coop: [Source; 6] = [
            (
                "probe.coop_scalar_staged_tflops",
                crate::matmul_wgsl::coop_matmul_scalar_staged,
            ),
            ("probe.coop_b_from_storage_tflops", v::coop_matmul_b_global),
            (
                "probe.coop_matrix_staged_tflops",
                v::coop_matmul_matrix_staged,
            ),
            ("probe.coop_unstaged_tflops", v::coop_matmul_global),
            ("probe.coop_prefetched_tflops", || {
                v::coop_matmul_pipelined(false)
            }),
            ("probe.coop_prefetched_double_buffered_tflops", || {
                v::coop_matmul_pipelined(true)
            }),
        ];
        for (name, src) in coop {
            makers.push((name, Box::new(move || matmul_with(name, src()))));
        }
        for (name, c) in crate::probe_coop::variants() {
            makers.push((
                name,
                Box::new(move || matmul_raw(name, c.wgsl(), Some(c.groups(8192)))),
            ));
        }
    }
    makers
        .into_iter()
        .filter(|(name, _)| wants(name))
        .map(|(_, make)| make())
        .collect()
}
