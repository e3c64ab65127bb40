//! Layouts and binding sizes are checked against the module, never
//! believed.

use super::*;
use compute_runtime::{
    BufferBinding, Bytes, CubeCount, CubeKernel, Handle, KernelArguments, Server, ServerError,
};
use wgpu_server::{BindingAccess, WgslKernel};

#[test]
fn a_declared_layout_that_disagrees_with_the_module_is_a_layout_mismatch_poisoning_the_declared_writes()
 {
    let mut f = fixture();
    let a = upload(&mut f.s, u32_bytes(&[1; N]), S0);
    let b = upload(&mut f.s, u32_bytes(&[2; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    // Writes both bindings: src is `read_write` in the source.
    let both_rw = r#"
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] + 1u; src[id.x] = 99u; }
}
"#;
    let with_uniform = r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + p.n; }
}
"#;
    let rw = BindingAccess::ReadWrite;
    let ro = BindingAccess::ReadOnly;
    let scalars = || Bytes::from(u32_bytes(&[5, 0, 0, 0]));
    struct Case {
        kernel: WgslKernel,
        args: KernelArguments,
        /// What the declared layout writes (poisoned), then what it reads
        /// only (left trusted and untouched).
        writes: Vec<Handle>,
        reads: Vec<Handle>,
        reason: &'static str,
    }
    let cases = vec![
        // Declared read-only, `read_write` in the module: the declared
        // write set misses `a`, so `a` must not be written either.
        Case {
            kernel: WgslKernel::new("ro_but_rw", both_rw, "main", [64, 1, 1], vec![ro, rw]),
            args: bindings(&[&a, &b]),
            writes: vec![b.clone()],
            reads: vec![a.clone()],
            reason: "binding 0 is declared read-only but the module declares it read_write",
        },
        // Declared read-write, `read` in the module.
        Case {
            kernel: WgslKernel::new("rw_but_ro", DOUBLE_WGSL, "main", [64, 1, 1], vec![rw, rw]),
            args: bindings(&[&a, &b]),
            writes: vec![a.clone(), b.clone()],
            reads: vec![],
            reason: "binding 0 is declared read_write but the module declares it read-only",
        },
        // One binding too many.
        Case {
            kernel: WgslKernel::new("two_for_one", INC_WGSL, "main", [64, 1, 1], vec![rw, ro]),
            args: bindings(&[&b, &a]),
            writes: vec![b.clone()],
            reads: vec![a.clone()],
            reason: "2 storage binding(s) declared, the module has 1",
        },
        // A scalar block the module does not have.
        Case {
            kernel: WgslKernel::new("no_uniform", INC_WGSL, "main", [64, 1, 1], vec![rw])
                .with_scalars(),
            args: bindings(&[&b]).with_scalars(scalars()),
            writes: vec![b.clone()],
            reads: vec![],
            reason: "a scalar block is declared but the module has no uniform",
        },
        // The module's uniform, undeclared.
        Case {
            kernel: WgslKernel::new(
                "undeclared_uniform",
                with_uniform,
                "main",
                [64, 1, 1],
                vec![rw],
            ),
            args: bindings(&[&b]),
            writes: vec![b.clone()],
            reads: vec![],
            reason: "the module has a uniform block but no scalars are declared",
        },
        // The wrong workgroup size.
        Case {
            kernel: WgslKernel::new("narrow", INC_WGSL, "main", [32, 1, 1], vec![rw]),
            args: bindings(&[&b]),
            writes: vec![b.clone()],
            reads: vec![],
            reason: "workgroup size [32, 1, 1] declared, the module's is [64, 1, 1]",
        },
    ];
    for case in cases {
        let name = case.kernel.name().to_string();
        // Every write set is trusted again before the case.
        for h in [&a, &b] {
            let data = if h.memory.id() == a.memory.id() { 1 } else { 2 };
            f.s.write(
                vec![(h.copy_descriptor(), u32_bytes(&[data; N]).into())],
                S0,
            );
        }
        sync(&mut f.s, S0).expect("rewrite");
        let failures = f.s.failure_count();
        f.begin(S0);
        launch_args(&mut f.s, case.kernel, CubeCount::x(1), case.args, S0);
        f.end();
        assert_eq!(f.s.failure_count(), failures + 1, "{name}");
        for w in &case.writes {
            let cause = untrusted_cause(&mut f.s, w);
            let ServerError::LayoutMismatch { kernel, reason } = cause.as_ref() else {
                panic!("{name}: expected LayoutMismatch, got {cause}");
            };
            assert_eq!(kernel, &name);
            assert!(reason.contains(case.reason), "{name}: {reason}");
        }
        for r in &case.reads {
            f.s.check(vec![r.binding()], S0)
                .expect("a declared read-only binding is not poisoned");
        }
        let err = f.s.flush(S0).expect_err("deferred");
        assert!(
            matches!(err.root_cause(), ServerError::LayoutMismatch { .. }),
            "{name}: {err}"
        );
        // Nothing was dispatched.
        assert_eq!(raw_u32(&mut f.s, &a), vec![1; N], "{name} wrote a");
        assert_eq!(raw_u32(&mut f.s, &b), vec![2; N], "{name} wrote b");
        f.assert_neighbours_and_bystander();
        f.reset_neighbours();
    }
}

