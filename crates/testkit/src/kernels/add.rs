use compute_ir::{IrError, Kernel, KernelBuilder, Scalar};

/// `c[i] = a[i] + b[i]` for `i < n`.
///
/// Bindings: 0 `a` (read), 1 `b` (read), 2 `c` (read-write). Scalars: `n: u32`.
/// Dispatch `ceil(n / workgroup)` workgroups along x.
pub fn elementwise_add(elem: Scalar, workgroup: u32) -> Result<Kernel, IrError> {
    elementwise_add_vec(elem, 1, workgroup)
}

/// The same add over buffers of `vec{lanes}<elem>` (`lanes` 1, 2 or 4):
/// each invocation adds `lanes` elements with one load per input and one
/// store, so `n` counts vectors (the element count over `lanes`; the
/// buffers' lengths must be multiples of `lanes` elements).
///
/// Bindings and scalars as [`elementwise_add`]; dispatch `ceil(n /
/// workgroup)` workgroups along x.
pub fn elementwise_add_vec(elem: Scalar, lanes: u8, workgroup: u32) -> Result<Kernel, IrError> {
    let name = if lanes == 1 {
        format!("add_{elem}")
    } else {
        format!("add_vec{lanes}_{elem}")
    };
    let k = KernelBuilder::new(name, [workgroup, 1, 1]);
    let a = k.input_vec(elem, lanes);
    let b = k.input_vec(elem, lanes);
    let c = k.output_vec(elem, lanes);
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
