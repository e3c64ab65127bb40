//! The suite's figures: each job's sizes (the on a GPU, small on a
//! CPU adapter), inputs, launches and host check.

use compute_ir::{IrError, Kernel, Lit};
use compute_runtime::BoundsChecks;
use compute_testkit::bytes::{bytes_f32, bytes_u32, f32_bytes, u32_bytes};
use compute_testkit::{Rng, kernels};

use super::job::{Job, Launch, RawLaunch};
use super::{Check, Measured};
use crate::suite_wgsl as wgsl;

pub fn all(cpu: bool, subgroups: bool, matrices: bool) -> Result<Vec<Measured>, IrError> {
    let mut v = vec![
        softmax(cpu)?,
        layernorm(cpu)?,
        histogram(cpu)?,
        matmul(cpu, false)?,
        matmul(cpu, true)?,
    ];
    if subgroups {
        v.push(super::scan::scan(cpu)?);
        v.push(sort(cpu)?);
    } else {
        eprintln!(
            "bench: no SUBGROUP on this adapter: kernel.scan_gbps and the radix sort skipped"
        );
    }
    if matrices {
        v.push(super::coop::matmul()?);
    } else {
        eprintln!(
            "bench: no EXPERIMENTAL_COOPERATIVE_MATRIX on this adapter: \
             kernel.matmul_f16_tc_tflops skipped"
        );
    }
    Ok(v)
}

pub(super) fn launch(
    kernel: Kernel,
    wgsl: String,
    groups: [u32; 3],
    bufs: &[usize],
    scalars: &[Lit],
) -> Result<Launch, IrError> {
    let scalars = if scalars.is_empty() {
        Vec::new()
    } else {
        kernel.pack_scalars(scalars)?
    };
    Ok(Launch {
        kernel,
        raw: RawLaunch {
            wgsl,
            groups,
            bufs: bufs.to_vec(),
            scalars,
        },
    })
}

fn floats(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut r = Rng::spread(seed);
    (0..n).map(|_| scale * r.f32_signed()).collect()
}

pub(super) fn words(seed: u64, n: usize) -> Vec<u32> {
    let mut r = Rng::spread(seed);
    (0..n).map(|_| r.u32()).collect()
}

/// Each of `got` within `rel` of `want` or `abs` of it.
pub(super) fn close(got: &[f32], want: &[f64], rel: f64, abs: f64) -> Result<(), String> {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if (f64::from(g) - w).abs() > rel * w.abs() + abs || g.is_nan() {
            return Err(format!("element {i}: {g} against the host's {w}"));
        }
    }
    Ok(())
}

/// Rows the float checks recompute on the host: both ends and a spread.
fn sample_rows(rows: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..8).map(|i| i * rows / 8).collect();
    v.push(rows - 1);
    v.dedup();
    v
}

/// The host's softmax of one row.
fn host_softmax(row: &[f32]) -> Vec<f64> {
    let m = row.iter().fold(f64::MIN, |m, &v| m.max(f64::from(v)));
    let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| v / sum).collect()
}

