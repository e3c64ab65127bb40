//! The kernel suite's baselines, handwritten in WGSL: each the design of
//! its IR kernel in `compute_testkit::kernels` (same tiling, same
//! registers, same barriers and atomics), so a figure's ratio is the cost
//! of writing it with the IR and launching it through the server.

/// Each line of `line(j)` for `j` in `0..per`, joined: a loop over the
/// registers written out, so each register is a named value (an array
/// indexed by a loop counter stayed in local memory on the H200; see
/// `crate::matmul_wgsl`).
fn unrolled(per: u32, line: impl Fn(u32) -> String) -> String {
    (0..per).map(line).collect::<Vec<_>>().join("\n")
}

/// Row softmax, `per` vectors per invocation in registers.
pub fn softmax(per: u32) -> String {
    let load = unrolled(per, |j| {
        format!(
            "    let r{j} = x[base + {o}u];\n    m = max(m, max(max(r{j}.x, r{j}.y), max(r{j}.z, r{j}.w)));",
            o = j * 256
        )
    });
    let sum = unrolled(per, |j| {
        format!(
            "    let e{j} = exp(r{j} - vec4(m));\n    s += (e{j}.x + e{j}.y) + (e{j}.z + e{j}.w);"
        )
    });
    let store = unrolled(per, |j| {
        format!("    y[base + {o}u] = exp(r{j} - mm) * inv;", o = j * 256)
    });
    format!(
        "@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;
var<workgroup> sm: array<f32, 256>;
var<workgroup> ss: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {{
    let base = wid.x * {per}u * 256u + l;
    var m = -3.40282347e38;
{load}
    var s = 0.0;
{sum}
    sm[l] = m;
    ss[l] = s;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {{
        if (l < stride) {{
            let ma = sm[l];
            let mb = sm[l + stride];
            let mx = max(ma, mb);
            ss[l] = ss[l] * exp(ma - mx) + ss[l + stride] * exp(mb - mx);
            sm[l] = mx;
        }}
        workgroupBarrier();
    }}
    let mm = vec4(sm[0]);
    let inv = vec4(1.0 / ss[0]);
{store}
}}
"
    )
}

/// Row layernorm of `cols` columns, `cols / 1024` vectors per invocation.
pub fn layernorm(cols: u32) -> String {
    let per = cols / 1024;
    let load = unrolled(per, |j| {
        format!(
            "    let r{j} = x[base + {o}u];\n    s += (r{j}.x + r{j}.y) + (r{j}.z + r{j}.w);",
            o = j * 256
        )
    });
    let dev = unrolled(per, |j| {
        format!(
            "    let q{j} = (r{j} - mean) * (r{j} - mean);\n    d += (q{j}.x + q{j}.y) + (q{j}.z + q{j}.w);"
        )
    });
    let store = unrolled(per, |j| {
        format!(
            "    y[base + {o}u] = (r{j} - mean) * rstd * gamma[l + {o}u] + beta[l + {o}u];",
            o = j * 256
        )
    });
    format!(
        "struct P {{ eps: f32, pad0: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> gamma: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> beta: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> p: P;
var<workgroup> red: array<f32, 256>;
fn workgroup_sum(l: u32, v: f32) -> f32 {{
    red[l] = v;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {{
        if (l < stride) {{ red[l] += red[l + stride]; }}
        workgroupBarrier();
    }}
    return red[0];
}}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {{
    let base = wid.x * {per}u * 256u + l;
    var s = 0.0;
{load}
    let mean = vec4(workgroup_sum(l, s) / {cols}.0);
    var d = 0.0;
{dev}
    workgroupBarrier();
    let rstd = vec4(inverseSqrt(workgroup_sum(l, d) / {cols}.0 + p.eps));
{store}
}}
"
    )
}

/// The workgroup scan every scan and sort kernel shares (the IR's
/// `workgroup_exclusive`): subgroup inclusive scans, the subgroups'
/// totals scanned by invocation 0.
const WG_EXCLUSIVE: &str = r#"
var<workgroup> totals: array<u32, 257>;
fn wg_exclusive(t: u32, l: u32, lane: u32, size: u32, sg: u32, nsg: u32) -> vec2<u32> {
    let incl = subgroupInclusiveAdd(t);
    if (lane + 1u == size) { totals[sg] = incl; }
    workgroupBarrier();
    if (l == 0u) {
        var run = 0u;
        for (var i = 0u; i < nsg; i++) {
            let v = totals[i];
            totals[i] = run;
            run += v;
        }
        totals[nsg] = run;
    }
    workgroupBarrier();
    return vec2(incl - t + totals[sg], totals[nsg]);
}
"#;

/// The scan's entry point arguments.
const SCAN_ARGS: &str = "@builtin(workgroup_id) wid: vec3<u32>, \
    @builtin(local_invocation_index) l: u32, @builtin(subgroup_invocation_id) lane: u32, \
    @builtin(subgroup_size) size: u32, @builtin(subgroup_id) sg: u32, \
    @builtin(num_subgroups) nsg: u32";

