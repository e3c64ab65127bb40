use super::every_loop_counted;
use crate::launch::proof_tests::{reference_kernels, validated};

/// `body` inside a compute entry point with a storage array `a` and a
/// uniform `n`; `extra` at module scope.
fn counted(body: &str, extra: &str) -> bool {
    let source = format!(
        "@group(0) @binding(0) var<storage, read_write> a: array<u32>;
         @group(0) @binding(1) var<uniform> n: u32;
         {extra}
         @compute @workgroup_size(1) fn main() {{ {body} }}"
    );
    let (module, _) = validated(&source).expect("test WGSL parses and validates");
    every_loop_counted(&module)
}

#[test]
fn a_module_without_loops_needs_no_bound() {
    assert!(counted("a[0] = 1u;", ""));
}

#[test]
fn for_loops_up_and_down_are_counted() {
    assert!(counted("for (var i = 0u; i < n; i++) { a[i] = i; }", ""));
    assert!(counted(
        "for (var i = 0u; n > i; i += 1u) { a[i] = i; }",
        ""
    ));
    assert!(counted(
        "for (var i = i32(n); i > 0; i--) { a[i] = 1u; }",
        ""
    ));
    assert!(counted(
        "for (var i = 0u; i < n; i = i + 1u) { if a[i] == 0u { break; } if a[i] == 1u { continue; } a[i] = 2u; }",
        ""
    ));
}

#[test]
fn the_exit_may_be_written_as_a_break_on_the_negation() {
    assert!(counted(
        "var i = 0u; loop { if i >= n { break; } a[i] = 1u; continuing { i = i + 1u; } }",
        ""
    ));
    assert!(counted(
        "var i = 0u; loop { if !(i < n) { break; } a[i] = 1u; continuing { i = 1u + i; } }",
        ""
    ));
}

#[test]
fn a_tree_reduction_halving_an_unsigned_stride_is_counted() {
    assert!(counted(
        "var s = n; loop { if s <= 1u { break; } a[s] += a[s / 2u]; continuing { s = s / 2u; } }",
        ""
    ));
    assert!(counted(
        "for (var s = n; s > 0u; s >>= 1u) { a[s] = 0u; }",
        ""
    ));
    // Signed: -1 / 2 is 0, and 0 > -5 forever.
    assert!(!counted(
        "for (var s = i32(n); s > -5; s = s / 2) { a[0] = 1u; }",
        ""
    ));
    assert!(!counted(
        "for (var s = n; s > 0u; s = s / 1u) { a[0] = 1u; }",
        ""
    ));
    assert!(!counted(
        "for (var s = n; s > 0u; s >>= 0u) { a[0] = 1u; }",
        ""
    ));
    // A run-time shift by 32 is a shift by 0.
    assert!(!counted(
        "var k = 32u; let by = k; for (var s = n; s > 0u; s = s >> by) { a[0] = 1u; }",
        ""
    ));
    assert!(counted(
        "var k = 31u; let by = k; for (var s = n; s > 0u; s = s >> by) { a[0] = 1u; }",
        ""
    ));
}

#[test]
fn a_step_read_from_a_local_only_its_initializer_sets_is_a_constant() {
    assert!(counted(
        "var one = 1u; let s = one; for (var i = 0u; i < n; i = i + s) { a[i] = 0u; }",
        ""
    ));
    // Written once more: no longer a constant.
    assert!(!counted(
        "var one = 1u; one = a[0]; let s = one; for (var i = 0u; i < n; i = i + s) { a[i] = 0u; }",
        ""
    ));
    assert!(!counted(
        "var two = 2u; let s = two; for (var i = 0u; i < n; i = i + s) { a[i] = 0u; }",
        ""
    ));
}

#[test]
fn nested_counted_loops_are_counted() {
    assert!(counted(
        "for (var i = 0u; i < n; i++) { for (var j = 0u; j < i; j++) { a[j] += i; } }",
        ""
    ));
}

#[test]
fn a_while_loop_on_data_keeps_the_bound() {
    assert!(!counted("var i = 0u; while a[i] != 0u { i = a[i]; }", ""));
    assert!(!counted("loop { if a[0] == 0u { break; } }", ""));
}

#[test]
fn an_inclusive_or_wrong_step_test_keeps_the_bound() {
    // `i <= n` with n == MAX never ends: i wraps.
    assert!(!counted("for (var i = 0u; i <= n; i++) { a[0] = i; }", ""));
    // A step other than one can step over MAX and wrap.
    assert!(!counted(
        "for (var i = 0u; i < n; i += 2u) { a[0] = i; }",
        ""
    ));
    // Down with a test that goes up.
    assert!(!counted("for (var i = 0u; i < n; i--) { a[0] = i; }", ""));
    // A float counter does not wrap but may stop moving.
    assert!(!counted(
        "for (var x = 0.0; x < 1e30; x += 1.0) { a[0] = 1u; }",
        ""
    ));
}