#[test]
fn a_binding_smaller_than_the_module_needs_is_binding_too_small_before_wgpu_sees_it() {
    let mut f = fixture();
    let vec4 = WgslKernel::new(
        "vec4",
        r#"
@group(0) @binding(0) var<storage, read_write> v: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&v)) { v[id.x] = v[id.x] * 2.0; }
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let fixed = WgslKernel::new(
        "fixed64",
        r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    x[id.x] = src[0] + u32(id.x);
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    );
    let scaled = WgslKernel::new(
        "scaled",
        r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + p.n; }
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let v = upload(&mut f.s, Bytes::from(vec![0u8; 8]), S0);
    let src = upload(&mut f.s, u32_bytes(&[1; N]), S0);
    let x = upload(&mut f.s, u32_bytes(&[3; N]), S0);
    let y = upload(&mut f.s, u32_bytes(&[4; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    let first_16 = BufferBinding {
        memory: x.memory.clone(),
        offset: 0,
        size: 16,
    };
    let failures = f.s.failure_count();

    f.begin(S0);
    launch(&mut f.s, vec4, CubeCount::x(1), &[&v], S0);
    launch_args(
        &mut f.s,
        fixed.clone(),
        CubeCount::x(1),
        KernelArguments::buffers(vec![src.binding(), first_16]),
        S0,
    );
    launch_args(
        &mut f.s,
        scaled.clone(),
        CubeCount::x(1),
        bindings(&[&y]).with_scalars(Bytes::from(u32_bytes(&[5]))),
        S0,
    );
    f.end();

    assert_eq!(f.s.failure_count(), failures + 3);
    let expect = |s: &mut TestServer, h: &Handle, want: (&str, u32, u64, u64)| {
        let cause = untrusted_cause(s, h);
        match cause.as_ref() {
            ServerError::BindingTooSmall {
                kernel,
                binding,
                size,
                min,
            } => assert_eq!((kernel.as_str(), *binding, *size, *min), want),
            other => panic!("expected BindingTooSmall, got {other}"),
        }
    };
    expect(&mut f.s, &v, ("vec4", 0, 8, 16));
    expect(&mut f.s, &x, ("fixed64", 1, 16, 256));
    // The scalar block is the binding after the buffers.
    expect(&mut f.s, &y, ("scaled", 1, 4, 16));
    f.s.check(vec![src.binding()], S0)
        .expect("the read-only input is not poisoned");
    let err = f.s.flush(S0).expect_err("deferred");
    assert_eq!(deferred(&err).2, 2);
    assert_eq!(raw_u32(&mut f.s, &x), vec![3; N], "fixed64 ran");
    assert_eq!(raw_u32(&mut f.s, &y), vec![4; N], "scaled ran");
    assert_eq!(raw_bytes(&mut f.s, &v), vec![0; 8], "vec4 ran");

    // Bound with enough, the same kernels run.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[0; N]).into())], S0);
    f.s.write(vec![(y.copy_descriptor(), u32_bytes(&[4; N]).into())], S0);
    launch(&mut f.s, fixed, CubeCount::x(1), &[&src, &x], S0);
    launch_args(
        &mut f.s,
        scaled,
        CubeCount::x(1),
        bindings(&[&y]).with_scalars(Bytes::from(u32_bytes(&[5, 0, 0, 0]))),
        S0,
    );
    let want: Vec<u32> = (1..=N as u32).collect();
    assert_eq!(bytes_u32(&read(&mut f.s, &x, S0).expect("x")), want);
    assert_eq!(bytes_u32(&read(&mut f.s, &y, S0).expect("y")), vec![9; N]);
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}
