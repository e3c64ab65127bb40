//! Elementwise cases: float unary and binary ops (with broadcasting), int
//! arithmetic with negative operands, bool logic, comparisons and NaN/inf
//! tests.

use burn::tensor::activation;
use burn::tensor::{Device, Tensor, TensorData};

use super::inputs::{arr, by_rank, ints, label, nonzero_ints, quarters, seed, signed, uniform};
use super::{Case, Tol};

const G: &str = "elementwise";

/// The shapes unary ops run on.
const SHAPES: &[&[usize]] = &[&[7], &[33, 17], &[1, 1], &[2, 3, 5]];

#[derive(Clone, Copy, Debug)]
enum Unary {
    Exp,
    Log,
    Log1p,
    Sqrt,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sinh,
    Cosh,
    Atan,
    Abs,
    Neg,
    Recip,
    Square,
    PowfScalar,
    PowiScalar,
    Erf,
    Sigmoid,
    Relu,
    Gelu,
    Silu,
    LeakyRelu,
    Softplus,
    Floor,
    Ceil,
    Round,
    Trunc,
    Sign,
    Clamp,
}

/// What a unary op's input is made of.
#[derive(Clone, Copy)]
enum Input {
    Uniform(f32, f32),
    Quarters(i64),
}

impl Unary {
    const ALL: [Unary; 30] = [
        Unary::Exp,
        Unary::Log,
        Unary::Log1p,
        Unary::Sqrt,
        Unary::Sin,
        Unary::Cos,
        Unary::Tan,
        Unary::Tanh,
        Unary::Sinh,
        Unary::Cosh,
        Unary::Atan,
        Unary::Abs,
        Unary::Neg,
        Unary::Recip,
        Unary::Square,
        Unary::PowfScalar,
        Unary::PowiScalar,
        Unary::Erf,
        Unary::Sigmoid,
        Unary::Relu,
        Unary::Gelu,
        Unary::Silu,
        Unary::LeakyRelu,
        Unary::Softplus,
        Unary::Floor,
        Unary::Ceil,
        Unary::Round,
        Unary::Trunc,
        Unary::Sign,
        Unary::Clamp,
    ];