/// The host's layernorm of one row.
fn host_layernorm(row: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> Vec<f64> {
    let n = row.len() as f64;
    let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = row
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    let rstd = 1.0 / (var + f64::from(eps)).sqrt();
    row.iter()
        .zip(gamma.iter().zip(beta))
        .map(|(&v, (&g, &b))| (f64::from(v) - mean) * rstd * f64::from(g) + f64::from(b))
        .collect()
}

const ROWS_BASELINE: &str = "the same design handwritten in WGSL (suite_wgsl)";

fn softmax(cpu: bool) -> Result<Measured, IrError> {
    let (rows, cols) = (if cpu { 64 } else { 4096 }, 4096usize);
    let x = floats(21, rows * cols, 8.0);
    let job = Job {
        buffers: vec![f32_bytes(&x), vec![0; rows * cols * 4]],
        launches: vec![launch(
            kernels::softmax(cols as u32)?,
            wgsl::softmax(cols as u32 / 1024),
            [rows as u32, 1, 1],
            &[0, 1],
            &[],
        )?],
        raw: None,
    };
    let check: Check = Box::new(move |read| {
        let y = bytes_f32(&read(1));
        for r in sample_rows(rows) {
            let want = host_softmax(&x[r * cols..][..cols]);
            close(&y[r * cols..][..cols], &want, 1e-4, 1e-12)
                .map_err(|e| format!("row {r}: {e}"))?;
        }
        Ok(())
    });
    Ok(Measured {
        name: "kernel.softmax_gbps",
        unit: format!(
            "GB/s moved, 8 B/element (read once, written once), {rows}x{cols} f32 (higher is better)"
        ),
        baseline: ROWS_BASELINE,
        job,
        work: 8.0 * (rows * cols) as f64,
        scale: 1e9,
        reps: if cpu { 2 } else { 100 },
        check,
        raw_check: None,
    })
}

fn layernorm(cpu: bool) -> Result<Measured, IrError> {
    let (rows, cols) = (if cpu { 64 } else { 4096 }, 4096usize);
    let x = floats(22, rows * cols, 4.0);
    let (gamma, beta) = (floats(23, cols, 1.5), floats(24, cols, 0.5));
    let eps = 1e-5f32;
    let job = Job {
        buffers: vec![
            f32_bytes(&x),
            f32_bytes(&gamma),
            f32_bytes(&beta),
            vec![0; rows * cols * 4],
        ],
        launches: vec![launch(
            kernels::layernorm(cols as u32)?,
            wgsl::layernorm(cols as u32),
            [rows as u32, 1, 1],
            &[0, 1, 2, 3],
            &[Lit::F32(eps)],
        )?],
        raw: None,
    };
    let check: Check = Box::new(move |read| {
        let y = bytes_f32(&read(3));
        for r in sample_rows(rows) {
            let want = host_layernorm(&x[r * cols..][..cols], &gamma, &beta, eps);
            close(&y[r * cols..][..cols], &want, 1e-4, 1e-4)
                .map_err(|e| format!("row {r}: {e}"))?;
        }
        Ok(())
    });
    Ok(Measured {
        name: "kernel.layernorm_gbps",
        unit: format!(
            "GB/s moved, 8 B/element (read once, written once), {rows}x{cols} f32 (higher is better)"
        ),
        baseline: ROWS_BASELINE,
        job,
        work: 8.0 * (rows * cols) as f64,
        scale: 1e9,
        reps: if cpu { 2 } else { 100 },
        check,
        raw_check: None,
    })
}

fn histogram(cpu: bool) -> Result<Measured, IrError> {
    histogram_with(
        cpu,
        "kernel.histogram_gbps",
        crate::suite_wgsl::BYTE_HISTOGRAM.to_string(),
    )
}

/// The same job with `src` as its raw side (a probe's variant).
pub(super) fn histogram_with(
    cpu: bool,
    name: &'static str,
    src: String,
) -> Result<Measured, IrError> {
    let n: usize = if cpu { 1 << 22 } else { 1 << 28 };
    let data = u32_bytes(&words(26, n / 4));
    let mut want = vec![0u32; 256];
    for &b in &data {
        want[usize::from(b)] += 1;
    }
    let groups = if cpu { 8 } else { 2048 };
    let job = Job {
        buffers: vec![data, vec![0; 256 * 4]],
        launches: vec![launch(
            kernels::byte_histogram()?,
            src,
            [groups, 1, 1],
            &[0, 1],
            &[Lit::U32((n / 16) as u32)],
        )?],
        raw: None,
    };
    let check: Check = Box::new(move |read| {
        let got = bytes_u32(&read(1));
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "bins {:?}.., the host's {:?}..",
                &got[..4],
                &want[..4]
            ))
        }
    });
    Ok(Measured {
        name,
        unit: format!("GB/s of input, {n} bytes into 256 bins (higher is better)"),
        baseline: "the same design handwritten in WGSL (suite_wgsl::BYTE_HISTOGRAM)",
        job,
        work: n as f64,
        scale: 1e9,
        reps: if cpu { 2 } else { 50 },
        check,
        raw_check: None,
    })
}

