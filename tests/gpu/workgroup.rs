//! `workgroup_reduce` and `workgroup_scan` on the device and in the
//! interpreter against a host model, for every operation, three element
//! types and workgroup sizes that are and are not powers of two, in each
//! form a reduction takes: the shared-memory tree (`without_subgroups`),
//! the default (subgroups where the device has them, the tree elsewhere:
//! the interpreter runs it both ways) and subgroups only
//! (`with_subgroups`, on a device that has them); the interpreter at
//! several subgroup sizes.

use compute_ir::interp;
use compute_runtime::pod::{Pod, from_bytes, to_bytes};
use compute_testkit::Rng;
use wgpu_server::prelude::*;

const SIZES: [u32; 6] = [1, 7, 10, 12, 64, 96];
const GROUPS: u32 = 3;

/// Which form the reductions take.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    Tree,
    PerDevice,
    Subgroups,
}

/// `out[i] = reduce (or scan) of x over i's workgroup`.
fn kernel(scan: bool, op: ReduceOp, elem: Scalar, size: u32, form: Form) -> Kernel {
    let k = KernelBuilder::new("workgroup", [size, 1, 1]);
    let k = match form {
        Form::Tree => k.without_subgroups(),
        Form::PerDevice => k,
        Form::Subgroups => k.with_subgroups(),
    };
    let (x, out) = (k.input(elem), k.output(elem));
    let i = k.x(k.global_id());
    let v = k.load(x, i);
    let r = if scan {
        k.workgroup_scan(op, v)
    } else {
        k.workgroup_reduce(op, v)
    };
    k.store(out, i, r);
    k.build().expect("kernel")
}

/// The host's answer for one workgroup's values, in order.
fn model<T: Copy>(scan: bool, values: &[T], combine: impl Fn(T, T) -> T) -> Vec<T> {
    let mut acc = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        acc.push(if i == 0 { *v } else { combine(acc[i - 1], *v) });
    }
    if scan {
        acc
    } else {
        vec![acc[values.len() - 1]; values.len()]
    }
}

/// Subgroup sizes the interpreter runs a subgroup kernel at: a partial
/// last subgroup, more subgroups than a subgroup has lanes, one subgroup.
const INTERPRETER_SUBGROUPS: [u32; 3] = [1, 4, 32];

/// Runs `k` on the device and in the interpreter over `x`; both answers
/// (the interpreter's at each of `INTERPRETER_SUBGROUPS` where the form
/// may use subgroups, and as a device without them where it may not,
/// which must all agree).
fn run<T: Pod + PartialEq + std::fmt::Debug>(
    c: &DefaultClient,
    k: &Kernel,
    x: &[T],
    form: Form,
) -> (Vec<T>, Vec<T>) {
    let n = x.len() as u32;
    let hx = c.create_from_slice(x).expect("x");
    let out = c.empty_of::<T>(u64::from(n)).expect("out");
    k.launch(c, n, [&hx, &out], &[]).expect("launch");
    let device = c.read_vec::<T>(&out).expect("read");
    let interpreted = |size: Option<u32>| {
        let mut bufs = vec![to_bytes(x), vec![0; std::mem::size_of_val(x)]];
        match size {
            Some(s) => interp::run_with_subgroup(k, [GROUPS, 1, 1], &mut bufs, &[], s),
            None => interp::run_without_subgroups(k, [GROUPS, 1, 1], &mut bufs, &[]),
        }
        .expect("interpreter");
        from_bytes::<T>(&bufs[1]).expect("T")
    };
    let mut sizes: Vec<Option<u32>> = Vec::new();
    if form != Form::Tree {
        sizes.extend(INTERPRETER_SUBGROUPS.iter().map(|s| Some(*s)));
    }
    if form != Form::Subgroups {
        sizes.push(None);
    }
    let answers: Vec<Vec<T>> = sizes.into_iter().map(interpreted).collect();
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "the interpreter's answer depends on the subgroup size: {answers:?}"
    );
    (device, answers[0].clone())
}

/// How a type's answers are compared: exactly, except a float mean (one
/// division, whose rounding is the device's) within a relative 1e-6.
fn same<T: Pod + PartialEq>(
    op: ReduceOp,
    got: &[T],
    want: &[T],
    float: fn(T) -> Option<f32>,
) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| match (op, float(*g), float(*w)) {
                (ReduceOp::Mean, Some(g), Some(w)) => (g - w).abs() <= 1e-6 * w.abs(),
                _ => g == w,
            })
}

