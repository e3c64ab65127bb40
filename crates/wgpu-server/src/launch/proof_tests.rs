//! What the proofs' unit tests (`termination_tests.rs`,
//! `indices_tests.rs`) share: a module naga accepts, and the IR backend's
//! reference kernels as the server would compile them.

use compute_wgsl::{CompiledKernel, DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler};

/// `source` parsed and validated, `None` where naga refuses it.
pub(super) fn validated(source: &str) -> Option<(naga::Module, naga::valid::ModuleInfo)> {
    let module = naga::front::wgsl::parse_str(source).ok()?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .ok()?;
    Some((module, info))
}

/// The reference kernels of `compute-testkit`, compiled under `options`.
pub(super) fn reference_kernels(options: &WgpuCompilationOptions) -> Vec<CompiledKernel> {
    use compute_ir::Scalar;
    use compute_testkit::kernels as k;
    let kernels = [
        k::elementwise_add(Scalar::F32, 64),
        k::workgroup_sum(Scalar::F32, 256),
        k::histogram(64),
        k::byte_histogram(),
        k::tiled_matmul(),
        k::register_matmul(),
        k::softmax(1024),
        k::layernorm(1024),
        k::scan_reduce(),
        k::scan_spine(),
        k::scan_down(),
        k::scan_single_pass(4, 8),
        k::radix_count(),
        k::radix_scatter(),
        k::uniform_rounds(),
    ];
    let caps = DeviceCaps::of(wgpu::Limits::default(), wgpu::Features::all());
    kernels
        .iter()
        .map(|kernel| {
            let kernel = kernel.as_ref().expect("reference kernel builds");
            IrCompiler
                .compile(kernel, options, &caps)
                .expect("reference kernel compiles")
        })
        .collect()
}
