use super::every_index_in_range;
use crate::launch::proof_tests::{reference_kernels, validated};

/// `body` inside a compute entry point with a storage array `a`, a
/// uniform `n` and a workgroup array `w` of 64; `extra` at module scope.
fn in_range(body: &str, extra: &str) -> bool {
    try_in_range(body, extra).expect("test WGSL parses and validates")
}

/// [`in_range`], `None` where naga refuses the module (a constant index
/// past the end, or a constant expression that overflows, both caught
/// before any run).
fn try_in_range(body: &str, extra: &str) -> Option<bool> {
    let source = format!(
        "@group(0) @binding(0) var<storage, read_write> a: array<u32>;
         @group(0) @binding(1) var<uniform> n: u32;
         var<workgroup> w: array<u32, 64>;
         {extra}
         @compute @workgroup_size(64) fn main(@builtin(local_invocation_index) lid: u32) {{ {body} }}"
    );
    let (module, info) = validated(&source)?;
    Some(every_index_in_range(&module, &info, true))
}

#[test]
fn constant_indices_and_buffers_need_no_proof() {
    assert!(in_range(
        "var t: array<u32, 4>; t[3] = a[n]; w[63] = t[0];",
        ""
    ));
}

#[test]
fn a_counted_loop_bounds_its_variable_past_the_test() {
    assert!(in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 4u; i++) { for (var j = 0u; j < 4u; j++) { t[i * 4u + j] = 1.0; } }",
        ""
    ));
    assert!(in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 16u; i++) { t[i] = t[15u - i]; }",
        ""
    ));
}

#[test]
fn an_index_the_bound_does_not_cover_keeps_the_clamps() {
    // One too many: i reaches 16.
    assert!(!in_range(
        "var t: array<f32, 16>; for (var i = 0u; i <= 16u; i++) { t[i] = 1.0; }",
        ""
    ));
    assert!(!in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 17u; i++) { t[i] = 1.0; }",
        ""
    ));
    // A run-time bound.
    assert!(!in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < n; i++) { t[i] = 1.0; }",
        ""
    ));
    // Read from a buffer, a thread id: no range known.
    assert!(!in_range("var t: array<f32, 16>; t[a[0]] = 1.0;", ""));
    assert!(!in_range("w[lid + 1u] = 1u;", ""));
}

#[test]
fn masks_and_remainders_bound_an_unknown_value() {
    assert!(in_range(
        "var t: array<f32, 16>; t[a[0] & 15u] = 1.0; w[a[1] % 64u] = 1u;",
        ""
    ));
    assert!(!in_range("var t: array<f32, 16>; t[a[0] & 16u] = 1.0;", ""));
    assert!(in_range(
        "var t: array<f32, 16>; t[min(a[0], 15u)] = 1.0;",
        ""
    ));
    assert!(in_range("var t: array<f32, 16>; t[a[0] >> 28u] = 1.0;", ""));
    assert!(!in_range(
        "var t: array<f32, 16>; t[a[0] >> 27u] = 1.0;",
        ""
    ));
}

#[test]
fn an_index_that_may_wrap_keeps_the_clamps() {
    // 0 - 1 wraps to u32::MAX.
    assert!(!in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 4u; i++) { t[i - 1u] = 1.0; }",
        ""
    ));
    // A sum that may wrap is any u32, which the mask then bounds.
    assert!(in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 4u; i++) { t[(i + 4294967295u) & 7u] = 1.0; }",
        ""
    ));
    // A signed counter may be negative as far as the proof knows.
    assert!(!in_range(
        "var t: array<f32, 16>; for (var i = 0; i < 4; i++) { t[i] = 1.0; }",
        ""
    ));
}

#[test]
fn the_fact_holds_only_past_the_exit_test() {
    // Read before the test, with i == 16 on the last pass.
    assert!(!in_range(
        "var t: array<f32, 16>; var i = 0u; var s = 0.0; loop { let x = t[i]; if i >= 16u { break; } s += x; continuing { i = i + 1u; } }",
        ""
    ));
    assert!(in_range(
        "var t: array<f32, 16>; var i = 0u; var s = 0.0; loop { if i >= 16u { break; } s += t[i]; continuing { i = i + 1u; } }",
        ""
    ));
}

