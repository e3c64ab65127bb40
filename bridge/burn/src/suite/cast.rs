//! Casts between kinds (float/int/bool) and between dtypes (f16, bf16,
//! int widths). Ints and bools exact; half precision within a tolerance of
//! its rounding.

use burn::tensor::{FloatDType, IntDType};

use super::inputs::{bools, float, ints, quarters, uniform};
use super::{Case, Tol};

const G: &str = "cast";

/// Half precision: 11 significant bits.
const HALF: Tol = Tol::Close {
    rel: 2e-3,
    abs: 1e-3,
};

/// bfloat16: 8 significant bits.
const BHALF: Tol = Tol::Close {
    rel: 1e-2,
    abs: 1e-2,
};

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // Between kinds.
    out.push(Case::new(
        G,
        "float_to_int_quarters_33x17",
        Tol::Exact,
        |dev| vec![quarters(dev, 1, [33, 17], 20).int().into_data()],
    ));
    out.push(Case::new(
        G,
        "float_to_int_halves_and_negatives_12",
        Tol::Exact,
        |dev| {
            let v = vec![
                -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.75, 0.75, -1.0, 3.0, -7.99, 7.99,
            ];
            vec![float(dev, v, [12]).int().into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "float_to_int_large_2x3x5",
        Tol::Exact,
        |dev| vec![uniform(dev, 2, [2, 3, 5], -1.0e6, 1.0e6).int().into_data()],
    ));
    out.push(Case::new(G, "int_to_float_33x17", Tol::Exact, |dev| {
        vec![
            ints(dev, 3, [33, 17], -100_000, 100_000)
                .float()
                .into_data(),
        ]
    }));
    out.push(Case::new(
        G,
        "int_to_float_then_div_7",
        Tol::ELEMENTWISE,
        |dev| vec![(ints(dev, 4, [7], -50, 50).float() / 3.0).into_data()],
    ));
    out.push(Case::new(
        G,
        "bool_to_int_and_float_4x9x6",
        Tol::Exact,
        |dev| {
            let b = bools(dev, 5, [4, 9, 6], 0.5);
            vec![b.clone().int().into_data(), b.float().into_data()]
        },
    ));
    out.push(Case::new(G, "bool_to_int_sum_33x17", Tol::Exact, |dev| {
        vec![bools(dev, 6, [33, 17], 0.3).int().sum().into_data()]
    }));
    out.push(Case::new(
        G,
        "float_to_bool_with_zeros_33x17",
        Tol::Exact,
        |dev| vec![quarters(dev, 7, [33, 17], 1).bool().into_data()],
    ));
    out.push(Case::new(
        G,
        "int_to_bool_with_zeros_2x3x5",
        Tol::Exact,
        |dev| vec![ints(dev, 8, [2, 3, 5], -2, 3).bool().into_data()],
    ));
    out.push(Case::new(
        G,
        "compare_to_float_mask_1x1",
        Tol::Exact,
        |dev| {
            let x = uniform(dev, 9, [1, 1], -1.0, 1.0);
            vec![x.lower_elem(0.0).float().into_data()]
        },
    ));

    // Between dtypes.
    out.push(Case::new(G, "f32_to_f16_to_f32_33x17", HALF, |dev| {
        let x = uniform(dev, 10, [33, 17], -100.0, 100.0);
        vec![x.cast(FloatDType::F16).cast(FloatDType::F32).into_data()]
    }));
    out.push(Case::new(G, "f16_exp_add_7", HALF, |dev| {
        let x = uniform(dev, 11, [7], -2.0, 2.0).cast(FloatDType::F16);
        let y = uniform(dev, 12, [7], -2.0, 2.0).cast(FloatDType::F16);
        vec![(x.exp() + y).cast(FloatDType::F32).into_data()]
    }));
    out.push(Case::new(G, "f16_sum_dim1_4x64", HALF, |dev| {
        let x = uniform(dev, 13, [4, 64], 0.0, 1.0).cast(FloatDType::F16);
        vec![x.sum_dim(1).cast(FloatDType::F32).into_data()]
    }));
    out.push(Case::new(G, "f32_to_bf16_to_f32_5x7", BHALF, |dev| {
        let x = uniform(dev, 14, [5, 7], -100.0, 100.0);
        vec![x.cast(FloatDType::BF16).cast(FloatDType::F32).into_data()]
    }));
    out.push(Case::new(
        G,
        "f32_to_i32_cast_quarters_5x7",
        Tol::Exact,
        |dev| vec![quarters(dev, 15, [5, 7], 9).cast(IntDType::I32).into_data()],
    ));
    out.push(Case::new(G, "int_to_u32_to_float_5x7", Tol::Exact, |dev| {
        let x = ints(dev, 16, [5, 7], 0, 1000);
        vec![x.cast(IntDType::U32).float().into_data()]
    }));
    out.push(Case::new(G, "int_to_i64_5x7", Tol::Exact, |dev| {
        let x = ints(dev, 17, [5, 7], -1000, 1000);
        vec![x.cast(IntDType::I64).into_data()]
    }));
    out.push(Case::new(G, "int_to_u8_wrap_5x7", Tol::Exact, |dev| {
        let x = ints(dev, 18, [5, 7], 0, 255);
        vec![x.cast(IntDType::U8).cast(IntDType::I32).into_data()]
    }));
    out
}
