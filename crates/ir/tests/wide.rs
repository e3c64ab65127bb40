//! The 64-bit scalars in the interpreter: wrapping, WGSL's division rules,
//! shifts by the low 6 bits, casts, bitcasts, f64 math and 8-byte buffers.

use compute_ir::interp;
use compute_ir::{IrError, KernelBuilder, Lit, Scalar, Val};
use compute_testkit::bytes;

/// Runs a one-invocation kernel storing `f`'s results (all of `elem`) in order.
fn eval(elem: Scalar, f: impl FnOnce(&KernelBuilder) -> Vec<Val>) -> Vec<u8> {
    let b = KernelBuilder::new("eval64", [1, 1, 1]);
    let out = b.output(elem);
    let vals = f(&b);
    for (i, v) in vals.iter().enumerate() {
        let idx = b.u32(i as u32);
        b.store(out, idx, *v);
    }
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; elem.size() * vals.len()]];
    interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    bufs.remove(0)
}

#[test]
fn i64_wraps_and_divides_like_wgsl() {
    let got = bytes::bytes_i64(&eval(Scalar::I64, |b| {
        let max = b.i64(i64::MAX);
        let min = b.i64(i64::MIN);
        let one = b.i64(1);
        let m1 = b.i64(-1);
        let zero = b.i64(0);
        let seven = b.i64(7);
        let m7 = b.i64(-7);
        let two = b.i64(2);
        let big = b.i64(1 << 40);
        vec![
            b.add(max, one),
            b.sub(min, one),
            b.mul(big, big),
            b.div(seven, zero),
            b.rem(seven, zero),
            b.div(min, m1),
            b.rem(min, m1),
            b.div(m7, two),
            b.rem(m7, two),
            b.neg(min),
            b.abs(min),
            b.min(m7, seven),
            b.bit_not(zero),
        ]
    }));
    assert_eq!(
        got,
        vec![
            i64::MIN,
            i64::MAX,
            0,
            7,
            0,
            i64::MIN,
            0,
            -3,
            -1,
            i64::MIN,
            i64::MIN,
            -7,
            -1
        ]
    );
}

#[test]
fn u64_wraps_divides_and_shifts_by_six_bits() {
    let got = bytes::bytes_u64(&eval(Scalar::U64, |b| {
        let max = b.u64(u64::MAX);
        let one = b.u64(1);
        let zero = b.u64(0);
        let seven = b.u64(7);
        let s40 = b.u32(40);
        let s65 = b.u32(65);
        let s63 = b.u32(63);
        let top = b.shl(one, s63);
        vec![
            b.add(max, one),
            b.sub(zero, one),
            b.div(seven, zero),
            b.rem(seven, zero),
            b.shl(one, s40),
            b.shl(one, s65),
            b.shr(top, s63),
            b.max(max, one),
        ]
    }));
    assert_eq!(got, vec![0, u64::MAX, 7, 0, 1 << 40, 2, 1, u64::MAX]);
    // Arithmetic shift keeps the sign.
    let got = bytes::bytes_i64(&eval(Scalar::I64, |b| {
        let m = b.i64(-1 << 50);
        let s = b.u32(48);
        vec![b.shr(m, s)]
    }));
    assert_eq!(got, vec![-4]);
}

#[test]
fn comparisons_on_64_bit_values() {
    let got = bytes::bytes_u32(&eval(Scalar::U32, |b| {
        let big = b.u64(1 << 33);
        let small = b.u64(1);
        let neg = b.i64(-1);
        let pos = b.i64(1 << 35);
        let nan = b.f64(f64::NAN);
        let x = b.f64(1.0);
        let lts = [
            b.lt(small, big),
            b.lt(neg, pos),
            b.lt(nan, x),
            b.ne(nan, nan),
            b.eq(big, big),
        ];
        let one = b.u32(1);
        let zero = b.u32(0);
        lts.iter().map(|c| b.select(*c, one, zero)).collect()
    }));
    assert_eq!(got, vec![1, 1, 0, 1, 1]);
}

#[test]
fn integer_casts_truncate_or_extend_by_the_source() {
    let got = bytes::bytes_u64(&eval(Scalar::U64, |b| {
        let m1 = b.i32(-1);
        let big = b.u32(0x8000_0000);
        let wide = b.i64(-2);
        let as_i32 = b.cast(wide, Scalar::I32); // -2
        let t = b.u64(0x1_2345_6789);
        let as_u32 = b.cast(t, Scalar::U32); // 0x2345_6789
        let i64_of_u32 = b.cast(big, Scalar::I64);
        let i64_of_as_i32 = b.cast(as_i32, Scalar::I64);
        vec![
            b.cast(m1, Scalar::U64),            // sign-extended
            b.cast(big, Scalar::U64),           // zero-extended
            b.bitcast(i64_of_u32, Scalar::U64), // zero-extended
            b.bitcast(i64_of_as_i32, Scalar::U64),
            b.cast(as_u32, Scalar::U64),
        ]
    }));
    assert_eq!(
        got,
        vec![
            u64::MAX,
            0x8000_0000,
            0x8000_0000,
            (-2i64) as u64,
            0x2345_6789
        ]
    );
}

