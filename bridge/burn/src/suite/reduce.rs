//! Reductions: whole-tensor and along each dim of 2-D and 3-D tensors,
//! float and int, and any/all on bools.

use burn::tensor::{Device, TensorData};

use super::inputs::{
    arr, bools, by_rank, distinct, distinct_ints, ints, label, nonzero_ints, seed, uniform,
};
use super::{Case, Tol};

const G: &str = "reduce";

#[derive(Clone, Copy, Debug)]
enum Full {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    MaxAbs,
}

impl Full {
    fn name(self) -> &'static str {
        match self {
            Full::Sum => "sum",
            Full::Mean => "mean",
            Full::Max => "max",
            Full::Min => "min",
            Full::Prod => "prod",
            Full::MaxAbs => "max_abs",
        }
    }
}

fn full_float<const D: usize>(dev: &Device, op: Full, shape: &[usize], s: u64) -> Vec<TensorData> {
    let shape = arr::<D>(shape);
    let out = match op {
        Full::Sum => uniform(dev, s, shape, 0.0, 1.0).sum(),
        Full::Mean => uniform(dev, s, shape, -1.0, 3.0).mean(),
        Full::Max => distinct(dev, s, shape).max(),
        Full::Min => distinct(dev, s, shape).min(),
        Full::MaxAbs => uniform(dev, s, shape, -3.0, 2.0).max_abs(),
        Full::Prod => uniform(dev, s, shape, 0.9, 1.1).prod(),
    };
    vec![out.into_data()]
}

#[derive(Clone, Copy, Debug)]
enum Along {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    ArgMax,
    ArgMin,
    MaxWithIndices,
    Var,
}

impl Along {
    fn name(self) -> &'static str {
        match self {
            Along::Sum => "sum_dim",
            Along::Mean => "mean_dim",
            Along::Max => "max_dim",
            Along::Min => "min_dim",
            Along::Prod => "prod_dim",
            Along::ArgMax => "argmax",
            Along::ArgMin => "argmin",
            Along::MaxWithIndices => "max_dim_with_indices",
            Along::Var => "var",
        }
    }

    fn tol(self) -> Tol {
        match self {
            Along::Sum | Along::Mean | Along::Prod | Along::Var => Tol::REDUCTION,
            _ => Tol::Exact,
        }
    }
}

fn along_float<const D: usize>(
    dev: &Device,
    op: Along,
    shape: &[usize],
    dim: usize,
    s: u64,
) -> Vec<TensorData> {
    let shape = arr::<D>(shape);
    match op {
        Along::Sum => vec![uniform(dev, s, shape, -1.0, 1.0).sum_dim(dim).into_data()],
        Along::Mean => vec![uniform(dev, s, shape, -1.0, 1.0).mean_dim(dim).into_data()],
        Along::Prod => vec![uniform(dev, s, shape, 0.8, 1.25).prod_dim(dim).into_data()],
        Along::Var => vec![uniform(dev, s, shape, -2.0, 2.0).var(dim).into_data()],
        Along::Max => vec![distinct(dev, s, shape).max_dim(dim).into_data()],
        Along::Min => vec![distinct(dev, s, shape).min_dim(dim).into_data()],
        Along::ArgMax => vec![distinct(dev, s, shape).argmax(dim).into_data()],
        Along::ArgMin => vec![distinct(dev, s, shape).argmin(dim).into_data()],
        Along::MaxWithIndices => {
            let (v, i) = distinct(dev, s, shape).max_dim_with_indices(dim);
            vec![v.into_data(), i.into_data()]
        }
    }
}

