//! A single-pass exclusive scan (decoupled look-back with a fallback),
//! handwritten: the design `kernel.scan_gbps` needs to read its input
//! once. Measured against the committed three-launch IR scan.
//!
//! Each workgroup takes a ticket (its part, so it only ever waits on parts
//! whose workgroups have started), scans its tile in registers, publishes
//! the tile's sum, looks back over its predecessors' published sums until
//! it meets an inclusive one, publishes its own inclusive sum and writes
//! its outputs. A predecessor that has published nothing after `LIMIT`
//! polls is reduced by the waiting workgroup itself from the input, so no
//! workgroup depends on another's progress.
//!
//! State (`atomic<u32>`): `[0]` the ticket counter, `[1]` the finished
//! count, `[2]` the run's generation, then two words per part: the 32-bit
//! sum in two 16-bit halves, each word tagged in its top 16 bits with the
//! generation (14 bits) and the flag (1: the tile's sum, 2: inclusive), so
//! a reader takes a value only when both halves carry the same tag. The
//! last workgroup to finish resets the counters and moves the generation
//! on (clearing every tile word when the generations wrap), so launches
//! need no clearing in between: `kernels::scan_single_pass`'s design.

/// How a workgroup walks back over its predecessors' published sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookBack {
    /// Invocation 0 reads one predecessor per poll, the workgroup told
    /// through one barrier pair per poll.
    Serial,
    /// Subgroup 0 reads a window of one predecessor per lane per poll
    /// and reduces it with subgroup operations; the workgroup waits at one
    /// barrier for the result (`kernels::scan_single_pass`'s design).
    Window,
    /// None: each tile scanned alone (its sums published, nothing read
    /// back), the bound the look-back costs against; wrong past tile 0.
    Skipped,
}

/// The WGSL of [`LookBack::Window`].
pub fn single_pass(per: u32, limit: u32) -> String {
    single_pass_with(per, limit, LookBack::Window)
}

