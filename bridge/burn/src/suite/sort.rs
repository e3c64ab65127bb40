//! Sorting: sort, sort_descending, argsort, topk (values and indices) along
//! different dims, float and int, on inputs without ties so every index is
//! well defined. All exact.

use burn::tensor::{Device, TensorData};

use super::inputs::{arr, by_rank, distinct, distinct_ints, label, seed};
use super::{Case, Tol};

const G: &str = "sort";

#[derive(Clone, Copy, Debug)]
enum Op {
    Sort,
    SortDescending,
    SortWithIndices,
    ArgSort,
    ArgSortDescending,
    TopK(usize),
    TopKWithIndices(usize),
}

impl Op {
    fn name(self) -> String {
        match self {
            Op::Sort => "sort".into(),
            Op::SortDescending => "sort_descending".into(),
            Op::SortWithIndices => "sort_with_indices".into(),
            Op::ArgSort => "argsort".into(),
            Op::ArgSortDescending => "argsort_descending".into(),
            Op::TopK(k) => format!("topk{k}"),
            Op::TopKWithIndices(k) => format!("topk{k}_with_indices"),
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
    let x = distinct::<D>(dev, s, arr(shape));
    match op {
        Op::Sort => vec![x.sort(dim).into_data()],
        Op::SortDescending => vec![x.sort_descending(dim).into_data()],
        Op::SortWithIndices => {
            let (v, i) = x.sort_with_indices(dim);
            vec![v.into_data(), i.into_data()]
        }
        Op::ArgSort => vec![x.argsort(dim).into_data()],
        Op::ArgSortDescending => vec![x.argsort_descending(dim).into_data()],
        Op::TopK(k) => vec![x.topk(k, dim).into_data()],
        Op::TopKWithIndices(k) => {
            let (v, i) = x.topk_with_indices(k, dim);
            vec![v.into_data(), i.into_data()]
        }
    }
}

fn run_int<const D: usize>(
    dev: &Device,
    op: Op,
    shape: &[usize],
    dim: usize,
    s: u64,
) -> Vec<TensorData> {
    let x = distinct_ints::<D>(dev, s, arr(shape));
    match op {
        Op::Sort => vec![x.sort(dim).into_data()],
        Op::SortDescending => vec![x.sort_descending(dim).into_data()],
        Op::SortWithIndices => {
            let (v, i) = x.sort_with_indices(dim);
            vec![v.into_data(), i.into_data()]
        }
        Op::ArgSort => vec![x.argsort(dim).into_data()],
        Op::ArgSortDescending => vec![x.argsort_descending(dim).into_data()],
        Op::TopK(k) => vec![x.topk(k, dim).into_data()],
        Op::TopKWithIndices(k) => {
            let (v, i) = x.topk_with_indices(k, dim);
            vec![v.into_data(), i.into_data()]
        }
    }
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let float: [(Op, &'static [usize], usize); 12] = [
        (Op::Sort, &[37], 0),
        (Op::Sort, &[5, 33], 1),
        (Op::Sort, &[33, 5], 0),
        (Op::SortDescending, &[4, 9, 6], 1),
        (Op::SortDescending, &[1, 1], 1),
        (Op::SortWithIndices, &[6, 17], 1),
        (Op::SortWithIndices, &[3, 7, 5], 2),
        (Op::ArgSort, &[4, 9, 6], 0),
        (Op::ArgSortDescending, &[7, 12], 1),
        (Op::TopK(3), &[5, 33], 1),
        (Op::TopKWithIndices(4), &[4, 9, 6], 1),
        (Op::TopKWithIndices(1), &[257], 0),
    ];
    for (op, shape, dim) in float {
        let name = format!("{}_dim{dim}_f32_{}", op.name(), label(shape));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            by_rank!(shape, run_float(dev, op, shape, dim, s))
        }));
    }
    let int: [(Op, &'static [usize], usize); 8] = [
        (Op::Sort, &[33, 17], 1),
        (Op::SortDescending, &[33, 17], 0),
        (Op::SortWithIndices, &[2, 3, 5], 0),
        (Op::ArgSort, &[7], 0),
        (Op::ArgSort, &[4, 9, 6], 2),
        (Op::ArgSortDescending, &[4, 9, 6], 1),
        (Op::TopK(5), &[9, 20], 1),
        (Op::TopKWithIndices(2), &[6, 4, 7], 0),
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
