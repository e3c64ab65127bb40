use compute_ir::{AtomicBuf, IrError, Kernel, KernelBuilder, Scalar, Shared, Val};

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
pub const BYTE_HISTOGRAM_WORKGROUP: u32 = 64;

/// Vectors (16 bytes each) an invocation counts before its counters are
/// merged: `4095 * 16` = 65,520 fits a 16-bit counter.
pub const BYTE_HISTOGRAM_ROUND: u32 = 4095;

/// `hist[b] += ` the count of byte value `b` in `words[..n4]` (16 bytes per
/// vector), counted without an atomic per byte: each invocation owns 256
/// 16-bit counters (two to a word) in workgroup memory, so a byte costs one
/// plain load and store there. The H200 issues shared atomics at about a
/// quarter of its memory bandwidth in bytes (`docs/benchmarks.md`,
/// `probe.histogram_*`); plain accesses laid out word-major, invocation
/// minor (`counts[word * 64 + l]`) meet no bank conflict.
///
/// The grid-stride walk goes in rounds of [`BYTE_HISTOGRAM_ROUND`] vectors
/// per invocation; after each round the workgroup sums its invocations'
/// counters into `hist` (512 global atomics per workgroup and round, fewer
/// where a bin is empty) and clears them. Four vectors are loaded before
/// any is counted, so four loads are in flight per invocation.
///
/// Bindings: 0 `words: vec4<u32>` (read), 1 `hist: atomic<u32>`
/// (read-write, 256 elements, zeroed by the caller). Scalars: `n4: u32`.
/// Dispatch any number of workgroups along x; about as many as the device
/// holds at once is fastest (each costs 32 KiB of workgroup memory and a
/// merge).
pub fn byte_histogram() -> Result<Kernel, IrError> {
    byte_histogram_in_rounds(BYTE_HISTOGRAM_ROUND)
}

/// [`byte_histogram`] with `round` vectors per invocation per round (at
/// most [`BYTE_HISTOGRAM_ROUND`]): small rounds let a test cross many.
pub fn byte_histogram_in_rounds(round: u32) -> Result<Kernel, IrError> {
    const WG: u32 = BYTE_HISTOGRAM_WORKGROUP;
    let k = KernelBuilder::new("byte_histogram", [WG, 1, 1]);
    let words = k.input_vec(Scalar::U32, 4);
    let hist = k.atomic_buffer(Scalar::U32);
    let n4 = k.scalar_arg(Scalar::U32);
    // 128 words of two counters for each of the 64 invocations: 32 KiB.
    let counts = k.shared(Scalar::U32, 128 * WG);
    let l = k.local_index();
    let stride = k.mul(k.x(k.num_workgroups()), WG);
    let per_round = k.mul(stride, round.min(BYTE_HISTOGRAM_ROUND));
    let first = k.x(k.global_id());
    k.for_range_step(0u32, n4, per_round, |k, start| {
        let end = k.add(start, k.min(per_round, k.sub(n4, start)));
        let i = k.var(k.add(start, first));
        k.loop_(|k| {
            let last = k.add(k.get(i), k.mul(stride, 3u32));
            k.if_(k.ge(last, end), |k| k.break_());
            let at = k.get(i);
            let v: Vec<_> = (0..4u32)
                .map(|q| k.load(words, k.add(at, k.mul(stride, q))))
                .collect();
            for v in v {
                count_vector(k, counts, l, v);
            }
            k.set(i, k.add(at, k.mul(stride, 4u32)));
        });
        k.loop_(|k| {
            k.if_(k.ge(k.get(i), end), |k| k.break_());
            count_vector(k, counts, l, k.load(words, k.get(i)));
            k.set(i, k.add(k.get(i), stride));
        });
        k.barrier();
        merge_counts(k, counts, hist, l);
        k.barrier();
    });
    k.build()
}

/// Adds the 16 bytes of `v` to invocation `l`'s counters: byte `b` is the
/// half `b & 1` of word `b >> 1`.
fn count_vector(k: &KernelBuilder, counts: Shared, l: Val, v: Val) {
    for lane in 0..4 {
        let w = k.extract(v, lane);
        for byte in 0..4u32 {
            let word = k.extract_bits(w, 8 * byte + 1, 7u32);
            let at = k.add(k.mul(word, BYTE_HISTOGRAM_WORKGROUP), l);
            let half = k.extract_bits(w, 8 * byte, 1u32);
            let one = k.shl(1u32, k.mul(half, 16u32));
            k.store(counts, at, k.add(k.load(counts, at), one));
        }
    }
}

/// Invocation `l` sums words `l` and `l + 64` over every invocation's
/// counters (bins `2w` and `2w + 1`), clears them and adds the sums to
/// `hist`. Invocation `l` starts at invocation `l`'s counter, so the
/// subgroup's reads fall in distinct banks.
fn merge_counts(k: &KernelBuilder, counts: Shared, hist: AtomicBuf, l: Val) {
    const WG: u32 = BYTE_HISTOGRAM_WORKGROUP;
    for half in 0..2u32 {
        let word = k.add(l, half * WG);
        let (lo, hi) = (k.var(k.u32(0)), k.var(k.u32(0)));
        k.for_range(0u32, WG, |k, j| {
            let owner = k.and(k.add(j, l), WG - 1);
            let at = k.add(k.mul(word, WG), owner);
            let c = k.load(counts, at);
            k.store(counts, at, 0u32);
            k.set(lo, k.add(k.get(lo), k.and(c, 0xffffu32)));
            k.set(hi, k.add(k.get(hi), k.shr(c, 16u32)));
        });
        let bin = k.mul(word, 2u32);
        for (sum, bin) in [(lo, bin), (hi, k.add(bin, 1u32))] {
            let c = k.get(sum);
            k.if_(k.ne(c, 0u32), |k| {
                k.atomic_add(hist, bin, c);
            });
        }
    }
}
