//! i64, u64 and f64: the emitted WGSL validates with naga's SHADER_INT64 and
//! FLOAT64 capabilities (and fails without them), and the compiler refuses
//! a kernel using them on a device without the wgpu feature.

use compute_ir::{Kernel, KernelBuilder, Scalar};
use compute_runtime::ServerError;
use compute_wgsl::{DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler};

fn caps(features: wgpu::Features) -> DeviceCaps {
    DeviceCaps::of(wgpu::Limits::default(), features)
}

fn compile(
    k: &Kernel,
    features: wgpu::Features,
) -> Result<compute_wgsl::CompiledKernel, ServerError> {
    IrCompiler.compile(k, &WgpuCompilationOptions::default(), &caps(features))
}

/// Parses and validates with exactly `caps`.
fn naga_validate(source: &str, caps: naga::valid::Capabilities) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map(|_| ())
        .map_err(|e| e.emit_to_string(source))
}

/// Every 64-bit integer operation the IR has, constant and run-time, with
/// the constants naga's evaluator would refuse (`MIN`, division by zero).
fn int64_kernel(s: Scalar) -> Kernel {
    let b = KernelBuilder::new("int64", [64, 1, 1]);
    let input = b.input(s);
    let out = b.output(s);
    let sh = b.shared(s, 64);
    let i = b.local_index();
    let x = b.load(input, i);
    let c = if s == Scalar::I64 {
        b.i64(i64::MIN)
    } else {
        b.u64(u64::MAX)
    };
    let z32 = b.i32(0);
    let zero = b.cast(z32, s);
    let mut acc = b.add(x, c);
    for f in [
        KernelBuilder::sub,
        KernelBuilder::mul,
        KernelBuilder::div,
        KernelBuilder::rem,
        KernelBuilder::and,
        KernelBuilder::or,
        KernelBuilder::xor,
        KernelBuilder::min,
        KernelBuilder::max,
    ] {
        let t = f(&b, acc, x);
        acc = f(&b, t, c);
    }
    let q = b.div(acc, zero);
    let q = b.rem(q, zero);
    let folded = b.div(c, zero); // constants only: c / 0 == c at run time
    let m1_32 = b.i32(-1);
    let m1 = b.cast(m1_32, s);
    let folded2 = b.div(c, m1);
    let amt = b.cast(i, Scalar::U32);
    let sh1 = b.shl(q, amt);
    let sh2 = b.shr(sh1, amt);
    let nb = b.bit_not(sh2);
    let ab = b.abs(nb);
    let lt = b.lt(ab, x);
    let sel = b.select(lt, folded, folded2);
    let v = b.vec(&[sel, x]);
    let two = b.u32(2);
    let amts = b.splat(two, 2);
    let v = b.shl(v, amts);
    let v0 = b.x(v);
    let clamped = b.clamp(v0, x, c);
    b.store(sh, i, clamped);
    b.barrier();
    let y = b.load(sh, i);
    // Casts to and from every other scalar, including across sign and width.
    let mut acc2 = y;
    for t in [
        Scalar::I32,
        Scalar::U32,
        Scalar::F32,
        Scalar::Bool,
        Scalar::I64,
        Scalar::U64,
    ] {
        let there = b.cast(y, t);
        let back = b.cast(there, s);
        acc2 = b.add(acc2, back);
    }
    let other = if s == Scalar::I64 {
        Scalar::U64
    } else {
        Scalar::I64
    };
    let bc = b.bitcast(acc2, other);
    let bc = b.bitcast(bc, s);
    b.store(out, i, bc);
    b.build().expect("builds")
}

fn f64_kernel() -> Kernel {
    let b = KernelBuilder::new("float64", [64, 1, 1]);
    let input = b.input(Scalar::F64);
    let out = b.output(Scalar::F64);
    let i = b.local_index();
    let x = b.load(input, i);
    let c = b.f64(0.1);
    let neg = b.f64(-1e300);
    let zero = b.f64(0.0);
    let one = b.f64(1.0);
    let inf = b.div(one, zero); // constants only: infinity, at run time
    let nan = b.sub(inf, inf);
    let mut acc = b.add(x, c);
    for f in [
        KernelBuilder::sub,
        KernelBuilder::mul,
        KernelBuilder::div,
        KernelBuilder::rem,
        KernelBuilder::min,
        KernelBuilder::max,
    ] {
        acc = f(&b, acc, neg);
    }
    for f in [
        KernelBuilder::neg,
        KernelBuilder::abs,
        KernelBuilder::sqrt,
        KernelBuilder::inverse_sqrt,
        KernelBuilder::floor,
        KernelBuilder::ceil,
    ] {
        acc = f(&b, acc);
    }
    let acc = b.fma(acc, c, x);
    let acc = b.clamp(acc, neg, c);
    let lt = b.lt(acc, nan);
    let acc = b.select(lt, acc, inf);
    let mut acc2 = acc;
    for t in [
        Scalar::I32,
        Scalar::U32,
        Scalar::F32,
        Scalar::Bool,
        Scalar::I64,
        Scalar::U64,
    ] {
        let there = b.cast(acc, t);
        let back = b.cast(there, Scalar::F64);
        acc2 = b.add(acc2, back);
    }
    let v = b.vec(&[acc2, inf, nan]);
    let s = b.splat(c, 3);
    let v = b.mul(v, s);
    let r = b.z(v);
    let bits = b.bitcast(r, Scalar::U64);
    let back = b.bitcast(bits, Scalar::F64);
    b.store(out, i, back);
    b.build().expect("builds")
}

