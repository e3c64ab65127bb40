//! `kernel.matmul_f16_tc_tflops`: the cooperative-matrix matmul, a GPU
//! figure only (no CPU adapter has cooperative matrices).

use compute_ir::{IrError, Lit};
use compute_testkit::bytes::bytes_f32;
use compute_testkit::{Rng, kernels};

use super::job::{Job, RawLaunch};
use super::jobs::{close, launch};
use super::{Check, Measured};
use crate::suite_wgsl as wgsl;

/// f16 bits of values an f16 holds exactly (multiples of 1/8 in [-4, 4)),
/// and the values.
fn halves(seed: u64, n: usize) -> (Vec<f32>, Vec<u8>) {
    let mut r = Rng::spread(seed);
    let v: Vec<f32> = (0..n).map(|_| (r.below(64) as f32 - 32.0) / 8.0).collect();
    let b = v
        .iter()
        .flat_map(|&x| compute_ir::interp::f16::from_f32(x).to_le_bytes())
        .collect();
    (v, b)
}

/// 8192^3 of `f16 x f16 -> f32`, 64 entries checked against the host.
pub fn matmul() -> Result<Measured, IrError> {
    matmul_with("kernel.matmul_f16_tc_tflops", wgsl::coop_matmul())
}

/// The same job with `src` as its raw side (a probe's variant).
pub fn matmul_with(name: &'static str, src: String) -> Result<Measured, IrError> {
    matmul_raw(name, src, None)
}

/// The same job with `src` as its raw side, dispatched over `groups` when
/// given (a variant of another tiling).
pub fn matmul_raw(
    name: &'static str,
    src: String,
    groups: Option<[u32; 3]>,
) -> Result<Measured, IrError> {
    let d = 8192usize;
    let ((a, ab), (b, bb)) = (halves(31, d * d), halves(32, d * d));
    let t = kernels::COOP_MATMUL_TILE;
    let dim = Lit::U32(d as u32);
    let l = launch(
        kernels::coop_matmul(32)?,
        src,
        [d as u32 / t, d as u32 / t, 1],
        &[0, 1, 2],
        &[dim, dim, dim],
    )?;
    let raw = groups.map(|groups| {
        vec![RawLaunch {
            groups,
            ..l.raw.clone()
        }]
    });
    let job = Job {
        buffers: vec![ab, bb, vec![0; d * d * 4]],
        launches: vec![l],
        raw,
    };
    let check: Check = Box::new(move |read| {
        let c = bytes_f32(&read(2));
        let mut r = Rng::spread(33);
        for _ in 0..64 {
            let (i, j) = (r.below(d as u32) as usize, r.below(d as u32) as usize);
            let want: f64 = (0..d)
                .map(|p| f64::from(a[i * d + p]) * f64::from(b[p * d + j]))
                .sum();
            // Products of multiples of 1/8 are exact in f32; the sums
            // round at 2^-24 of each partial sum.
            close(&c[i * d + j..][..1], &[want], 1e-5, 1e-6 * d as f64)
                .map_err(|e| format!("c[{i}][{j}]: {e}"))?;
        }
        Ok(())
    });
    Ok(Measured {
        name,
        unit: format!("TFLOP/s, {d}^3 f16 x f16 -> f32, cooperative matrices (higher is better)"),
        baseline: "the same design handwritten in WGSL (matmul_wgsl::coop_matmul)",
        job,
        work: 2.0 * (d as f64).powi(3),
        scale: 1e12,
        reps: 5,
        check,
        raw_check: None,
    })
}
