//! Pooling (max, avg with and without counting padding, adaptive avg, 1-D
//! and 2-D) and interpolation (nearest, bilinear, bicubic) up and down.

use burn::tensor::module::{
    InterpolateMode, InterpolateOptions, adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d,
    avg_pool2d, interpolate, max_pool1d, max_pool2d, max_pool2d_with_indices,
};
use burn::tensor::ops::{AvgPoolOptions, MaxPoolOptions};

use super::inputs::{distinct, label, seed, uniform};
use super::{Case, Tol};

const G: &str = "pool";

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // max_pool2d: (x, kernel, stride, padding, dilation, ceil).
    type P2 = (
        [usize; 4],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        bool,
    );
    let max2: [P2; 5] = [
        ([1, 1, 6, 6], [2, 2], [2, 2], [0, 0], [1, 1], false),
        ([2, 3, 17, 13], [3, 3], [2, 2], [1, 1], [1, 1], false),
        ([1, 2, 15, 16], [3, 3], [1, 1], [0, 0], [2, 2], false),
        ([1, 3, 11, 9], [2, 3], [2, 1], [1, 1], [1, 1], true),
        ([2, 4, 32, 31], [2, 2], [2, 2], [0, 0], [1, 1], false),
    ];
    for (x, k, st, p, d, ceil) in max2 {
        let name = format!(
            "max_pool2d_x{}_k{}_s{}_p{}_d{}{}",
            label(&x),
            label(&k),
            label(&st),
            label(&p),
            label(&d),
            if ceil { "_ceil" } else { "" }
        );
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::Exact, move |dev| {
            let opts = MaxPoolOptions::new(k)
                .with_stride(st)
                .with_padding(p)
                .with_dilation(d)
                .with_ceil_mode(ceil);
            vec![max_pool2d(uniform(dev, s, x, -1.0, 1.0), opts).into_data()]
        }));
    }
    out.push(Case::new(
        G,
        "max_pool2d_with_indices_x2x2x9x9_k3_s2",
        Tol::Exact,
        |dev| {
            let opts = MaxPoolOptions::new([3, 3]).with_stride([2, 2]);
            let (v, i) = max_pool2d_with_indices(distinct(dev, 61, [2, 2, 9, 9]), opts);
            vec![v.into_data(), i.into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "max_pool2d_with_indices_x1x3x8x7_k2_s1_p1",
        Tol::Exact,
        |dev| {
            let opts = MaxPoolOptions::new([2, 2])
                .with_stride([1, 1])
                .with_padding([1, 1]);
            let (v, i) = max_pool2d_with_indices(distinct(dev, 62, [1, 3, 8, 7]), opts);
            vec![v.into_data(), i.into_data()]
        },
    ));

    // avg_pool2d: (x, kernel, stride, padding, count_include_pad, ceil).
    type A2 = ([usize; 4], [usize; 2], [usize; 2], [usize; 2], bool, bool);
    let avg2: [A2; 5] = [
        ([1, 1, 6, 6], [2, 2], [2, 2], [0, 0], true, false),
        ([2, 3, 17, 13], [3, 3], [2, 2], [1, 1], true, false),
        ([2, 3, 17, 13], [3, 3], [2, 2], [1, 1], false, false),
        ([1, 2, 10, 11], [3, 2], [1, 2], [0, 0], true, true),
        ([1, 2, 9, 10], [4, 3], [3, 2], [2, 1], false, true),
    ];
    for (x, k, st, p, count, ceil) in avg2 {
        let name = format!(
            "avg_pool2d_x{}_k{}_s{}_p{}{}{}",
            label(&x),
            label(&k),
            label(&st),
            label(&p),
            if count { "_count_pad" } else { "_exclude_pad" },
            if ceil { "_ceil" } else { "" }
        );
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            let opts = AvgPoolOptions::new(k)
                .with_stride(st)
                .with_padding(p)
                .with_count_include_pad(count)
                .with_ceil_mode(ceil);
            vec![avg_pool2d(uniform(dev, s, x, -1.0, 1.0), opts).into_data()]
        }));
    }

    // adaptive_avg_pool2d.
    for (x, o) in [
        ([2usize, 3, 17, 13], [5usize, 4]),
        ([1, 2, 7, 7], [1, 1]),
        ([1, 2, 5, 6], [8, 9]),
    ] {
        let name = format!("adaptive_avg_pool2d_x{}_o{}", label(&x), label(&o));
        let s = seed(&name);
        out.push(Case::new(G, name, Tol::REDUCTION, move |dev| {
            vec![adaptive_avg_pool2d(uniform(dev, s, x, -1.0, 1.0), o).into_data()]
        }));
    }

    // 1-D pools.
    out.push(Case::new(
        G,
        "max_pool1d_x2x3x17_k3_s2_p1",
        Tol::Exact,
        |dev| {
            let opts = MaxPoolOptions::new([3]).with_stride([2]).with_padding([1]);
            vec![max_pool1d(uniform(dev, 71, [2, 3, 17], -1.0, 1.0), opts).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "max_pool1d_x1x2x20_k4_d2",
        Tol::Exact,
        |dev| {
            let opts = MaxPoolOptions::new([4]).with_stride([1]).with_dilation([2]);
            vec![max_pool1d(uniform(dev, 72, [1, 2, 20], -1.0, 1.0), opts).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "avg_pool1d_x2x3x17_k4_s3_p2_exclude_pad",
        Tol::REDUCTION,
        |dev| {
            let opts = AvgPoolOptions::new([4])
                .with_stride([3])
                .with_padding([2])
                .with_count_include_pad(false);
            vec![avg_pool1d(uniform(dev, 73, [2, 3, 17], -1.0, 1.0), opts).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "avg_pool1d_x1x4x15_k3_s1_p1_count_pad",
        Tol::REDUCTION,
        |dev| {
            let opts = AvgPoolOptions::new([3]).with_stride([1]).with_padding([1]);
            vec![avg_pool1d(uniform(dev, 74, [1, 4, 15], -1.0, 1.0), opts).into_data()]
        },
    ));
    out.push(Case::new(
        G,
        "adaptive_avg_pool1d_x2x3x17_o5",
        Tol::REDUCTION,
        |dev| vec![adaptive_avg_pool1d(uniform(dev, 75, [2, 3, 17], -1.0, 1.0), 5).into_data()],
    ));

    // Interpolation: (mode, align corners or None for the mode's default,
    // input, output size).
    type Interp = (InterpolateMode, Option<bool>, [usize; 4], [usize; 2]);
    let interp: [Interp; 10] = [
        (InterpolateMode::Nearest, None, [1, 2, 5, 7], [10, 14]),
        (InterpolateMode::Nearest, None, [1, 2, 17, 13], [5, 4]),
        (InterpolateMode::NearestExact, None, [2, 1, 6, 5], [9, 13]),
        (InterpolateMode::Bilinear, None, [1, 3, 6, 5], [11, 9]),
        (InterpolateMode::Bilinear, None, [1, 2, 17, 13], [7, 6]),
        (
            InterpolateMode::Bilinear,
            Some(false),
            [2, 2, 5, 6],
            [12, 7],
        ),
        (
            InterpolateMode::Bilinear,
            Some(false),
            [1, 2, 16, 16],
            [5, 11],
        ),
        (InterpolateMode::Bicubic, None, [1, 2, 6, 5], [13, 11]),
        (InterpolateMode::Bicubic, None, [1, 2, 17, 13], [8, 5]),
        (
            InterpolateMode::Bicubic,
            Some(false),
            [1, 1, 7, 7],
            [10, 10],
        ),
    ];
    for (mode, align, x, o) in interp {
        let mode_name = format!("{mode:?}").to_lowercase();
        let align_name = match align {
            None => "",
            Some(true) => "_align",
            Some(false) => "_half_pixel",
        };
        let name = format!(
            "interpolate_{mode_name}{align_name}_x{}_o{}",
            label(&x),
            label(&o)
        );
        let s = seed(&name);
        let tol = match mode {
            InterpolateMode::Nearest | InterpolateMode::NearestExact => Tol::Exact,
            _ => Tol::REDUCTION,
        };
        out.push(Case::new(G, name, tol, move |dev| {
            let mut opts = InterpolateOptions::new(mode).with_output_size(o);
            if let Some(a) = align {
                opts = opts.with_align_corners(a);
            }
            vec![interpolate(uniform(dev, s, x, -1.0, 1.0), opts).into_data()]
        }));
    }
    out.push(Case::new(
        G,
        "interpolate_bilinear_scale2x1.5_x1x2x6x8",
        Tol::REDUCTION,
        |dev| {
            let opts =
                InterpolateOptions::new(InterpolateMode::Bilinear).with_scale_factor([2.0, 1.5]);
            vec![interpolate(uniform(dev, 76, [1, 2, 6, 8], -1.0, 1.0), opts).into_data()]
        },
    ));
    out
}
