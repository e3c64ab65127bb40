//! Cooperative matrices in the interpreter: a tile product against the
//! host (inputs as the f16 the device reads), both layouts, offsets and
//! strides, workgroup memory, and the refusals: a subgroup that is not
//! whole, an index or stride that differs between invocations, a tile out
//! of bounds, a stride shorter than a row; and the builder's type errors.

use compute_ir::interp::{self, f16};
use compute_ir::{IrError, KernelBuilder, Layout, MatrixRole, RunError, Scalar};

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| f16::from_f32(x).to_le_bytes())
        .collect()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `c = a * b + c` for one 16x16 tile: `a` row-major at offset 3 with
/// stride 20, `b` column-major at offset 0 with stride 16, `c` in `layout`.
fn tile_product(layout: Layout, shared: bool) {
    let k = KernelBuilder::new("tile", [32, 1, 1]);
    let a_in = k.input(Scalar::F16);
    let b_in = k.input(Scalar::F16);
    let c = k.output(Scalar::F32);
    let (ma, mb, mc) = (
        k.matrix(MatrixRole::A, Scalar::F16, 16),
        k.matrix(MatrixRole::B, Scalar::F16, 16),
        k.matrix(MatrixRole::C, Scalar::F32, 16),
    );
    if shared {
        let tile = k.shared(Scalar::F16, 3 + 16 * 20);
        k.for_range_step(k.local_index(), 3 + 16 * 20, 32u32, |k, i| {
            k.store(tile, i, k.load(a_in, i));
        });
        k.barrier();
        k.matrix_load(ma, tile, 3u32, 20u32, Layout::RowMajor);
    } else {
        k.matrix_load(ma, a_in, 3u32, 20u32, Layout::RowMajor);
    }
    k.matrix_load(mb, b_in, 0u32, 16u32, Layout::ColumnMajor);
    k.matrix_load(mc, c, 0u32, 16u32, layout);
    k.matrix_multiply_add(mc, ma, mb, mc);
    k.matrix_store(mc, c, 0u32, 16u32, layout);
    let kernel = k.build().expect("builds");

    // Values an f16 holds exactly but an f32 sum does not reorder freely.
    let a: Vec<f32> = (0..3 + 16 * 20)
        .map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0)
        .collect();
    let b: Vec<f32> = (0..256)
        .map(|i| ((i * 5 % 17) as f32 - 8.0) / 4.0)
        .collect();
    let c0: Vec<f32> = (0..256).map(|i| i as f32 / 16.0).collect();
    let mut buffers = vec![
        f16_bytes(&a),
        f16_bytes(&b),
        c0.iter().flat_map(|x| x.to_le_bytes()).collect(),
    ];
    interp::run_with_subgroup(&kernel, [1, 1, 1], &mut buffers, &[], 32).expect("runs");
    let got = f32s(&buffers[2]);
    let at = |r: usize, col: usize| match layout {
        Layout::RowMajor => r * 16 + col,
        Layout::ColumnMajor => col * 16 + r,
    };
    for r in 0..16 {
        for col in 0..16 {
            let sum: f64 = (0..16)
                .map(|i| f64::from(a[3 + r * 20 + i]) * f64::from(b[col * 16 + i]))
                .sum();
            let want = (sum + f64::from(c0[at(r, col)])) as f32;
            assert_eq!(
                got[at(r, col)],
                want,
                "({r}, {col}) {layout:?} shared {shared}"
            );
        }
    }
}

#[test]
fn a_tile_product_matches_the_host_in_both_layouts_and_memories() {
    for layout in [Layout::RowMajor, Layout::ColumnMajor] {
        for shared in [false, true] {
            tile_product(layout, shared);
        }
    }
}

/// A kernel loading a 16x16 f32 tile of `x` at `index` with `stride`
/// (both chosen by `f`) and storing it to `y`; run with subgroups of 16.
fn moved(
    workgroup: u32,
    f: impl Fn(&KernelBuilder) -> (compute_ir::Val, compute_ir::Val),
    x_len: usize,
) -> Result<Vec<f32>, RunError> {
    let k = KernelBuilder::new("move", [workgroup, 1, 1]);
    let x = k.input(Scalar::F32);
    let y = k.output(Scalar::F32);
    let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
    let (index, stride) = f(&k);
    k.matrix_load(m, x, index, stride, Layout::RowMajor);
    k.matrix_store(m, y, 0u32, 16u32, Layout::RowMajor);
    let kernel = k.build().expect("builds");
    let xs: Vec<u8> = (0..x_len).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut buffers = vec![xs, vec![0; 256 * 4]];
    interp::run_with_subgroup(&kernel, [1, 1, 1], &mut buffers, &[], 16)?;
    Ok(f32s(&buffers[1]))
}

#[test]
fn refusals_name_the_problem() {
    let whole = |k: &KernelBuilder| (k.u32(0), k.u32(16));
    assert_eq!(moved(16, whole, 256).expect("whole subgroup")[17], 17.0);
    // 24 invocations: the second subgroup of 16 has 8.
    let err = moved(24, whole, 256).expect_err("partial subgroup");
    assert!(
        matches!(
            err,
            RunError::SubgroupLane {
                op: "matrix_load",
                ..
            }
        ),
        "{err}"
    );
    let err = moved(16, |k| (k.local_index(), k.u32(16)), 512).expect_err("divergent index");
    assert!(
        matches!(
            err,
            RunError::SubgroupLane {
                op: "matrix_load",
                ..
            }
        ),
        "{err}"
    );
    // The last row reaches element 15 * 16 + 15 + 1 = 256 of 256.
    let err = moved(16, |k| (k.u32(1), k.u32(16)), 256).expect_err("out of bounds");
    assert!(
        matches!(
            err,
            RunError::OutOfBounds {
                op: "matrix_load",
                index: 256,
                len: 256
            }
        ),
        "{err}"
    );
    let err = moved(16, |k| (k.u32(0), k.u32(8)), 256).expect_err("short stride");
    assert!(
        matches!(
            err,
            RunError::SubgroupLane {
                op: "matrix_load",
                ..
            }
        ),
        "{err}"
    );
}

