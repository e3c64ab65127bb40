//! Cooperative-matrix matmul variants staged in vectors: A and B read
//! from storage as `vec4<f16>` and stored as such into workgroup arrays of
//! `vec4<f16>` (naga 30 has no `bitcast` from `vec2<u32>` to
//! `vec4<f16>`, so no 16-byte loads), and loaded as
//! tiles from there (`coopLoadT` through a `vec4<f16>` pointer, stride in
//! vectors), where the older design
//! (`matmul_wgsl::coop_matmul_scalar_staged`) stores 64 single halves per
//! invocation per step. The first variant measured, 128 rows, k step 32 and
//! no prefetch, is now the committed design (`Coop::COMMITTED`, 224.8
//! TFLOPS on the H200 against 133.9); `variants` lists the others.
//!
//! One generator, three knobs: the workgroup's rows (128 with 4 subgroups,
//! 256 with 8; each subgroup 64 x 64 as 4 x 4 accumulators), the step
//! along k (32 or 64), and whether the next step's loads are issued into
//! registers before this step's multiply-adds.

use std::fmt::Write;

/// A variant's shape.
#[derive(Clone, Copy)]
pub struct Coop {
    /// Rows of `c` per workgroup: 128 (4 subgroups) or 256 (8).
    pub rows: u32,
    /// The step along k: 32 or 64.
    pub bk: u32,
    /// Next step's loads into registers before this step's multiply-adds.
    pub prefetch: bool,
}

impl Coop {
    /// The kernel suite's design (`matmul_wgsl::coop_matmul`, the twin of
    /// `kernels::coop_matmul`).
    pub const COMMITTED: Coop = Coop {
        rows: 128,
        bk: 32,
        prefetch: false,
    };

    pub fn groups(self, d: u32) -> [u32; 3] {
        [d / 128, d / self.rows, 1]
    }

    fn threads(self) -> u32 {
        32 * self.rows / 64 * 2
    }

