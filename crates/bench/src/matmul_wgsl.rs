//! The two matmul baselines of the kernel suite, written out in WGSL with
//! every register named and every fixed-count loop unrolled, as the IR
//! kernels they measure are (`compute_testkit::kernels::register_matmul`,
//! `coop_matmul`).
//!
//! Why written out: the first versions kept their accumulators in
//! `array<vec4<f32>, 16>` and `array<coop_mat16x16<f32, C>, 16>` indexed
//! by loop counters. NVIDIA's compiler on the H200 left those arrays in
//! local memory: 2.07 TFLOPS against the IR's 21.1 for the f32 matmul,
//! 17.0 against 121.9 for the cooperative one (e432f65,
//! `docs/bench/h200-tests.txt`'s run), so they did not bind. The text is
//! generated here rather than pasted so each unrolled statement is written
//! once.

use std::fmt::Write;

/// The register-tiled f32 matmul: 128x128 tiles of `c`, 256 invocations of
/// 8x8 results each (16 `vec4` accumulators), `a` and `b` staged through
/// workgroup memory 8 columns of `a` (rows of `b`) at a time.
pub fn register_matmul() -> String {
    let mut s = String::from(
        "struct P { m: u32, n: u32, k: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: P;
var<workgroup> sa: array<f32, 1024>;
var<workgroup> sb: array<f32, 1024>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let tx = l % 16u;
    let ty = l / 16u;
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;
    let a_row = l / 2u;
    let a_quad = l % 2u;
    let b_row = l / 32u;
    let b_quad = l % 32u;
    let a_at = ((row0 + a_row) * p.k + a_quad * 4u) / 4u;
    let b_col = col0 + b_quad * 4u;
    let n = p.n;
    let kk = p.k;
",
    );
    for i in 0..16 {
        let _ = writeln!(s, "    var acc{i} = vec4<f32>();");
    }
    s.push_str(
        "    for (var k0 = 0u; k0 < kk; k0 += 8u) {
        workgroupBarrier();
        let va = a[a_at + k0 / 4u];
        let vb = b[((k0 + b_row) * n + b_col) / 4u];
",
    );
    for q in 0..4 {
        let _ = writeln!(
            s,
            "        sa[(a_quad * 4u + {q}u) * 128u + a_row] = va[{q}];
        sb[b_row * 128u + b_quad * 4u + {q}u] = vb[{q}];"
        );
    }
    s.push_str(
        "        workgroupBarrier();
        for (var s = 0u; s < 8u; s++) {
            let at = s * 128u;
            let ya = at + ty * 4u;
            let xb = at + tx * 4u;
            let a0 = vec4(sa[ya], sa[ya + 1u], sa[ya + 2u], sa[ya + 3u]);
            let a1 = vec4(sa[ya + 64u], sa[ya + 65u], sa[ya + 66u], sa[ya + 67u]);
            let b0 = vec4(sb[xb], sb[xb + 1u], sb[xb + 2u], sb[xb + 3u]);
            let b1 = vec4(sb[xb + 64u], sb[xb + 65u], sb[xb + 66u], sb[xb + 67u]);
",
    );
    for i in 0..4 {
        let (e, o, f, g) = (i * 2, i * 2 + 1, 8 + i * 2, 8 + i * 2 + 1);
        let _ = writeln!(
            s,
            "            acc{e} = fma(vec4(a0[{i}]), b0, acc{e});
            acc{o} = fma(vec4(a0[{i}]), b1, acc{o});
            acc{f} = fma(vec4(a1[{i}]), b0, acc{f});
            acc{g} = fma(vec4(a1[{i}]), b1, acc{g});"
        );
    }
    s.push_str("        }\n    }\n");
    for i in 0..8 {
        let row = format!("row0 + {}u + ty * 4u + {}u", (i / 4) * 64, i % 4);
        for h in 0..2 {
            let _ = writeln!(
                s,
                "    c[(({row}) * n + col0 + {}u + tx * 4u) / 4u] = acc{};",
                h * 64,
                i * 2 + h
            );
        }
    }
    s.push_str("}\n");
    s
}

/// The cooperative-matrix matmul: 128x128 tiles of `c` by 4 subgroups of
/// 32, each 64x64 of them (4x4 accumulators of 16x16), `a` and `b` staged
/// as `vec4<f16>` through workgroup memory 32 deep at a time (rows padded
/// by 8 halves), the variant `probe_coop` generates. Without the IR
/// kernel's guards (the figure's sizes keep every tile in bounds) or its
/// subgroup-size check.
pub fn coop_matmul() -> String {
    crate::probe_coop::Coop::COMMITTED.wgsl()
}

/// The cooperative-matrix matmul as it was before 2026-12-05: the same
/// tiles, `a` and `b` staged as single halves (four stores per `vec4`
/// loaded; 133.9 TFLOPS on the H200 against 224.8 for `coop_matmul`).
/// The base of the older probes (`probe_wgsl`).
pub fn coop_matmul_scalar_staged() -> String {
    let mut s = coop_head(1);
    s.push_str("    for (var k0 = 0u; k0 < kk; k0 += 32u) {\n        workgroupBarrier();\n");
    for round in 0..8 {
        let _ = writeln!(
            s,
            "        {{
            let v = l + {}u;
            let r = v / 8u;
            let q = v % 8u;
            let x = a[((row0 + r) * kk + k0) / 4u + q];
            let br = v / 32u;
            let bq = v % 32u;
            let y = b[((k0 + br) * n + col0) / 4u + bq];",
            round * 128
        );
        for t in 0..4 {
            let _ = writeln!(
                s,
                "            sa[r * SA + q * 4u + {t}u] = x[{t}];
            sb[br * SB + bq * 4u + {t}u] = y[{t}];"
            );
        }
        s.push_str("        }\n");
    }
    s.push_str("        workgroupBarrier();\n");
    coop_multiply(&mut s, "", "");
    s.push_str("    }\n");
    coop_store(&mut s);
    s
}

/// The coop matmul's module up to its loop: bindings, `buffers` staging
/// buffers of A and B, the tile coordinates, and the 16 accumulators and 8
/// tiles of the subgroup (shared with `crate::probe_wgsl`'s variants).
pub(crate) fn coop_head(buffers: u32) -> String {
    let mut s = format!(
        "enable f16;
enable wgpu_cooperative_matrix;
struct P {{ m: u32, n: u32, k: u32, pad: u32 }}
@group(0) @binding(0) var<storage, read> a: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const SA: u32 = 40u;
const SB: u32 = 136u;
var<workgroup> sa: array<f16, {}>;
var<workgroup> sb: array<f16, {}>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32,
        @builtin(subgroup_id) sg: u32) {{
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;
    let sr = (sg / 2u) * 64u;
    let sc = (sg % 2u) * 64u;
    // A store's stride and index are named, not inline: naga 30's WGSL
    // front end emits a `coopStoreT`'s inline arguments after the store,
    // and its SPIR-V writer then panics (\"Expression is not cached\").
    let n = p.n;
    let kk = p.k;
",
        5120 * buffers,
        4352 * buffers
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
    s
}

/// One step's tile loads from the staging buffers (at `base_a` and
/// `base_b`, each empty or an offset followed by ` + `) and its 32
/// multiply-adds.
pub(crate) fn coop_multiply(s: &mut String, base_a: &str, base_b: &str) {
    for half in 0..2 {
        for i in 0..4 {
            let _ = writeln!(
                s,
                "        ta{i} = coopLoadT<coop_mat16x16<f16, A>>(&sa[{base_a}(sr + {}u) * SA + {}u], SA);
        tb{i} = coopLoadT<coop_mat16x16<f16, B>>(&sb[{base_b}{}u * SB + sc + {}u], SB);",
                i * 16,
                half * 16,
                half * 16,
                i * 16
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

/// The 16 accumulators stored into `c`, and the module's end.
pub(crate) fn coop_store(s: &mut String) {
    for i in 0..4 {
        for j in 0..4 {
            let m = i * 4 + j;
            let _ = writeln!(
                s,
                "    let at{m} = (row0 + sr + {}u) * n + col0 + sc + {}u;
    coopStoreT(acc{m}, &c[at{m}], n);",
                i * 16,
                j * 16
            );
        }
    }
    s.push_str("}\n");
}
