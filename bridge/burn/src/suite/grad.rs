//! Gradients through `device.autodiff()`: each case marks its inputs with
//! `require_grad`, reduces an op's output to a scalar with a fixed host
//! weighting (so every output element gets a distinct upstream gradient),
//! and returns the gradient of every input.

use burn::module::Param;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation;
use burn::tensor::module::{avg_pool2d, conv_transpose2d, conv2d, max_pool2d};
use burn::tensor::ops::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, MaxPoolOptions};
use burn::tensor::{Device, Gradients, Int, Tensor, TensorData};

use super::inputs::{bools, index_list, indices, int, normal, seed, signed, uniform};
use super::{Case, Tol};

const G: &str = "grad";

fn ad(dev: &Device) -> Device {
    dev.clone().autodiff()
}

/// A leaf that requires a gradient, uniform in `[lo, hi)`.
fn leaf<const D: usize>(dev: &Device, s: u64, shape: [usize; D], lo: f32, hi: f32) -> Tensor<D> {
    uniform(dev, s, shape, lo, hi).require_grad()
}

/// `sum(y * w)` for a fixed host `w` in `[-1, 1)`.
fn weighted<const D: usize>(y: Tensor<D>, s: u64) -> Tensor<1> {
    let w = uniform(&y.device(), s ^ 0x5eed, y.dims(), -1.0, 1.0);
    (y * w).sum()
}

fn grad<const D: usize>(x: &Tensor<D>, grads: &Gradients) -> TensorData {
    x.grad(grads)
        .expect("the input has no gradient")
        .into_data()
}