#[test]
fn float_casts_saturate_like_naga() {
    let got = bytes::bytes_i64(&eval(Scalar::I64, |b| {
        let big = b.f64(1e30);
        let neg = b.f64(-1e30);
        let nan = b.f64(f64::NAN);
        let f = b.f32(3e19);
        let x = b.f64(-2.75);
        vec![
            b.cast(big, Scalar::I64),
            b.cast(neg, Scalar::I64),
            b.cast(nan, Scalar::I64),
            b.cast(f, Scalar::I64),
            b.cast(x, Scalar::I64),
        ]
    }));
    assert_eq!(
        got,
        vec![
            9_223_372_036_854_774_784,
            i64::MIN,
            0,
            9_223_371_487_098_961_920,
            -2
        ]
    );
    let got = bytes::bytes_u64(&eval(Scalar::U64, |b| {
        let big = b.f64(1e30);
        let neg = b.f64(-5.0);
        let f = b.f32(1e30);
        vec![
            b.cast(big, Scalar::U64),
            b.cast(neg, Scalar::U64),
            b.cast(f, Scalar::U64),
        ]
    }));
    assert_eq!(
        got,
        vec![18_446_744_073_709_549_568, 0, 18_446_742_974_197_923_840]
    );
    let got = bytes::bytes_i32(&eval(Scalar::I32, |b| {
        let big = b.f64(3e9);
        vec![b.cast(big, Scalar::I32)]
    }));
    assert_eq!(got, vec![i32::MAX]);
}

#[test]
fn f64_arithmetic_is_double_precision() {
    let got = bytes::bytes_f64(&eval(Scalar::F64, |b| {
        let third = b.f64(1.0 / 3.0);
        let three = b.f64(3.0);
        let two = b.f64(2.0);
        let tiny = b.f64(1e-300);
        let i = b.i64(1 << 60);
        let f = b.f32(0.1);
        let seven = b.f64(7.5);
        vec![
            b.mul(third, three),
            b.sqrt(two),
            b.mul(tiny, tiny),
            b.cast(i, Scalar::F64),
            b.cast(f, Scalar::F64),
            b.rem(seven, two),
            b.fma(third, three, tiny),
            b.floor(seven),
            b.inverse_sqrt(two),
        ]
    }));
    assert_eq!(
        got,
        vec![
            1.0,
            2f64.sqrt(),
            0.0,
            (1u64 << 60) as f64,
            f64::from(0.1f32),
            1.5,
            (1.0f64 / 3.0).mul_add(3.0, 1e-300),
            7.0,
            1.0 / 2f64.sqrt()
        ]
    );
    // f64 -> f32 rounds once, f64 -> bits and back is exact.
    let got = bytes::bytes_f32(&eval(Scalar::F32, |b| {
        let x = b.f64(0.1);
        vec![b.cast(x, Scalar::F32)]
    }));
    assert_eq!(got, vec![0.1f32]);
    let got = bytes::bytes_u64(&eval(Scalar::U64, |b| {
        let x = b.f64(-0.0);
        vec![b.bitcast(x, Scalar::U64)]
    }));
    assert_eq!(got, vec![1 << 63]);
}

#[test]
fn wide_buffers_and_shared_arrays_hold_eight_bytes() {
    // out[i] = in[i] * 3 via a shared i64 array, 4 invocations.
    let b = KernelBuilder::new("wide_copy", [4, 1, 1]);
    let input = b.input(Scalar::I64);
    let out = b.output(Scalar::I64);
    let sh = b.shared(Scalar::I64, 4);
    let i = b.local_index();
    let x = b.load(input, i);
    let three = b.i64(3);
    let y = b.mul(x, three);
    b.store(sh, i, y);
    b.barrier();
    let three_u = b.u32(3);
    let j = b.sub(three_u, i);
    let z = b.load(sh, j);
    b.store(out, i, z);
    let k = b.build().expect("builds");
    let data = [1i64 << 40, -5, i64::MAX, 7];
    let mut bufs = vec![bytes::i64_bytes(&data), vec![0; 32]];
    interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    assert_eq!(
        bytes::bytes_i64(&bufs[1]),
        vec![21, i64::MAX.wrapping_mul(3), -15, 3 << 40]
    );
    // A buffer that is not a whole number of 8-byte elements is refused.
    let mut bad = vec![vec![0; 12], vec![0; 32]];
    assert!(interp::run(&k, [1, 1, 1], &mut bad, &[]).is_err());
}

