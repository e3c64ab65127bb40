//! Convolutions: conv1d, conv2d (stride, padding, dilation, groups, with
//! and without bias), conv3d, conv_transpose1d/2d, on odd shapes.

use burn::tensor::Device;
use burn::tensor::module::{conv_transpose1d, conv_transpose2d, conv1d, conv2d, conv3d};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};

use super::inputs::{label, seed, uniform};
use super::{Case, Tol};

const G: &str = "conv";

/// A conv2d case: input, weight, bias?, stride, padding, dilation, groups.
struct C2 {
    x: [usize; 4],
    w: [usize; 4],
    bias: bool,
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
    groups: usize,
}

/// A conv_transpose2d case: as [`C2`] plus the output padding.
struct T2 {
    x: [usize; 4],
    w: [usize; 4],
    bias: bool,
    stride: [usize; 2],
    pad: [usize; 2],
    pad_out: [usize; 2],
    dil: [usize; 2],
    groups: usize,
}

fn conv2d_name(c: &C2) -> String {
    format!(
        "conv2d_x{}_w{}_s{}_p{}_d{}_g{}{}",
        label(&c.x),
        label(&c.w),
        label(&c.stride),
        label(&c.pad),
        label(&c.dil),
        c.groups,
        if c.bias { "_bias" } else { "" }
    )
}