/// The WGSL, with `per` `vec4<u32>` rows per invocation (a multiple of 4),
/// `limit` polls before a fallback and the look-back `walk`.
pub fn single_pass_with(per: u32, limit: u32, walk: LookBack) -> String {
    let mut load = String::new();
    let mut store = String::new();
    for j in 0..per {
        load.push_str(&format!(
            "    var r{j} = vec4(0u);\n    if (base + {j}u * WG + l < p.n4) {{ r{j} = x[base + {j}u * WG + l]; }}\n"
        ));
        store.push_str(&format!(
            "    {{
        let at = base + {j}u * WG + l;
        let a = excl + off{g}[{c}] + ex{g}[{c}];
        let b = a + r{j}.x;
        let c = b + r{j}.y;
        if (at < p.n4) {{ y[at] = vec4(a, b, c, c + r{j}.z); }}
    }}\n",
            g = j / 4,
            c = j % 4
        ));
    }
    let mut scans = String::new();
    for g in 0..per / 4 {
        let r = |c: u32| format!("hsum(r{})", g * 4 + c);
        scans.push_str(&format!(
            "    let t{g} = vec4({}, {}, {}, {});
    let i{g} = subgroupInclusiveAdd(t{g});
    if (lane + 1u == size) {{ totals{g}[sg] = i{g}; }}\n",
            r(0),
            r(1),
            r(2),
            r(3)
        ));
    }
    let mut spine = String::new();
    let mut offs = String::new();
    let mut carry = "0u".to_string();
    for g in 0..per / 4 {
        spine.push_str(&format!(
            "        var run{g} = vec4(0u);
        for (var b = 0u; b < nsg; b += size) {{
            let s = b + lane;
            var v = vec4(0u);
            if (s < nsg) {{ v = totals{g}[s]; }}
            let before = subgroupExclusiveAdd(v);
            if (s < nsg) {{ totals{g}[s] = run{g} + before; }}
            run{g} += subgroupAdd(v);
        }}
        if (lane == 0u) {{ totals{g}[nsg] = run{g}; }}\n"
        ));
        offs.push_str(&format!(
            "    let ex{g} = i{g} - t{g} + totals{g}[sg];
    let rt{g} = totals{g}[nsg];
    let off{g} = vec4({carry}, {carry} + rt{g}.x, {carry} + rt{g}.x + rt{g}.y, {carry} + rt{g}.x + rt{g}.y + rt{g}.z);\n"
        ));
        carry = format!("(off{g}.w + rt{g}.w)");
    }
    let mut reduce = String::new();
    for j in 0..per {
        reduce.push_str(&format!(
            "    if (b + {j}u * WG + l < p.n4) {{ t += hsum(x[b + {j}u * WG + l]); }}\n"
        ));
    }
    let look_back = match walk {
        LookBack::Serial => SERIAL,
        LookBack::Window => WINDOW,
        LookBack::Skipped => "    let excl = 0u;\n",
    };
    let decl: String = (0..per / 4)
        .map(|g| format!("var<workgroup> totals{g}: array<vec4<u32>, 65>;\n"))
        .collect();
    format!(
        "struct P {{ n4: u32, parts: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;
@group(0) @binding(3) var<uniform> p: P;
const WG: u32 = 256u;
const PER: u32 = {per}u;
const LIMIT: u32 = {limit}u;
{decl}var<workgroup> bcast: vec2<u32>;
var<workgroup> red: array<u32, 65>;
fn hsum(v: vec4<u32>) -> u32 {{ return (v.x + v.y) + (v.z + v.w); }}
// The sum of tile `part`'s input, by one subgroup.
fn reduce_lanes(part: u32, lane: u32, size: u32) -> u32 {{
    let b = part * WG * PER;
    var t = 0u;
    for (var v = lane; v < WG * PER; v += size) {{ if (b + v < p.n4) {{ t += hsum(x[b + v]); }} }}
    return subgroupAdd(t);
}}
fn publish(part: u32, v: u32, tag: u32) {{
    atomicStore(&state[3u + 2u * part], (tag << 16u) | (v & 0xffffu));
    atomicStore(&state[4u + 2u * part], (tag << 16u) | (v >> 16u));
}}
// (flag, value) of a part's published sum this generation; flag 0: none yet.
fn lookup(part: u32, gen: u32) -> vec2<u32> {{
    let w0 = atomicLoad(&state[3u + 2u * part]);
    let w1 = atomicLoad(&state[4u + 2u * part]);
    let tag = w0 >> 16u;
    if (tag != (w1 >> 16u) || (tag >> 2u) != gen) {{ return vec2(0u); }}
    return vec2(tag & 3u, (w1 << 16u) | (w0 & 0xffffu));
}}
// The sum of tile `part`'s input, by the whole workgroup (uniform control flow).
fn reduce_tile(part: u32, l: u32, lane: u32, size: u32, sg: u32, nsg: u32) -> u32 {{
    let b = part * WG * PER;
    var t = 0u;
{reduce}    let s = subgroupAdd(t);
    workgroupBarrier();
    if (lane == 0u) {{ red[sg] = s; }}
    workgroupBarrier();
    if (l == 0u) {{
        var sum = 0u;
        for (var i = 0u; i < nsg; i++) {{ sum += red[i]; }}
        bcast = vec2(sum, 0u);
    }}
    return workgroupUniformLoad(&bcast).x;
}}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) l: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) size: u32, @builtin(subgroup_id) sg: u32,
        @builtin(num_subgroups) nsg: u32) {{
    if (l == 0u) {{
        let ticket = atomicAdd(&state[0], 1u);
        bcast = vec2(ticket, atomicLoad(&state[2]));
    }}
    let tg = workgroupUniformLoad(&bcast);
    let part = tg.x;
    let gen = tg.y & 0x3fffu;
    let base = part * WG * PER;
{load}{scans}    workgroupBarrier();
    if (sg == 0u) {{
{spine}    }}
    workgroupBarrier();
{offs}    let agg = {carry};
    if (l == 0u) {{ publish(part, agg, (gen << 2u) | select(1u, 2u, part == 0u)); }}
{look_back}{store}    if (l == 0u) {{
        let done = atomicAdd(&state[1], 1u);
        if (done + 1u == p.parts) {{
            atomicStore(&state[0], 0u);
            atomicStore(&state[1], 0u);
            atomicStore(&state[2], tg.y + 1u);
            if (((tg.y + 1u) & 0x3fffu) == 0u) {{
                for (var i = 3u; i < arrayLength(&state); i++) {{ atomicStore(&state[i], 0u); }}
            }}
        }}
    }}
}}
"
    )
}

