//! The WGSL the server-side and raw sides of a figure both run.

/// One invocation per element of `x`, `x += 1`: the launch-path kernel.
pub const TINY: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + 1u; }
}
"#;

/// `dst = src + 1`: two streams reading one input.
pub const SHARED_COPY: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] + 1u; }
}
"#;

/// A loop of `p.n` fused steps per invocation: GPU time on demand.
pub const SPIN: &str = r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var acc = f32(id.x);
    for (var i = 0u; i < p.n; i = i + 1u) { acc = acc * 0.999 + 1.0; }
    x[id.x] = acc;
}
"#;

/// The tiled matmul of the IR sample kernel, written by hand: 16x16 tiles of
/// a and b in workgroup memory, two barriers per step, fma accumulation,
/// zero padding at the edges.
pub const MATMUL_WGSL: &str = r#"
struct P { m: u32, n: u32, k: u32, pad: u32 }
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
var<workgroup> ta: array<f32, 256>;
var<workgroup> tb: array<f32, 256>;
@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.y * 16u + lid.y;
    let col = wid.x * 16u + lid.x;
    let me = lid.y * 16u + lid.x;
    var acc = 0.0;
    let steps = (p.k + 15u) / 16u;
    for (var t = 0u; t < steps; t = t + 1u) {
        let ac = t * 16u + lid.x;
        var va = 0.0;
        if (row < p.m && ac < p.k) { va = a[row * p.k + ac]; }
        ta[me] = va;
        let br = t * 16u + lid.y;
        var vb = 0.0;
        if (br < p.k && col < p.n) { vb = b[br * p.n + col]; }
        tb[me] = vb;
        workgroupBarrier();
        for (var i = 0u; i < 16u; i = i + 1u) {
            acc = fma(ta[lid.y * 16u + i], tb[i * 16u + lid.x], acc);
        }
        workgroupBarrier();
    }
    if (row < p.m && col < p.n) { c[row * p.n + col] = acc; }
}
"#;

/// `c = a + b` over `vec4<f32>`, written by hand: the bandwidth bound a
/// hand-tuned kernel reaches for the IR's element-wise add (12 bytes moved
/// per f32 element).
pub const ADD_VEC4: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let i = id.x + id.y * n.x * 256u;
    if (i < arrayLength(&c)) { c[i] = a[i] + b[i]; }
}
"#;