#[test]
fn vectors_and_matrices_are_indexed_arrays_too() {
    assert!(in_range(
        "var v = vec4<f32>(); var m = mat4x4<f32>(); for (var i = 0u; i < 4u; i++) { v[i] = 1.0; m[i] = v; }",
        ""
    ));
    assert!(!in_range(
        "var v = vec4<f32>(); for (var i = 0u; i < 5u; i++) { v[i] = 1.0; }",
        ""
    ));
}

#[test]
fn buffers_need_the_drivers_bounds() {
    let source = "@group(0) @binding(0) var<storage, read_write> a: array<u32>;
         @compute @workgroup_size(1) fn main() { a[a[0]] = 1u; }";
    let (module, info) = validated(source).expect("parses and validates");
    assert!(every_index_in_range(&module, &info, true));
    assert!(!every_index_in_range(&module, &info, false));
}

/// naga's SPIR-V front end copies each builtin input into a private global
/// at the entry point and the kernel's function loads it: a thread id so
/// kept is still below the workgroup size.
#[test]
fn thread_ids_bound_indices_also_through_private_globals() {
    let source = "var<workgroup> w: array<u32, 128>;
         var<private> lid: vec3<u32>;
         var<private> index: u32;
         fn body() { w[lid.y * 32u + lid.x] = 1u; w[index] = 2u; let v = lid; w[v[1] * 64u + v[0]] = 3u; }
         @compute @workgroup_size(32, 2, 1)
         fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(local_invocation_index) i: u32) {
             lid = l; index = i; body(); w[l.x + l.y] = 4u; w[i] = 5u;
         }";
    assert!(module_in_range(source));
    // A third row would pass the end; another store makes it any value.
    assert!(!module_in_range(
        &source.replace("(32, 2, 1)", "(32, 5, 1)")
    ));
    assert!(!module_in_range(
        &source.replace("fn body() {", "fn body() { index = 200u;")
    ));
    assert!(!module_in_range(
        &source.replace("lid = l;", "lid = l * 2u;")
    ));
    // An initializer is a value the stores do not show.
    assert!(!module_in_range(&source.replace(
        "var<private> index: u32;",
        "var<private> index: u32 = 300u;"
    )));
}

#[test]
fn float_arithmetic_bounds_nothing() {
    // Each sum below 2^24 is exact in f32, but the proof does not reason
    // about rounding, so any float step drops what it knew.
    assert!(!in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 8u; i++) { t[u32(f32(i) + f32(i))] = 1.0; }",
        ""
    ));
    assert!(in_range(
        "var t: array<f32, 16>; for (var i = 0u; i < 8u; i++) { t[i + i] = 1.0; }",
        ""
    ));
}

#[test]
fn guards_bound_what_they_compare() {
    assert!(in_range(
        "if lid < 16u { var t: array<f32, 16>; t[lid] = 1.0; }",
        ""
    ));
    assert!(in_range(
        "let s = a[0] & 31u; if lid < s { w[lid + s] = 1u; }",
        ""
    ));
    assert!(in_range(
        "if !(lid >= 16u) { var t: array<f32, 16>; t[lid] = 1.0; }",
        ""
    ));
    assert!(in_range(
        "var t: array<f32, 16>; if lid >= 16u { } else { t[lid] = 1.0; }",
        ""
    ));
    // `&` on booleans (WGSL's `&&` is lowered to an `if` and a variable,
    // which the proof does not follow).
    assert!(in_range(
        "var t: array<f32, 16>; if (lid < 16u) & (lid > 2u) { t[lid - 3u] = 1.0; }",
        ""
    ));
    // Only where the guard holds.
    assert!(!in_range(
        "var t: array<f32, 16>; if lid < 16u { } t[lid] = 1.0;",
        ""
    ));
    assert!(!in_range(
        "var t: array<f32, 16>; if lid < 17u { t[lid] = 1.0; }",
        ""
    ));
    assert!(!in_range(
        "var t: array<f32, 16>; if lid < 16u || lid == 40u { t[lid] = 1.0; }",
        ""
    ));
}

fn module_in_range(source: &str) -> bool {
    let (module, info) = validated(source).expect("test WGSL parses and validates");
    every_index_in_range(&module, &info, true)
}