fn along_int<const D: usize>(
    dev: &Device,
    op: Along,
    shape: &[usize],
    dim: usize,
    s: u64,
) -> Vec<TensorData> {
    let shape = arr::<D>(shape);
    let out = match op {
        Along::Sum => ints(dev, s, shape, -100, 100).sum_dim(dim),
        Along::Mean => ints(dev, s, shape, 0, 100).mean_dim(dim),
        Along::Prod => nonzero_ints(dev, s, shape, -2, 3).prod_dim(dim),
        Along::Max => distinct_ints(dev, s, shape).max_dim(dim),
        Along::Min => distinct_ints(dev, s, shape).min_dim(dim),
        Along::ArgMax => distinct_ints(dev, s, shape).argmax(dim),
        Along::ArgMin => distinct_ints(dev, s, shape).argmin(dim),
        Along::MaxWithIndices | Along::Var => {
            let (v, i) = distinct_ints(dev, s, shape).min_dim_with_indices(dim);
            return vec![v.into_data(), i.into_data()];
        }
    };
    vec![out.into_data()]
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // Whole-tensor float reductions.
    let full: [(Full, &[&[usize]]); 6] = [
        (Full::Sum, &[&[7], &[33, 17], &[2, 3, 5], &[257, 129]]),
        (Full::Mean, &[&[1, 1], &[33, 17], &[64, 65, 3]]),
        (Full::Max, &[&[7], &[33, 17], &[257, 129]]),
        (Full::Min, &[&[2, 3, 5], &[33, 17]]),
        (Full::Prod, &[&[7], &[33, 17]]),
        (Full::MaxAbs, &[&[33, 17]]),
    ];
    for (op, shapes) in full {
        for &shape in shapes {
            let name = format!("{}_f32_{}", op.name(), label(shape));
            let s = seed(&name);
            let tol = match op {
                Full::Max | Full::Min | Full::MaxAbs => Tol::Exact,
                _ => Tol::REDUCTION,
            };
            out.push(Case::new(G, name, tol, move |dev| {
                by_rank!(shape, full_float(dev, op, shape, s))
            }));
        }
    }

    // Whole-tensor int reductions.
    out.push(Case::new(G, "sum_int_33x17", Tol::Exact, |dev| {
        vec![ints(dev, 1, [33, 17], -1000, 1000).sum().into_data()]
    }));
    out.push(Case::new(G, "sum_int_257x129", Tol::Exact, |dev| {
        vec![ints(dev, 2, [257, 129], -100, 100).sum().into_data()]
    }));
    out.push(Case::new(G, "mean_int_33x17", Tol::Exact, |dev| {
        vec![ints(dev, 8, [33, 17], 0, 1000).mean().into_data()]
    }));
    out.push(Case::new(G, "max_int_2x3x5", Tol::Exact, |dev| {
        vec![ints(dev, 3, [2, 3, 5], -1000, 1000).max().into_data()]
    }));
    out.push(Case::new(G, "min_int_33x17", Tol::Exact, |dev| {
        vec![ints(dev, 4, [33, 17], -1000, 1000).min().into_data()]
    }));
    out.push(Case::new(G, "prod_int_7", Tol::Exact, |dev| {
        vec![nonzero_ints(dev, 5, [7], -3, 4).prod().into_data()]
    }));

    // Along each dim, float.
    let float_ops = [
        Along::Sum,
        Along::Mean,
        Along::Max,
        Along::Min,
        Along::ArgMax,
        Along::ArgMin,
    ];
    let shapes: [&[usize]; 2] = [&[33, 17], &[4, 9, 6]];
    for op in float_ops {
        for shape in shapes {
            for dim in 0..shape.len() {
                let name = format!("{}{dim}_f32_{}", op.name(), label(shape));
                let s = seed(&name);
                out.push(Case::new(G, name, op.tol(), move |dev| {
                    by_rank!(shape, along_float(dev, op, shape, dim, s))
                }));
            }
        }
    }
    // Fewer dims for the rarer ones.
    let extra: [(Along, &'static [usize], usize); 8] = [
        (Along::Prod, &[33, 17], 1),
        (Along::Prod, &[4, 9, 6], 0),
        (Along::Var, &[33, 17], 0),
        (Along::Var, &[4, 9, 6], 2),
        (Along::MaxWithIndices, &[33, 17], 1),
        (Along::MaxWithIndices, &[4, 9, 6], 1),
        (Along::Sum, &[3, 1000], 1),
        (Along::Max, &[1000, 3], 0),
    ];
    for (op, shape, dim) in extra {
        let name = format!("{}{dim}_f32_{}", op.name(), label(shape));
        let s = seed(&name);
        out.push(Case::new(G, name, op.tol(), move |dev| {
            by_rank!(shape, along_float(dev, op, shape, dim, s))
        }));
    }

    // Along each dim of a 3-D tensor, int.
    for op in [
        Along::Sum,
        Along::Max,
        Along::ArgMax,
        Along::ArgMin,
        Along::MaxWithIndices,
    ] {
        for dim in 0..3 {
            let shape: &'static [usize] = &[4, 9, 6];
            let op_name = match op {
                Along::MaxWithIndices => "min_dim_with_indices",
                _ => op.name(),
            };
            let name = format!("{op_name}{dim}_int_{}", label(shape));
            let s = seed(&name);
            out.push(Case::new(G, name, Tol::Exact, move |dev| {
                by_rank!(shape, along_int(dev, op, shape, dim, s))
            }));
        }
    }
    for (op, dim) in [(Along::Mean, 1usize), (Along::Min, 0), (Along::Prod, 2)] {
        let shape: &'static [usize] = &[4, 9, 6];
        let name = format!("{}{dim}_int_{}", op.name(), label(shape));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            by_rank!(shape, along_int(dev, op, shape, dim, s))
        }));
    }

    // any/all on bools.
    out.push(Case::new(
        G,
        "any_all_bool_sparse_33x17",
        Tol::Exact,
        |dev| {
            let x = bools(dev, 11, [33, 17], 0.002);
            vec![x.clone().any().into_data(), x.all().into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "any_all_bool_all_false_true_7",
        Tol::Exact,
        |dev| {
            let f = bools(dev, 12, [7], 0.0);
            let t = bools(dev, 13, [7], 1.0);
            vec![
                f.clone().any().into_data(),
                f.all().into_data(),
                t.clone().any().into_data(),
                t.all().into_data(),
            ]
        },
    ));
    for dim in 0..3 {
        let name = format!("any_all_dim{dim}_bool_4x9x6");
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            let x = bools(dev, s, [4, 9, 6], 0.15);
            vec![
                x.clone().any_dim(dim).into_data(),
                x.all_dim(dim).into_data(),
            ]
        }));
    }
    out.push(Case::new(
        G,
        "any_all_dim1_bool_dense_9x40",
        Tol::Exact,
        |dev| {
            let x = bools(dev, 14, [9, 40], 0.97);
            vec![x.clone().any_dim(1).into_data(), x.all_dim(1).into_data()]
        },
    ));
    out
}
