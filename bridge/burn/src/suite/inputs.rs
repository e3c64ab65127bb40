//! Host-made inputs for the suite's cases: every tensor a case computes on
//! comes from [`crate::host::Rng`] through `Tensor::from_data`, so both
//! builds start from the same bytes.

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::host::Rng;

/// The number of elements of `shape`.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `shape` as a label: `33x17`.
pub fn label(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// A slice of a known length as an array (`shape.len() == D`).
pub fn arr<const D: usize>(shape: &[usize]) -> [usize; D] {
    let mut out = [0; D];
    assert_eq!(shape.len(), D, "rank of {shape:?}");
    out.copy_from_slice(shape);
    out
}

/// A seed from a case's name (FNV-1a), so each case has its own inputs.
pub fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A float tensor of `values` in `shape`.
pub fn float<const D: usize>(dev: &Device, values: Vec<f32>, shape: [usize; D]) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values, shape), dev)
}

/// An int tensor of `values` in `shape`.
pub fn int<const D: usize>(dev: &Device, values: Vec<i64>, shape: [usize; D]) -> Tensor<D, Int> {
    Tensor::from_data(TensorData::new(values, shape), dev)
}

/// A bool tensor of `values` in `shape`.
pub fn boolean<const D: usize>(
    dev: &Device,
    values: Vec<bool>,
    shape: [usize; D],
) -> Tensor<D, Bool> {
    Tensor::from_data(TensorData::new(values, shape), dev)
}

/// Uniform floats in `[lo, hi)`.
pub fn uniform<const D: usize>(
    dev: &Device,
    seed: u64,
    shape: [usize; D],
    lo: f32,
    hi: f32,
) -> Tensor<D> {
    float(dev, Rng::new(seed).uniforms(numel(&shape), lo, hi), shape)
}

/// Standard normal floats.
pub fn normal<const D: usize>(dev: &Device, seed: u64, shape: [usize; D]) -> Tensor<D> {
    float(dev, Rng::new(seed).normals(numel(&shape)), shape)
}

/// Integers in `[lo, hi)`.
pub fn ints<const D: usize>(
    dev: &Device,
    seed: u64,
    shape: [usize; D],
    lo: i64,
    hi: i64,
) -> Tensor<D, Int> {
    int(dev, Rng::new(seed).ints(numel(&shape), lo, hi), shape)
}

/// Nonzero integers in `[lo, hi)` (divisors).
pub fn nonzero_ints<const D: usize>(
    dev: &Device,
    seed: u64,
    shape: [usize; D],
    lo: i64,
    hi: i64,
) -> Tensor<D, Int> {
    let values = Rng::new(seed)
        .ints(numel(&shape), lo, hi)
        .into_iter()
        .map(|v| if v == 0 { hi - 1 } else { v })
        .collect();
    int(dev, values, shape)
}

/// Bools, each true with probability `p`.
pub fn bools<const D: usize>(
    dev: &Device,
    seed: u64,
    shape: [usize; D],
    p: f64,
) -> Tensor<D, Bool> {
    let mut rng = Rng::new(seed);
    let values = (0..numel(&shape)).map(|_| rng.unit() < p).collect();
    boolean(dev, values, shape)
}

/// A permutation of `0..n` (Fisher-Yates).
pub fn permutation(seed: u64, n: usize) -> Vec<i64> {
    let mut rng = Rng::new(seed);
    let mut v: Vec<i64> = (0..n as i64).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// Distinct floats (no ties anywhere in the tensor): a permutation of
/// `0..n`, scaled and shifted into roughly `[-n/8, n/8)` with a fraction,
/// so sorts and arg-reductions have one answer.
pub fn distinct<const D: usize>(dev: &Device, seed: u64, shape: [usize; D]) -> Tensor<D> {
    let n = numel(&shape);
    let values = permutation(seed, n)
        .into_iter()
        .map(|v| (v as f32 - n as f32 / 2.0) * 0.25 + 0.125)
        .collect();
    float(dev, values, shape)
}

/// Distinct integers (a permutation of `0..n`, shifted to be centred on 0).
pub fn distinct_ints<const D: usize>(dev: &Device, seed: u64, shape: [usize; D]) -> Tensor<D, Int> {
    let n = numel(&shape);
    let values = permutation(seed, n)
        .into_iter()
        .map(|v| v - n as i64 / 2)
        .collect();
    int(dev, values, shape)
}

/// Integer indices in `[0, hi)`.
pub fn indices<const D: usize>(
    dev: &Device,
    seed: u64,
    shape: [usize; D],
    hi: usize,
) -> Tensor<D, Int> {
    ints(dev, seed, shape, 0, hi as i64)
}

/// A 1-D int tensor of the given values.
pub fn index_list(dev: &Device, values: &[i64]) -> Tensor<1, Int> {
    int(dev, values.to_vec(), [values.len()])
}

/// Calls `$f::<D>` with the rank of a shape slice (1 to 5).
macro_rules! by_rank {
    ($shape:expr, $f:ident ( $($arg:expr),* )) => {
        match $shape.len() {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            _ => $f::<5>($($arg),*),
        }
    };
}
pub(crate) use by_rank;

/// Floats of magnitude in `[lo, hi)` with random signs (divisors that keep
/// away from zero).
pub fn signed<const D: usize>(
    dev: &Device,
    seed: u64,
    shape: [usize; D],
    lo: f32,
    hi: f32,
) -> Tensor<D> {
    let mut rng = Rng::new(seed);
    let values = (0..numel(&shape))
        .map(|_| {
            let m = lo + (hi - lo) * rng.unit() as f32;
            if rng.below(2) == 0 { m } else { -m }
        })
        .collect();
    float(dev, values, shape)
}

/// Multiples of 0.25 in `[-lim, lim]`: exact halves and integers included,
/// for rounding and for comparisons that must meet equal values.
pub fn quarters<const D: usize>(dev: &Device, seed: u64, shape: [usize; D], lim: i64) -> Tensor<D> {
    let values = Rng::new(seed)
        .ints(numel(&shape), -4 * lim, 4 * lim + 1)
        .into_iter()
        .map(|v| v as f32 * 0.25)
        .collect();
    float(dev, values, shape)
}
