use compute_ir::{IrError, Kernel, KernelBuilder, Scalar};

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
