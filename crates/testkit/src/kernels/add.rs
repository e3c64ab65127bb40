use compute_ir::{IrError, Kernel, KernelBuilder, Scalar};

/// `c[i] = a[i] + b[i]` for `i < n`.
///
/// Bindings: 0 `a` (read), 1 `b` (read), 2 `c` (read-write). Scalars: `n: u32`.
/// Dispatch `ceil(n / workgroup)` workgroups along x.
pub fn elementwise_add(elem: Scalar, workgroup: u32) -> Result<Kernel, IrError> {
    let mut k = KernelBuilder::new(format!("add_{elem}"), [workgroup, 1, 1]);
    let a = k.input(elem);
    let b = k.input(elem);
    let c = k.output(elem);
    let n = k.scalar_arg(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let inside = k.lt(i, n);
    k.if_(inside, |k| {
        let x = k.load(a, i);
        let y = k.load(b, i);
        let s = k.add(x, y);
        k.store(c, i, s);
    });
    k.build()
}