#[test]
fn a_counter_written_elsewhere_keeps_the_bound() {
    assert!(!counted("for (var i = 0u; i < n; i++) { i = 0u; }", ""));
    assert!(!counted(
        "for (var i = 0u; i < n; i++) { if a[0] == 1u { i = 0u; } }",
        ""
    ));
    assert!(!counted(
        "for (var i = 0u; i < n; i++) { for (var j = 0u; j < n; j++) { i = j; } }",
        ""
    ));
    // The step stored twice.
    assert!(!counted(
        "var i = 0u; loop { if i >= n { break; } continuing { i = i + 1u; i = i - 1u; } }",
        ""
    ));
}

#[test]
fn a_step_inside_a_branch_keeps_the_bound() {
    assert!(!counted(
        "var i = 0u; loop { if i >= n { break; } continuing { if a[0] == 0u { i = i + 1u; } } }",
        ""
    ));
}

#[test]
fn a_counter_handed_to_a_function_keeps_the_bound() {
    assert!(!counted(
        "for (var i = 0u; i < n; i++) { reset(&i); }",
        "fn reset(p: ptr<function, u32>) { *p = 0u; }"
    ));
}

#[test]
fn a_test_on_a_value_loaded_before_the_loop_keeps_the_bound() {
    // `v` never changes, so `i = v + 1` stores the same value forever.
    assert!(!counted(
        "var i = 0u; let v = i; loop { if v >= n { break; } continuing { i = v + 1u; } }",
        ""
    ));
    // The test reads `i`, the step a load from before the loop.
    assert!(!counted(
        "var i = 0u; let w = i; loop { if i >= n { break; } continuing { i = w + 1u; } }",
        ""
    ));
}

#[test]
fn stores_may_come_before_the_test() {
    assert!(counted(
        "var i = 0u; var p = 1u; loop { let v = i; a[0] = p; if v >= n { break; } continuing { p = p * 2u; i = v + 1u; } }",
        ""
    ));
}

#[test]
fn a_jump_before_the_test_keeps_the_bound() {
    // The `continue` skips the test and runs the step: i wraps forever.
    assert!(!counted(
        "var i = 0u; loop { if a[0] == 0u { continue; } if i >= n { break; } continuing { i = i + 1u; } }",
        ""
    ));
    assert!(!counted(
        "var i = 0u; loop { { a[0] = 1u; } if i >= n { break; } continuing { i = i + 1u; } }",
        ""
    ));
}

#[test]
fn a_store_to_the_counter_before_the_test_keeps_the_bound() {
    assert!(!counted(
        "var i = 0u; loop { i = 0u; if i >= n { break; } continuing { i = i + 1u; } }",
        ""
    ));
}

#[test]
fn every_function_is_checked() {
    assert!(!counted(
        "helper();",
        "fn helper() { loop { if a[0] == 0u { break; } } }"
    ));
    assert!(counted(
        "helper();",
        "fn helper() { for (var i = 0u; i < n; i++) { a[i] = 0u; } }"
    ));
}

/// The IR backend writes `for_range` as a counted loop, so a reference
/// kernel carries wgpu's counter only for a loop the proof cannot count:
/// a run-time step (a grid-stride loop: `i += stride` wraps past `MAX`
/// when the bound is near it) or a loop on data (the single-pass scan's
/// look-back). A constant step's loop (a matmul's k tiles) is emitted as
/// a count of its trips (`crates/wgsl/src/ir/loops.rs`), which is counted. Checked and reported alike. (The tiled
/// matmul's inner loop is counted since the IR backend declares its
/// literals at the top of the function: a literal's variable declared in
/// the loop was stored on every pass, and so no constant step.)
#[test]
fn the_ir_backends_reference_kernels_are_all_counted() {
    use compute_wgsl::{BoundsChecks, WgpuCompilationOptions};
    let mut bounded = Vec::new();
    for checks in [BoundsChecks::Checked, BoundsChecks::Reported] {
        let options = WgpuCompilationOptions {
            bounds_checks: checks,
            ..Default::default()
        };
        for compiled in reference_kernels(&options) {
            let (module, _) = validated(&compiled.source).expect("reference kernel validates");
            if !every_loop_counted(&module) {
                bounded.push(format!("{} ({checks:?})", compiled.name));
            }
        }
    }
    let expected: Vec<String> = ["byte_histogram", "scan_single_pass_4_8", "uniform_rounds"]
        .iter()
        .flat_map(|k| ["Checked", "Reported"].map(|c| (c, *k)))
        .map(|(c, k)| format!("{k} ({c})"))
        .collect();
    bounded.sort();
    let mut expected = expected;
    expected.sort();
    assert_eq!(bounded, expected);
}