/// The single pass's loads and stores alone: `y` = `x`, each workgroup
/// loading its `per` rows of `vec4<u32>` (laid out as the scan's tile),
/// then storing them.
pub fn copy(per: u32) -> String {
    let rows = |f: &dyn Fn(u32) -> String| (0..per).map(f).collect::<String>();
    let load = rows(&|j| {
        format!(
            "    var r{j} = vec4(0u);\n    if (base + {j}u * 256u + l < p.n4) {{ r{j} = x[base + {j}u * 256u + l]; }}\n"
        )
    });
    let store = rows(&|j| {
        format!("    if (base + {j}u * 256u + l < p.n4) {{ y[base + {j}u * 256u + l] = r{j}; }}\n")
    });
    format!(
        "struct P {{ n4: u32, parts: u32, pad1: u32, pad2: u32 }}
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) l: u32) {{
    let base = w.x * 256u * {per}u;
{load}{store}}}
"
    )
}

/// One predecessor per poll (`LookBack::Serial`).
const SERIAL: &str = "    var excl = 0u;
    if (part != 0u) {
        var j = part - 1u;
        var spins = 0u;
        loop {
            if (l == 0u) { bcast = lookup(j, gen); }
            let seen = workgroupUniformLoad(&bcast);
            if (seen.x == 2u) { excl += seen.y; break; }
            if (seen.x == 1u) {
                excl += seen.y;
                if (j == 0u) { break; }
                j -= 1u;
                spins = 0u;
                continue;
            }
            spins += 1u;
            if (spins >= LIMIT) {
                excl += reduce_tile(j, l, lane, size, sg, nsg);
                if (j == 0u) { break; }
                j -= 1u;
                spins = 0u;
            }
        }
        if (l == 0u) { publish(part, excl + agg, (gen << 2u) | 2u); }
    }
";

/// A window of one predecessor per lane per poll (`LookBack::Window`):
/// lane `i` reads tile `top - i` (past tile 0: an inclusive zero); the
/// window is counted up to its nearest inclusive sum, or up to its nearest
/// tile with nothing published, which is polled (and reduced after `LIMIT`
/// polls) when it is the window's first.
const WINDOW: &str = "    var excl = 0u;
    if (part != 0u) {
        if (sg == 0u) {
            var top = part - 1u;
            var spins = 0u;
            var sum = 0u;
            loop {
                var seen = vec2(2u, 0u);
                if (lane <= top) { seen = lookup(top - lane, gen); }
                let incl = subgroupMin(select(size, lane, seen.x == 2u));
                let miss = subgroupMin(select(size, lane, seen.x == 0u));
                if (incl < miss) {
                    sum += subgroupAdd(select(0u, seen.y, lane <= incl));
                    break;
                }
                sum += subgroupAdd(select(0u, seen.y, lane < miss));
                if (miss != 0u) {
                    top -= miss;
                    spins = 0u;
                    continue;
                }
                spins += 1u;
                if (spins >= LIMIT) {
                    sum += reduce_lanes(top, lane, size);
                    if (top == 0u) { break; }
                    top -= 1u;
                    spins = 0u;
                }
            }
            if (lane == 0u) {
                publish(part, sum + agg, (gen << 2u) | 2u);
                bcast = vec2(sum, 0u);
            }
        }
        excl = workgroupUniformLoad(&bcast).x;
    }
";
