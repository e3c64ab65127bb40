//! The IR backend: the reference kernels compile to WGSL naga accepts, with
//! the layout the IR declares; the device checks refuse what it cannot run.

use compute_ir::{Kernel, KernelBuilder, Scalar};
use compute_runtime::{CubeKernel, ServerError};
use compute_testkit::kernels;
use compute_wgsl::{
    BindingAccess, DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler, WgslKernel,
    validate_wgsl,
};

fn caps(features: wgpu::Features) -> DeviceCaps {
    DeviceCaps::of(wgpu::Limits::default(), features)
}

fn compile(k: &Kernel) -> Result<compute_wgsl::CompiledKernel, ServerError> {
    IrCompiler.compile(
        k,
        &WgpuCompilationOptions {
            bounds_checks: compute_wgsl::BoundsChecks::Checked,
            ..Default::default()
        },
        &caps(wgpu::Features::empty()),
    )
}

#[test]
fn reference_kernels_compile_and_validate() {
    let all = [
        kernels::elementwise_add(Scalar::F32, 64),
        kernels::elementwise_add(Scalar::I32, 256),
        kernels::elementwise_add_vec(Scalar::F32, 4, 256),
        kernels::elementwise_add_vec(Scalar::U32, 2, 64),
        kernels::workgroup_sum(Scalar::F32, 256),
        kernels::workgroup_sum(Scalar::U32, 64),
        kernels::histogram(64),
        kernels::tiled_matmul(),
    ];
    for k in all {
        let k = k.expect("builds");
        let c = compile(&k)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", k.name(), compute_wgsl::ir::emit_wgsl(&k)));
        assert!(!c.source.contains("enable f16"));
        // The emitted module declares exactly the layout the IR reports, so
        // the server's check of layout against module holds.
        let module = validate_wgsl(&c.name, &c.source).expect("valid");
        let interface = compute_wgsl::module_interface(&module, "main").expect("interface");
        assert_eq!(compute_wgsl::check_layout(&c.layout, &interface), Ok(()));
        assert_eq!(c.entry_point, "main");
        assert_eq!(c.layout, IrCompiler.layout(&k).expect("layout"));
    }
}

#[test]
fn layout_names_the_write_set_and_scalars() {
    let k = kernels::tiled_matmul().expect("builds");
    let layout = IrCompiler.layout(&k).expect("layout");
    assert_eq!(
        layout.bindings,
        vec![
            BindingAccess::ReadOnly,
            BindingAccess::ReadOnly,
            BindingAccess::ReadWrite
        ]
    );
    assert!(layout.scalars);
    assert_eq!(layout.workgroup_size, [16, 16, 1]);
    let src = compile(&k).expect("compiles").source;
    assert!(
        src.contains("@group(0) @binding(3) var<uniform> scalars: Scalars;"),
        "{src}"
    );
}

#[test]
fn f16_needs_the_device_feature() {
    let b = KernelBuilder::new("half", [1, 1, 1]);
    let out = b.output(Scalar::F16);
    let one = b.f32(1.5);
    let h = b.cast(one, Scalar::F16);
    let i = b.u32(0);
    b.store(out, i, h);
    let k = b.build().expect("builds");
    let err = compile(&k).expect_err("no SHADER_F16");
    assert!(
        matches!(err, ServerError::Unsupported { what: "f16", .. }),
        "{err}"
    );
    let c = IrCompiler
        .compile(
            &k,
            &WgpuCompilationOptions {
                bounds_checks: compute_wgsl::BoundsChecks::Checked,
                ..Default::default()
            },
            &caps(wgpu::Features::SHADER_F16),
        )
        .expect("compiles with the feature");
    assert!(c.source.starts_with("enable f16;"), "{}", c.source);
}

#[test]
fn device_limits_are_checked_before_codegen() {
    let b = KernelBuilder::new("wide", [1024, 1, 1]);
    let _ = b.local_index();
    let k = b.build().expect("builds");
    let err = compile(&k).expect_err("over 256 invocations");
    assert!(matches!(err, ServerError::LimitExceeded { .. }), "{err}");

    let b = KernelBuilder::new("big_shared", [1, 1, 1]);
    let _ = b.shared(Scalar::F32, 1 << 20);
    let err = compile(&b.build().expect("builds")).expect_err("too much shared memory");
    assert!(matches!(
        err,
        ServerError::LimitExceeded {
            limit: "max_compute_workgroup_storage_size",
            ..
        }
    ));
}

#[test]
fn foreign_kernels_are_refused() {
    let k = WgslKernel::new(
        "w",
        "@compute @workgroup_size(1) fn main() {}",
        "main",
        [1, 1, 1],
        vec![],
    );
    let err = IrCompiler.layout(&k).expect_err("foreign");
    assert!(
        matches!(err, ServerError::ForeignKernel { compiler: "ir", .. }),
        "{err}"
    );
}

#[test]
fn constants_naga_would_reject_are_folded_or_made_runtime() {
    let b = KernelBuilder::new("consts", [1, 1, 1]);
    let out_i = b.output(Scalar::I32);
    let out_f = b.output(Scalar::F32);
    let x = b.i32(7);
    let zero = b.i32(0);
    let q = b.div(x, zero); // 7 (WGSL runtime rule), a const-eval error otherwise
    let r = b.rem(x, zero);
    let min = b.i32(i32::MIN);
    let m1 = b.i32(-1);
    let big = b.mul(min, m1); // overflow: wraps
    let s = b.add(q, r);
    let s = b.add(s, big);
    let idx = b.u32(0);
    b.store(out_i, idx, s);
    let one = b.f32(1.0);
    let fz = b.f32(0.0);
    let inf = b.div(one, fz);
    let nan = b.sub(inf, inf);
    let v = b.vec(&[inf, nan, one]);
    let e = b.extract(v, 1);
    let minus_one = b.neg(one);
    let neg = b.sqrt(minus_one);
    let t = b.add(e, neg);
    b.store(out_f, idx, t);
    let k = b.build().expect("builds");
    let c = compile(&k).unwrap_or_else(|e| panic!("{e}\n{}", compute_wgsl::ir::emit_wgsl(&k)));
    assert!(
        c.source.contains("bitcast<i32>(0x80000000u)") || c.source.contains("(-2147483648"),
        "{}",
        c.source
    );
}

#[test]
#[ignore = "prints the matmul's WGSL"]
fn show_matmul() {
    println!(
        "{}",
        compute_wgsl::ir::emit_wgsl(&kernels::tiled_matmul().expect("builds"))
    );
}
