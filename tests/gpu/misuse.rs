//! Mistakes refused where they are made: bindings that share bytes with a
//! written one, WGSL scalars that do not fit the uniform block; and the
//! 2-D launch that replaces hand-computed workgroup counts.

use wgpu_server::prelude::*;

fn client() -> DefaultClient {
    WgpuServerOptions::new().client().expect("adapter")
}

/// `out[i] = x[n - 1 - i]`: a kernel whose result is wrong when `out` and
/// `x` share bytes (invocations read what others already wrote).
fn reverse() -> Kernel {
    let k = KernelBuilder::new("reverse", [64, 1, 1]);
    let (x, out) = (k.input(Scalar::F32), k.output(Scalar::F32));
    let n = k.scalar_arg(Scalar::U32);
    let i = k.x(k.global_id());
    k.if_(k.lt(i, n), |k| {
        let from = k.sub(k.sub(n, 1u32), i);
        k.store(out, i, k.load(x, from));
    });
    k.build().expect("reverse")
}

/// The byte range `[offset, offset + size)` of `h`'s slice.
fn part(h: &Handle, offset: u64, size: u64) -> Handle {
    Handle {
        offset,
        size,
        ..h.clone()
    }
}

#[test]
fn one_buffer_bound_as_input_and_output_is_refused_and_left_untouched() {
    let c = client();
    let values: Vec<f32> = (0..4096).map(|v| v as f32).collect();
    let x = c.create_from_slice(&values).expect("x").with_label("x");
    let e = reverse()
        .launch(&c, 4096, [&x, &x], &[Lit::U32(4096)])
        .expect_err("aliased");
    match e.root_cause() {
        ServerError::BindingsOverlap {
            kernel,
            first: 0,
            second: 1,
            written: 1,
            ..
        } => assert_eq!(kernel, "reverse"),
        other => panic!("expected BindingsOverlap, got {other}"),
    }
    assert!(e.to_string().contains("`x`"), "the label: {e}");
    assert_eq!(c.read_vec::<f32>(&x).expect("untouched"), values);
    c.sync().expect("nothing was enqueued");
}

#[test]
fn overlapping_parts_of_one_slice_are_refused_disjoint_ones_run() {
    let c = client();
    let x = c.create_from_slice(&[1.0f32; 512]).expect("x");
    // Two 1 KiB halves (offsets are multiples of every device's 256-byte
    // storage alignment): disjoint, so the launch runs.
    let (low, high) = (part(&x, 0, 1024), part(&x, 1024, 1024));
    c.write_from_slice(&low, &(0..256).map(|v| v as f32).collect::<Vec<_>>())
        .expect("write");
    reverse()
        .launch(&c, 256, [&low, &high], &[Lit::U32(256)])
        .expect("disjoint parts");
    let got = c.read_vec::<f32>(&x).expect("read");
    assert_eq!(got[256], 255.0);
    assert_eq!(got[511], 0.0);
    // The input's range reaches 256 bytes into the output's.
    let wide = part(&x, 0, 1280);
    let e = reverse()
        .launch(&c, 256, [&wide, &high], &[Lit::U32(256)])
        .expect_err("overlap");
    assert!(
        matches!(e.root_cause(), ServerError::BindingsOverlap { .. }),
        "{e}"
    );
}

#[test]
fn reading_one_buffer_twice_and_writing_in_place_run() {
    let c = client();
    let k = KernelBuilder::new("square_into", [64, 1, 1]);
    let (a, b, out) = (
        k.input(Scalar::F32),
        k.input(Scalar::F32),
        k.output(Scalar::F32),
    );
    let i = k.x(k.global_id());
    k.store(out, i, k.mul(k.load(a, i), k.load(b, i)));
    let square = k.build().expect("square");
    let x = c.create_from_slice(&[3.0f32; 64]).expect("x");
    let y = c.empty_of::<f32>(64).expect("y");
    square.launch(&c, 64, [&x, &x, &y], &[]).expect("two reads");
    assert_eq!(c.read_vec::<f32>(&y).expect("y"), [9.0; 64]);

    let k = KernelBuilder::new("double", [64, 1, 1]);
    let x_in_place = k.output(Scalar::F32);
    let i = k.x(k.global_id());
    k.store(x_in_place, i, k.mul(k.load(x_in_place, i), 2.0f32));
    let double = k.build().expect("double");
    double.launch(&c, 64, [&y], &[]).expect("in place");
    assert_eq!(c.read_vec::<f32>(&y).expect("y"), [18.0; 64]);
}

/// `x[i] = s.v` for `i < s.n`, from WGSL.
fn fill() -> WgslKernel {
    WgslKernel::new(
        "fill",
        "struct S { n: u32, v: f32 }
         @group(0) @binding(0) var<storage, read_write> x: array<f32>;
         @group(0) @binding(1) var<uniform> s: S;
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
             if id.x < s.n { x[id.x] = s.v; }
         }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars()
}