#[test]
fn int64_kernels_validate_with_shader_int64() {
    for s in [Scalar::I64, Scalar::U64] {
        let k = int64_kernel(s);
        let c = compile(&k, wgpu::Features::SHADER_INT64)
            .unwrap_or_else(|e| panic!("{e}\n{}", compute_wgsl::ir::emit_wgsl(&k)));
        naga_validate(&c.source, naga::valid::Capabilities::SHADER_INT64)
            .unwrap_or_else(|e| panic!("{e}\n{}", c.source));
        assert!(
            naga_validate(&c.source, naga::valid::Capabilities::empty()).is_err(),
            "needs the capability"
        );
        assert!(c.source.contains(&format!("array<{s}>")), "{}", c.source);
    }
}

#[test]
fn f64_kernel_validates_with_float64() {
    let k = f64_kernel();
    let c = compile(
        &k,
        wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64,
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", compute_wgsl::ir::emit_wgsl(&k)));
    naga_validate(
        &c.source,
        naga::valid::Capabilities::FLOAT64 | naga::valid::Capabilities::SHADER_INT64,
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", c.source));
    assert!(c.source.contains("array<f64>"), "{}", c.source);
    assert!(c.source.contains("bitcast<f64>"), "{}", c.source);
    assert!(!c.source.contains("enable"), "{}", c.source);
}

#[test]
fn the_device_feature_is_required() {
    let err = compile(&int64_kernel(Scalar::I64), wgpu::Features::empty()).expect_err("no int64");
    assert!(
        matches!(err, ServerError::Unsupported { what: "i64", .. }),
        "{err}"
    );
    let b = KernelBuilder::new("u64_only", [1, 1, 1]);
    let out = b.output(Scalar::U64);
    let x = b.u64(7);
    let i = b.u32(0);
    b.store(out, i, x);
    let k = b.build().expect("builds");
    let err = compile(&k, wgpu::Features::SHADER_F64).expect_err("no int64");
    assert!(
        matches!(err, ServerError::Unsupported { what: "u64", .. }),
        "{err}"
    );
    compile(&k, wgpu::Features::SHADER_INT64).expect("compiles with SHADER_INT64");
    // f64 alone: only SHADER_F64 needed.
    let b = KernelBuilder::new("f64_only", [1, 1, 1]);
    let out = b.output(Scalar::F64);
    let x = b.f64(2.5);
    let i = b.u32(0);
    b.store(out, i, x);
    let k = b.build().expect("builds");
    let err = compile(&k, wgpu::Features::SHADER_INT64).expect_err("no f64");
    assert!(
        matches!(err, ServerError::Unsupported { what: "f64", .. }),
        "{err}"
    );
    let c = compile(&k, wgpu::Features::SHADER_F64).expect("compiles with SHADER_F64");
    naga_validate(&c.source, naga::valid::Capabilities::FLOAT64)
        .unwrap_or_else(|e| panic!("{e}\n{}", c.source));
    // An f64 value used only internally still counts.
    let b = KernelBuilder::new("f64_inside", [1, 1, 1]);
    let out = b.output(Scalar::F32);
    let x = b.f64(2.5);
    let y = b.cast(x, Scalar::F32);
    let i = b.u32(0);
    b.store(out, i, y);
    let k = b.build().expect("builds");
    let err = compile(&k, wgpu::Features::empty()).expect_err("no f64");
    assert!(
        matches!(err, ServerError::Unsupported { what: "f64", .. }),
        "{err}"
    );
}

#[test]
fn literals_round_trip_through_naga() {
    // Constants naga must read back exactly: extremes and odd bit patterns,
    // each stored so the literal survives to the module.
    let b = KernelBuilder::new("lits", [1, 1, 1]);
    let oi = b.output(Scalar::I64);
    let ou = b.output(Scalar::U64);
    let of = b.output(Scalar::F64);
    for (n, v) in [i64::MIN, i64::MAX, -1, 0, -(1 << 40)]
        .into_iter()
        .enumerate()
    {
        let x = b.i64(v);
        let i = b.u32(n as u32);
        b.store(oi, i, x);
    }
    for (n, v) in [u64::MAX, 0, 1 << 63].into_iter().enumerate() {
        let x = b.u64(v);
        let i = b.u32(n as u32);
        b.store(ou, i, x);
    }
    for (n, v) in [f64::MAX, f64::MIN_POSITIVE, -0.0, 0.1, 1e-310, -2.5e300]
        .into_iter()
        .enumerate()
    {
        let x = b.f64(v);
        let i = b.u32(n as u32);
        b.store(of, i, x);
    }
    let k = b.build().expect("builds");
    let c = compile(
        &k,
        wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64,
    )
    .expect("compiles");
    let module = naga::front::wgsl::parse_str(&c.source).expect("parses");
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}\n{}", e.emit_to_string(&c.source), c.source));
    // naga reads the literals back as the same values.
    let mut lits = Vec::new();
    for (_, f) in module.entry_points.iter().map(|e| ((), &e.function)) {
        for (_, e) in f.expressions.iter() {
            if let naga::Expression::Literal(l) = e {
                lits.push(*l);
            }
        }
    }
    assert!(lits.contains(&naga::Literal::I64(i64::MAX)), "{lits:?}");
    assert!(lits.contains(&naga::Literal::U64(u64::MAX)), "{lits:?}");
    assert!(lits.contains(&naga::Literal::F64(0.1)), "{lits:?}");
    assert!(lits.contains(&naga::Literal::F64(1e-310)), "{lits:?}");
}

#[test]
#[ignore = "prints the 64-bit kernels' WGSL"]
fn show_wide() {
    println!(
        "{}",
        compute_wgsl::ir::emit_wgsl(&int64_kernel(Scalar::I64))
    );
    println!("{}", compute_wgsl::ir::emit_wgsl(&f64_kernel()));
}
