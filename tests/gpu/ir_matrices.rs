//! Cooperative matrices on the device (the H200; skipped with a message
//! on an adapter without them, lavapipe among them): one tile product in
//! every layout against the interpreter, the kernel suite's matmul against
//! the host, and a tile out of bounds reported under reported bounds
//! checks rather than clamped.

use compute_ir::{Kernel, KernelBuilder, Layout, Lit, MatrixRole, Scalar, interp};
use compute_testkit::Rng;
use compute_testkit::bytes::bytes_f32;
use compute_testkit::kernels;
use wgpu_server::prelude::{
    BindingAccess, BoundsChecks, CubeCount, KernelArguments, KernelArray, ServerError,
    WgpuServerOptions, WgslKernel,
};

use crate::ir::{IrServer, read, run, server, upload};

/// Whether the server's device has cooperative matrices; says so if not.
fn has_matrices(s: &IrServer) -> bool {
    crate::common::has_feature(
        s.device(),
        wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
        "cooperative matrices",
    )
}

fn halves(seed: u64, n: usize) -> (Vec<f32>, Vec<u8>) {
    let mut r = Rng::spread(seed);
    let v: Vec<f32> = (0..n).map(|_| (r.below(64) as f32 - 32.0) / 8.0).collect();
    let b = v
        .iter()
        .flat_map(|&x| interp::f16::from_f32(x).to_le_bytes())
        .collect();
    (v, b)
}

/// `c = a * b + c` of one 16x16 tile by one subgroup of 32, `c` in `layout`.
fn tile(layout: Layout) -> Kernel {
    let k = KernelBuilder::new("tile", [32, 1, 1]);
    let (a, b, c) = (
        k.input(Scalar::F16),
        k.input(Scalar::F16),
        k.output(Scalar::F32),
    );
    let (ma, mb, mc) = (
        k.matrix(MatrixRole::A, Scalar::F16, 16),
        k.matrix(MatrixRole::B, Scalar::F16, 16),
        k.matrix(MatrixRole::C, Scalar::F32, 16),
    );
    k.matrix_load(ma, a, 0u32, 16u32, Layout::RowMajor);
    k.matrix_load(mb, b, 0u32, 16u32, Layout::ColumnMajor);
    k.matrix_load(mc, c, 0u32, 16u32, layout);
    k.matrix_multiply_add(mc, ma, mb, mc);
    k.matrix_store(mc, c, 0u32, 16u32, layout);
    k.build().expect("kernel")
}

#[test]
fn a_tile_product_matches_the_interpreter_in_both_layouts() {
    let mut s = server();
    if !has_matrices(&s) {
        return;
    }
    let ((_, a), (_, b)) = (halves(31, 256), halves(32, 256));
    let c: Vec<u8> = (0..256)
        .flat_map(|i| (i as f32 / 4.0).to_le_bytes())
        .collect();
    for layout in [Layout::RowMajor, Layout::ColumnMajor] {
        let k = tile(layout);
        let mut expected = vec![a.clone(), b.clone(), c.clone()];
        interp::run_with_subgroup(&k, [1, 1, 1], &mut expected, &[], 32).expect("interpreter");
        let handles = [
            upload(&mut s, a.clone()),
            upload(&mut s, b.clone()),
            upload(&mut s, c.clone()),
        ];
        run(&mut s, &k, [1, 1, 1], &handles, Vec::new());
        // Products of multiples of 1/8 and sums of 16 of them: exact in f32.
        assert_eq!(
            bytes_f32(&read(&mut s, &handles[2])),
            bytes_f32(&expected[2]),
            "{layout:?}"
        );
    }
}

#[test]
fn the_coop_matmul_matches_the_host() {
    let mut s = server();
    if !has_matrices(&s) {
        return;
    }
    let (m, n, kk) = (256usize, 384usize, 128usize);
    let ((a, ab), (b, bb)) = (halves(33, m * kk), halves(34, kk * n));
    let k = kernels::coop_matmul(32).expect("kernel");
    let handles = [
        upload(&mut s, ab),
        upload(&mut s, bb),
        upload(&mut s, vec![0; m * n * 4]),
    ];
    let scalars = k
        .pack_scalars(&[Lit::U32(m as u32), Lit::U32(n as u32), Lit::U32(kk as u32)])
        .expect("scalars");
    run(
        &mut s,
        &k,
        [(n / 128) as u32, (m / 128) as u32, 1],
        &handles,
        scalars,
    );
    let c = bytes_f32(&read(&mut s, &handles[2]));
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..kk).map(|p| a[i * kk + p] * b[p * n + j]).sum();
            assert_eq!(c[i * n + j], want, "c[{i}][{j}]");
        }
    }
}

