//! Every kernel the IR backend emits for the kernel suite, and a few hundred
//! random programs, go through naga's SPIR-V writer (what wgpu runs on
//! Vulkan) without an error or a panic, with and without reported bounds
//! checks. naga's validator accepting a module does not mean its writer
//! does: naga 30 panics ("Expression is not cached") on a `coopStoreT`
//! whose stride is an inline expression. The server turns such a panic
//! into a `Compilation` error; this test keeps the IR's own output clear
//! of it on a machine without a GPU, cooperative-matrix kernels included.

mod common;

use compute_ir::Kernel;
use compute_runtime::CubeKernel;
use compute_testkit::kernels;
use compute_testkit::random_ir::{self, Config, FloatOps};
use compute_wgsl::{BoundsChecks, DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler};
use wgpu::wgt::{CooperativeMatrixProperties, CooperativeScalarType};

/// A device with every feature the IR uses and the H200's f16 x f16 -> f32
/// 16x16 configuration.
fn caps() -> DeviceCaps {
    let features = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        | wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP
        | wgpu::Features::SHADER_INT64
        | wgpu::Features::SHADER_F64;
    let limits = wgpu::Limits {
        max_compute_workgroup_storage_size: 48 << 10,
        ..wgpu::Limits::default()
    };
    DeviceCaps::of(limits, features).with_cooperative_matrices(vec![CooperativeMatrixProperties {
        m_size: 16,
        n_size: 16,
        k_size: 16,
        ab_type: CooperativeScalarType::F16,
        cr_type: CooperativeScalarType::F32,
        saturating_accumulation: false,
    }])
}

/// The kernel compiled under `checks`, through naga's SPIR-V writer.
fn spirv(k: &Kernel, checks: BoundsChecks) -> Result<(), String> {
    let options = WgpuCompilationOptions {
        bounds_checks: checks,
        ..Default::default()
    };
    let compiled = IrCompiler
        .compile(k, &options, &caps())
        .map_err(|e| e.to_string())?;
    let source = &compiled.source;
    common::naga_spirv(source).map_err(|e| format!("{e}\n{source}"))
}

fn each_check(k: &Kernel) {
    for checks in [BoundsChecks::Checked, BoundsChecks::Reported] {
        if let Err(e) = spirv(k, checks) {
            panic!("{} ({checks:?}): {e}", k.name());
        }
    }
}

#[test]
fn the_kernel_suite_writes_spirv() {
    let all = [
        kernels::softmax(4096),
        kernels::layernorm(4096),
        kernels::scan_reduce(),
        kernels::scan_spine(),
        kernels::scan_down(),
        kernels::byte_histogram(),
        kernels::byte_histogram_lanes(),
        kernels::scan_single_pass(4, 256),
        kernels::scan_single_pass(8, 256),
        kernels::radix_count(),
        kernels::radix_scatter(),
        kernels::register_matmul(),
        kernels::coop_matmul(32),
        kernels::tiled_matmul(),
        kernels::histogram(256),
        kernels::uniform_rounds(),
    ];
    for k in all {
        each_check(&k.expect("builds"));
    }
}

#[test]
fn random_programs_write_spirv() {
    for floats in [FloatOps::None, FloatOps::Exact, FloatOps::All] {
        let cfg = Config {
            statements: 16,
            depth: 3,
            floats,
            vectors: true,
            barriers: true,
            atomics: true,
        };
        for seed in 1..=60 {
            each_check(&random_ir::program(seed, &cfg).kernel);
        }
    }
}
