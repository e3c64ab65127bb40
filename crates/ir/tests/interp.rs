//! The interpreter's semantics: WGSL's integer rules, control flow, barriers.

use compute_ir::interp;
use compute_ir::{KernelBuilder, Lit, RunError, Scalar, Val};
use compute_testkit::bytes;

/// Runs a one-invocation kernel that stores `f`'s u32/i32 results in order.
fn eval_i32(f: impl FnOnce(&KernelBuilder) -> Vec<Val>) -> Vec<i32> {
    let b = KernelBuilder::new("eval", [1, 1, 1]);
    let out = b.output(Scalar::I32);
    let vals = f(&b);
    for (i, v) in vals.iter().enumerate() {
        let idx = b.u32(i as u32);
        let v = if v.ty.scalar == Scalar::I32 {
            *v
        } else {
            b.bitcast(*v, Scalar::I32)
        };
        b.store(out, idx, v);
    }
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 4 * vals.len()]];
    interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    bytes::bytes_i32(&bufs[0])
}

#[test]
fn integer_division_follows_wgsl() {
    let got = eval_i32(|b| {
        let seven = b.i32(7);
        let zero = b.i32(0);
        let min = b.i32(i32::MIN);
        let m1 = b.i32(-1);
        let m7 = b.i32(-7);
        let two = b.i32(2);
        vec![
            b.div(seven, zero),
            b.rem(seven, zero),
            b.div(min, m1),
            b.rem(min, m1),
            b.div(m7, two),
            b.rem(m7, two),
        ]
    });
    assert_eq!(got, vec![7, 0, i32::MIN, 0, -3, -1]);
    let got = eval_i32(|b| {
        let seven = b.u32(7);
        let zero = b.u32(0);
        let one = b.u32(1);
        let s33 = b.u32(33);
        vec![b.div(seven, zero), b.rem(seven, zero), b.shl(one, s33)]
    });
    assert_eq!(got, vec![7, 0, 2]);
}

#[test]
fn float_to_int_saturates() {
    let got = eval_i32(|b| {
        let big = b.f32(3e9);
        let neg = b.f32(-3e9);
        let nan = {
            let z = b.f32(0.0);
            b.div(z, z)
        };
        let frac = b.f32(-2.7);
        let u = b.cast(big, Scalar::U32);
        vec![
            b.cast(big, Scalar::I32),
            b.cast(neg, Scalar::I32),
            b.cast(nan, Scalar::I32),
            b.cast(frac, Scalar::I32),
            u,
        ]
    });
    assert_eq!(
        got,
        vec![2_147_483_520, i32::MIN, 0, -2, 3_000_000_000u32 as i32]
    );
}

#[test]
fn loops_break_and_continue() {
    // sum of odd i in 0..10, stopping at i == 7 -> 1 + 3 + 5 = 9;
    // then a `loop` counting to 5.
    let got = eval_i32(|b| {
        let zero = b.i32(0);
        let acc = b.var(zero);
        let ten = b.i32(10);
        b.for_range(zero, ten, |b, i| {
            let seven = b.i32(7);
            let stop = b.eq(i, seven);
            b.if_(stop, |b| b.break_());
            let two = b.i32(2);
            let r = b.rem(i, two);
            let even = b.eq(r, zero);
            b.if_(even, |b| b.continue_());
            let a = b.get(acc);
            let s = b.add(a, i);
            b.set(acc, s);
        });
        let n = b.var(zero);
        b.loop_(|b| {
            let x = b.get(n);
            let five = b.i32(5);
            let done = b.ge(x, five);
            b.if_(done, |b| b.break_());
            let one = b.i32(1);
            let y = b.add(x, one);
            b.set(n, y);
        });
        vec![b.get(acc), b.get(n)]
    });
    assert_eq!(got, vec![9, 5]);
}

