//! Scans: cumsum (float within REDUCTION, int exact), cumprod, cummax,
//! cummin along different dims.

use burn::tensor::{Device, TensorData};

use super::inputs::{arr, by_rank, ints, label, nonzero_ints, seed, uniform};
use super::{Case, Tol};

const G: &str = "scan";

#[derive(Clone, Copy, Debug)]
enum Op {
    Cumsum,
    Cumprod,
    Cummax,
    Cummin,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Cumsum => "cumsum",
            Op::Cumprod => "cumprod",
            Op::Cummax => "cummax",
            Op::Cummin => "cummin",
        }
    }
}

fn run_float<const D: usize>(
    dev: &Device,
    op: Op,
    shape: &[usize],
    dim: usize,
    s: u64,
) -> Vec<TensorData> {
    let shape = arr::<D>(shape);
    let out = match op {
        Op::Cumsum => uniform(dev, s, shape, -0.5, 1.0).cumsum(dim),
        Op::Cumprod => uniform(dev, s, shape, 0.8, 1.25).cumprod(dim),
        Op::Cummax => uniform(dev, s, shape, -1.0, 1.0).cummax(dim),
        Op::Cummin => uniform(dev, s, shape, -1.0, 1.0).cummin(dim),
    };
    vec![out.into_data()]
}

fn run_int<const D: usize>(
    dev: &Device,
    op: Op,
    shape: &[usize],
    dim: usize,
    s: u64,
) -> Vec<TensorData> {
    let shape = arr::<D>(shape);
    let out = match op {
        Op::Cumsum => ints(dev, s, shape, -100, 100).cumsum(dim),
        Op::Cumprod => nonzero_ints(dev, s, shape, -2, 3).cumprod(dim),
        Op::Cummax => ints(dev, s, shape, -100, 100).cummax(dim),
        Op::Cummin => ints(dev, s, shape, -100, 100).cummin(dim),
    };
    vec![out.into_data()]
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let float: [(Op, &'static [usize], usize); 10] = [
        (Op::Cumsum, &[7], 0),
        (Op::Cumsum, &[33, 17], 0),
        (Op::Cumsum, &[33, 17], 1),
        (Op::Cumsum, &[4, 9, 6], 1),
        (Op::Cumsum, &[3, 1000], 1),
        (Op::Cumprod, &[5, 40], 1),
        (Op::Cumprod, &[4, 9, 6], 0),
        (Op::Cummax, &[33, 17], 1),
        (Op::Cummax, &[4, 9, 6], 2),
        (Op::Cummin, &[33, 17], 0),
    ];
    for (op, shape, dim) in float {
        let name = format!("{}_dim{dim}_f32_{}", op.name(), label(shape));
        let s = seed(&name);
        let tol = match op {
            Op::Cumsum | Op::Cumprod => Tol::REDUCTION,
            _ => Tol::Exact,
        };
        out.push(Case::new(G, name, tol, move |dev| {
            by_rank!(shape, run_float(dev, op, shape, dim, s))
        }));
    }
    let int: [(Op, &'static [usize], usize); 7] = [
        (Op::Cumsum, &[7], 0),
        (Op::Cumsum, &[33, 17], 1),
        (Op::Cumsum, &[4, 9, 6], 0),
        (Op::Cumsum, &[2, 2000], 1),
        (Op::Cumprod, &[6, 12], 1),
        (Op::Cummax, &[4, 9, 6], 1),
        (Op::Cummin, &[33, 17], 1),
    ];
    for (op, shape, dim) in int {
        let name = format!("{}_dim{dim}_int_{}", op.name(), label(shape));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            by_rank!(shape, run_int(dev, op, shape, dim, s))
        }));
    }
    out
}