/// Block sums of the scan: `scan_reduce`.
pub fn scan_reduce() -> String {
    format!(
        "{WG_EXCLUSIVE}
struct P {{ n4: u32, pad0: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(256)
fn main({SCAN_ARGS}) {{
    let first = wid.x * 1024u + l * 4u;
    var t = 0u;
    for (var j = 0u; j < 4u; j++) {{
        if (first + j < p.n4) {{
            let v = x[first + j];
            t += (v.x + v.y) + (v.z + v.w);
        }}
    }}
    let r = wg_exclusive(t, l, lane, size, sg, nsg);
    if (l == 0u) {{ sums[wid.x] = r.y; }}
}}
"
    )
}

/// The scan's spine: `scan_spine`.
pub fn scan_spine() -> String {
    format!(
        "{WG_EXCLUSIVE}
struct P {{ blocks: u32, pad0: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read_write> sums: array<u32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(256)
fn main({SCAN_ARGS}) {{
    let chunk = (p.blocks + 255u) / 256u;
    let start = min(l * chunk, p.blocks);
    let end = min(start + chunk, p.blocks);
    var t = 0u;
    for (var i = start; i < end; i++) {{ t += sums[i]; }}
    var run = wg_exclusive(t, l, lane, size, sg, nsg).x;
    for (var i = start; i < end; i++) {{
        let v = sums[i];
        sums[i] = run;
        run += v;
    }}
}}
"
    )
}

/// The scan's down-sweep: `scan_down`.
pub fn scan_down() -> String {
    let load = unrolled(4, |j| {
        format!(
            "    var r{j} = vec4(0u);
    if (first + {j}u < p.n4) {{ r{j} = x[first + {j}u]; t += (r{j}.x + r{j}.y) + (r{j}.z + r{j}.w); }}"
        )
    });
    let store = unrolled(4, |j| {
        format!(
            "    if (first + {j}u < p.n4) {{
        let a = run;
        let b = a + r{j}.x;
        let c = b + r{j}.y;
        let d = c + r{j}.z;
        y[first + {j}u] = vec4(a, b, c, d);
        run = d + r{j}.w;
    }}"
        )
    });
    format!(
        "{WG_EXCLUSIVE}
struct P {{ n4: u32, pad0: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;
@group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size(256)
fn main({SCAN_ARGS}) {{
    let first = wid.x * 1024u + l * 4u;
    var t = 0u;
{load}
    var run = wg_exclusive(t, l, lane, size, sg, nsg).x + offsets[wid.x];
{store}
}}
"
    )
}

/// The byte histogram: `byte_histogram`.
pub const BYTE_HISTOGRAM: &str = r#"
struct P { n4: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read> words: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> p: P;
var<workgroup> bins: array<atomic<u32>, 256>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) l: u32) {
    atomicStore(&bins[l], 0u);
    workgroupBarrier();
    let stride = nwg.x * 256u;
    for (var i = gid.x; i < p.n4; i += stride) {
        let v = words[i];
        for (var q = 0u; q < 4u; q++) {
            let w = v[q];
            atomicAdd(&bins[w & 255u], 1u);
            atomicAdd(&bins[(w >> 8u) & 255u], 1u);
            atomicAdd(&bins[(w >> 16u) & 255u], 1u);
            atomicAdd(&bins[(w >> 24u) & 255u], 1u);
        }
    }
    workgroupBarrier();
    let c = atomicLoad(&bins[l]);
    if (c != 0u) { atomicAdd(&hist[l], c); }
}
"#;

/// The radix sort's parameters and digit counting, shared by both passes'
/// kernels.
const RADIX_COMMON: &str = r#"
struct P { n: u32, shift: u32, blocks: u32, pad: u32 }
var<workgroup> bins: array<atomic<u32>, 256>;
fn count_digits(l: u32, block: u32) {
    atomicStore(&bins[l], 0u);
    workgroupBarrier();
    for (var q = 0u; q < 4u; q++) {
        let at = block * 1024u + l * 4u + q;
        if (at < p.n) { atomicAdd(&bins[(keys[at] >> p.shift) & 255u], 1u); }
    }
    workgroupBarrier();
}
"#;

/// Digit counts: `radix_count`.
pub fn radix_count() -> String {
    format!(
        "@group(0) @binding(0) var<storage, read> keys: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;
@group(0) @binding(2) var<uniform> p: P;
{RADIX_COMMON}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {{
    count_digits(l, wid.x);
    counts[l * p.blocks + wid.x] = atomicLoad(&bins[l]);
}}
"
    )
}

/// The block sort and scatter: `radix_scatter`.
pub fn radix_scatter() -> String {
    format!(
        "@group(0) @binding(0) var<storage, read> keys: array<u32>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> p: P;
{RADIX_COMMON}{WG_EXCLUSIVE}
var<workgroup> starts: array<u32, 256>;
var<workgroup> sorted: array<u32, 1024>;
@compute @workgroup_size(256)
fn main({SCAN_ARGS}) {{
    count_digits(l, wid.x);
    for (var q = 0u; q < 4u; q++) {{
        let at = wid.x * 1024u + l * 4u + q;
        var key = 0xffffffffu;
        if (at < p.n) {{ key = keys[at]; }}
        sorted[l * 4u + q] = key;
    }}
    starts[l] = wg_exclusive(atomicLoad(&bins[l]), l, lane, size, sg, nsg).x;
    workgroupBarrier();
    for (var bit = 0u; bit < 8u; bit++) {{
        var k: array<u32, 4>;
        var clear: array<u32, 4>;
        var mine = 0u;
        for (var q = 0u; q < 4u; q++) {{
            k[q] = sorted[l * 4u + q];
            clear[q] = 1u - (((k[q] >> p.shift) >> bit) & 1u);
            mine += clear[q];
        }}
        let r = wg_exclusive(mine, l, lane, size, sg, nsg);
        var zeros_before = r.x;
        for (var q = 0u; q < 4u; q++) {{
            let ones_before = l * 4u + q - zeros_before;
            let to = select(r.y + ones_before, zeros_before, clear[q] == 1u);
            sorted[to] = k[q];
            zeros_before += clear[q];
        }}
        workgroupBarrier();
    }}
    let valid = p.n - wid.x * 1024u;
    for (var q = 0u; q < 4u; q++) {{
        let at = l * 4u + q;
        if (at < valid) {{
            let key = sorted[at];
            let d = (key >> p.shift) & 255u;
            out[offsets[d * p.blocks + wid.x] + at - starts[d]] = key;
        }}
    }}
}}
"
    )
}

// The two matmuls' baselines are `crate::matmul_wgsl`'s: written out
// register by register, they do not fit here.
pub use crate::matmul_wgsl::{coop_matmul, register_matmul};

#[cfg(test)]
mod tests {
    /// A probe built by text replacement measures the base design if a
    /// replacement misses: make sure both landed.
    #[test]
    fn the_padded_histograms_carry_their_pad() {
        let s = crate::probe_wgsl::padded_histogram(8);
        assert!(s.contains("var<workgroup> pad: array<u32, 2048>;"), "{s}");
        assert!(s.contains("if (pad[l] == 12345u)"), "{s}");
    }

    /// Every baseline parses and validates, so a figure never fails on a
    /// typo only the device would catch.
    #[test]
    fn every_baseline_validates() {
        let sources = [
            super::softmax(4),
            super::layernorm(4096),
            super::scan_reduce(),
            super::scan_spine(),
            super::scan_down(),
            super::BYTE_HISTOGRAM.to_string(),
            crate::probe_wgsl::PRIVATE_COUNTERS_HISTOGRAM.to_string(),
            crate::probe_wgsl::padded_histogram(8),
            crate::probe_wgsl::padded_histogram(31),
            crate::probe_wgsl::coop_matmul_matrix_staged(),
            super::radix_count(),
            super::radix_scatter(),
            super::register_matmul(),
            super::coop_matmul(),
            crate::matmul_wgsl::coop_matmul_scalar_staged(),
            crate::probe_wgsl::coop_matmul_b_global(),
            crate::probe_wgsl::coop_matmul_global(),
            crate::probe_wgsl::coop_matmul_pipelined(false),
            crate::probe_wgsl::coop_matmul_pipelined(true),
            crate::probe_wgsl::sub_histograms(4),
            crate::probe_wgsl::sub_histograms(8),
            crate::probe_wgsl::sub_histograms(32),
            crate::probe_wgsl::lane_histograms(false),
            crate::probe_wgsl::lane_histograms(true),
            crate::probe_scan::single_pass(8, 256),
            crate::probe_scan::single_pass(16, 16),
            crate::probe_scan::single_pass(32, 256),
            crate::probe_scan::single_pass_with(16, 256, crate::probe_scan::LookBack::Serial),
            crate::probe_scan::single_pass_with(16, 256, crate::probe_scan::LookBack::Skipped),
            crate::probe_scan::copy(16),
        ];
        let coop = crate::probe_coop::variants()
            .into_iter()
            .map(|(_, v)| v.wgsl());
        for src in sources.into_iter().chain(coop) {
            let module = wgpu::naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{}\n{src}", e.emit_to_string(&src)));
            let info = wgpu::naga::valid::Validator::new(
                wgpu::naga::valid::ValidationFlags::all(),
                wgpu::naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}\n{src}", e.emit_to_string(&src)));
            // The SPIR-V writer is what Vulkan runs; it can reject (or
            // panic on) a module the validator accepts.
            let options = wgpu::naga::back::spv::Options::default();
            wgpu::naga::back::spv::write_vec(&module, &info, &options, None)
                .unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }
}