/// A 16x16 f32 tile moved from `vec4<f32>` storage, or from a workgroup
/// array of `vec4<f32>` staged from it, at vector 1 with a stride of 5
/// vectors: index and stride count vectors on the device as in the
/// interpreter.
fn moved_from_vectors(shared: bool) -> Kernel {
    let k = KernelBuilder::new("move4", [32, 1, 1]);
    let (x, y) = (k.input_vec(Scalar::F32, 4), k.output(Scalar::F32));
    let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
    if shared {
        let s = k.shared_vec(Scalar::F32, 4, 96);
        k.for_range_step(k.local_index(), 96u32, 32u32, |k, i| {
            k.store(s, i, k.load(x, i));
        });
        k.barrier();
        k.matrix_load(m, s, 1u32, 5u32, Layout::RowMajor);
    } else {
        k.matrix_load(m, x, 1u32, 5u32, Layout::RowMajor);
    }
    k.matrix_store(m, y, 0u32, 16u32, Layout::RowMajor);
    k.build().expect("kernel")
}

#[test]
fn a_tile_of_vectors_matches_the_interpreter_from_storage_and_workgroup_memory() {
    let mut s = server();
    if !has_matrices(&s) {
        return;
    }
    let x: Vec<u8> = (0..96 * 4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    for shared in [false, true] {
        let k = moved_from_vectors(shared);
        let mut expected = vec![x.clone(), vec![0; 1024]];
        interp::run_with_subgroup(&k, [1, 1, 1], &mut expected, &[], 32).expect("interpreter");
        let handles = [upload(&mut s, x.clone()), upload(&mut s, vec![0; 1024])];
        run(&mut s, &k, [1, 1, 1], &handles, Vec::new());
        assert_eq!(
            bytes_f32(&read(&mut s, &handles[1])),
            bytes_f32(&expected[1]),
            "shared {shared}"
        );
    }
}

#[test]
fn a_tile_past_its_buffer_is_reported() {
    let c = WgpuServerOptions::new()
        .bounds_checks(BoundsChecks::Reported)
        .client()
        .expect("adapter");
    let k = KernelBuilder::new("past", [32, 1, 1]);
    let (x, y) = (k.input(Scalar::F32), k.output(Scalar::F32));
    let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
    // Row 15 of a tile at 8 with stride 16 ends at element 263 of 256.
    k.matrix_load(m, x, 8u32, 16u32, Layout::RowMajor);
    k.matrix_store(m, y, 0u32, 16u32, Layout::RowMajor);
    let kernel = k.build().expect("kernel");
    let (hx, hy) = (c.empty(1024).expect("x"), c.empty(1024).expect("y"));
    let launched = c.launch(
        kernel,
        CubeCount::x(1),
        KernelArguments::handles([&hx, &hy]),
    );
    if let Err(e) = &launched
        && let ServerError::Unsupported { what, .. } = e.root_cause()
        && what.starts_with("cooperative")
    {
        eprintln!("{what} unsupported on this adapter: the bounds report not run");
        return;
    }
    launched.expect("launch");
    match c.read_vec::<f32>(&hy).expect_err("poisoned").root_cause() {
        ServerError::OutOfBoundsAccess {
            array, index, len, ..
        } => {
            assert_eq!((*array, *index, *len), (KernelArray::Binding(0), 8, 256));
        }
        other => panic!("expected OutOfBoundsAccess, got {other}"),
    }
}

/// A kernel naga validates but its SPIR-V writer panics on (naga 30: a
/// `coopStoreT` whose stride is an inline load is emitted after the store)
/// is a compilation error at the call, and the server serves on.
#[test]
fn a_translation_panic_is_a_compilation_error() {
    let c = WgpuServerOptions::new().client().expect("adapter");
    if !crate::common::has_feature(
        c.server().device(),
        wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
        "the translation panic",
    ) {
        return;
    }
    let source = "enable wgpu_cooperative_matrix;
        @group(0) @binding(0) var<storage, read_write> c: array<f32>;
        @group(0) @binding(1) var<storage, read> p: array<u32>;
        @compute @workgroup_size(32) fn main() {
            let m = coop_mat16x16<f32, C>();
            coopStoreT(m, &c[0], p[0]);
        }";
    let broken = WgslKernel::new(
        "uncached",
        source,
        "main",
        [32, 1, 1],
        vec![BindingAccess::ReadWrite, BindingAccess::ReadOnly],
    );
    let x = c.empty(1024).expect("x");
    let n = c.create_from_slice(&[16u32]).expect("n");
    let err = c
        .launch(broken, CubeCount::x(1), KernelArguments::handles([&x, &n]))
        .expect_err("the writer panics");
    assert!(
        matches!(err.root_cause(), ServerError::Compilation { kernel, .. } if kernel == "uncached"),
        "{err}"
    );
    c.check(&[&x]).expect("x untouched");
    c.launch(
        crate::common::inc_kernel(),
        CubeCount::x(4),
        KernelArguments::handles([&x]),
    )
    .expect("a good kernel after it");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![1; 256]);
}