    fn name(self) -> &'static str {
        match self {
            Unary::Exp => "exp",
            Unary::Log => "log",
            Unary::Log1p => "log1p",
            Unary::Sqrt => "sqrt",
            Unary::Sin => "sin",
            Unary::Cos => "cos",
            Unary::Tan => "tan",
            Unary::Tanh => "tanh",
            Unary::Sinh => "sinh",
            Unary::Cosh => "cosh",
            Unary::Atan => "atan",
            Unary::Abs => "abs",
            Unary::Neg => "neg",
            Unary::Recip => "recip",
            Unary::Square => "square",
            Unary::PowfScalar => "powf_scalar2.5",
            Unary::PowiScalar => "powi_scalar3",
            Unary::Erf => "erf",
            Unary::Sigmoid => "sigmoid",
            Unary::Relu => "relu",
            Unary::Gelu => "gelu",
            Unary::Silu => "silu",
            Unary::LeakyRelu => "leaky_relu0.1",
            Unary::Softplus => "softplus",
            Unary::Floor => "floor",
            Unary::Ceil => "ceil",
            Unary::Round => "round",
            Unary::Trunc => "trunc",
            Unary::Sign => "sign",
            Unary::Clamp => "clamp",
        }
    }

    fn input(self) -> Input {
        match self {
            Unary::Exp => Input::Uniform(-10.0, 10.0),
            Unary::Log => Input::Uniform(0.01, 100.0),
            Unary::Log1p => Input::Uniform(-0.5, 10.0),
            Unary::Sqrt => Input::Uniform(0.0, 100.0),
            Unary::Sin | Unary::Cos => Input::Uniform(-6.0, 6.0),
            Unary::Tan => Input::Uniform(-1.2, 1.2),
            Unary::Tanh | Unary::Sinh | Unary::Cosh => Input::Uniform(-5.0, 5.0),
            Unary::Atan => Input::Uniform(-20.0, 20.0),
            Unary::Recip => Input::Uniform(0.1, 10.0),
            Unary::PowfScalar => Input::Uniform(0.0, 10.0),
            Unary::PowiScalar => Input::Uniform(-4.0, 4.0),
            Unary::Erf => Input::Uniform(-3.0, 3.0),
            Unary::Sigmoid | Unary::Silu | Unary::Softplus => Input::Uniform(-10.0, 10.0),
            Unary::Gelu => Input::Uniform(-5.0, 5.0),
            Unary::Floor
            | Unary::Ceil
            | Unary::Round
            | Unary::Trunc
            | Unary::Sign
            | Unary::Clamp
            | Unary::Abs
            | Unary::Neg
            | Unary::Relu
            | Unary::LeakyRelu => Input::Quarters(10),
            Unary::Square => Input::Uniform(-10.0, 10.0),
        }
    }

    fn tol(self) -> Tol {
        match self {
            Unary::Floor
            | Unary::Ceil
            | Unary::Round
            | Unary::Trunc
            | Unary::Sign
            | Unary::Clamp
            | Unary::Abs
            | Unary::Neg
            | Unary::Relu => Tol::Exact,
            _ => Tol::ELEMENTWISE,
        }
    }

    fn apply<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Unary::Exp => x.exp(),
            Unary::Log => x.log(),
            Unary::Log1p => x.log1p(),
            Unary::Sqrt => x.sqrt(),
            Unary::Sin => x.sin(),
            Unary::Cos => x.cos(),
            Unary::Tan => x.tan(),
            Unary::Tanh => x.tanh(),
            Unary::Sinh => x.sinh(),
            Unary::Cosh => x.cosh(),
            Unary::Atan => x.atan(),
            Unary::Abs => x.abs(),
            Unary::Neg => x.neg(),
            Unary::Recip => x.recip(),
            Unary::Square => x.square(),
            Unary::PowfScalar => x.powf_scalar(2.5),
            Unary::PowiScalar => x.powi_scalar(3),
            Unary::Erf => x.erf(),
            Unary::Sigmoid => activation::sigmoid(x),
            Unary::Relu => activation::relu(x),
            Unary::Gelu => activation::gelu(x),
            Unary::Silu => activation::silu(x),
            Unary::LeakyRelu => activation::leaky_relu(x, 0.1),
            Unary::Softplus => activation::softplus(x, 1.0),
            Unary::Floor => x.floor(),
            Unary::Ceil => x.ceil(),
            Unary::Round => x.round(),
            Unary::Trunc => x.trunc(),
            Unary::Sign => x.sign(),
            Unary::Clamp => x.clamp(-2.5, 3.75),
        }
    }
}

fn unary_run<const D: usize>(dev: &Device, op: Unary, shape: &[usize], s: u64) -> Vec<TensorData> {
    let x = match op.input() {
        Input::Uniform(lo, hi) => uniform::<D>(dev, s, arr(shape), lo, hi),
        Input::Quarters(lim) => quarters::<D>(dev, s, arr(shape), lim),
    };
    vec![op.apply(x).into_data()]
}

#[derive(Clone, Copy, Debug)]
enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Remainder,
    Fmod,
    MaxPair,
    MinPair,
    Powf,
    Atan2,
}

