//! Indexing: gather, scatter, select, select_assign, slice (with steps and
//! negative bounds), slice_assign, slice_fill, mask_where, mask_fill,
//! narrow, take, float/int/bool. All exact (data movement, or sums of
//! small integers).

use burn::tensor::{IndexingUpdateOp, Int, Tensor, s};

use super::inputs::{
    bools, distinct, index_list, indices, int, ints, permutation, quarters, uniform,
};
use super::{Case, Tol};

const G: &str = "index";

/// Integer-valued floats in `[-20, 20]`: their sums are exact in any order.
fn int_floats<const D: usize>(dev: &burn::tensor::Device, s: u64, shape: [usize; D]) -> Tensor<D> {
    ints(dev, s, shape, -20, 21).float()
}

/// Per row of `rows`, the first `k` entries of a permutation of `0..n`
/// (unique indices along dim 1).
fn unique_rows(s: u64, rows: usize, n: usize, k: usize) -> Vec<i64> {
    (0..rows)
        .flat_map(|r| permutation(s + r as u64, n).into_iter().take(k))
        .collect()
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // gather.
    out.push(Case::new(
        G,
        "gather_dim0_f32_5x7_idx4x7",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 1, [5, 7], -1.0, 1.0);
            vec![x.gather(0, indices(dev, 2, [4, 7], 5)).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "gather_dim1_f32_33x17_idx33x9",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 3, [33, 17], -1.0, 1.0);
            vec![x.gather(1, indices(dev, 4, [33, 9], 17)).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "gather_dim2_f32_4x9x6_idx4x9x10",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 5, [4, 9, 6], -1.0, 1.0);
            vec![x.gather(2, indices(dev, 6, [4, 9, 10], 6)).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "gather_dim1_int_6x8_idx6x3",
        Tol::Exact,
        |dev| {
            let x = ints(dev, 7, [6, 8], -100, 100);
            vec![x.gather(1, indices(dev, 8, [6, 3], 8)).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "gather_dim0_bool_6x8_idx9x8",
        Tol::Exact,
        |dev| {
            let x = bools(dev, 9, [6, 8], 0.5);
            vec![x.gather(0, indices(dev, 10, [9, 8], 6)).into_data()]
        },
    ));

    // scatter.
    out.push(Case::new(
        G,
        "scatter_add_dim0_f32_5x7_dup_idx8x7",
        Tol::Exact,
        |dev| {
            let x = int_floats(dev, 11, [5, 7]);
            let v = int_floats(dev, 12, [8, 7]);
            let idx = indices(dev, 13, [8, 7], 5);
            vec![x.scatter(0, idx, v, IndexingUpdateOp::Add).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "scatter_add_dim1_int_6x10_dup_idx6x15",
        Tol::Exact,
        |dev| {
            let x = ints(dev, 14, [6, 10], -50, 50);
            let v = ints(dev, 15, [6, 15], -50, 50);
            let idx = indices(dev, 16, [6, 15], 10);
            vec![x.scatter(1, idx, v, IndexingUpdateOp::Add).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "scatter_assign_dim1_f32_4x9_unique_idx4x5",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 17, [4, 9], -1.0, 1.0);
            let v = uniform(dev, 18, [4, 5], 2.0, 3.0);
            let idx = int(dev, unique_rows(19, 4, 9, 5), [4, 5]);
            vec![x.scatter(1, idx, v, IndexingUpdateOp::Assign).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "scatter_add_dim2_f32_3x4x6_dup_idx3x4x8",
        Tol::Exact,
        |dev| {
            let x = int_floats(dev, 20, [3, 4, 6]);
            let v = int_floats(dev, 21, [3, 4, 8]);
            let idx = indices(dev, 22, [3, 4, 8], 6);
            vec![x.scatter(2, idx, v, IndexingUpdateOp::Add).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "scatter_assign_dim1_int_5x12_unique_idx5x12",
        Tol::Exact,
        |dev| {
            let x = ints(dev, 23, [5, 12], -9, 9);
            let v = ints(dev, 24, [5, 12], 100, 200);
            let idx = int(dev, unique_rows(25, 5, 12, 12), [5, 12]);
            vec![x.scatter(1, idx, v, IndexingUpdateOp::Assign).into_data()]
        },
    ));

    // select.
    out.push(Case::new(
        G,
        "select_dim0_f32_10x7_dup",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 26, [10, 7], -1.0, 1.0);
            vec![x.select(0, index_list(dev, &[3, 0, 9, 3])).into_data()]
        },
    ));
    out.push(Case::new(G, "select_dim1_int_6x11", Tol::Exact, |dev| {
        let x = ints(dev, 27, [6, 11], -100, 100);
        vec![
            x.select(1, index_list(dev, &[10, 2, 5, 5, 0, 7]))
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "select_dim2_f32_3x4x9", Tol::Exact, |dev| {
        let x = uniform(dev, 28, [3, 4, 9], -1.0, 1.0);
        vec![x.select(2, indices(dev, 29, [13], 9)).into_data()]
    }));
    out.push(Case::new(G, "select_dim1_bool_5x8", Tol::Exact, |dev| {
        let x = bools(dev, 30, [5, 8], 0.5);
        vec![x.select(1, index_list(dev, &[7, 1, 1, 4])).into_data()]
    }));

    // select_assign.
    out.push(Case::new(
        G,
        "select_assign_add_dim0_f32_8x5_dup",
        Tol::Exact,
        |dev| {
            let x = int_floats(dev, 31, [8, 5]);
            let v = int_floats(dev, 32, [6, 5]);
            let idx = index_list(dev, &[1, 7, 1, 0, 7, 1]);
            vec![
                x.select_assign(0, idx, v, IndexingUpdateOp::Add)
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(
        G,
        "select_assign_add_dim1_int_4x9",
        Tol::Exact,
        |dev| {
            let x = ints(dev, 33, [4, 9], -10, 10);
            let v = ints(dev, 34, [4, 3], -10, 10);
            let idx = index_list(dev, &[8, 0, 4]);
            vec![
                x.select_assign(1, idx, v, IndexingUpdateOp::Add)
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(
        G,
        "select_assign_assign_dim2_f32_2x3x7",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 35, [2, 3, 7], -1.0, 1.0);
            let v = uniform(dev, 36, [2, 3, 3], 5.0, 6.0);
            let idx = index_list(dev, &[6, 2, 3]);
            vec![
                x.select_assign(2, idx, v, IndexingUpdateOp::Assign)
                    .into_data(),
            ]
        },
    ));

    // slice.
    out.push(Case::new(
        G,
        "slice_f32_33x17_3to20_5to16",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 37, [33, 17], -1.0, 1.0);
            vec![x.slice([3..20, 5..16]).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "slice_step_neg_f32_4x9x6",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 38, [4, 9, 6], -1.0, 1.0);
            vec![
                x.clone().slice(s![.., 1..-1, 0..6;2]).into_data(),
                x.clone().slice(s![-2.., ..;-1, ..]).into_data(),
                x.slice(s![1..4;-2, 2..=5, -1]).into_data(),
            ]
        },
    ));
    out.push(Case::new(G, "slice_int_8x8_2to7_0to3", Tol::Exact, |dev| {
        let x = ints(dev, 39, [8, 8], -100, 100);
        vec![x.slice([2..7, 0..3]).into_data()]
    }));
    out.push(Case::new(
        G,
        "slice_bool_6x9_1to5_3to9",
        Tol::Exact,
        |dev| {
            let x = bools(dev, 40, [6, 9], 0.5);
            vec![x.slice([1..5, 3..9]).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "slice_then_add_f32_20x20",
        Tol::Exact,
        |dev| {
            // Two overlapping views of one tensor combined (strided reads).
            let x = quarters(dev, 41, [20, 20], 8);
            let a = x.clone().slice([0..10, 5..15]);
            let b = x.slice([10..20, 0..10]);
            vec![(a + b).into_data()]
        },
    ));

    // slice_assign / slice_fill.
    out.push(Case::new(
        G,
        "slice_assign_f32_9x11_2to6_3to10",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 42, [9, 11], -1.0, 1.0);
            let v = uniform(dev, 43, [4, 7], 5.0, 6.0);
            vec![x.slice_assign([2..6, 3..10], v).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "slice_assign_step_f32_8x6",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 44, [8, 6], -1.0, 1.0);
            let v = uniform(dev, 45, [4, 6], 5.0, 6.0);
            vec![x.slice_assign(s![0..8;2, ..], v).into_data()]
        },
    ));
    out.push(Case::new(G, "slice_assign_int_3x5x7", Tol::Exact, |dev| {
        let x = ints(dev, 46, [3, 5, 7], -9, 9);
        let v = ints(dev, 47, [1, 5, 2], 100, 200);
        vec![x.slice_assign([1..2, 0..5, 4..6], v).into_data()]
    }));
    out.push(Case::new(G, "slice_assign_bool_6x6", Tol::Exact, |dev| {
        let x = bools(dev, 48, [6, 6], 0.2);
        let v = bools(dev, 49, [3, 2], 0.8);
        vec![x.slice_assign([1..4, 2..4], v).into_data()]
    }));
    out.push(Case::new(G, "slice_fill_f32_7x9", Tol::Exact, |dev| {
        let x = uniform(dev, 50, [7, 9], -1.0, 1.0);
        vec![x.slice_fill([2..5, 1..8], -3.5).into_data()]
    }));

    // mask_where / mask_fill.
    out.push(Case::new(G, "mask_where_f32_33x17", Tol::Exact, |dev| {
        let x = uniform(dev, 51, [33, 17], -1.0, 1.0);
        let v = uniform(dev, 52, [33, 17], 5.0, 6.0);
        vec![x.mask_where(bools(dev, 53, [33, 17], 0.4), v).into_data()]
    }));
    out.push(Case::new(G, "mask_where_int_2x3x5", Tol::Exact, |dev| {
        let x = ints(dev, 54, [2, 3, 5], -9, 9);
        let v = ints(dev, 55, [2, 3, 5], 100, 200);
        vec![x.mask_where(bools(dev, 56, [2, 3, 5], 0.5), v).into_data()]
    }));
    out.push(Case::new(G, "mask_where_bool_7", Tol::Exact, |dev| {
        let x = bools(dev, 57, [7], 0.5);
        let v = bools(dev, 58, [7], 0.5);
        vec![x.mask_where(bools(dev, 59, [7], 0.5), v).into_data()]
    }));
    out.push(Case::new(G, "mask_fill_f32_33x17", Tol::Exact, |dev| {
        let x = uniform(dev, 60, [33, 17], -1.0, 1.0);
        vec![
            x.mask_fill(bools(dev, 61, [33, 17], 0.3), -7.25)
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "mask_fill_int_4x9x6", Tol::Exact, |dev| {
        let x = ints(dev, 62, [4, 9, 6], -9, 9);
        vec![x.mask_fill(bools(dev, 63, [4, 9, 6], 0.3), 42).into_data()]
    }));
    out.push(Case::new(G, "mask_fill_bool_5x5", Tol::Exact, |dev| {
        let x = bools(dev, 64, [5, 5], 0.1);
        vec![x.mask_fill(bools(dev, 65, [5, 5], 0.5), true).into_data()]
    }));
    out.push(Case::new(
        G,
        "mask_fill_f32_comparison_mask_1x1",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 66, [1, 1], 0.5, 1.0);
            let m = x.clone().greater_elem(0.0);
            vec![x.mask_fill(m, f32::INFINITY).into_data()]
        },
    ));

    // narrow, take, gather through a view.
    out.push(Case::new(G, "narrow_dim1_f32_4x9x6", Tol::Exact, |dev| {
        let x = uniform(dev, 67, [4, 9, 6], -1.0, 1.0);
        vec![
            x.clone().narrow(1, 2, 5).into_data(),
            x.narrow(2, 5, 1).into_data(),
        ]
    }));
    out.push(Case::new(G, "narrow_dim0_int_10x3", Tol::Exact, |dev| {
        let x = ints(dev, 68, [10, 3], -9, 9);
        vec![x.narrow(0, 7, 3).into_data()]
    }));
    out.push(Case::new(
        G,
        "take_dim1_f32_5x8_idx2x3",
        Tol::Exact,
        |dev| {
            let x = distinct(dev, 69, [5, 8]);
            let idx: Tensor<2, Int> = int(dev, vec![7, 0, 3, 3, 6, 1], [2, 3]);
            vec![x.take::<2, 3>(1, idx).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "gather_dim0_transposed_f32_7x5",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 70, [5, 7], -1.0, 1.0).transpose();
            vec![x.gather(0, indices(dev, 71, [3, 5], 7)).into_data()]
        },
    ));
    out
}
