//! Subgroup operations: the emitted WGSL validates with naga's SUBGROUP
//! capability (no `enable` directive: naga 30 refuses `enable subgroups;`),
//! and the compiler refuses them on a device without `Features::SUBGROUP`.

use compute_ir::{Kernel, KernelBuilder, Scalar};
use compute_runtime::ServerError;
use compute_wgsl::{DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler};

fn compile(
    k: &Kernel,
    features: wgpu::Features,
) -> Result<compute_wgsl::CompiledKernel, ServerError> {
    IrCompiler.compile(
        k,
        &WgpuCompilationOptions::default(),
        &DeviceCaps::of(wgpu::Limits::default(), features),
    )
}

fn naga_validate(source: &str, caps: naga::valid::Capabilities) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map(|_| ())
        .map_err(|e| e.emit_to_string(source))
}

fn kernel() -> Kernel {
    let b = KernelBuilder::new("subgroups", [64, 1, 1]);
    let out = b.output(Scalar::U32);
    let outf = b.output(Scalar::F32);
    let i = b.local_index();
    let sgid = b.subgroup_invocation_id();
    let size = b.subgroup_size();
    let s = b.subgroup_add(i);
    let lo = b.subgroup_min(sgid);
    let hi = b.subgroup_max(size);
    let first = b.subgroup_broadcast_first(s);
    let zero = b.u32(0);
    let pred = b.eq(lo, zero);
    let ballot = b.subgroup_ballot(pred);
    let bx = b.x(ballot);
    let f = b.cast(i, Scalar::F32);
    let v = b.vec(&[f, f]);
    let fs = b.subgroup_add(v);
    let si = b.cast(i, Scalar::I32);
    let sm = b.subgroup_max(si);
    let sm = b.cast(sm, Scalar::U32);
    let fx = b.x(fs);
    let one = b.u32(1);
    let c = b.subgroup_add(one); // constant operand
    let t = b.add(first, hi);
    let t = b.add(t, bx);
    let t = b.add(t, sm);
    let t = b.add(t, c);
    b.store(out, i, t);
    b.store(outf, i, fx);
    b.build().expect("builds")
}

#[test]
fn subgroup_kernels_validate_with_the_subgroup_capability() {
    let k = kernel();
    let c = compile(&k, wgpu::Features::SUBGROUP)
        .unwrap_or_else(|e| panic!("{e}\n{}", compute_wgsl::ir::emit_wgsl(&k)));
    naga_validate(&c.source, naga::valid::Capabilities::SUBGROUP)
        .unwrap_or_else(|e| panic!("{e}\n{}", c.source));
    assert!(
        naga_validate(&c.source, naga::valid::Capabilities::empty()).is_err(),
        "needs the capability"
    );
    for f in [
        "subgroupAdd(",
        "subgroupMin(",
        "subgroupMax(",
        "subgroupBroadcastFirst(",
        "subgroupBallot(",
        "@builtin(subgroup_invocation_id)",
        "@builtin(subgroup_size)",
    ] {
        assert!(c.source.contains(f), "{f}\n{}", c.source);
    }
    assert!(!c.source.contains("enable"), "{}", c.source);
}

#[test]
fn naga_30_refuses_the_enable_directive() {
    // Why the emitter writes none: if this starts passing, naga has
    // implemented the extension and the emitter may add it.
    let src = "enable subgroups;\n@compute @workgroup_size(1) fn main() {}";
    assert!(naga::front::wgsl::parse_str(src).is_err());
}

#[test]
fn subgroups_need_the_device_feature() {
    let err = compile(&kernel(), wgpu::Features::empty()).expect_err("no SUBGROUP");
    assert!(
        matches!(
            err,
            ServerError::Unsupported {
                what: "subgroups",
                ..
            }
        ),
        "{err}"
    );
    // Only the builtin: still subgroups.
    let b = KernelBuilder::new("size_only", [1, 1, 1]);
    let out = b.output(Scalar::U32);
    let s = b.subgroup_size();
    let i = b.u32(0);
    let t = b.bool(true);
    b.if_(t, |b| b.store(out, i, s));
    let k = b.build().expect("builds");
    let err = compile(&k, wgpu::Features::empty()).expect_err("no SUBGROUP");
    assert!(matches!(
        err,
        ServerError::Unsupported {
            what: "subgroups",
            ..
        }
    ));
    compile(&k, wgpu::Features::SUBGROUP).expect("compiles");
    // A kernel without subgroups does not declare the builtins.
    let b = KernelBuilder::new("plain", [1, 1, 1]);
    let _ = b.local_index();
    let c = compile(&b.build().expect("builds"), wgpu::Features::empty()).expect("compiles");
    assert!(!c.source.contains("subgroup"), "{}", c.source);
}

#[test]
fn a_workgroup_reduction_through_subgroups_needs_the_feature_and_the_tree_does_not() {
    let reduce = |subgroups: bool, elem: Scalar| {
        let b = KernelBuilder::new("wg_sum", [96, 1, 1]);
        let b = if subgroups {
            b.with_subgroups()
        } else {
            b.without_subgroups()
        };
        let (x, out) = (b.input(elem), b.output(elem));
        let i = b.x(b.global_id());
        let s = b.workgroup_reduce(compute_runtime::ReduceOp::Sum, b.load(x, i));
        b.store(out, i, s);
        b.build().expect("builds")
    };
    let err =
        compile(&reduce(true, Scalar::F32), wgpu::Features::empty()).expect_err("no SUBGROUP");
    assert!(
        matches!(
            err,
            ServerError::Unsupported {
                what: "subgroups",
                ..
            }
        ),
        "{err}"
    );
    compile(&reduce(true, Scalar::F32), wgpu::Features::SUBGROUP).expect("compiles");
    compile(&reduce(false, Scalar::F32), wgpu::Features::empty()).expect("the tree needs nothing");
    // A type subgroup operations lack keeps the tree.
    compile(&reduce(true, Scalar::F64), wgpu::Features::SHADER_F64).expect("f64 keeps the tree");
}

/// By default a reduction holds both forms and the compiler keeps the one
/// the device runs: subgroup operations with `SUBGROUP`, the tree (and no
/// subgroup builtin) without.
#[test]
fn a_default_workgroup_reduction_takes_the_form_the_device_runs() {
    let b = KernelBuilder::new("wg_max", [96, 1, 1]);
    let (x, out) = (b.input(Scalar::U32), b.output(Scalar::U32));
    let i = b.x(b.global_id());
    let m = b.workgroup_reduce(compute_runtime::ReduceOp::Max, b.load(x, i));
    b.store(out, i, m);
    let k = b.build().expect("builds");
    let with = compile(&k, wgpu::Features::SUBGROUP).expect("with SUBGROUP");
    assert!(with.source.contains("subgroupMax("), "{}", with.source);
    let without = compile(&k, wgpu::Features::empty()).expect("without SUBGROUP");
    assert!(!without.source.contains("subgroup"), "{}", without.source);
}