impl Binary {
    fn name(self) -> &'static str {
        match self {
            Binary::Add => "add",
            Binary::Sub => "sub",
            Binary::Mul => "mul",
            Binary::Div => "div",
            Binary::Remainder => "remainder",
            Binary::Fmod => "fmod",
            Binary::MaxPair => "max_pair",
            Binary::MinPair => "min_pair",
            Binary::Powf => "powf",
            Binary::Atan2 => "atan2",
        }
    }

    fn tol(self) -> Tol {
        match self {
            Binary::MaxPair | Binary::MinPair => Tol::Exact,
            _ => Tol::ELEMENTWISE,
        }
    }

    fn inputs<const D: usize>(
        self,
        dev: &Device,
        s: u64,
        a: [usize; D],
        b: [usize; D],
    ) -> (Tensor<D>, Tensor<D>) {
        match self {
            Binary::Div | Binary::Remainder | Binary::Fmod => (
                uniform(dev, s, a, -10.0, 10.0),
                signed(dev, s + 1, b, 0.5, 3.0),
            ),
            Binary::Powf => (
                uniform(dev, s, a, 0.1, 5.0),
                uniform(dev, s + 1, b, -2.0, 2.0),
            ),
            Binary::MaxPair | Binary::MinPair => {
                (quarters(dev, s, a, 4), quarters(dev, s + 1, b, 4))
            }
            _ => (
                uniform(dev, s, a, -10.0, 10.0),
                uniform(dev, s + 1, b, -10.0, 10.0),
            ),
        }
    }

    fn apply<const D: usize>(self, x: Tensor<D>, y: Tensor<D>) -> Tensor<D> {
        match self {
            Binary::Add => x + y,
            Binary::Sub => x - y,
            Binary::Mul => x * y,
            Binary::Div => x / y,
            Binary::Remainder => x.remainder(y),
            Binary::Fmod => x.fmod(y),
            Binary::MaxPair => x.max_pair(y),
            Binary::MinPair => x.min_pair(y),
            Binary::Powf => x.powf(y),
            Binary::Atan2 => x.atan2(y),
        }
    }
}

fn binary_run<const D: usize>(
    dev: &Device,
    op: Binary,
    a: &[usize],
    b: &[usize],
    s: u64,
) -> Vec<TensorData> {
    let (x, y) = op.inputs::<D>(dev, s, arr(a), arr(b));
    vec![op.apply(x, y).into_data()]
}

/// Shape pairs for binary ops: equal, one side broadcast, both broadcast.
const PAIRS: &[(&[usize], &[usize])] = &[
    (&[33, 17], &[33, 17]),
    (&[33, 17], &[1, 17]),
    (&[33, 1], &[1, 17]),
    (&[2, 3, 5], &[2, 1, 5]),
    (&[7], &[7]),
    (&[2, 1, 4, 3], &[1, 3, 1, 3]),
];

#[derive(Clone, Copy, Debug)]
enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
    Remainder,
    MaxPair,
    MinPair,
}

impl IntOp {
    const ALL: [IntOp; 7] = [
        IntOp::Add,
        IntOp::Sub,
        IntOp::Mul,
        IntOp::Div,
        IntOp::Remainder,
        IntOp::MaxPair,
        IntOp::MinPair,
    ];

    fn name(self) -> &'static str {
        match self {
            IntOp::Add => "add",
            IntOp::Sub => "sub",
            IntOp::Mul => "mul",
            IntOp::Div => "div",
            IntOp::Remainder => "remainder",
            IntOp::MaxPair => "max_pair",
            IntOp::MinPair => "min_pair",
        }
    }
}