fn build_error(f: impl Fn(&KernelBuilder)) -> String {
    let k = KernelBuilder::new("bad", [32, 1, 1]);
    f(&k);
    match k.build() {
        Err(IrError::Built { error, .. }) => error.to_string(),
        other => panic!("expected a builder error, got {other:?}"),
    }
}

#[test]
fn the_builder_refuses_ill_typed_matrix_statements() {
    let e = build_error(|k| {
        let x = k.input(Scalar::F32);
        let m = k.matrix(MatrixRole::A, Scalar::F16, 16);
        k.matrix_load(m, x, 0u32, 16u32, Layout::RowMajor);
    });
    assert!(e.contains("f16 matrix"), "{e}");
    let e = build_error(|k| {
        let x = k.input(Scalar::F32);
        let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
        k.matrix_store(m, x, 0u32, 16u32, Layout::RowMajor);
    });
    assert!(e.contains("read-only"), "{e}");
    let e = build_error(|k| {
        let regs = k.local_array(compute_ir::Type::F32, 256);
        let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
        k.matrix_load(m, regs, 0u32, 16u32, Layout::RowMajor);
    });
    assert!(e.contains("workgroup array"), "{e}");
    let e = build_error(|k| {
        let a = k.matrix(MatrixRole::A, Scalar::F16, 16);
        let b = k.matrix(MatrixRole::B, Scalar::F16, 8);
        let c = k.matrix(MatrixRole::C, Scalar::F32, 16);
        k.matrix_multiply_add(c, a, b, c);
    });
    assert!(e.contains("one size"), "{e}");
    let e = build_error(|k| {
        let a = k.matrix(MatrixRole::A, Scalar::F16, 16);
        let c = k.matrix(MatrixRole::C, Scalar::F32, 16);
        k.matrix_multiply_add(c, a, a, c);
    });
    assert!(e.contains("b: B"), "{e}");
    let k = KernelBuilder::new("bad", [32, 1, 1]);
    k.matrix(MatrixRole::A, Scalar::F32, 12);
    assert!(k.build().is_err(), "a 12x12 matrix");
}

/// A 16x16 f32 tile moved from an array of `vec4<f32>` (a buffer, or a
/// workgroup array staged from it) at vector `index` with `stride`
/// vectors: row `r` is the 16 lanes from the first of vector
/// `index + r * stride`.
fn moved_from_vectors(shared: bool, index: u32, stride: u32) -> Result<Vec<f32>, RunError> {
    let k = KernelBuilder::new("move4", [16, 1, 1]);
    let x = k.input_vec(Scalar::F32, 4);
    let y = k.output(Scalar::F32);
    let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
    if shared {
        let s = k.shared_vec(Scalar::F32, 4, 96);
        k.for_range_step(k.local_index(), 96u32, 16u32, |k, i| {
            k.store(s, i, k.load(x, i));
        });
        k.barrier();
        k.matrix_load(m, s, index, stride, Layout::RowMajor);
    } else {
        k.matrix_load(m, x, index, stride, Layout::RowMajor);
    }
    k.matrix_store(m, y, 0u32, 16u32, Layout::RowMajor);
    let kernel = k.build().expect("builds");
    let xs: Vec<u8> = (0..96 * 4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut buffers = vec![xs, vec![0; 256 * 4]];
    interp::run_with_subgroup(&kernel, [1, 1, 1], &mut buffers, &[], 16)?;
    Ok(f32s(&buffers[1]))
}

#[test]
fn a_tile_of_vectors_counts_index_and_stride_in_vectors() {
    for shared in [false, true] {
        let got = moved_from_vectors(shared, 1, 5).expect("runs");
        for r in 0..16 {
            for c in 0..16 {
                let want = ((1 + r * 5) * 4 + c) as f32;
                assert_eq!(got[r * 16 + c], want, "({r}, {c}) shared {shared}");
            }
        }
        // The last row would end at lane (16 + 15 * 6) * 4 + 15 = 439 of
        // 96 * 4: the first lane past the end is reported.
        let err = moved_from_vectors(shared, 16, 6).expect_err("out of bounds");
        assert!(
            matches!(
                err,
                RunError::OutOfBounds {
                    op: "matrix_load",
                    index: 384,
                    len: 384
                }
            ),
            "{err}"
        );
        // 3 vectors are 12 lanes: shorter than a row of 16.
        let err = moved_from_vectors(shared, 0, 3).expect_err("short stride");
        assert!(
            matches!(
                err,
                RunError::SubgroupLane {
                    op: "matrix_load",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn vectors_whose_lanes_do_not_divide_the_edge_and_vec3_staging_are_refused() {
    let e = build_error(|k| {
        let x = k.input_vec(Scalar::F32, 3);
        let m = k.matrix(MatrixRole::C, Scalar::F32, 16);
        k.matrix_load(m, x, 0u32, 16u32, Layout::RowMajor);
    });
    assert!(e.contains("lanes divide 16"), "{e}");
    let k = KernelBuilder::new("vec3", [1, 1, 1]);
    let s = k.shared_vec(Scalar::F32, 3, 4);
    let out = k.output_vec(Scalar::F32, 3);
    k.store(out, 0u32, k.load(s, 0u32));
    let e = k.build().expect_err("vec3 staging").to_string();
    assert!(e.contains("2 or 4"), "{e}");
}