#[test]
fn barrier_makes_shared_writes_visible() {
    // Each invocation writes its index, then reads its neighbour's.
    let b = KernelBuilder::new("rotate", [8, 1, 1]);
    let out = b.output(Scalar::U32);
    let s = b.shared(Scalar::U32, 8);
    let l = b.local_index();
    b.store(s, l, l);
    b.barrier();
    let one = b.u32(1);
    let seven = b.u32(7);
    let n = b.add(l, one);
    let n = b.and(n, seven);
    let x = b.load(s, n);
    b.store(out, l, x);
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 32]];
    interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    assert_eq!(bytes::bytes_u32(&bufs[0]), vec![1, 2, 3, 4, 5, 6, 7, 0]);
}

/// A barrier only some invocations reach is refused when the kernel is
/// built (`uniformity.rs`), so the interpreter's own run-time rule
/// (`RunError::NonUniformBarrier`) is a guard no validated kernel reaches.
#[test]
fn divergent_barrier_is_refused_at_build() {
    let b = KernelBuilder::new("divergent", [4, 1, 1]);
    let l = b.local_index();
    let two = b.u32(2);
    let low = b.lt(l, two);
    b.if_(low, |b| b.barrier());
    let err = b.build().expect_err("non-uniform");
    assert!(
        err.to_string().contains("non-uniform") || err.to_string().contains("differs"),
        "{err}"
    );
}

#[test]
fn out_of_bounds_and_interface_errors() {
    let b = KernelBuilder::new("oob", [1, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.u32(4);
    let one = b.u32(1);
    b.store(out, i, one);
    let k = b.build().expect("builds");
    let err = interp::run(&k, [1, 1, 1], &mut [vec![0; 16]], &[]).expect_err("oob");
    assert!(
        matches!(
            err,
            RunError::OutOfBounds {
                op: "store",
                index: 4,
                len: 4
            }
        ),
        "{err}"
    );
    let err = interp::run(&k, [1, 1, 1], &mut [], &[]).expect_err("no buffer");
    assert!(matches!(err, RunError::Interface(_)), "{err}");
}

#[test]
fn scalars_and_array_length() {
    let b = KernelBuilder::new("args", [1, 1, 1]);
    let out = b.output(Scalar::U32);
    let x = b.scalar_arg(Scalar::U32);
    let f = b.scalar_arg(Scalar::F32);
    let len = b.array_length(out);
    let fi = b.cast(f, Scalar::U32);
    let s = b.add(x, fi);
    let s = b.add(s, len);
    let zero = b.u32(0);
    b.store(out, zero, s);
    let k = b.build().expect("builds");
    let scalars = k
        .pack_scalars(&[Lit::U32(10), Lit::F32(2.5)])
        .expect("types");
    assert_eq!(scalars.len(), 16);
    let mut bufs = vec![vec![0; 12]];
    interp::run(&k, [1, 1, 1], &mut bufs, &scalars).expect("runs");
    assert_eq!(bytes::bytes_u32(&bufs[0])[0], 10 + 2 + 3);
    assert!(k.pack_scalars(&[Lit::U32(1), Lit::U32(2)]).is_err());
}

#[test]
fn endless_loops_exhaust_the_budget() {
    let b = KernelBuilder::new("spin", [1, 1, 1]);
    b.loop_(|_| {});
    let k = b.build().expect("builds");
    let err = interp::run_with_budget(&k, [1, 1, 1], &mut [], &[], 1000).expect_err("spins");
    assert_eq!(err, RunError::StepBudget);
}

#[test]
fn f16_rounds_after_every_operation() {
    let b = KernelBuilder::new("half", [1, 1, 1]);
    let out = b.output(Scalar::F32);
    let big = b.f32(2048.0);
    let one = b.f32(1.0);
    let big = b.cast(big, Scalar::F16);
    let one = b.cast(one, Scalar::F16);
    let s = b.add(big, one); // 2049 is not an f16: rounds to even, 2048
    let s = b.cast(s, Scalar::F32);
    let zero = b.u32(0);
    b.store(out, zero, s);
    let k = b.build().expect("builds");
    assert!(k.def().uses_f16());
    let mut bufs = vec![vec![0; 4]];
    interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    assert_eq!(bytes::bytes_f32(&bufs[0]), vec![2048.0]);
}
