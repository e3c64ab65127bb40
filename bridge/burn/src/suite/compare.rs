//! Comparison cases: bool logic, comparisons of floats and ints with
//! tensors (broadcast) and scalars, and NaN/infinity tests.

use burn::tensor::{Device, Tensor, TensorData};

use super::inputs::{bools, float, ints, label, quarters, seed, uniform};
use super::{Case, Tol};

const G: &str = "compare";

#[derive(Clone, Copy, Debug)]
enum Cmp {
    Equal,
    NotEqual,
    Greater,
    GreaterEqual,
    Lower,
    LowerEqual,
}

impl Cmp {
    const ALL: [Cmp; 6] = [
        Cmp::Equal,
        Cmp::NotEqual,
        Cmp::Greater,
        Cmp::GreaterEqual,
        Cmp::Lower,
        Cmp::LowerEqual,
    ];

    fn name(self) -> &'static str {
        match self {
            Cmp::Equal => "equal",
            Cmp::NotEqual => "not_equal",
            Cmp::Greater => "greater",
            Cmp::GreaterEqual => "greater_equal",
            Cmp::Lower => "lower",
            Cmp::LowerEqual => "lower_equal",
        }
    }
}

/// Comparison inputs: small-range quarters (floats) or small ints, so equal
/// pairs occur often. `scalar` compares with 0.5 (floats) or 2 (ints).
fn cmp_run(dev: &Device, op: Cmp, int_kind: bool, scalar: bool, s: u64) -> Vec<TensorData> {
    let shape = [33, 17];
    let bshape = if scalar { [33, 17] } else { [1, 17] };
    let out = if int_kind {
        let x = ints(dev, s, shape, -3, 4);
        let y = ints(dev, s + 1, bshape, -3, 4);
        match (op, scalar) {
            (Cmp::Equal, false) => x.equal(y),
            (Cmp::NotEqual, false) => x.not_equal(y),
            (Cmp::Greater, false) => x.greater(y),
            (Cmp::GreaterEqual, false) => x.greater_equal(y),
            (Cmp::Lower, false) => x.lower(y),
            (Cmp::LowerEqual, false) => x.lower_equal(y),
            (Cmp::Equal, true) => x.equal_elem(2),
            (Cmp::NotEqual, true) => x.not_equal_elem(2),
            (Cmp::Greater, true) => x.greater_elem(2),
            (Cmp::GreaterEqual, true) => x.greater_equal_elem(2),
            (Cmp::Lower, true) => x.lower_elem(2),
            (Cmp::LowerEqual, true) => x.lower_equal_elem(2),
        }
    } else {
        let x = quarters(dev, s, shape, 1);
        let y = quarters(dev, s + 1, bshape, 1);
        match (op, scalar) {
            (Cmp::Equal, false) => x.equal(y),
            (Cmp::NotEqual, false) => x.not_equal(y),
            (Cmp::Greater, false) => x.greater(y),
            (Cmp::GreaterEqual, false) => x.greater_equal(y),
            (Cmp::Lower, false) => x.lower(y),
            (Cmp::LowerEqual, false) => x.lower_equal(y),
            (Cmp::Equal, true) => x.equal_elem(0.5),
            (Cmp::NotEqual, true) => x.not_equal_elem(0.5),
            (Cmp::Greater, true) => x.greater_elem(0.5),
            (Cmp::GreaterEqual, true) => x.greater_equal_elem(0.5),
            (Cmp::Lower, true) => x.lower_elem(0.5),
            (Cmp::LowerEqual, true) => x.lower_equal_elem(0.5),
        }
    };
    vec![out.into_data()]
}

/// A [5, 7] float tensor with NaN, +inf and -inf at fixed places.
fn special(dev: &Device, s: u64) -> Tensor<2> {
    let mut values = crate::host::Rng::new(s).uniforms(35, -5.0, 5.0);
    for (i, v) in [
        (0, f32::NAN),
        (3, f32::INFINITY),
        (8, f32::NEG_INFINITY),
        (13, f32::NAN),
        (21, f32::INFINITY),
        (34, f32::NAN),
        (30, f32::NEG_INFINITY),
    ] {
        values[i] = v;
    }
    float(dev, values, [5, 7])
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // Bool logic.
    type BoolOp = fn(
        Tensor<3, burn::tensor::Bool>,
        Tensor<3, burn::tensor::Bool>,
    ) -> Tensor<3, burn::tensor::Bool>;
    let bool_ops: [(&str, BoolOp); 4] = [
        ("bool_not", |x, _| x.bool_not()),
        ("bool_and", |x, y| x.bool_and(y)),
        ("bool_or", |x, y| x.bool_or(y)),
        ("bool_xor", |x, y| x.bool_xor(y)),
    ];
    for (name, f) in bool_ops {
        for shape in [[2, 3, 5], [3, 11, 7]] {
            let name = format!("{name}_{}", label(&shape));
            let s = seed(&name);
            out.push(Case::new(G, name, Tol::Exact, move |dev| {
                let x = bools(dev, s, shape, 0.5);
                let y = bools(dev, s + 1, shape, 0.3);
                vec![f(x, y).into_data()]
            }));
        }
    }
    out.push(Case::new(G, "bool_not_not_and_1x1", Tol::Exact, |dev| {
        let x = bools(dev, 5, [1, 1], 0.5);
        let y = bools(dev, 6, [1, 1], 0.5);
        vec![
            x.clone().bool_not().bool_not().bool_and(y).into_data(),
            x.into_data(),
        ]
    }));

    // Comparisons.
    for (i, op) in Cmp::ALL.into_iter().enumerate() {
        for (kind, int_kind) in [("f32", false), ("int", true)] {
            for (how, scalar) in [("tensor", false), ("scalar", true)] {
                if scalar && i % 2 == 1 && int_kind {
                    // Keep the count reasonable: int scalar forms on every
                    // other op only.
                    continue;
                }
                let name = format!("{}_{how}_{kind}_33x17", op.name());
                let s = seed(&name);
                out.push(Case::new(G, name, Tol::Exact, move |dev| {
                    cmp_run(dev, op, int_kind, scalar, s)
                }));
            }
        }
    }

    // NaN and infinities.
    out.push(Case::new(G, "is_nan_f32_5x7", Tol::Exact, |dev| {
        vec![special(dev, 1).is_nan().into_data()]
    }));
    out.push(Case::new(G, "is_inf_f32_5x7", Tol::Exact, |dev| {
        vec![special(dev, 2).is_inf().into_data()]
    }));
    out.push(Case::new(G, "is_finite_f32_5x7", Tol::Exact, |dev| {
        vec![special(dev, 3).is_finite().into_data()]
    }));
    out.push(Case::new(
        G,
        "add_nan_inf_propagates_f32_5x7",
        Tol::ELEMENTWISE,
        |dev| {
            let x = special(dev, 4);
            let y = uniform(dev, 5, [1, 7], -1.0, 1.0);
            vec![(x * 2.0 + y).into_data()]
        },
    ));
    out
}