#[test]
fn vectors_of_64_bit_lanes() {
    let got = bytes::bytes_u64(&eval(Scalar::U64, |b| {
        let a = b.u64(u64::MAX);
        let c = b.u64(5);
        let v = b.vec(&[a, c, c]);
        let one = b.u64(1);
        let ones = b.splat(one, 3);
        let s = b.add(v, ones);
        vec![b.x(s), b.y(s), b.z(s)]
    }));
    assert_eq!(got, vec![0, 6, 6]);
}

#[test]
fn what_64_bit_types_refuse() {
    let err = |f: &dyn Fn(&KernelBuilder)| -> IrError {
        let b = KernelBuilder::new("bad", [1, 1, 1]);
        f(&b);
        b.build().expect_err("refused")
    };
    // No 64-bit exp/sin/pow (Vulkan has none).
    let e = err(&|b| {
        let x = b.f64(1.0);
        let _ = b.exp(x);
    });
    assert_eq!(e.op(), "exp");
    let e = err(&|b| {
        let x = b.f64(1.0);
        let _ = b.pow(x, x);
    });
    assert_eq!(e.op(), "pow");
    // Bitcast only between types of one size.
    let e = err(&|b| {
        let x = b.u64(1);
        let _ = b.bitcast(x, Scalar::F32);
    });
    assert_eq!(e.op(), "bitcast");
    // No 64-bit atomics or scalar arguments.
    let e = err(&|b| {
        let _ = b.atomic_buffer(Scalar::U64);
    });
    assert_eq!(e.op(), "atomic_buffer");
    let e = err(&|b| {
        let _ = b.scalar_arg(Scalar::I64);
    });
    assert_eq!(e.op(), "scalar_arg");
    // Shift amounts stay u32.
    let e = err(&|b| {
        let x = b.u64(1);
        let _ = b.shl(x, x);
    });
    assert_eq!(e.op(), "shl");
    assert_eq!(Lit::from(-1i64).bits(), u64::MAX);
    assert_eq!(Lit::from(-1i32).bits(), 0xffff_ffff);
}

#[test]
fn float_literals_hold_values_and_compare_by_bits() {
    use std::collections::HashSet;
    // Values in, the same bits out: the two zeros, NaN payloads, extremes.
    for v in [
        0.0f32,
        -0.0,
        1.5,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::INFINITY,
    ] {
        assert_eq!(Lit::F32(v).bits(), u64::from(v.to_bits()));
    }
    let nan = f32::from_bits(0xffc0_1234);
    assert_eq!(Lit::F32(nan).bits(), 0xffc0_1234);
    assert_eq!(Lit::F32(nan), Lit::F32(nan));
    assert_ne!(Lit::F32(nan), Lit::F32(f32::NAN));
    assert_ne!(Lit::F32(0.0), Lit::F32(-0.0));
    let nan64 = f64::from_bits(0x7ff8_0000_0000_0abc);
    assert_eq!(Lit::F64(nan64).bits(), 0x7ff8_0000_0000_0abc);
    assert_ne!(Lit::F64(0.0), Lit::F64(-0.0));
    // Same bits, different types: different literals.
    assert_ne!(Lit::F32(0.0), Lit::U32(0));
    let set: HashSet<Lit> = [Lit::F32(0.0), Lit::F32(-0.0), Lit::F32(nan), Lit::F32(nan)]
        .into_iter()
        .collect();
    assert_eq!(set.len(), 3);
    // f16 from a value, rounded to nearest even.
    assert_eq!(Lit::f16(1.0), Lit::F16(0x3c00));
    assert_eq!(Lit::f16(-2.0), Lit::F16(0xc000));
    assert_eq!(Lit::f16(65520.0), Lit::F16(0x7c00), "rounds up to infinity");
    assert_eq!(Lit::f16(-0.0), Lit::F16(0x8000));
}

#[test]
fn kernels_that_differ_only_in_the_sign_of_a_zero_literal_differ() {
    let build = |zero: f32| {
        let k = KernelBuilder::new("z", [1, 1, 1]);
        let out = k.output(Scalar::F32);
        let i = k.u32(0);
        let v = k.f32(zero);
        k.store(out, i, v);
        k.build().expect("kernel")
    };
    use compute_runtime::CubeKernel;
    assert_ne!(build(0.0).id(), build(-0.0).id());
    assert_eq!(build(0.0).id(), build(0.0).id());
}
