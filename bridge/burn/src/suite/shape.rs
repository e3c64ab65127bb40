//! Shape and data movement: cat, stack, repeat, expand, reshape,
//! transpose/swap_dims/permute followed by contiguous ops, flip,
//! unsqueeze/squeeze, chunk/split, roll, pad, triu/tril. All exact.

use burn::tensor::{Int, Tensor};

use super::inputs::{bools, ints, quarters, uniform};
use super::{Case, Tol};

const G: &str = "shape";

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // cat / stack.
    out.push(Case::new(
        G,
        "cat_dim0_f32_3x5_4x5_1x5",
        Tol::Exact,
        |dev| {
            let a = uniform(dev, 1, [3, 5], -1.0, 1.0);
            let b = uniform(dev, 2, [4, 5], -1.0, 1.0);
            let c = uniform(dev, 3, [1, 5], -1.0, 1.0);
            vec![Tensor::cat(vec![a, b, c], 0).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "cat_dim1_f32_2x3x4_2x7x4",
        Tol::Exact,
        |dev| {
            let a = uniform(dev, 4, [2, 3, 4], -1.0, 1.0);
            let b = uniform(dev, 5, [2, 7, 4], -1.0, 1.0);
            vec![Tensor::cat(vec![a, b], 1).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "cat_dim2_int_2x3x1_2x3x6",
        Tol::Exact,
        |dev| {
            let a = ints(dev, 6, [2, 3, 1], -9, 9);
            let b = ints(dev, 7, [2, 3, 6], -9, 9);
            vec![Tensor::cat(vec![a, b], 2).into_data()]
        },
    ));
    out.push(Case::new(G, "cat_dim0_bool_2x4_5x4", Tol::Exact, |dev| {
        let a = bools(dev, 8, [2, 4], 0.5);
        let b = bools(dev, 9, [5, 4], 0.5);
        vec![Tensor::cat(vec![a, b], 0).into_data()]
    }));
    out.push(Case::new(G, "stack_dim0_f32_3x_4x5", Tol::Exact, |dev| {
        let t: Vec<Tensor<2>> = (0..3)
            .map(|i| uniform(dev, 10 + i, [4, 5], -1.0, 1.0))
            .collect();
        vec![Tensor::stack::<3>(t, 0).into_data()]
    }));
    out.push(Case::new(G, "stack_dim2_int_2x_3x4", Tol::Exact, |dev| {
        let t: Vec<Tensor<2, Int>> = (0..2).map(|i| ints(dev, 13 + i, [3, 4], -9, 9)).collect();
        vec![Tensor::stack::<3>(t, 2).into_data()]
    }));

    // repeat / expand.
    out.push(Case::new(G, "repeat_dim1_f32_3x4_x3", Tol::Exact, |dev| {
        vec![
            uniform(dev, 15, [3, 4], -1.0, 1.0)
                .repeat_dim(1, 3)
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "repeat_f32_2x3x1_x2x1x5", Tol::Exact, |dev| {
        vec![
            uniform(dev, 16, [2, 3, 1], -1.0, 1.0)
                .repeat(&[2, 1, 5])
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "repeat_dim0_int_1x7_x4", Tol::Exact, |dev| {
        vec![ints(dev, 17, [1, 7], -9, 9).repeat_dim(0, 4).into_data()]
    }));
    out.push(Case::new(G, "expand_f32_3x1_to_2x3x6", Tol::Exact, |dev| {
        let x = uniform(dev, 18, [3, 1], -1.0, 1.0);
        vec![x.expand([2, 3, 6]).into_data()]
    }));
    out.push(Case::new(G, "expand_then_mul_f32_1x5", Tol::Exact, |dev| {
        let x = quarters(dev, 19, [1, 5], 4);
        let y = quarters(dev, 20, [4, 5], 4);
        vec![(x.expand([4, 5]) * y).into_data()]
    }));
    out.push(Case::new(G, "expand_bool_1x4_to_3x4", Tol::Exact, |dev| {
        vec![bools(dev, 21, [1, 4], 0.5).expand([3, 4]).into_data()]
    }));

    // reshape, and views followed by contiguous work.
    out.push(Case::new(
        G,
        "reshape_f32_6x10_to_3x4x5",
        Tol::Exact,
        |dev| {
            vec![
                uniform(dev, 22, [6, 10], -1.0, 1.0)
                    .reshape([3, 4, 5])
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(
        G,
        "reshape_infer_int_4x9x6_to_m1x18",
        Tol::Exact,
        |dev| {
            vec![
                ints(dev, 23, [4, 9, 6], -9, 9)
                    .reshape([-1, 18])
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(
        G,
        "transpose_then_reshape_f32_5x7",
        Tol::Exact,
        |dev| {
            // Reshaping a transposed view forces a copy into the new layout.
            let x = uniform(dev, 24, [5, 7], -1.0, 1.0);
            vec![x.transpose().reshape([35]).into_data()]
        },
    ));
    out.push(Case::new(G, "transpose_f32_33x17", Tol::Exact, |dev| {
        vec![
            uniform(dev, 25, [33, 17], -1.0, 1.0)
                .transpose()
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "swap_dims_0_2_int_2x3x5", Tol::Exact, |dev| {
        vec![ints(dev, 26, [2, 3, 5], -9, 9).swap_dims(0, 2).into_data()]
    }));
    out.push(Case::new(
        G,
        "permute_2_0_3_1_f32_2x3x4x5",
        Tol::Exact,
        |dev| {
            vec![
                uniform(dev, 27, [2, 3, 4, 5], -1.0, 1.0)
                    .permute([2, 0, 3, 1])
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(
        G,
        "permute_then_add_f32_3x4x5",
        Tol::Exact,
        |dev| {
            let x = quarters(dev, 28, [3, 4, 5], 4).permute([2, 0, 1]);
            let y = quarters(dev, 29, [5, 3, 4], 4);
            vec![(x + y).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "permute_then_reshape_then_flip_f32_2x3x4",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 30, [2, 3, 4], -1.0, 1.0).permute([1, 2, 0]);
            vec![x.reshape([6, 4]).flip([0]).into_data()]
        },
    ));
    out.push(Case::new(G, "movedim_f32_2x3x4", Tol::Exact, |dev| {
        vec![
            uniform(dev, 31, [2, 3, 4], -1.0, 1.0)
                .movedim(0, 2)
                .into_data(),
        ]
    }));

    // flip.
    out.push(Case::new(G, "flip_0_2_f32_3x4x5", Tol::Exact, |dev| {
        vec![
            uniform(dev, 32, [3, 4, 5], -1.0, 1.0)
                .flip([0, 2])
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "flip_1_int_6x7", Tol::Exact, |dev| {
        vec![ints(dev, 33, [6, 7], -9, 9).flip([1]).into_data()]
    }));
    out.push(Case::new(G, "flip_0_bool_5", Tol::Exact, |dev| {
        vec![bools(dev, 34, [5], 0.5).flip([0]).into_data()]
    }));

    // unsqueeze / squeeze.
    out.push(Case::new(
        G,
        "unsqueeze_dim1_squeeze_dim0_f32",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 35, [4, 6], -1.0, 1.0);
            let a: Tensor<3> = x.clone().unsqueeze_dim(1);
            let b: Tensor<1> = uniform(dev, 36, [1, 9], -1.0, 1.0).squeeze_dim(0);
            let c: Tensor<4> = x.unsqueeze();
            vec![a.into_data(), b.into_data(), c.into_data()]
        },
    ));
    out.push(Case::new(G, "squeeze_int_1x5x1", Tol::Exact, |dev| {
        let x: Tensor<1, Int> = ints(dev, 37, [1, 5, 1], -9, 9).squeeze();
        vec![x.into_data()]
    }));

    // chunk / split.
    out.push(Case::new(G, "chunk_3_dim0_f32_10x4", Tol::Exact, |dev| {
        let parts = uniform(dev, 38, [10, 4], -1.0, 1.0).chunk(3, 0);
        parts.into_iter().map(|t| t.into_data()).collect()
    }));
    out.push(Case::new(G, "split_4_dim1_int_3x11", Tol::Exact, |dev| {
        let parts = ints(dev, 39, [3, 11], -9, 9).split(4, 1);
        parts.into_iter().map(|t| t.into_data()).collect()
    }));
    out.push(Case::new(
        G,
        "split_with_sizes_dim2_f32_2x3x9",
        Tol::Exact,
        |dev| {
            let parts = uniform(dev, 40, [2, 3, 9], -1.0, 1.0).split_with_sizes(vec![2, 5, 2], 2);
            parts.into_iter().map(|t| t.into_data()).collect()
        },
    ));

    // roll, pad, triu/tril, flatten.
    out.push(Case::new(
        G,
        "roll_dim1_f32_4x7_shift3",
        Tol::Exact,
        |dev| {
            vec![
                uniform(dev, 41, [4, 7], -1.0, 1.0)
                    .roll_dim(3, 1)
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(
        G,
        "roll_int_5x6_shifts_m2_4",
        Tol::Exact,
        |dev| {
            vec![
                ints(dev, 42, [5, 6], -9, 9)
                    .roll(&[-2, 4], &[0, 1])
                    .into_data(),
            ]
        },
    ));
    out.push(Case::new(G, "pad_constant_f32_2x3x4", Tol::Exact, |dev| {
        let x = uniform(dev, 43, [2, 3, 4], -1.0, 1.0);
        vec![
            x.pad((1, 2, 0, 3), burn::tensor::ops::PadMode::Constant(0.5))
                .into_data(),
        ]
    }));
    out.push(Case::new(G, "triu_tril_f32_6x6", Tol::Exact, |dev| {
        let x = uniform(dev, 44, [6, 6], -1.0, 1.0);
        vec![x.clone().triu(1).into_data(), x.tril(-1).into_data()]
    }));
    out.push(Case::new(
        G,
        "flatten_f32_2x3x4x5_1to2",
        Tol::Exact,
        |dev| {
            let x: Tensor<3> = uniform(dev, 45, [2, 3, 4, 5], -1.0, 1.0).flatten(1, 2);
            vec![x.into_data()]
        },
    ));
    out
}