type Unary2 = fn(Tensor<2>) -> Tensor<2>;

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // Unary ops on one [5, 7] input: (name, lo, hi, op).
    let unary: [(&str, f32, f32, Unary2); 23] = [
        ("exp", -3.0, 3.0, |x| x.exp()),
        ("log", 0.1, 5.0, |x| x.log()),
        ("sqrt", 0.1, 5.0, |x| x.sqrt()),
        ("sin", -3.0, 3.0, |x| x.sin()),
        ("cos", -3.0, 3.0, |x| x.cos()),
        ("tanh", -3.0, 3.0, |x| x.tanh()),
        ("abs", -3.0, 3.0, |x| x.abs()),
        ("neg", -3.0, 3.0, |x| x.neg()),
        ("recip", 0.5, 3.0, |x| x.recip()),
        ("powf_scalar2.5", 0.1, 3.0, |x| x.powf_scalar(2.5)),
        ("erf", -2.0, 2.0, |x| x.erf()),
        ("relu", -3.0, 3.0, activation::relu),
        ("gelu", -3.0, 3.0, activation::gelu),
        ("sigmoid", -4.0, 4.0, activation::sigmoid),
        ("silu", -4.0, 4.0, activation::silu),
        ("clamp", -3.0, 3.0, |x| x.clamp(-1.0, 1.5)),
        ("sum_dim1", -1.0, 1.0, |x| x.sum_dim(1)),
        ("mean_dim0", -1.0, 1.0, |x| x.mean_dim(0)),
        ("max_dim1", -1.0, 1.0, |x| x.max_dim(1)),
        ("min_dim0", -1.0, 1.0, |x| x.min_dim(0)),
        ("softmax_dim1", -2.0, 2.0, |x| activation::softmax(x, 1)),
        ("log_softmax_dim0", -2.0, 2.0, |x| {
            activation::log_softmax(x, 0)
        }),
        ("cumsum_dim1", -1.0, 1.0, |x| x.cumsum(1)),
    ];
    for (name, lo, hi, f) in unary {
        let name = format!("{name}_5x7");
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            let x = leaf(&ad(dev), s, [5, 7], lo, hi);
            let grads = weighted(f(x.clone()), s).backward();
            vec![grad(&x, &grads)]
        }));
    }

    // Binary ops, with broadcasting.
    type Binary2 = fn(Tensor<2>, Tensor<2>) -> Tensor<2>;
    let binary: [(&str, [usize; 2], [usize; 2], Binary2); 6] = [
        ("add_broadcast", [5, 7], [1, 7], |x, y| x + y),
        ("sub_broadcast", [5, 1], [5, 7], |x, y| x - y),
        ("mul", [5, 7], [5, 7], |x, y| x * y),
        ("div", [5, 7], [5, 7], |x, y| x / y),
        ("powf", [5, 7], [5, 7], |x, y| x.powf(y)),
        ("max_pair", [5, 7], [5, 7], |x, y| x.max_pair(y)),
    ];
    for (name, a, b, f) in binary {
        let name = format!("{name}_{}x{}_{}x{}", a[0], a[1], b[0], b[1]);
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            let dev = ad(dev);
            let x = leaf(&dev, s, a, 0.5, 2.0);
            // Divisors and exponents away from zero.
            let y = signed(&dev, s + 1, b, 0.5, 2.0).require_grad();
            let grads = weighted(f(x.clone(), y.clone()), s).backward();
            vec![grad(&x, &grads), grad(&y, &grads)]
        }));
    }

    out.push(Case::new(G, "matmul_6x9_9x4", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 1, [6, 9], -1.0, 1.0);
        let y = leaf(&dev, 2, [9, 4], -1.0, 1.0);
        let grads = weighted(x.clone().matmul(y.clone()), 3).backward();
        vec![grad(&x, &grads), grad(&y, &grads)]
    }));
    out.push(Case::new(
        G,
        "matmul_batched_broadcast_2x5x3_1x3x4",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let x = leaf(&dev, 4, [2, 5, 3], -1.0, 1.0);
            let y = leaf(&dev, 5, [1, 3, 4], -1.0, 1.0);
            let grads = weighted(x.clone().matmul(y.clone()), 6).backward();
            vec![grad(&x, &grads), grad(&y, &grads)]
        },
    ));
    out.push(Case::new(G, "max_dim2_3d_2x3x6", Tol::REDUCTION, |dev| {
        let x = leaf(&ad(dev), 7, [2, 3, 6], -1.0, 1.0);
        let grads = weighted(x.clone().max_dim(2), 8).backward();
        vec![grad(&x, &grads)]
    }));

    // Module ops.
    out.push(Case::new(
        G,
        "conv2d_x2x3x7x6_w4x3x3x3_p1_bias",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let x = leaf(&dev, 10, [2, 3, 7, 6], -1.0, 1.0);
            let w = leaf(&dev, 11, [4, 3, 3, 3], -1.0, 1.0);
            let b = leaf(&dev, 12, [4], -1.0, 1.0);
            let y = conv2d(
                x.clone(),
                w.clone(),
                Some(b.clone()),
                ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
            );
            let grads = weighted(y, 13).backward();
            vec![grad(&x, &grads), grad(&w, &grads), grad(&b, &grads)]
        },
    ));
    out.push(Case::new(
        G,
        "conv2d_stride2_groups2_x1x4x9x8_w6x2x3x2",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let x = leaf(&dev, 14, [1, 4, 9, 8], -1.0, 1.0);
            let w = leaf(&dev, 15, [6, 2, 3, 2], -1.0, 1.0);
            let y = conv2d(
                x.clone(),
                w.clone(),
                None,
                ConvOptions::new([2, 2], [1, 0], [1, 1], 2),
            );
            let grads = weighted(y, 16).backward();
            vec![grad(&x, &grads), grad(&w, &grads)]
        },
    ));
    out.push(Case::new(
        G,
        "conv_transpose2d_x1x2x4x5_w2x3x3x3_s2",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let x = leaf(&dev, 17, [1, 2, 4, 5], -1.0, 1.0);
            let w = leaf(&dev, 18, [2, 3, 3, 3], -1.0, 1.0);
            let opts = ConvTransposeOptions::new([2, 2], [1, 1], [1, 1], [1, 1], 1);
            let grads = weighted(conv_transpose2d(x.clone(), w.clone(), None, opts), 19).backward();
            vec![grad(&x, &grads), grad(&w, &grads)]
        },
    ));
    out.push(Case::new(
        G,
        "max_pool2d_x2x2x9x8_k3_s2_p1",
        Tol::REDUCTION,
        |dev| {
            let x = leaf(&ad(dev), 20, [2, 2, 9, 8], -1.0, 1.0);
            let opts = MaxPoolOptions::new([3, 3])
                .with_stride([2, 2])
                .with_padding([1, 1]);
            let grads = weighted(max_pool2d(x.clone(), opts), 21).backward();
            vec![grad(&x, &grads)]
        },
    ));
    out.push(Case::new(
        G,
        "avg_pool2d_x2x2x9x8_k3_s2_p1_exclude_pad",
        Tol::REDUCTION,
        |dev| {
            let x = leaf(&ad(dev), 22, [2, 2, 9, 8], -1.0, 1.0);
            let opts = AvgPoolOptions::new([3, 3])
                .with_stride([2, 2])
                .with_padding([1, 1])
                .with_count_include_pad(false);
            let grads = weighted(avg_pool2d(x.clone(), opts), 23).backward();
            vec![grad(&x, &grads)]
        },
    ));

    // Indexing and shape ops.
    out.push(Case::new(G, "gather_dim1_5x7_dup", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 24, [5, 7], -1.0, 1.0);
        let grads = weighted(x.clone().gather(1, indices(&dev, 25, [5, 10], 7)), 26).backward();
        vec![grad(&x, &grads)]
    }));
    out.push(Case::new(G, "select_dim0_6x4_dup", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 27, [6, 4], -1.0, 1.0);
        let idx = index_list(&dev, &[5, 0, 5, 2, 5]);
        let grads = weighted(x.clone().select(0, idx), 28).backward();
        vec![grad(&x, &grads)]
    }));
    out.push(Case::new(G, "slice_6x8_1to5_2to7", Tol::REDUCTION, |dev| {
        let x = leaf(&ad(dev), 29, [6, 8], -1.0, 1.0);
        let grads = weighted(x.clone().slice([1..5, 2..7]), 30).backward();
        vec![grad(&x, &grads)]
    }));
    out.push(Case::new(G, "cat_dim1_3x2_3x5", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 31, [3, 2], -1.0, 1.0);
        let y = leaf(&dev, 32, [3, 5], -1.0, 1.0);
        let z = Tensor::cat(vec![x.clone(), y.clone().exp()], 1);
        let grads = weighted(z, 33).backward();
        vec![grad(&x, &grads), grad(&y, &grads)]
    }));
    out.push(Case::new(G, "reshape_4x6_to_3x8", Tol::REDUCTION, |dev| {
        let x = leaf(&ad(dev), 34, [4, 6], -1.0, 1.0);
        let y: Tensor<2> = x.clone().reshape([3, 8]).sin();
        let grads = weighted(y, 35).backward();
        vec![grad(&x, &grads)]
    }));
    out.push(Case::new(
        G,
        "transpose_5x3_then_matmul",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let x = leaf(&dev, 36, [5, 3], -1.0, 1.0);
            let y = leaf(&dev, 37, [5, 4], -1.0, 1.0);
            let grads = weighted(x.clone().transpose().matmul(y.clone()), 38).backward();
            vec![grad(&x, &grads), grad(&y, &grads)]
        },
    ));
    out.push(Case::new(G, "permute_2x3x4", Tol::REDUCTION, |dev| {
        let x = leaf(&ad(dev), 39, [2, 3, 4], -1.0, 1.0);
        let grads = weighted(x.clone().permute([2, 0, 1]).exp(), 40).backward();
        vec![grad(&x, &grads)]
    }));
    out.push(Case::new(G, "mask_fill_5x7", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 41, [5, 7], -1.0, 1.0);
        let y = x
            .clone()
            .exp()
            .mask_fill(bools(&dev, 42, [5, 7], 0.4), 0.25);
        let grads = weighted(y, 43).backward();
        vec![grad(&x, &grads)]
    }));
    out.push(Case::new(G, "mask_where_5x7", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 44, [5, 7], -1.0, 1.0);
        let y = leaf(&dev, 45, [5, 7], -1.0, 1.0);
        let z = x
            .clone()
            .mask_where(bools(&dev, 46, [5, 7], 0.5), y.clone() * 2.0);
        let grads = weighted(z, 47).backward();
        vec![grad(&x, &grads), grad(&y, &grads)]
    }));
    out.push(Case::new(G, "expand_1x7_to_4x7", Tol::REDUCTION, |dev| {
        let x = leaf(&ad(dev), 48, [1, 7], -1.0, 1.0);
        let grads = weighted(x.clone().expand([4, 7]).tanh(), 49).backward();
        vec![grad(&x, &grads)]
    }));

    // burn::nn modules and the loss.
    out.push(Case::new(G, "nn_linear_6x5_to_3", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 50, [6, 5], -1.0, 1.0);
        let mut linear: Linear = LinearConfig::new(5, 3).init(&dev);
        linear.weight = Param::from_tensor(uniform(&dev, 51, [5, 3], -1.0, 1.0));
        linear.bias = Some(Param::from_tensor(uniform(&dev, 52, [3], -1.0, 1.0)));
        let grads = weighted(linear.forward(x.clone()), 53).backward();
        let bias = linear.bias.as_ref().expect("bias");
        vec![
            grad(&x, &grads),
            grad(&*linear.weight, &grads),
            grad(bias, &grads),
        ]
    }));
    out.push(Case::new(G, "nn_layer_norm_4x9", Tol::REDUCTION, |dev| {
        let dev = ad(dev);
        let x = leaf(&dev, 54, [4, 9], -2.0, 2.0);
        let mut ln = LayerNormConfig::new(9).init(&dev);
        ln.gamma = Param::from_tensor(uniform(&dev, 55, [9], 0.5, 1.5));
        ln.beta = Some(Param::from_tensor(uniform(&dev, 56, [9], -0.5, 0.5)));
        let grads = weighted(ln.forward(x.clone()), 57).backward();
        let beta = ln.beta.as_ref().expect("beta");
        vec![
            grad(&x, &grads),
            grad(&*ln.gamma, &grads),
            grad(beta, &grads),
        ]
    }));
    out.push(Case::new(
        G,
        "nn_cross_entropy_8x5",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let logits = leaf(&dev, 58, [8, 5], -2.0, 2.0);
            let targets: Tensor<1, Int> = int(&dev, vec![0, 4, 2, 2, 1, 3, 0, 4], [8]);
            let loss = CrossEntropyLossConfig::new()
                .init(&dev)
                .forward(logits.clone(), targets);
            let grads = loss.backward();
            vec![grad(&logits, &grads)]
        },
    ));
    out.push(Case::new(
        G,
        "cross_entropy_with_logits_probs_6x4",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let logits = leaf(&dev, 59, [6, 4], -2.0, 2.0);
            let probs = activation::softmax(uniform(&dev, 60, [6, 4], -1.0, 1.0), 1);
            let loss = burn::tensor::loss::cross_entropy_with_logits(logits.clone(), probs);
            vec![grad(&logits, &loss.backward())]
        },
    ));
    out.push(Case::new(
        G,
        "mlp_chain_linear_relu_linear_softmax",
        Tol::REDUCTION,
        |dev| {
            let dev = ad(dev);
            let x = normal(&dev, 61, [8, 4]);
            let w1 = leaf(&dev, 62, [4, 6], -1.0, 1.0);
            let w2 = leaf(&dev, 63, [6, 3], -1.0, 1.0);
            let h = activation::relu(x.matmul(w1.clone()));
            let p = activation::log_softmax(h.matmul(w2.clone()), 1);
            let grads = weighted(p, 64).backward();
            vec![grad(&w1, &grads), grad(&w2, &grads)]
        },
    ));
    out.push(Case::new(
        G,
        "shared_input_used_twice",
        Tol::REDUCTION,
        |dev| {
            // x feeds two branches: its gradient is the sum of both.
            let x = leaf(&ad(dev), 65, [3, 4], -1.0, 1.0);
            let y = x.clone().sin() * x.clone().exp() + x.clone().sum_dim(1);
            let grads = weighted(y, 66).backward();
            vec![grad(&x, &grads)]
        },
    ));
    out
}