/// Which of the IR backend's reference kernels the proof covers. The rest
/// keep wgpu's clamps (and with them its loop counter): the scans and the
/// radix scatter index by a variable they write on data, and the
/// single-pass scan's look-back indexes 65 flags by a lane plus a step.
/// (The register matmul's tile indices divide by literals through the IR's
/// guarded division, `select(x / d, x, d == 0)`, proven since the proof
/// decides such a condition.)
#[test]
fn the_ir_backends_reference_kernels_proven_in_range() {
    let clamped: Vec<String> = reference_kernels(&Default::default())
        .into_iter()
        .filter(|compiled| !module_in_range(&compiled.source))
        .map(|compiled| compiled.name)
        .collect();
    let expected = [
        "scan_reduce",
        "scan_spine",
        "scan_down",
        "scan_single_pass_4_8",
        "radix_scatter",
    ];
    assert_eq!(clamped, expected);
}

/// The proof against brute force: random index expressions over a counted
/// loop's variable, the thread index, literals and a value read from a
/// buffer, some under a random guard. Wherever the proof says "in range",
/// every evaluation (every loop pass, every thread, a spread of buffer
/// values), in WGSL's wrapping `u32` arithmetic, must be. The oracle
/// evaluates its own expression tree and shares no code with the proof.
#[test]
fn the_proof_never_accepts_an_index_brute_force_finds_out_of_range() {
    let mut rng = Lcg(0x9e37_79b9_7f4a_7c15);
    let (mut proven, cases) = (0, 3000);
    for _ in 0..cases {
        let len = [4u32, 16, 64][rng.below(3) as usize];
        let bound = 1 + rng.below(20);
        let index = Expr::random(&mut rng, 3);
        let guard = (rng.below(2) == 0).then(|| (Expr::random(&mut rng, 2), rng.below(70)));
        let access = format!("t[{}] = 1u;", index.wgsl());
        let body = match &guard {
            Some((g, c)) => format!("if ({} < {c}u) {{ {access} }}", g.wgsl()),
            None => access,
        };
        let source =
            format!("var t: array<u32, {len}>; for (var i = 0u; i < {bound}u; i++) {{ {body} }}");
        if try_in_range(&source, "") != Some(true) {
            continue;
        }
        proven += 1;
        for i in 0..bound {
            for lid in 0..64 {
                for unknown in [0, 1, 7, 1 << 31, u32::MAX, rng.next()] {
                    let env = Env { i, lid, unknown };
                    let passes = guard.as_ref().is_none_or(|(g, c)| g.eval(&env) < *c);
                    let at = index.eval(&env);
                    assert!(
                        !passes || at < len,
                        "proved in range but index {at} of {len} at i {i}, lid {lid}, a[0] {unknown}: {source}"
                    );
                }
            }
        }
    }
    // The test means something only if the proof accepts a fair share.
    assert!(proven > cases / 10, "only {proven} of {cases} proven");
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

struct Env {
    i: u32,
    lid: u32,
    unknown: u32,
}

enum Expr {
    I,
    Lid,
    Unknown,
    Lit(u32),
    Bin(&'static str, Box<Expr>, Box<Expr>),
}

impl Expr {
    fn random(rng: &mut Lcg, depth: u32) -> Expr {
        let leaf = depth == 0 || rng.below(3) == 0;
        if leaf {
            return match rng.below(4) {
                0 => Expr::I,
                1 => Expr::Lid,
                2 => Expr::Unknown,
                _ => Expr::Lit(
                    [0, 1, 2, 3, 4, 15, 16, 31, 63, 64, 4294967295][rng.below(11) as usize],
                ),
            };
        }
        let ops = [
            "+", "-", "*", "/", "%", "&", "|", "^", ">>", "<<", "min", "max",
        ];
        let op = ops[rng.below(ops.len() as u32) as usize];
        let left = Expr::random(rng, depth - 1);
        // Shifts by a literal below 32 (WGSL refuses a larger constant).
        let right = if op == ">>" || op == "<<" {
            Expr::Lit(rng.below(32))
        } else {
            Expr::random(rng, depth - 1)
        };
        Expr::Bin(op, Box::new(left), Box::new(right))
    }

    fn wgsl(&self) -> String {
        match self {
            Expr::I => "i".into(),
            Expr::Lid => "lid".into(),
            Expr::Unknown => "a[0]".into(),
            Expr::Lit(v) => format!("{v}u"),
            Expr::Bin(op @ ("min" | "max"), l, r) => format!("{op}({}, {})", l.wgsl(), r.wgsl()),
            Expr::Bin(op, l, r) => format!("({} {op} {})", l.wgsl(), r.wgsl()),
        }
    }

    /// WGSL's run-time `u32` rules: wrapping arithmetic, `x / 0 == x`,
    /// `x % 0 == 0`, shift amounts masked to 5 bits.
    fn eval(&self, env: &Env) -> u32 {
        match self {
            Expr::I => env.i,
            Expr::Lid => env.lid,
            Expr::Unknown => env.unknown,
            Expr::Lit(v) => *v,
            Expr::Bin(op, l, r) => {
                let (a, b) = (l.eval(env), r.eval(env));
                match *op {
                    "+" => a.wrapping_add(b),
                    "-" => a.wrapping_sub(b),
                    "*" => a.wrapping_mul(b),
                    "/" => a.checked_div(b).unwrap_or(a),
                    "%" => a.checked_rem(b).unwrap_or(0),
                    "&" => a & b,
                    "|" => a | b,
                    "^" => a ^ b,
                    ">>" => a >> (b & 31),
                    "<<" => a << (b & 31),
                    "min" => a.min(b),
                    "max" => a.max(b),
                    other => unreachable!("no operator {other} is generated"),
                }
            }
        }
    }
}

/// Shared operands make an expression tree a DAG: 2^40 paths here, a
/// compile that never ends unless each node is worked out once.
#[test]
fn shared_operands_cost_the_proof_linear_time() {
    let mut body = String::from("var t: array<f32, 16>; let x0 = lid; let c0 = lid < 9u;");
    for k in 1..=40 {
        body += &format!(" let x{k} = x{} + x{};", k - 1, k - 1);
        body += &format!(" let c{k} = c{} & c{};", k - 1, k - 1);
    }
    body += " if c40 { t[x40 & 15u] = 1.0; t[lid] = 2.0; }";
    // Before the memo this did not end.
    assert!(in_range(&body, ""));
}

/// 64-bit bounds multiply past `i128`: the proof must give up, not panic
/// (it runs on the server's compile path).
#[test]
fn a_product_of_64_bit_bounds_does_not_overflow_the_proof() {
    let big = "18446744073709551615lu";
    assert!(in_range(
        &format!(
            "var t: array<f32, 16>; t[u32((max(b[0], {big}) * max(b[1], {big})) % 16lu)] = 1.0;"
        ),
        "@group(0) @binding(2) var<storage, read_write> b: array<u64>;"
    ));
}

#[test]
fn the_first_unbounded_access_is_named_for_the_log() {
    // A rank-sized array indexed by a value read from a buffer: what
    // burn's fused reductions do with the reduce axis (docs/burn.md).
    let source = "@group(0) @binding(0) var<storage, read_write> a: array<u32>;
         @compute @workgroup_size(1) fn main() { var shape: array<u32, 3>; shape[1] = 4u; a[0] = shape[a[1]]; }";
    let (module, info) = validated(source).expect("test WGSL validates");
    let found = super::first_unbounded(&module, &info, true).expect("unbounded");
    assert_eq!(found.function.as_deref(), Some("main"));
    let access = found.access.expect("an access");
    let naga::Expression::Access { index, .. } =
        module.entry_points[0].function.expressions[access]
    else {
        panic!("not an access: {found:?}");
    };
    assert!(matches!(
        module.entry_points[0].function.expressions[index],
        naga::Expression::Load { .. }
    ));
    assert!(found.to_string().contains("of `main`"), "{found}");
}

/// A `select` whose condition the ranges decide takes its branch's range
/// alone (the IR's guarded division by a literal); one they do not decide
/// takes both.
#[test]
fn a_decided_select_takes_one_branch() {
    let d = "var d_lit: u32 = 2u;";
    assert!(in_range(
        &format!(
            "{d} let d = d_lit; var t: array<f32, 32>; t[select(lid / d, lid, d == 0u)] = 1.0;"
        ),
        ""
    ));
    assert!(in_range(
        &format!(
            "{d} let d = d_lit; var t: array<f32, 32>; t[select(lid, lid / d, d != 0u)] = 1.0;"
        ),
        ""
    ));
    // Undecided (`lid` may be 0 or not): both branches, `lid` up to 63.
    assert!(!in_range(
        "var t: array<f32, 32>; t[select(lid / 2u, lid, lid == 0u)] = 1.0;",
        ""
    ));
    // Decided the other way: the branch past the end is the one taken.
    assert!(!in_range(
        &format!(
            "{d} let d = d_lit; var t: array<f32, 32>; t[select(lid / d, lid, d == 2u)] = 1.0;"
        ),
        ""
    ));
}
