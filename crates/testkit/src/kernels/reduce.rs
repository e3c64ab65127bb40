use compute_ir::{IrError, Kernel, KernelBuilder, Scalar};

/// Per-workgroup sums: `out[w] = sum(a[w * size .. (w + 1) * size])`, with
/// elements at `i >= n` counting as zero. A tree reduction in shared memory,
/// one barrier per level.
///
/// Bindings: 0 `a` (read), 1 `out` (read-write, one element per workgroup).
/// Scalars: `n: u32`. `size` must be a power of two.
pub fn workgroup_sum(elem: Scalar, size: u32) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new(format!("sum_{elem}_{size}"), [size, 1, 1]);
    let a = k.input(elem);
    let out = k.output(elem);
    let n = k.scalar_arg(Scalar::U32);
    let tile = k.shared(elem, size);
    let gid = k.global_id();
    let i = k.x(gid);
    let l = k.local_index();
    let zero_bits = k.u32(0);
    let zero = k.cast(zero_bits, elem);
    let v = k.var(zero);
    let inside = k.lt(i, n);
    k.if_(inside, |k| {
        let x = k.load(a, i);
        k.set(v, x);
    });
    let x = k.get(v);
    k.store(tile, l, x);
    k.barrier();
    let levels = size.trailing_zeros();
    let start = k.u32(0);
    let end = k.u32(levels);
    let half = k.u32(size / 2);
    k.for_range(start, end, |k, level| {
        let stride = k.shr(half, level);
        let active = k.lt(l, stride);
        k.if_(active, |k| {
            let other = k.add(l, stride);
            let x = k.load(tile, l);
            let y = k.load(tile, other);
            let s = k.add(x, y);
            k.store(tile, l, s);
        });
        k.barrier();
    });
    let zero_u = k.u32(0);
    let first = k.eq(l, zero_u);
    k.if_(first, |k| {
        let wid = k.workgroup_id();
        let w = k.x(wid);
        let s = k.load(tile, zero_u);
        k.store(out, w, s);
    });
    k.build()
}
