//! naga rejects nothing the IR compiler emits, over the generated corpus.

use compute_runtime::CubeKernel;
use compute_testkit::random_ir::{Config, FloatOps, program};
use compute_wgsl::{
    BoundsChecks, DeviceCaps, IrCompiler, WgpuCompilationOptions, WgpuCompiler, check_layout,
    module_interface, validate_wgsl,
};
use proptest::prelude::*;

fn caps() -> DeviceCaps {
    DeviceCaps::of(wgpu::Limits::default(), wgpu::Features::empty())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn naga_accepts_every_generated_program(seed in any::<u64>(), which in 0usize..3) {
        let cfg = [
            Config::default(),
            Config { floats: FloatOps::Exact, statements: 40, ..Config::default() },
            Config { floats: FloatOps::None, depth: 4, ..Config::default() },
        ][which];
        let p = program(seed, &cfg);
        let compiled = IrCompiler.compile(&p.kernel, &WgpuCompilationOptions { bounds_checks: compute_wgsl::BoundsChecks::Checked, ..Default::default() }, &caps());
        match compiled {
            Ok(c) => prop_assert_eq!(c.layout, IrCompiler.layout(&p.kernel).expect("layout")),
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "seed {seed} ({}): {e}\n{}",
                    p.kernel.name(),
                    compute_wgsl::ir::emit_wgsl(&p.kernel)
                )));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With reported bounds checks every access is instrumented: naga still
    /// accepts the program, and the module declares the report slot the
    /// layout says it has.
    #[test]
    fn naga_accepts_every_generated_program_with_reported_bounds(seed in any::<u64>()) {
        let p = program(seed, &Config::default());
        let options = WgpuCompilationOptions {
            bounds_checks: BoundsChecks::Reported,
            validate: true,
            ..Default::default()
        };
        let c = IrCompiler.compile(&p.kernel, &options, &caps())
            .map_err(|e| TestCaseError::fail(format!("seed {seed}: {e}")))?;
        prop_assert!(c.layout.reports);
        let module = validate_wgsl("reported", &c.source).expect("validated above");
        let interface = module_interface(&module, &c.entry_point).expect("interface");
        prop_assert_eq!(check_layout(&c.layout, &interface), Ok(()));
    }
}

/// `SEED=... cargo test -p compute-wgsl --test ir_corpus show_seed -- --ignored --nocapture`
#[test]
#[ignore = "prints one generated program's WGSL"]
fn show_seed() {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    println!(
        "{}",
        compute_wgsl::ir::emit_wgsl(&program(seed, &Config::default()).kernel)
    );
}
