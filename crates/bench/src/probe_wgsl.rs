//! The probes' variants (`cargo xtask bench --filter probe.`): other designs
//! of two kernels the H200 misses its target on, written by hand, each
//! measured against the IR kernel of the figure in the same run. They are
//! what `docs/benchmarks.md` cites for the misses of
//! `kernel.matmul_f16_tc_tflops` and `kernel.histogram_gbps`; kept so the
//! numbers can be measured again, not as figures.
//!
//! The coop variants are the scalar-staged baseline
//! (`matmul_wgsl::coop_matmul_scalar_staged`, the committed design until
//! 2026-12-05) rewritten line by line, so they stay that design but for the
//! one change each names.

use std::fmt::Write;

use crate::matmul_wgsl::{
    coop_head, coop_matmul_scalar_staged as coop_matmul, coop_multiply, coop_store,
};

/// `coop_matmul` with B read straight from storage (`coopLoadT` from the
/// buffer, stride `n`), only A staged through workgroup memory.
pub fn coop_matmul_b_global() -> String {
    let s = coop_matmul().replace(
        "@group(0) @binding(1) var<storage, read> b: array<vec4<f16>>;",
        "@group(0) @binding(1) var<storage, read> b: array<f16>;",
    );
    let mut out = String::new();
    for line in s.lines() {
        if line.contains("let y = b[") || line.contains("sb[br * SB") {
            continue;
        }
        if let Some((i, h)) = tile_load(line, "tb", "&sb[") {
            let _ = writeln!(
                out,
                "        let bt{i}{h} = (k0 + {h}u) * n + col0 + sc + {}u;\n        tb{i} = coopLoadT<coop_mat16x16<f16, B>>(&b[bt{i}{h}], n);",
                i * 16
            );
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `coop_matmul` staged through matrix registers: each subgroup loads 4 of
/// the step's 16 A tiles and 4 of its 16 B tiles straight from storage
/// (`coopLoadT`) and stores them into the staging buffers (`coopStoreT`),
/// where the scalar design stores 64 single f16 per invocation.
pub fn coop_matmul_matrix_staged() -> String {
    let mut s = coop_head(1)
        .replace(
            "@group(0) @binding(0) var<storage, read> a: array<vec4<f16>>;",
            "@group(0) @binding(0) var<storage, read> a: array<f16>;",
        )
        .replace(
            "@group(0) @binding(1) var<storage, read> b: array<vec4<f16>>;",
            "@group(0) @binding(1) var<storage, read> b: array<f16>;",
        );
    s.push_str("    let sa_stride = SA;\n    let sb_stride = SB;\n");
    s.push_str("    for (var k0 = 0u; k0 < kk; k0 += 32u) {\n        workgroupBarrier();\n");
    for t in 0..4 {
        // A tile (row block t / 2 of this subgroup's pair, k half t % 2);
        // B tile (k half t / 2, column block of this subgroup's pair).
        let _ = writeln!(
            s,
            "        {{
            let rb = sg * 2u + {ra}u;
            let ga = (row0 + rb * 16u) * kk + k0 + {ka}u;
            let sa_at = rb * 16u * SA + {ka}u;
            let ma = coopLoadT<coop_mat16x16<f16, A>>(&a[ga], kk);
            coopStoreT(ma, &sa[sa_at], sa_stride);
            let cb = sg * 2u + {cb}u;
            let gb = (k0 + {kb}u) * n + col0 + cb * 16u;
            let sb_at = {kb}u * SB + cb * 16u;
            let mb = coopLoadT<coop_mat16x16<f16, B>>(&b[gb], n);
            coopStoreT(mb, &sb[sb_at], sb_stride);
        }}",
            ra = t / 2,
            ka = (t % 2) * 16,
            cb = t % 2,
            kb = (t / 2) * 16,
        );
    }
    s.push_str("        workgroupBarrier();\n");
    coop_multiply(&mut s, "", "");
    s.push_str("    }\n");
    coop_store(&mut s);
    s
}

/// `coop_matmul` with no staging at all: A and B both read straight from
/// storage (the raw kernel of issue 22's measurement, in this tiling).
pub fn coop_matmul_global() -> String {
    let s = coop_matmul_b_global().replace(
        "@group(0) @binding(0) var<storage, read> a: array<vec4<f16>>;",
        "@group(0) @binding(0) var<storage, read> a: array<f16>;",
    );
    let mut out = String::new();
    let mut staging = false;
    for line in s.lines() {
        // The staging rounds are the blocks that open a line of their own.
        if line.trim_start().starts_with('{') {
            staging = true;
        }
        if staging {
            staging = line.trim() != "}";
            continue;
        }
        if line.contains("workgroupBarrier") {
            continue;
        }
        if let Some((i, h)) = tile_load(line, "ta", "SA + ") {
            let _ = writeln!(
                out,
                "        let at_{i}{h} = (row0 + sr + {}u) * kk + k0 + {h}u;\n        ta{i} = coopLoadT<coop_mat16x16<f16, A>>(&a[at_{i}{h}], kk);",
                i * 16
            );
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The tile index and the half (0 or 16) of a `ta{i}`/`tb{i}` load of the
/// baseline, read from the number that follows `marker` in the line.
fn tile_load(line: &str, var: &str, marker: &str) -> Option<(u32, u32)> {
    let t = line.trim();
    if !(t.starts_with(var) && t.contains("coopLoadT")) {
        return None;
    }
    let i = t[var.len()..].chars().next()?.to_digit(10)?;
    let h = t.split(marker).nth(1)?.split('u').next()?.parse().ok()?;
    Some((i, h))
}

/// `coop_matmul` with the next step's A and B loaded into registers before
/// the multiply-adds of this one; with `double`, also two staging buffers
/// and one barrier per step.
pub fn coop_matmul_pipelined(double: bool) -> String {
    let mut s = coop_head(if double { 2 } else { 1 });
    for round in 0..8 {
        let _ = writeln!(
            s,
            "    var x{round} = vec4<f16>();\n    var y{round} = vec4<f16>();"
        );
    }
    prefetch(&mut s, "0u");
    if double {
        // Step 0 staged first; each step computes from buffer t % 2 and
        // stages step t + 1 (already in registers) into the other.
        stage(&mut s, "0u", "0u");
        s.push_str("    workgroupBarrier();\n    for (var k0 = 0u; k0 < kk; k0 += 32u) {\n");
        s.push_str(
            "        let cur = (k0 / 32u) % 2u;\n        let ca = cur * 5120u;\n        let cb = cur * 4352u;\n        let na = 5120u - ca;\n        let nb = 4352u - cb;\n",
        );
        s.push_str("        let more = k0 + 32u < kk;\n        if (more) {\n");
        prefetch(&mut s, "(k0 + 32u)");
        s.push_str("        }\n");
        coop_multiply(&mut s, "ca + ", "cb + ");
        s.push_str("        if (more) {\n");
        stage(&mut s, "na", "nb");
        s.push_str("        }\n        workgroupBarrier();\n    }\n");
    } else {
        s.push_str("    for (var k0 = 0u; k0 < kk; k0 += 32u) {\n        workgroupBarrier();\n");
        stage(&mut s, "0u", "0u");
        s.push_str("        workgroupBarrier();\n        if (k0 + 32u < kk) {\n");
        prefetch(&mut s, "(k0 + 32u)");
        s.push_str("        }\n");
        coop_multiply(&mut s, "0u + ", "0u + ");
        s.push_str("    }\n");
    }
    coop_store(&mut s);
    s
}

/// The eight rounds of A and B vectors of the step at `k` into registers.
fn prefetch(s: &mut String, k: &str) {
    for round in 0..8 {
        let _ = writeln!(
            s,
            "        {{ let v = l + {o}u; x{round} = a[((row0 + v / 8u) * kk + {k}) / 4u + v % 8u]; y{round} = b[(({k} + v / 32u) * n + col0) / 4u + v % 32u]; }}",
            o = round * 128
        );
    }
}

/// The registers into the staging buffers at `base_a` and `base_b`.
fn stage(s: &mut String, base_a: &str, base_b: &str) {
    for round in 0..8 {
        let _ = writeln!(
            s,
            "        {{ let v = l + {o}u; let r = v / 8u; let q = v % 8u; let br = v / 32u; let bq = v % 32u;",
            o = round * 128
        );
        for t in 0..4 {
            let _ = writeln!(
                s,
                "            sa[{base_a} + r * SA + q * 4u + {t}u] = x{round}[{t}]; sb[{base_b} + br * SB + bq * 4u + {t}u] = y{round}[{t}];"
            );
        }
        s.push_str("        }\n");
    }
}

/// The committed byte histogram (`suite_wgsl::BYTE_HISTOGRAM`) with `kib`
/// KiB of workgroup memory it never needs beside its 1 KiB of bins: how
/// many workgroups an SM holds at that size, seen as bandwidth. The pad is
/// read once (a test the zero-filled memory never passes), so no compiler
/// drops it.
pub fn padded_histogram(kib: u32) -> String {
    let words = kib * 256;
    crate::suite_wgsl::BYTE_HISTOGRAM
        .replace(
            "var<workgroup> bins: array<atomic<u32>, 256>;",
            &format!(
                "var<workgroup> bins: array<atomic<u32>, 256>;\nvar<workgroup> pad: array<u32, {words}>;"
            ),
        )
        .replace(
            "    if (c != 0u) { atomicAdd(&hist[l], c); }",
            "    if (c != 0u) { atomicAdd(&hist[l], c); }\n    if (pad[l] == 12345u) { atomicAdd(&hist[0], 1u); }",
        )
}

/// The byte histogram without an atomic per byte: each invocation owns 256
/// 16-bit counters (two to a word, `counts[word * 64 + l]`, no bank
/// conflict) in 32 KiB of workgroup memory, a plain load and store per
/// byte, merged into `hist` after each round of 4095 vectors. On the H200
/// it measured 93 GB/s (the IR of the same design 219) against the shared
/// atomics' 2,020: a 32 KiB workgroup leaves too few invocations on an SM
/// to keep loads in flight (`docs/benchmarks.md`).
pub const PRIVATE_COUNTERS_HISTOGRAM: &str = r#"
struct P { n4: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read> words: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> p: P;
var<workgroup> counts: array<u32, 8192>;
fn count(l: u32, v: vec4<u32>) {
    for (var q = 0u; q < 4u; q++) {
        let w = v[q];
        for (var s = 0u; s < 32u; s += 8u) {
            let at = extractBits(w, s + 1u, 7u) * 64u + l;
            counts[at] += 1u << (extractBits(w, s, 1u) * 16u);
        }
    }
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) l: u32) {
    let stride = nwg.x * 64u;
    let per_round = stride * 4095u;
    for (var start = 0u; start < p.n4; start += per_round) {
        let end = start + min(per_round, p.n4 - start);
        var i = start + gid.x;
        for (; i + 3u * stride < end; i += 4u * stride) {
            let v0 = words[i];
            let v1 = words[i + stride];
            let v2 = words[i + 2u * stride];
            let v3 = words[i + 3u * stride];
            count(l, v0);
            count(l, v1);
            count(l, v2);
            count(l, v3);
        }
        for (; i < end; i += stride) {
            count(l, words[i]);
        }
        workgroupBarrier();
        for (var w = l; w < 128u; w += 64u) {
            var lo = 0u;
            var hi = 0u;
            for (var j = 0u; j < 64u; j++) {
                let at = w * 64u + ((j + l) & 63u);
                let c = counts[at];
                counts[at] = 0u;
                lo += c & 0xffffu;
                hi += c >> 16u;
            }
            if (lo != 0u) { atomicAdd(&hist[2u * w], lo); }
            if (hi != 0u) { atomicAdd(&hist[2u * w + 1u], hi); }
        }
        workgroupBarrier();
    }
}
"#;

/// The byte histogram (`suite_wgsl::BYTE_HISTOGRAM`) with `copies`
/// sub-histograms in workgroup memory: 4 interleaved by lane
/// (`bin * 4 + lane % 4`), 8 one per 32 invocations (`(l / 32) * 256 +
/// bin`), or 32 interleaved by lane (`bin * 32 + lane % 32`).
pub fn sub_histograms(copies: u32) -> String {
    let (decl, idx, flush) = match copies {
        4 => (
            "var<workgroup> bins: array<atomic<u32>, 1024>;",
            "(BIN) * 4u + (l & 3u)",
            "let c = atomicLoad(&bins[l * 4u]) + atomicLoad(&bins[l * 4u + 1u]) + atomicLoad(&bins[l * 4u + 2u]) + atomicLoad(&bins[l * 4u + 3u]);",
        ),
        8 => (
            "var<workgroup> bins: array<atomic<u32>, 2048>;",
            "(l / 32u) * 256u + (BIN)",
            "var c = 0u; for (var q = 0u; q < 8u; q++) { c += atomicLoad(&bins[q * 256u + l]); }",
        ),
        _ => (
            "var<workgroup> bins: array<atomic<u32>, 8192>;",
            "(BIN) * 32u + (l & 31u)",
            "var c = 0u; for (var q = 0u; q < 32u; q++) { c += atomicLoad(&bins[l * 32u + q]); }",
        ),
    };
    copies_histogram(decl, copies * 256, idx, "1u", flush_and_add(flush))
}

/// A flush that sums bin `l`'s copies into `c`, then adds `c` to `hist[l]`.
fn flush_and_add(sum: &str) -> String {
    format!("{sum}\n    if (c != 0u) {{ atomicAdd(&hist[l], c); }}")
}

/// The byte histogram over `words` workgroup atomics (`bins`, declared by
/// `decl`): byte `BIN` adds `inc` at `idx` (expressions of `BIN`, `l` and
/// `lane`), then `flush` moves the counts into `hist`.
fn copies_histogram(decl: &str, words: u32, idx: &str, inc: &str, flush: String) -> String {
    let adds: String = [
        "w & 255u",
        "(w >> 8u) & 255u",
        "(w >> 16u) & 255u",
        "w >> 24u",
    ]
    .iter()
    .map(|b| {
        format!(
            "            atomicAdd(&bins[{}], {});\n",
            idx.replace("BIN", b),
            inc.replace("BIN", b)
        )
    })
    .collect();
    format!(
        "struct P {{ n4: u32, pad0: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read> words: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> p: P;
{decl}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) l: u32) {{
    let lane = l & 31u;
    for (var q = 0u; q < {words}u; q += 256u) {{ atomicStore(&bins[q + l], 0u); }}
    workgroupBarrier();
    let stride = nwg.x * 256u;
    for (var i = gid.x; i < p.n4; i += stride) {{
        let v = words[i];
        for (var q = 0u; q < 4u; q++) {{
            let w = v[q];
{adds}        }}
    }}
    workgroupBarrier();
    {flush}
}}
"
    )
}

/// The byte histogram with 32 copies interleaved by lane (`bin * 32 +
/// lane`: each lane of a subgroup of 32 in a bank of its own, so no
/// atomic of a subgroup waits on another's bank) and a flush that reads
/// them rotated by lane (conflict-free too; `sub_histograms(32)` read them
/// all from one bank). `packed`: two 16-bit counters a word (16 KiB
/// instead of 32; this job's 2048 workgroups count at most 4,096 per lane
/// and bin).
pub fn lane_histograms(packed: bool) -> String {
    if packed {
        copies_histogram(
            "var<workgroup> bins: array<atomic<u32>, 4096>;",
            4096,
            "((BIN) >> 1u) * 32u + lane",
            "1u << (((BIN) & 1u) * 16u)",
            "if (l < 128u) {
        var lo = 0u;
        var hi = 0u;
        for (var q = 0u; q < 32u; q++) {
            let c = atomicLoad(&bins[l * 32u + ((q + l) & 31u)]);
            lo += c & 0xffffu;
            hi += c >> 16u;
        }
        if (lo != 0u) { atomicAdd(&hist[2u * l], lo); }
        if (hi != 0u) { atomicAdd(&hist[2u * l + 1u], hi); }
    }"
            .to_string(),
        )
    } else {
        copies_histogram(
            "var<workgroup> bins: array<atomic<u32>, 8192>;",
            8192,
            "(BIN) * 32u + lane",
            "1u",
            flush_and_add(
                "var c = 0u;
    for (var q = 0u; q < 32u; q++) { c += atomicLoad(&bins[l * 32u + ((q + l) & 31u)]); }",
            ),
        )
    }
}
