//! Reading the test harness's output: one outcome per test, and the suite
//! each test belongs to (by its module path in `bridge/tests/suites.rs`).

use std::collections::BTreeMap;

/// What one test did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Passed,
    Failed,
    Ignored,
}

/// cubecl's suites as `cargo xtask cubecl` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Suite {
    /// cubecl-core at f32 / i32 / u32, and its untyped tests.
    Core,
    /// cubecl-core at f16 / i64 / u64.
    CoreWide,
    /// cubecl-std.
    Std,
    /// cubecl-core's profiling tests.
    Profiling,
}

impl Outcome {
    /// The harness's word for it.
    pub(crate) fn verdict(self) -> &'static str {
        match self {
            Outcome::Passed => "ok",
            Outcome::Failed => "FAILED",
            Outcome::Ignored => "ignored",
        }
    }
}

impl Suite {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Suite::Core => "core",
            Suite::CoreWide => "core-wide",
            Suite::Std => "std",
            Suite::Profiling => "profiling",
        }
    }
}

/// The suite of the test `name`.
pub(crate) fn suite_of(name: &str) -> Suite {
    if name.starts_with("std_suite::") {
        Suite::Std
    } else if name.starts_with("profiling::") {
        Suite::Profiling
    } else if ["core::f16_ty::", "core::i64_ty::", "core::u64_ty::"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        Suite::CoreWide
    } else {
        Suite::Core
    }
}

/// Every `test NAME ... ok|FAILED|ignored` line of libtest's output. A
/// test that started and never reported (the process died under it)
/// counts as failed.
pub(crate) fn parse_results(output: &str) -> BTreeMap<String, Outcome> {
    let mut results = BTreeMap::new();
    for line in output.lines() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some((name, verdict)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        let outcome = match verdict.trim() {
            "ok" => Outcome::Passed,
            "FAILED" => Outcome::Failed,
            v if v.starts_with("ignored") => Outcome::Ignored,
            _ => continue,
        };
        results.insert(name.trim().to_owned(), outcome);
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_suites_are_read_from_the_harness_output() {
        let out = "running 3 tests\n\
                   test core::f32_ty::binary::test_add ... ok\n\
                   test core::i64_ty::x ... FAILED\n\
                   test std_suite::test_cubecl_std::y ... ignored, slow\n\
                   test result: FAILED. 1 passed; 1 failed\n";
        let r = parse_results(out);
        assert_eq!(r.len(), 3);
        assert_eq!(r["core::f32_ty::binary::test_add"], Outcome::Passed);
        assert_eq!(r["core::i64_ty::x"], Outcome::Failed);
        assert_eq!(suite_of("core::i64_ty::x"), Suite::CoreWide);
        assert_eq!(suite_of("core::launch::z"), Suite::Core);
        assert_eq!(suite_of("std_suite::test_cubecl_std::y"), Suite::Std);
    }
}