#[test]
fn wgsl_scalars_are_checked_against_the_uniform_struct() {
    let c = client();
    let x = c.empty_of::<f32>(64).expect("x");
    let k = fill();
    // `v` is an f32: `Lit::U32(1)` would read as 1.4e-45.
    let e = k
        .args([&x], &[Lit::U32(64), Lit::U32(1)])
        .expect_err("u32 into f32");
    assert!(
        matches!(
            &e,
            ServerError::ScalarType {
                index: 1,
                declared: DType::F32,
                passed: DType::U32,
                member,
                ..
            } if member == "v"
        ),
        "{e}"
    );
    let e = k.args([&x], &[Lit::U32(64)]).expect_err("v missing");
    assert!(
        matches!(
            e,
            ServerError::ScalarCount {
                declared: 2,
                passed: 1,
                ..
            }
        ),
        "{e}"
    );
    let args = k.args([&x], &[Lit::U32(64), Lit::f32(0.5)]).expect("fits");
    c.launch(k.clone(), k.groups_for(64), args).expect("launch");
    assert_eq!(c.read_vec::<f32>(&x).expect("x"), [0.5; 64]);
}

#[test]
fn a_uniform_block_of_another_layout_is_named() {
    let k = WgslKernel::new(
        "wide",
        "struct S { n: u32, v: vec2<f32> }
         @group(0) @binding(0) var<storage, read_write> x: array<f32>;
         @group(0) @binding(1) var<uniform> s: S;
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
             if id.x < s.n { x[id.x] = s.v.x; }
         }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let x = Handle::new(compute_runtime::ManagedMemoryHandle::new(), 256);
    let e = k
        .args([&x], &[Lit::U32(1), Lit::f32(1.0)])
        .expect_err("a vec2 member");
    assert!(
        matches!(e, ServerError::LayoutMismatch { .. }) && e.to_string().contains("`v`"),
        "{e}"
    );
}

/// `out[y * w + x] = 1000 y + x` over a `w x h` grid, in 8x8 workgroups.
#[test]
fn a_kernel_launches_over_a_2d_grid() {
    let c = client();
    let k = KernelBuilder::new("coords", [8, 8, 1]);
    let out = k.output(Scalar::U32);
    let [w, h] = [0; 2].map(|_| k.scalar_arg(Scalar::U32));
    let id = k.global_id();
    let (x, y) = (k.x(id), k.y(id));
    k.if_(k.and(k.lt(x, w), k.lt(y, h)), |k| {
        k.store(out, k.add(k.mul(y, w), x), k.add(k.mul(y, 1000u32), x));
    });
    let coords = k.build().expect("coords");
    let (w, h) = (21u32, 13u32);
    assert!(matches!(
        coords.groups_for([w, h]),
        CubeCount::Static(3, 2, 1)
    ));
    let o = c.empty_of::<u32>(u64::from(w * h)).expect("out");
    coords
        .launch(&c, [w, h], [&o], &[Lit::U32(w), Lit::U32(h)])
        .expect("2-D launch");
    let want: Vec<u32> = (0..h)
        .flat_map(|y| (0..w).map(move |x| 1000 * y + x))
        .collect();
    assert_eq!(c.read_vec::<u32>(&o).expect("read"), want);
}

/// `c = a + b` over `rows x cols`, each buffer declared `rows * cols` long.
fn add2d() -> Kernel {
    let k = KernelBuilder::new("add2d", [64, 1, 1]);
    let [rows, cols] = [0; 2].map(|_| k.scalar_arg(Scalar::U32));
    let n = k.mul(rows, cols);
    let a = k.input_len(Scalar::F32, n);
    let b = k.input_len(Scalar::F32, n);
    let c = k.output_len(Scalar::F32, n);
    let i = k.x(k.global_id());
    k.if_(k.lt(i, n), |k| {
        k.store(c, i, k.add(k.load(a, i), k.load(b, i)))
    });
    k.build().expect("add2d")
}

#[test]
fn a_buffer_shorter_than_its_declared_length_is_refused_at_the_call() {
    let c = client();
    let a = c.create_from_slice(&[1.0f32; 12]).expect("a");
    let b = c
        .create_from_slice(&[2.0f32; 11])
        .expect("b")
        .with_label("b");
    let out = c.empty_of::<f32>(12).expect("out");
    let k = add2d();
    let e = k
        .launch(&c, 12, [&a, &b, &out], &[Lit::U32(3), Lit::U32(4)])
        .expect_err("b holds 11 of 12");
    match &e {
        ServerError::BindingLength {
            kernel,
            binding: 1,
            expected: 12,
            actual: 11,
            ..
        } => assert_eq!(kernel, "add2d"),
        other => panic!("expected BindingLength, got {other}"),
    }
    assert!(e.to_string().contains("`b`"), "the label: {e}");
    // Longer than declared is fine.
    k.launch(&c, 10, [&a, &a, &out], &[Lit::U32(2), Lit::U32(5)])
        .expect("12 >= 10");
    assert_eq!(c.read_vec::<f32>(&out).expect("out")[..10], [2.0; 10]);
}

#[test]
fn a_declared_length_is_an_expression_of_scalars() {
    let k = KernelBuilder::new("bad_len", [64, 1, 1]);
    let x = k.output(Scalar::F32);
    k.require_len(x, k.local_index());
    let e = k.build().expect_err("a thread id is no length");
    assert!(e.to_string().contains("declared length"), "{e}");
}

/// An error returned to `main` after its buffers were dropped still names
/// them by label.
#[test]
fn an_error_names_a_buffer_by_label_after_the_buffer_is_dropped() {
    let c = client();
    let e = {
        let x = c.create_from_slice(&[1.0f32; 8]).expect("x");
        let x = x.with_label("activations");
        reverse()
            .launch(&c, 8, [&x, &x], &[Lit::U32(8)])
            .expect_err("aliased")
    };
    c.sync().expect("the handle's release is processed");
    assert!(e.to_string().contains("`activations`"), "{e}");
}