fn bias(dev: &Device, on: bool, s: u64, n: usize) -> Option<burn::tensor::Tensor<1>> {
    on.then(|| uniform(dev, s, [n], -1.0, 1.0))
}

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // conv1d: (x, w, bias, stride, pad, dil, groups).
    type C1 = ([usize; 3], [usize; 3], bool, usize, usize, usize, usize);
    let c1: [C1; 5] = [
        ([2, 3, 17], [4, 3, 3], false, 1, 0, 1, 1),
        ([1, 4, 33], [6, 4, 5], true, 2, 1, 1, 1),
        ([2, 4, 20], [6, 2, 3], true, 1, 0, 2, 2),
        ([1, 6, 15], [6, 1, 3], false, 1, 1, 1, 6),
        ([3, 1, 1], [2, 1, 1], true, 1, 0, 1, 1),
    ];
    for (x, w, b, st, p, d, g) in c1 {
        let name = format!(
            "conv1d_x{}_w{}_s{st}_p{p}_d{d}_g{g}{}",
            label(&x),
            label(&w),
            if b { "_bias" } else { "" }
        );
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            let xt = uniform(dev, s, x, -1.0, 1.0);
            let wt = uniform(dev, s + 1, w, -1.0, 1.0);
            let opts = ConvOptions::new([st], [p], [d], g);
            vec![conv1d(xt, wt, bias(dev, b, s + 2, w[0]), opts).into_data()]
        }));
    }

    let c2 = [
        C2 {
            x: [1, 1, 5, 5],
            w: [1, 1, 3, 3],
            bias: false,
            stride: [1, 1],
            pad: [0, 0],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [2, 3, 17, 13],
            w: [8, 3, 3, 3],
            bias: true,
            stride: [1, 1],
            pad: [1, 1],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [1, 3, 16, 15],
            w: [4, 3, 3, 3],
            bias: true,
            stride: [2, 2],
            pad: [1, 1],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [2, 2, 11, 14],
            w: [5, 2, 3, 4],
            bias: false,
            stride: [2, 3],
            pad: [0, 2],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [1, 3, 15, 15],
            w: [4, 3, 3, 3],
            bias: false,
            stride: [1, 1],
            pad: [2, 2],
            dil: [2, 2],
            groups: 1,
        },
        C2 {
            x: [2, 4, 9, 9],
            w: [6, 2, 3, 3],
            bias: true,
            stride: [1, 1],
            pad: [0, 0],
            dil: [1, 1],
            groups: 2,
        },
        C2 {
            x: [1, 4, 10, 7],
            w: [4, 1, 3, 3],
            bias: false,
            stride: [1, 1],
            pad: [1, 1],
            dil: [1, 1],
            groups: 4,
        },
        C2 {
            x: [3, 16, 7, 9],
            w: [8, 16, 1, 1],
            bias: true,
            stride: [1, 1],
            pad: [0, 0],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [2, 16, 32, 32],
            w: [32, 16, 3, 3],
            bias: true,
            stride: [1, 1],
            pad: [1, 1],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [1, 2, 20, 18],
            w: [3, 2, 5, 5],
            bias: true,
            stride: [1, 2],
            pad: [2, 1],
            dil: [1, 1],
            groups: 1,
        },
        C2 {
            x: [1, 6, 13, 11],
            w: [9, 2, 2, 3],
            bias: false,
            stride: [3, 1],
            pad: [1, 0],
            dil: [2, 1],
            groups: 3,
        },
    ];
    for c in c2 {
        let name = conv2d_name(&c);
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            let xt = uniform(dev, s, c.x, -1.0, 1.0);
            let wt = uniform(dev, s + 1, c.w, -1.0, 1.0);
            let opts = ConvOptions::new(c.stride, c.pad, c.dil, c.groups);
            vec![conv2d(xt, wt, bias(dev, c.bias, s + 2, c.w[0]), opts).into_data()]
        }));
    }

    out.push(Case::new(
        G,
        "conv3d_x1x2x5x6x7_w3x2x3x3x3_p1_bias",
        Tol::REDUCTION,
        |dev| {
            let s = seed("conv3d");
            let xt = uniform(dev, s, [1, 2, 5, 6, 7], -1.0, 1.0);
            let wt = uniform(dev, s + 1, [3, 2, 3, 3, 3], -1.0, 1.0);
            let opts = ConvOptions::new([1, 1, 1], [1, 1, 1], [1, 1, 1], 1);
            vec![conv3d(xt, wt, bias(dev, true, s + 2, 3), opts).into_data()]
        },
    ));

    // conv_transpose2d: weight is [in, out / groups, kh, kw].
    let t2 = [
        T2 {
            x: [1, 2, 5, 5],
            w: [2, 3, 3, 3],
            bias: false,
            stride: [1, 1],
            pad: [0, 0],
            pad_out: [0, 0],
            dil: [1, 1],
            groups: 1,
        },
        T2 {
            x: [2, 4, 7, 6],
            w: [4, 3, 3, 3],
            bias: true,
            stride: [2, 2],
            pad: [1, 1],
            pad_out: [1, 1],
            dil: [1, 1],
            groups: 1,
        },
        T2 {
            x: [1, 3, 5, 4],
            w: [3, 2, 4, 3],
            bias: false,
            stride: [2, 3],
            pad: [0, 1],
            pad_out: [1, 0],
            dil: [1, 1],
            groups: 1,
        },
        T2 {
            x: [1, 4, 6, 6],
            w: [4, 3, 3, 3],
            bias: true,
            stride: [2, 2],
            pad: [1, 1],
            pad_out: [0, 0],
            dil: [1, 1],
            groups: 2,
        },
        T2 {
            x: [1, 2, 6, 5],
            w: [2, 2, 3, 3],
            bias: false,
            stride: [1, 1],
            pad: [1, 0],
            pad_out: [0, 0],
            dil: [2, 2],
            groups: 1,
        },
        T2 {
            x: [2, 8, 9, 9],
            w: [8, 4, 2, 2],
            bias: true,
            stride: [2, 2],
            pad: [0, 0],
            pad_out: [0, 0],
            dil: [1, 1],
            groups: 1,
        },
    ];
    for c in t2 {
        let name = format!(
            "conv_transpose2d_x{}_w{}_s{}_p{}_op{}_d{}_g{}{}",
            label(&c.x),
            label(&c.w),
            label(&c.stride),
            label(&c.pad),
            label(&c.pad_out),
            label(&c.dil),
            c.groups,
            if c.bias { "_bias" } else { "" }
        );
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            let xt = uniform(dev, s, c.x, -1.0, 1.0);
            let wt = uniform(dev, s + 1, c.w, -1.0, 1.0);
            let opts = ConvTransposeOptions::new(c.stride, c.pad, c.pad_out, c.dil, c.groups);
            let b = bias(dev, c.bias, s + 2, c.w[1] * c.groups);
            vec![conv_transpose2d(xt, wt, b, opts).into_data()]
        }));
    }

    out.push(Case::new(
        G,
        "conv_transpose1d_x2x3x9_w3x4x3_s2_p1_op1_bias",
        Tol::REDUCTION,
        |dev| {
            let s = seed("conv_transpose1d");
            let xt = uniform(dev, s, [2, 3, 9], -1.0, 1.0);
            let wt = uniform(dev, s + 1, [3, 4, 3], -1.0, 1.0);
            let opts = ConvTransposeOptions::new([2], [1], [1], [1], 1);
            vec![conv_transpose1d(xt, wt, bias(dev, true, s + 2, 4), opts).into_data()]
        },
    ));
    out
}