fn int_binary_run<const D: usize>(
    dev: &Device,
    op: IntOp,
    a: &[usize],
    b: &[usize],
    s: u64,
) -> Vec<TensorData> {
    let x = ints::<D>(dev, s, arr(a), -1000, 1000);
    let y = nonzero_ints::<D>(dev, s + 1, arr(b), -13, 14);
    let out = match op {
        IntOp::Add => x + y,
        IntOp::Sub => x - y,
        IntOp::Mul => x * y,
        IntOp::Div => x / y,
        IntOp::Remainder => x.remainder(y),
        IntOp::MaxPair => x.max_pair(y),
        IntOp::MinPair => x.min_pair(y),
    };
    vec![out.into_data()]
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // Float unary: every op on 33x17 and on one of the other shapes.
    for (i, op) in Unary::ALL.into_iter().enumerate() {
        let other = SHAPES[[0, 2, 3][i % 3]];
        for shape in [SHAPES[1], other] {
            let name = format!("{}_f32_{}", op.name(), label(shape));
            let s = seed(&name);
            out.push(Case::new(G, name, op.tol(), move |dev| {
                by_rank!(shape, unary_run(dev, op, shape, s))
            }));
        }
    }

    // Float binary with broadcasting.
    let binaries: [(Binary, &[usize]); 10] = [
        (Binary::Add, &[0, 1, 2, 3, 5]),
        (Binary::Sub, &[0, 2, 4]),
        (Binary::Mul, &[0, 1, 3, 5]),
        (Binary::Div, &[0, 2, 3]),
        (Binary::Remainder, &[0, 1, 4]),
        (Binary::Fmod, &[0, 2]),
        (Binary::MaxPair, &[0, 2, 3]),
        (Binary::MinPair, &[1, 4]),
        (Binary::Powf, &[0, 1]),
        (Binary::Atan2, &[0, 2]),
    ];
    for (op, pairs) in binaries {
        for &p in pairs {
            let (a, b) = PAIRS[p];
            let name = format!("{}_f32_{}_{}", op.name(), label(a), label(b));
            let s = seed(&name);
            out.push(Case::new(G, name, op.tol(), move |dev| {
                by_rank!(a, binary_run(dev, op, a, b, s))
            }));
        }
    }

    // Float scalar ops.
    type ScalarOp = fn(Tensor<2>) -> Tensor<2>;
    let scalars: [(&str, ScalarOp, Tol); 7] = [
        ("add_scalar", |x| x + 2.5, Tol::ELEMENTWISE),
        ("sub_scalar", |x| x - 1.25, Tol::ELEMENTWISE),
        ("mul_scalar", |x| x * -3.0, Tol::ELEMENTWISE),
        ("div_scalar", |x| x / 7.0, Tol::ELEMENTWISE),
        (
            "remainder_scalar_pos",
            |x| x.remainder_scalar(2.5),
            Tol::ELEMENTWISE,
        ),
        (
            "remainder_scalar_neg",
            |x| x.remainder_scalar(-1.5),
            Tol::ELEMENTWISE,
        ),
        ("fmod_scalar_neg", |x| x.fmod_scalar(-1.5), Tol::ELEMENTWISE),
    ];
    for (name, f, tol) in scalars {
        let name = format!("{name}_f32_33x17");
        let s = seed(&name);
        out.push(Case::new(G, name, tol, move |dev| {
            vec![f(uniform(dev, s, [33, 17], -10.0, 10.0)).into_data()]
        }));
    }

    // A chain the fusion backend fuses into one kernel.
    out.push(Case::new(
        G,
        "fused_chain_f32_65x31",
        Tol::ELEMENTWISE,
        |dev| {
            let s = seed("fused_chain_f32_65x31");
            let x = uniform(dev, s, [65, 31], -2.0, 2.0);
            let y = uniform(dev, s + 1, [1, 31], 0.5, 2.0);
            let z = (x.clone() * y.clone() + 1.0).exp() / (y + x.abs()) - 0.5;
            vec![activation::tanh(z).into_data()]
        },
    ));

    // Int arithmetic with negative operands (tensor-tensor, broadcast).
    for (i, op) in IntOp::ALL.into_iter().enumerate() {
        let pairs: &[usize] = if i % 2 == 0 { &[0, 3] } else { &[1, 2] };
        for &p in pairs {
            let (a, b) = PAIRS[p];
            let name = format!("{}_int_{}_{}", op.name(), label(a), label(b));
            let s = seed(&name);
            out.push(Case::new(G, name, Tol::Exact, move |dev| {
                by_rank!(a, int_binary_run(dev, op, a, b, s))
            }));
        }
    }

    // Int scalar and unary ops.
    type IntUnary = fn(Tensor<2, burn::tensor::Int>) -> Tensor<2, burn::tensor::Int>;
    let int_unary: [(&str, IntUnary); 11] = [
        ("add_scalar_int", |x| x + 7),
        ("sub_scalar_int", |x| x - (-9)),
        ("mul_scalar_int", |x| x * -3),
        ("div_scalar_int_pos", |x| x.div_scalar(7)),
        ("div_scalar_int_neg", |x| x.div_scalar(-4)),
        ("remainder_scalar_int_pos", |x| x.remainder_scalar(7)),
        ("remainder_scalar_int_neg", |x| x.remainder_scalar(-4)),
        ("abs_int", |x| x.abs()),
        ("neg_int", |x| x.neg()),
        ("sign_int", |x| x.sign()),
        ("clamp_int", |x| x.clamp(-50, 75)),
    ];
    for (name, f) in int_unary {
        let name = format!("{name}_33x17");
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            vec![f(ints(dev, s, [33, 17], -200, 200)).into_data()]
        }));
    }

    out
}