    /// The WGSL of the variant.
    pub fn wgsl(self) -> String {
        let t = self.threads();
        // Row strides in the staging arrays' elements: 8 halves of padding
        // so the 8 rows of a tile load start in different banks.
        let sa = (self.bk + 8) / 4;
        let sb = (128 + 8) / 4;
        let mut s = format!(
            "enable f16;
enable wgpu_cooperative_matrix;
struct P {{ m: u32, n: u32, k: u32, pad: u32 }}
@group(0) @binding(0) var<storage, read> a: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const SA: u32 = {sa}u;
const SB: u32 = {sb}u;
var<workgroup> sa: array<vec4<f16>, {}>;
var<workgroup> sb: array<vec4<f16>, {}>;
@compute @workgroup_size({t})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32,
        @builtin(subgroup_id) sg: u32) {{
    let row0 = wid.y * {rows}u;
    let col0 = wid.x * 128u;
    let sr = (sg / 2u) * 64u;
    let sc = (sg % 2u) * 64u;
    let n = p.n;
    let kk = p.k;
",
            self.rows * sa,
            self.bk * sb,
            rows = self.rows,
        );
        for i in 0..16 {
            let _ = writeln!(s, "    var acc{i} = coop_mat16x16<f32, C>();");
        }
        for i in 0..4 {
            let _ = writeln!(
                s,
                "    var ta{i} = coop_mat16x16<f16, A>();\n    var tb{i} = coop_mat16x16<f16, B>();"
            );
        }
        let (na, nb) = (self.a_rounds(), self.b_rounds());
        if self.prefetch {
            for r in 0..na {
                let _ = writeln!(s, "    var xa{r} = vec4<f16>();");
            }
            for r in 0..nb {
                let _ = writeln!(s, "    var xb{r} = vec4<f16>();");
            }
            self.loads(&mut s, "0u");
            let _ = writeln!(
                s,
                "    for (var k0 = 0u; k0 < kk; k0 += {}u) {{\n        workgroupBarrier();",
                self.bk
            );
            self.stores(&mut s);
            let _ = writeln!(
                s,
                "        workgroupBarrier();\n        let next = min(k0 + {0}u, kk - {0}u);",
                self.bk
            );
            self.loads(&mut s, "next");
        } else {
            for r in 0..na {
                let _ = writeln!(s, "    var xa{r}: vec4<f16>;");
            }
            for r in 0..nb {
                let _ = writeln!(s, "    var xb{r}: vec4<f16>;");
            }
            let _ = writeln!(
                s,
                "    for (var k0 = 0u; k0 < kk; k0 += {}u) {{\n        workgroupBarrier();",
                self.bk
            );
            self.loads(&mut s, "k0");
            self.stores(&mut s);
            s.push_str("        workgroupBarrier();\n");
        }
        self.multiply(&mut s);
        s.push_str("    }\n");
        for i in 0..4 {
            for j in 0..4 {
                let m = i * 4 + j;
                let _ = writeln!(
                    s,
                    "    let at{m} = (row0 + sr + {}u) * n + col0 + sc + {}u;\n    coopStoreT(acc{m}, &c[at{m}], n);",
                    i * 16,
                    j * 16
                );
            }
        }
        s.push_str("}\n");
        s
    }

    /// `vec4<f16>` loads of A per invocation per step.
    fn a_rounds(self) -> u32 {
        self.rows * self.bk / 4 / self.threads()
    }

    fn b_rounds(self) -> u32 {
        self.bk * 32 / self.threads()
    }

    /// The step at `k0` (an expression) loaded into `xa*`, `xb*`.
    fn loads(self, s: &mut String, k0: &str) {
        let t = self.threads();
        let qa = self.bk / 4;
        for r in 0..self.a_rounds() {
            let _ = writeln!(
                s,
                "        xa{r} = a[((row0 + (l + {0}u) / {qa}u) * kk + {k0}) / 4u + (l + {0}u) % {qa}u];",
                r * t
            );
        }
        for r in 0..self.b_rounds() {
            let _ = writeln!(
                s,
                "        xb{r} = b[(({k0} + (l + {0}u) / 32u) * n + col0) / 4u + (l + {0}u) % 32u];",
                r * t
            );
        }
    }

    /// `xa*`, `xb*` stored into the staging arrays.
    fn stores(self, s: &mut String) {
        let t = self.threads();
        let qa = self.bk / 4;
        for r in 0..self.a_rounds() {
            let v = format!("(l + {}u)", r * t);
            let _ = writeln!(s, "        sa[({v} / {qa}u) * SA + {v} % {qa}u] = xa{r};");
        }
        for r in 0..self.b_rounds() {
            let v = format!("(l + {}u)", r * t);
            let _ = writeln!(s, "        sb[({v} / 32u) * SB + {v} % 32u] = xb{r};");
        }
    }

    /// The step's tile loads and multiply-adds.
    fn multiply(self, s: &mut String) {
        for h in 0..self.bk / 16 {
            for i in 0..4 {
                let _ = writeln!(
                    s,
                    "        ta{i} = coopLoadT<coop_mat16x16<f16, A>>(&sa[(sr + {}u) * SA + {}u], SA);
        tb{i} = coopLoadT<coop_mat16x16<f16, B>>(&sb[{}u * SB + (sc + {}u) / 4u], SB);",
                    i * 16,
                    h * 4,
                    h * 16,
                    i * 16,
                );
            }
            for i in 0..4 {
                for j in 0..4 {
                    let m = i * 4 + j;
                    let _ = writeln!(s, "        acc{m} = coopMultiplyAdd(ta{i}, tb{j}, acc{m});");
                }
            }
        }
    }
}

/// The variants the probes measure, by figure name.
pub fn variants() -> Vec<(&'static str, Coop)> {
    let v = |rows, bk, prefetch| Coop { rows, bk, prefetch };
    vec![
        ("probe.coop_vec_staged_prefetched_tflops", v(128, 32, true)),
        ("probe.coop_vec_staged_k64_tflops", v(128, 64, false)),
        ("probe.coop_vec_staged_256_tflops", v(256, 32, false)),
        (
            "probe.coop_vec_staged_256_prefetched_tflops",
            v(256, 32, true),
        ),
        ("probe.coop_vec_staged_256_k64_tflops", v(256, 64, false)),
    ]
}