fn sort(cpu: bool) -> Result<Measured, IrError> {
    let n: usize = if cpu { 1 << 16 } else { 1 << 24 };
    let keys = words(27, n);
    let blocks = (n as u32).div_ceil(kernels::RADIX_BLOCK);
    let len = 256 * blocks;
    let scan_blocks = len.div_ceil(kernels::SCAN_BLOCK) as usize;
    // 0 the keys (never written), 1 and 2 ping-pong, 3 counts, 4 offsets,
    // 5 the scan's block sums. Four passes: 0 -> 1 -> 2 -> 1 -> 2.
    let (count, scatter) = (kernels::radix_count()?, kernels::radix_scatter()?);
    let mut launches = Vec::new();
    for (pass, (from, to)) in [(0, 1), (1, 2), (2, 1), (1, 2)].into_iter().enumerate() {
        let p = [
            Lit::U32(n as u32),
            Lit::U32(pass as u32 * kernels::RADIX_BITS),
            Lit::U32(blocks),
        ];
        launches.push(launch(
            count.clone(),
            wgsl::radix_count(),
            [blocks, 1, 1],
            &[from, 3],
            &p,
        )?);
        launches.extend(super::scan::scan_launches(3, 5, 4, len)?);
        launches.push(launch(
            scatter.clone(),
            wgsl::radix_scatter(),
            [blocks, 1, 1],
            &[from, 4, to],
            &p,
        )?);
    }
    let job = Job {
        buffers: vec![
            u32_bytes(&keys),
            vec![0; n * 4],
            vec![0; n * 4],
            vec![0; len as usize * 4],
            vec![0; len as usize * 4],
            vec![0; scan_blocks * 4],
        ],
        launches,
        raw: None,
    };
    let mut sorted = keys;
    sorted.sort_unstable();
    let check: Check = Box::new(move |read| {
        let got = bytes_u32(&read(2));
        match got.iter().zip(&sorted).position(|(g, w)| g != w) {
            None if got.len() == sorted.len() => Ok(()),
            None => Err(format!("{} keys, not {}", got.len(), sorted.len())),
            Some(i) => Err(format!("key {i}: {}, the host's {}", got[i], sorted[i])),
        }
    });
    Ok(Measured {
        name: "kernel.radix_sort_mkeys_per_s",
        unit: format!(
            "million keys/s, {n} u32, 4 passes of 8 bits, checked exactly (higher is better)"
        ),
        baseline: "the same passes handwritten in WGSL (suite_wgsl::radix_*, scan_*)",
        job,
        work: n as f64,
        scale: 1e6,
        reps: if cpu { 1 } else { 5 },
        check,
        raw_check: None,
    })
}

/// The register-tiled matmul; `reported`: the same kernel with its own
/// `BoundsChecks::Reported` policy (every access compared, a report slot
/// per launch), what a debug build runs by default, against the same
/// handwritten twin.
fn matmul(cpu: bool, reported: bool) -> Result<Measured, IrError> {
    let d: usize = if cpu { 256 } else { 8192 };
    let (a, b) = (floats(28, d * d, 1.0), floats(29, d * d, 1.0));
    let t = kernels::REGISTER_MATMUL_TILE;
    let dim = Lit::U32(d as u32);
    let job = Job {
        buffers: vec![f32_bytes(&a), f32_bytes(&b), vec![0; d * d * 4]],
        launches: vec![launch(
            if reported {
                kernels::register_matmul()?.with_bounds_checks(BoundsChecks::Reported)
            } else {
                kernels::register_matmul()?
            },
            wgsl::register_matmul(),
            [d as u32 / t, d as u32 / t, 1],
            &[0, 1, 2],
            &[dim, dim, dim],
        )?],
        raw: None,
    };
    let check: Check = Box::new(move |read| {
        let c = bytes_f32(&read(2));
        let mut r = Rng::spread(30);
        for _ in 0..64 {
            let (i, j) = (r.below(d as u32) as usize, r.below(d as u32) as usize);
            let want: f64 = (0..d)
                .map(|p| f64::from(a[i * d + p]) * f64::from(b[p * d + j]))
                .sum();
            // Sums of d products in [-1, 1) rounded in f32.
            close(&c[i * d + j..][..1], &[want], 1e-4, 1e-6 * d as f64)
                .map_err(|e| format!("c[{i}][{j}]: {e}"))?;
        }
        Ok(())
    });
    Ok(Measured {
        name: if reported {
            "kernel.matmul_f32_reported_tflops"
        } else {
            "kernel.matmul_f32_tflops"
        },
        unit: format!(
            "TFLOP/s, {d}^3 f32, register-tiled 128x128{} (higher is better)",
            if reported {
                ", reported bounds checks"
            } else {
                ""
            }
        ),
        baseline: "the same design handwritten in WGSL (matmul_wgsl::register_matmul)",
        job,
        work: 2.0 * (d as f64).powi(3),
        scale: 1e12,
        reps: if cpu { 1 } else { 3 },
        check,
        raw_check: None,
    })
}