fn check<T: Pod + PartialEq + std::fmt::Debug>(
    c: &DefaultClient,
    form: Form,
    elem: Scalar,
    x: impl Fn(&mut Rng) -> T,
    combine: impl Fn(ReduceOp, T, T) -> T,
    mean: impl Fn(T, u32) -> T,
    float: fn(T) -> Option<f32>,
) {
    let mut r = Rng::spread(7);
    for size in SIZES {
        let xs: Vec<T> = (0..size * GROUPS).map(|_| x(&mut r)).collect();
        for op in [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::Mean,
        ] {
            for scan in [false, true] {
                // Scans keep the tree in every form: run once.
                if scan && (op == ReduceOp::Mean || form != Form::Tree) {
                    continue;
                }
                let k = kernel(scan, op, elem, size, form);
                let want: Vec<T> = xs
                    .chunks(size as usize)
                    .flat_map(|g| {
                        let m = model(scan, g, |a, b| combine(op, a, b));
                        if op == ReduceOp::Mean {
                            m.into_iter().map(|s| mean(s, size)).collect()
                        } else {
                            m
                        }
                    })
                    .collect();
                let (device, interp) = run(c, &k, &xs, form);
                let what = format!("{elem} {op:?} scan={scan} size={size} {form:?}");
                assert!(
                    same(op, &device, &want, float),
                    "device, {what}: {device:?} against {want:?}"
                );
                assert!(
                    same(op, &interp, &want, float),
                    "interpreter, {what}: {interp:?} against {want:?}"
                );
            }
        }
    }
}

#[test]
fn reductions_and_scans_match_the_host() {
    let c = WgpuServerOptions::new().client().expect("adapter");
    all_types(&c, Form::Tree);
    all_types(&c, Form::PerDevice);
}

#[test]
fn reductions_through_subgroups_match_the_host() {
    let c = WgpuServerOptions::new().client().expect("adapter");
    if !crate::common::has_feature(
        c.server().device(),
        wgpu::Features::SUBGROUP,
        "the subgroup reductions",
    ) {
        return;
    }
    all_types(&c, Form::Subgroups);
}

fn all_types(c: &DefaultClient, form: Form) {
    // Powers of two and their negatives as f32: every sum (a multiple of
    // 0.5 below 2^8) and product (a power of two within 2^-96..2^96) is
    // exact in any order, so the device's tree and the host's loop agree
    // bit for bit.
    let int_op = |op: ReduceOp, a: i64, b: i64| match op {
        ReduceOp::Sum | ReduceOp::Mean => a.wrapping_add(b),
        ReduceOp::Prod => a.wrapping_mul(b),
        ReduceOp::Min => a.min(b),
        ReduceOp::Max => a.max(b),
    };
    check(
        c,
        form,
        Scalar::F32,
        |r| r.pick(&[-2.0f32, -1.0, -0.5, 0.5, 1.0, 2.0]),
        |op, a: f32, b| match op {
            ReduceOp::Sum | ReduceOp::Mean => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Min => a.min(b),
            ReduceOp::Max => a.max(b),
        },
        |s, n| s / n as f32,
        Some,
    );
    check(
        c,
        form,
        Scalar::I32,
        |r| r.below(2001) as i32 - 1000,
        |op, a: i32, b| int_op(op, a.into(), b.into()) as i32,
        |s, n| s / n as i32,
        |_| None,
    );
    check(
        c,
        form,
        Scalar::U32,
        |r| r.below(1 << 20),
        |op, a: u32, b| int_op(op, a.into(), b.into()) as u32,
        |s, n| s / n,
        |_| None,
    );
}

/// The subgroup builtins in workgroups that end in a partial subgroup:
/// `num_subgroups` counts it (lavapipe's own builtin rounds down, so the
/// compiler works the count out), and every `subgroup_id` is below it.
#[test]
fn num_subgroups_counts_a_partial_last_subgroup() {
    let c = WgpuServerOptions::new().client().expect("adapter");
    if !crate::common::has_feature(
        c.server().device(),
        wgpu::Features::SUBGROUP,
        "the subgroup builtins",
    ) {
        return;
    }
    for size in [7u32, 10, 12, 20, 33] {
        let k = KernelBuilder::new("subgroup_builtins", [size, 1, 1]);
        let out = k.output(Scalar::U32);
        let at = k.mul(k.x(k.global_id()), 3u32);
        k.store(out, at, k.num_subgroups());
        k.store(out, k.add(at, 1u32), k.subgroup_size());
        k.store(out, k.add(at, 2u32), k.subgroup_id());
        let k = k.build().expect("kernel");
        let out = c.empty_of::<u32>(u64::from(size * 3)).expect("out");
        k.launch(&c, size, [&out], &[]).expect("launch");
        let got = c.read_vec::<u32>(&out).expect("read");
        for row in got.chunks(3) {
            let (count, width, id) = (row[0], row[1], row[2]);
            assert_eq!(count, size.div_ceil(width), "size {size}: {got:?}");
            assert!(id < count, "size {size}: {got:?}");
        }
    }
}
