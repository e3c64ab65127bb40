//! softmax and log_softmax along each dim, including inputs of large
//! magnitude (where a kernel that does not subtract the max overflows).

use burn::tensor::activation::{log_softmax, quiet_softmax, softmax, softmin};
use burn::tensor::{Device, Tensor, TensorData};

use super::inputs::{arr, by_rank, label, seed, uniform};
use super::{Case, Tol};

const G: &str = "softmax";

#[derive(Clone, Copy, Debug)]
enum Op {
    Softmax,
    LogSoftmax,
    Softmin,
    Quiet,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Softmax => "softmax",
            Op::LogSoftmax => "log_softmax",
            Op::Softmin => "softmin",
            Op::Quiet => "quiet_softmax",
        }
    }

    fn apply<const D: usize>(self, x: Tensor<D>, dim: usize) -> Tensor<D> {
        match self {
            Op::Softmax => softmax(x, dim),
            Op::LogSoftmax => log_softmax(x, dim),
            Op::Softmin => softmin(x, dim),
            Op::Quiet => quiet_softmax(x, dim),
        }
    }
}

fn run<const D: usize>(
    dev: &Device,
    op: Op,
    shape: &[usize],
    dim: usize,
    range: (f32, f32),
    s: u64,
) -> Vec<TensorData> {
    let x = uniform::<D>(dev, s, arr(shape), range.0, range.1);
    vec![op.apply(x, dim).into_data()]
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let shapes: [&'static [usize]; 2] = [&[33, 17], &[4, 9, 6]];
    for op in [Op::Softmax, Op::LogSoftmax] {
        for shape in shapes {
            for dim in 0..shape.len() {
                let name = format!("{}_dim{dim}_f32_{}", op.name(), label(shape));
                let s = seed(&name);
                out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
                    by_rank!(shape, run(dev, op, shape, dim, (-4.0, 4.0), s))
                }));
            }
        }
    }

    // Large magnitudes: wide spread, a large common offset, a long row.
    // (op, shape, dim, input range, label).
    type Large = (Op, &'static [usize], usize, (f32, f32), &'static str);
    let large: [Large; 8] = [
        (Op::Softmax, &[8, 100], 1, (-1000.0, 1000.0), "spread1e3"),
        (Op::LogSoftmax, &[8, 100], 1, (-1000.0, 1000.0), "spread1e3"),
        (Op::Softmax, &[50, 7], 0, (9990.0, 10010.0), "offset1e4"),
        (Op::LogSoftmax, &[50, 7], 0, (9990.0, 10010.0), "offset1e4"),
        (Op::Softmax, &[3, 4099], 1, (-30.0, 90.0), "row4099"),
        (Op::LogSoftmax, &[2, 5, 1000], 2, (-80.0, 80.0), "row1000"),
        (Op::Softmax, &[2, 300, 3], 1, (-200.0, 200.0), "spread200"),
        (Op::LogSoftmax, &[1, 1], 1, (50.0, 60.0), "single"),
    ];
    for (op, shape, dim, range, what) in large {
        let name = format!("{}_dim{dim}_{what}_f32_{}", op.name(), label(shape));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            by_rank!(shape, run(dev, op, shape, dim, range, s))
        }));
    }

    let extra: [(Op, &'static [usize], usize); 3] = [
        (Op::Softmin, &[33, 17], 1),
        (Op::Quiet, &[4, 9, 6], 2),
        (Op::Quiet, &[33, 17], 0),
    ];
    for (op, shape, dim) in extra {
        let name = format!("{}_dim{dim}_f32_{}", op.name(), label(shape));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            by_rank!(shape, run(dev, op, shape, dim, (-6.0, 6.0), s))
        }));
    }
    out
}
