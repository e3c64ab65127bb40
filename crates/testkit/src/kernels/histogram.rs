use compute_ir::{Buf, IrError, Kernel, KernelBuilder, Scalar, Val};

/// `hist[v % bins] += 1` for every `v` in `values[..n]`, with `atomicAdd`.
///
/// Bindings: 0 `values: u32` (read), 1 `hist: atomic<u32>` (read-write,
/// `bins` elements, zeroed by the caller). Scalars: `n: u32`, `bins: u32`.
pub fn histogram(workgroup: u32) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("histogram", [workgroup, 1, 1]);
    let values = k.input(Scalar::U32);
    let hist = k.atomic_buffer(Scalar::U32);
    let n = k.scalar_arg(Scalar::U32);
    let bins = k.scalar_arg(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let inside = k.lt(i, n);
    k.if_(inside, |k| {
        let v = k.load(values, i);
        let bin = k.rem(v, bins);
        let one = k.u32(1);
        k.atomic_add(hist, bin, one);
    });
    k.build()
}

/// Invocations per workgroup of [`byte_histogram`].
pub const BYTE_HISTOGRAM_WORKGROUP: u32 = 256;

/// `hist[b] += ` the count of byte value `b` in `words[..n4]` (16 bytes per
/// vector), with a workgroup histogram in shared atomics: each workgroup
/// walks the input with a grid stride, then adds its 256 counts to `hist`,
/// so the global atomics are 256 per workgroup, not one per byte.
///
/// Bindings: 0 `words: vec4<u32>` (read), 1 `hist: atomic<u32>`
/// (read-write, 256 elements, zeroed by the caller). Scalars: `n4: u32`.
/// Dispatch any number of workgroups along x (enough to fill the device;
/// each invocation takes every `workgroups * 256`-th vector).
pub fn byte_histogram() -> Result<Kernel, IrError> {
    const WG: u32 = BYTE_HISTOGRAM_WORKGROUP;
    let k = KernelBuilder::new("byte_histogram", [WG, 1, 1]);
    let words = k.input_vec(Scalar::U32, 4);
    let hist = k.atomic_buffer(Scalar::U32);
    let n4 = k.scalar_arg(Scalar::U32);
    let bins = k.atomic_shared(Scalar::U32, 256);
    let l = k.local_index();
    k.atomic_store(bins, l, 0u32);
    k.barrier();
    each_byte(&k, words, n4, |k, b| {
        k.atomic_add(bins, b, 1u32);
    });
    k.barrier();
    let c = k.atomic_load(bins, l);
    k.if_(k.ne(c, 0u32), |k| {
        k.atomic_add(hist, l, c);
    });
    k.build()
}

/// Copies of the 256 bins [`byte_histogram_lanes`] keeps, one per lane.
const LANES: u32 = 32;

/// [`byte_histogram`] with 32 copies of the workgroup histogram
/// interleaved by lane (`bin * 32 + local_index % 32`): on a device whose
/// subgroups are 32 wide, or a multiple of 8 with banks of 4 bytes, every
/// invocation of a subgroup adds into a bank of its own, so no atomic
/// waits on another's bank (the shared 256 bins meet about 3.5 conflicts
/// a subgroup on random bytes). The flush reads each bin's 32 copies
/// rotated by invocation, again one bank each. 32 KiB of workgroup memory.
///
/// Slower on the H200 all the same: its WGSL twin ran at 642 GB/s on 2^28
/// bytes against 2,082 for the shared bins of [`byte_histogram`] (8892b4b,
/// `probe.histogram_32_lanes_gbps`), so the kernel suite measures
/// [`byte_histogram`]; this one is kept, tested, as the measured
/// alternative.
///
/// Bindings, scalars and dispatch as [`byte_histogram`].
pub fn byte_histogram_lanes() -> Result<Kernel, IrError> {
    const WG: u32 = BYTE_HISTOGRAM_WORKGROUP;
    let k = KernelBuilder::new("byte_histogram_lanes", [WG, 1, 1]);
    let words = k.input_vec(Scalar::U32, 4);
    let hist = k.atomic_buffer(Scalar::U32);
    let n4 = k.scalar_arg(Scalar::U32);
    let bins = k.atomic_shared(Scalar::U32, 256 * LANES);
    let l = k.local_index();
    let lane = k.and(l, LANES - 1);
    for q in 0..256 * LANES / WG {
        k.atomic_store(bins, k.add(l, q * WG), 0u32);
    }
    k.barrier();
    each_byte(&k, words, n4, |k, b| {
        k.atomic_add(bins, k.or(k.shl(b, 5u32), lane), 1u32);
    });
    k.barrier();
    let c = k.var(k.u32(0));
    let first = k.mul(l, LANES);
    k.for_range(0u32, LANES, |k, q| {
        let copy = k.and(k.add(q, l), LANES - 1);
        k.set(c, k.add(k.get(c), k.atomic_load(bins, k.add(first, copy))));
    });
    k.if_(k.ne(k.get(c), 0u32), |k| {
        k.atomic_add(hist, l, k.get(c));
    });
    k.build()
}

/// `count(b)` for every byte `b` of `words[..n4]`: each invocation takes
/// every `workgroups * BYTE_HISTOGRAM_WORKGROUP`-th vector.
fn each_byte(k: &KernelBuilder, words: Buf, n4: Val, count: impl Fn(&KernelBuilder, Val)) {
    let stride = k.mul(k.x(k.num_workgroups()), BYTE_HISTOGRAM_WORKGROUP);
    k.for_range_step(k.x(k.global_id()), n4, stride, |k, i| {
        let v = k.load(words, i);
        for word in 0..4 {
            let w = k.extract(v, word);
            for byte in 0..4u32 {
                count(k, k.and(k.shr(w, 8 * byte), 255u32));
            }
        }
    });
}
