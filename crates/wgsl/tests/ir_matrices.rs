//! Cooperative matrices: the emitted WGSL (every shape, element type,
//! layout and memory, with and without reports) validates with naga's
//! cooperative-matrix capability, and the compiler refuses a kernel the
//! device cannot run: without the feature, or with a configuration the
//! adapter does not report.

mod common;

use compute_ir::{Kernel, KernelBuilder, Layout, MatrixRole, Scalar};
use compute_runtime::ServerError;
use compute_wgsl::{BoundsChecks, DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler};
use wgpu::wgt::{CooperativeMatrixProperties, CooperativeScalarType};

/// `c = a * b + c` of one tile: `a`, `b` from `inputs` (or staged through
/// workgroup memory), `c` loaded and stored in `layout`.
fn kernel(size: u8, elem: Scalar, acc: Scalar, layout: Layout, shared: bool) -> Kernel {
    let k = KernelBuilder::new("tile", [32, 1, 1]);
    let inputs = k.input(elem);
    let out = k.output(acc);
    let (a, b, c) = (
        k.matrix(MatrixRole::A, elem, size),
        k.matrix(MatrixRole::B, elem, size),
        k.matrix(MatrixRole::C, acc, size),
    );
    let n = u32::from(size);
    if shared {
        let tile = k.shared(elem, 2 * n * n);
        let l = k.local_index();
        k.for_range_step(l, 2 * n * n, 32u32, |k, i| {
            k.store(tile, i, k.load(inputs, i))
        });
        k.barrier();
        k.matrix_load(a, tile, 0u32, n, Layout::RowMajor);
        k.matrix_load(b, tile, n * n, n, Layout::ColumnMajor);
    } else {
        k.matrix_load(a, inputs, 0u32, n, Layout::RowMajor);
        k.matrix_load(b, inputs, n * n, n, Layout::ColumnMajor);
    }
    k.matrix_load(c, out, 0u32, n, layout);
    k.matrix_multiply_add(c, a, b, c);
    k.matrix_store(c, out, 0u32, n, layout);
    k.matrix_zero(c);
    k.build().expect("builds")
}

fn config(
    size: u32,
    ab: CooperativeScalarType,
    cr: CooperativeScalarType,
) -> CooperativeMatrixProperties {
    CooperativeMatrixProperties {
        m_size: size,
        n_size: size,
        k_size: size,
        ab_type: ab,
        cr_type: cr,
        saturating_accumulation: false,
    }
}

fn caps(configs: Vec<CooperativeMatrixProperties>) -> DeviceCaps {
    DeviceCaps::of(
        wgpu::Limits::default(),
        wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16,
    )
    .with_cooperative_matrices(configs)
}

fn compile(k: &Kernel, caps: &DeviceCaps, reports: bool) -> Result<String, ServerError> {
    let options = WgpuCompilationOptions {
        bounds_checks: if reports {
            BoundsChecks::Reported
        } else {
            BoundsChecks::Checked
        },
        ..Default::default()
    };
    IrCompiler.compile(k, &options, caps).map(|c| c.source)
}

#[test]
fn every_shape_type_layout_and_memory_validates() {
    use CooperativeScalarType::{F16, F32};
    let all = caps(vec![
        config(8, F16, F16),
        config(8, F16, F32),
        config(16, F16, F16),
        config(16, F16, F32),
        config(8, F32, F32),
        config(16, F32, F32),
    ]);
    for size in [8, 16] {
        for (elem, acc) in [
            (Scalar::F16, Scalar::F32),
            (Scalar::F16, Scalar::F16),
            (Scalar::F32, Scalar::F32),
        ] {
            for layout in [Layout::RowMajor, Layout::ColumnMajor] {
                for shared in [false, true] {
                    for reports in [false, true] {
                        let k = kernel(size, elem, acc, layout, shared);
                        let src = compile(&k, &all, reports).expect("compiles");
                        assert!(src.contains("enable wgpu_cooperative_matrix;"));
                        assert!(src.contains(if layout == Layout::RowMajor {
                            "coopStoreT("
                        } else {
                            "coopStore("
                        }));
                        if let Err(e) = common::naga_spirv(&src) {
                            panic!(
                                "{size} {elem} {acc} {layout:?} shared {shared} reports {reports}:\n{e}\n{src}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_device_without_the_feature_or_the_shape_refuses_the_kernel() {
    use CooperativeScalarType::{F16, F32};
    let k = kernel(16, Scalar::F16, Scalar::F32, Layout::RowMajor, false);
    let none = DeviceCaps::of(wgpu::Limits::default(), wgpu::Features::SHADER_F16);
    assert!(matches!(
        compile(&k, &none, false),
        Err(ServerError::Unsupported {
            what: "cooperative matrices",
            ..
        })
    ));
    // The H200's list has no 8x8x8 f16 -> f32 configuration... only 16.
    let only_8 = caps(vec![config(8, F16, F32)]);
    assert!(matches!(
        compile(&k, &only_8, false),
        Err(ServerError::Unsupported {
            what: "cooperative matrix shape",
            ..
        })
    ));
    let f16_acc_only = caps(vec![config(16, F16, F16)]);
    assert!(matches!(
        compile(&k, &f16_acc_only, false),
        Err(ServerError::Unsupported {
            what: "cooperative matrix shape",
            ..
        })
    ));
    assert!(compile(&k, &caps(vec![config(16, F16, F32)]), false).is_ok());
}

/// A tile that does not fit its array is guarded, not clamped: the
/// emitted code tests the whole footprint before the access.
#[test]
fn every_tile_access_is_guarded_by_its_footprint() {
    use CooperativeScalarType::{F16, F32};
    let k = kernel(16, Scalar::F16, Scalar::F32, Layout::RowMajor, false);
    let src = compile(&k, &caps(vec![config(16, F16, F32)]), true).expect("compiles");
    let guards = src.matches("< 16777216u").count();
    let accesses = src.matches("coopLoad").count() + src.matches("coopStore").count();
    assert_eq!(guards, accesses, "{src}");
    assert!(src.contains("note_out_of_bounds("), "{src}");
}
