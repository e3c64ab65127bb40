//! Matrix products: 2-D, batched 3-D and 4-D with broadcast batch dims,
//! transposed and swapped-dims views as operands, odd shapes, ints.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::inputs::{arr, by_rank, ints, label, seed, uniform};
use super::{Case, Tol};

const G: &str = "matmul";

/// Looser than REDUCTION, for long dot products.
const LARGE_K: Tol = Tol::Close {
    rel: 1e-3,
    abs: 1e-4,
};

fn mm<const D: usize>(dev: &Device, a: &[usize], b: &[usize], s: u64) -> Vec<TensorData> {
    let x = uniform::<D>(dev, s, arr(a), -1.0, 1.0);
    let y = uniform::<D>(dev, s + 1, arr(b), -1.0, 1.0);
    vec![x.matmul(y).into_data()]
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let plain: [(&[usize], &[usize], Tol); 14] = [
        (&[1, 1], &[1, 1], Tol::REDUCTION),
        (&[1, 13], &[13, 1], Tol::REDUCTION),
        (&[7, 13], &[13, 5], Tol::REDUCTION),
        (&[5, 1], &[1, 9], Tol::REDUCTION),
        (&[16, 16], &[16, 16], Tol::REDUCTION),
        (&[65, 33], &[33, 17], Tol::REDUCTION),
        (&[128, 64], &[64, 96], Tol::REDUCTION),
        (&[3, 300], &[300, 2], LARGE_K),
        (&[200, 257], &[257, 129], LARGE_K),
        (&[3, 7, 13], &[3, 13, 5], Tol::REDUCTION),
        (&[4, 33, 16], &[1, 16, 9], Tol::REDUCTION),
        (&[1, 8, 31], &[5, 31, 8], Tol::REDUCTION),
        (&[2, 3, 17, 8], &[2, 3, 8, 11], Tol::REDUCTION),
        (&[2, 1, 9, 20], &[1, 4, 20, 6], Tol::REDUCTION),
    ];
    for (a, b, tol) in plain {
        let name = format!("matmul_f32_{}_{}", label(a), label(b));
        let s = seed(&name);
        out.push(Case::new(G, name, tol, move |dev| {
            by_rank!(a, mm(dev, a, b, s))
        }));
    }

    // A vector-matrix product batched the way burn rewrites ([B,1,K] @ [1,K,N]).
    out.push(Case::new(
        G,
        "matmul_f32_6x1x40_1x40x7",
        Tol::REDUCTION,
        |dev| mm::<3>(dev, &[6, 1, 40], &[1, 40, 7], 21),
    ));

    // Views as operands.
    out.push(Case::new(
        G,
        "matmul_f32_transposed_lhs_13x7",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 31, [13, 7], -1.0, 1.0).transpose();
            let y = uniform(dev, 32, [13, 5], -1.0, 1.0);
            vec![x.matmul(y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_f32_transposed_rhs_5x13",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 33, [7, 13], -1.0, 1.0);
            let y = uniform(dev, 34, [5, 13], -1.0, 1.0).transpose();
            vec![x.matmul(y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_f32_both_transposed_33x65",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 35, [33, 65], -1.0, 1.0).transpose();
            let y = uniform(dev, 36, [17, 33], -1.0, 1.0).transpose();
            vec![x.matmul(y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_f32_swap_dims_batch",
        Tol::REDUCTION,
        |dev| {
            // [7, 3, 13] -> [3, 7, 13] and [5, 13, 3] -> [3, 13, 5].
            let x = uniform(dev, 37, [7, 3, 13], -1.0, 1.0).swap_dims(0, 1);
            let y = uniform(dev, 38, [5, 13, 3], -1.0, 1.0).permute([2, 1, 0]);
            vec![x.matmul(y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_f32_self_gram_31x12",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 39, [31, 12], -1.0, 1.0);
            vec![x.clone().matmul(x.transpose()).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_f32_sliced_operands",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 40, [20, 30], -1.0, 1.0).slice([3..15, 5..26]);
            let y = uniform(dev, 41, [25, 9], -1.0, 1.0).slice([2..23, 0..9]);
            vec![x.matmul(y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_f32_expanded_rhs",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 42, [4, 6, 10], -1.0, 1.0);
            let y = uniform(dev, 43, [10, 3], -1.0, 1.0)
                .unsqueeze::<3>()
                .expand([4, 10, 3]);
            vec![x.matmul(y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "matmul_then_add_bias_f32_19x23",
        Tol::REDUCTION,
        |dev| {
            let x = uniform(dev, 44, [19, 23], -1.0, 1.0);
            let w = uniform(dev, 45, [23, 11], -1.0, 1.0);
            let b = uniform(dev, 46, [1, 11], -1.0, 1.0);
            vec![(x.matmul(w) + b).into_data()]
        },
    ));

    // Ints.
    for (a, b) in [([7usize, 13usize], [13usize, 5usize]), ([33, 16], [16, 9])] {
        let name = format!("matmul_int_{}_{}", label(&a), label(&b));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            let x: Tensor<2, Int> = ints(dev, s, a, -20, 20);
            let y: Tensor<2, Int> = ints(dev, s + 1, b, -20, 20);
            vec![x.matmul(y).into_data()]
        }));
    }
    out.push(Case::new(
        G,
        "matmul_int_batched_2x5x6_2x6x3",
        Tol::Exact,
        |dev| {
            let x: Tensor<3, Int> = ints(dev, 51, [2, 5, 6], -9, 10);
            let y: Tensor<3, Int> = ints(dev, 52, [2, 6, 3], -9, 10);
            vec![x.matmul(y).into_data()]
        },
    ));
    out
}
