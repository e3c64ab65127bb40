//! The kernel suite written with the IR (`compute_testkit::kernels`: row
//! softmax and layernorm, scan, byte histogram, radix sort, register-tiled
//! matmul), at small sizes on the device against the host.

use compute_ir::Lit;
use compute_testkit::Rng;
use compute_testkit::bytes::{bytes_f32, f32_bytes};
use compute_testkit::kernels;

use crate::ir::{read, run, server, upload};

fn rows_of(r: &mut Rng, rows: usize, cols: usize, scale: f32) -> Vec<f32> {
    (0..rows * cols).map(|_| scale * r.f32_signed()).collect()
}

/// Each value within `rel` of the host's, or `abs` of it near zero.
fn assert_close(got: &[f32], want: &[f64], (rel, abs): (f64, f64), what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * w.abs() + abs,
            "{what}[{i}]: {g} against {w} (error {err:e})"
        );
    }
}

#[test]
fn softmax_rows_match_the_host() {
    let mut s = server();
    let (rows, cols) = (6usize, 2048usize);
    let x = rows_of(&mut Rng::spread(11), rows, cols, 30.0);
    let k = kernels::softmax(cols as u32).expect("kernel");
    let hx = upload(&mut s, f32_bytes(&x));
    let hy = upload(&mut s, vec![0; rows * cols * 4]);
    run(
        &mut s,
        &k,
        [rows as u32, 1, 1],
        &[hx, hy.clone()],
        Vec::new(),
    );
    let got = bytes_f32(&read(&mut s, &hy));
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let m = row.iter().fold(f64::MIN, |m, &v| m.max(f64::from(v)));
        let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| v / sum));
    }
    // exp on a device is within a few ulp; the sums are of 2048 terms.
    assert_close(&got, &want, (1e-4, 1e-12), "softmax");
}

#[test]
fn layernorm_rows_match_the_host() {
    let mut s = server();
    let (rows, cols) = (5usize, 1024usize);
    let mut r = Rng::spread(12);
    // An offset the naive E[x^2] - mean^2 would lose digits to.
    let x: Vec<f32> = rows_of(&mut r, rows, cols, 2.0)
        .into_iter()
        .map(|v| v + 300.0)
        .collect();
    let gamma = rows_of(&mut r, 1, cols, 1.5);
    let beta = rows_of(&mut r, 1, cols, 0.5);
    let eps = 1e-5f32;
    let k = kernels::layernorm(cols as u32).expect("kernel");
    let handles = [
        upload(&mut s, f32_bytes(&x)),
        upload(&mut s, f32_bytes(&gamma)),
        upload(&mut s, f32_bytes(&beta)),
        upload(&mut s, vec![0; rows * cols * 4]),
    ];
    let scalars = k.pack_scalars(&[Lit::F32(eps)]).expect("scalars");
    run(&mut s, &k, [rows as u32, 1, 1], &handles, scalars);
    let got = bytes_f32(&read(&mut s, &handles[3]));
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let n = cols as f64;
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        let rstd = 1.0 / (var + f64::from(eps)).sqrt();
        want.extend(row.iter().enumerate().map(|(c, &v)| {
            (f64::from(v) - mean) * rstd * f64::from(gamma[c]) + f64::from(beta[c])
        }));
    }
    // The mean of values near 300 carries f32's 2^-15 relative rounding
    // into deviations of about 1: 1e-4 of the normalized output.
    assert_close(&got, &want, (2e-4, 2e-4), "layernorm");
}

#[test]
fn row_kernels_refuse_a_row_they_cannot_hold() {
    assert!(kernels::softmax(1000).is_err());
    assert!(kernels::layernorm(0).is_err());
}
