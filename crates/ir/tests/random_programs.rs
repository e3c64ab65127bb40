//! Generated programs are well-typed, race-free and terminate: the
//! interpreter runs every one without error, and twice the same way.

use compute_ir::interp;
use compute_testkit::random_ir::{Config, FloatOps, program};
use proptest::prelude::*;

fn configs() -> [Config; 3] {
    [
        Config::default(),
        Config {
            floats: FloatOps::Exact,
            ..Config::default()
        },
        Config {
            floats: FloatOps::None,
            vectors: false,
            ..Config::default()
        },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn generated_programs_run_in_the_interpreter(seed in any::<u64>(), which in 0usize..3) {
        let cfg = configs()[which];
        let p = program(seed, &cfg);
        let mut a = p.buffers.clone();
        interp::run_with_budget(&p.kernel, p.workgroups, &mut a, &p.scalars, 50_000_000)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut b = p.buffers.clone();
        interp::run(&p.kernel, p.workgroups, &mut b, &p.scalars).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(a, b);
    }
}

#[test]
fn generation_is_deterministic_and_varied() {
    let cfg = Config::default();
    let a = program(5, &cfg);
    let b = program(5, &cfg);
    assert_eq!(a.kernel.def(), b.kernel.def());
    let c = program(6, &cfg);
    assert_ne!(a.kernel.def(), c.kernel.def());
    // The corpus exercises control flow, shared memory and atomics.
    let mut seen = [false; 4];
    for seed in 0..200 {
        let def = program(seed, &cfg).kernel.def().clone();
        let text = format!("{:?}", def.body);
        seen[0] |= text.contains("For {");
        seen[1] |= text.contains("Loop(");
        seen[2] |= text.contains("Barrier(");
        seen[3] |= text.contains("Atomic(");
    }
    assert_eq!(seen, [true; 4]);
}
