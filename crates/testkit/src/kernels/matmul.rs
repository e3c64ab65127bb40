use compute_ir::{IrError, Kernel, KernelBuilder, Scalar, Val};

/// The tile edge of [`tiled_matmul`]: workgroups are `16 x 16`.
pub const MATMUL_TILE: u32 = 16;

/// `c = a * b` for row-major `a: m x k`, `b: k x n`, `c: m x n` (f32), one
/// 16x16 output tile per workgroup, staging 16x16 tiles of `a` and `b` in
/// shared memory (two barriers per step along `k`). Any sizes: edges are
/// padded with zeros.
///
/// Bindings: 0 `a` (read), 1 `b` (read), 2 `c` (read-write). Scalars:
/// `m, n, k: u32`. Dispatch `(ceil(n / 16), ceil(m / 16), 1)`.
pub fn tiled_matmul() -> Result<Kernel, IrError> {
    const T: u32 = MATMUL_TILE;
    let k = KernelBuilder::new("matmul_tiled_16", [T, T, 1]);
    let a = k.input(Scalar::F32);
    let b = k.input(Scalar::F32);
    let c = k.output(Scalar::F32);
    let m = k.scalar_arg(Scalar::U32);
    let n = k.scalar_arg(Scalar::U32);
    let kk = k.scalar_arg(Scalar::U32);
    let ta = k.shared(Scalar::F32, T * T);
    let tb = k.shared(Scalar::F32, T * T);

    let lid = k.local_id();
    let lx = k.x(lid);
    let ly = k.y(lid);
    let wid = k.workgroup_id();
    let wx = k.x(wid);
    let wy = k.y(wid);
    let tile = k.u32(T);
    let row = mad(&k, wy, tile, ly);
    let col = mad(&k, wx, tile, lx);
    let zero = k.f32(0.0);
    let acc = k.var(zero);
    let me = mad(&k, ly, tile, lx);

    // Tiles along k: ceil(k / T).
    let t_minus_1 = k.u32(T - 1);
    let kk_pad = k.add(kk, t_minus_1);
    let steps = k.div(kk_pad, tile);
    let first = k.u32(0);
    k.for_range(first, steps, |k, t| {
        // a[row, t*T + lx] into ta[ly, lx]
        let a_col = mad(k, t, tile, lx);
        let ok_r = k.lt(row, m);
        let ok_c = k.lt(a_col, kk);
        let ok = k.and(ok_r, ok_c);
        let va = k.var(zero);
        k.if_(ok, |k| {
            let at = mad(k, row, kk, a_col);
            let x = k.load(a, at);
            k.set(va, x);
        });
        let x = k.get(va);
        k.store(ta, me, x);
        // b[t*T + ly, col] into tb[ly, lx]
        let b_row = mad(k, t, tile, ly);
        let ok_r = k.lt(b_row, kk);
        let ok_c = k.lt(col, n);
        let ok = k.and(ok_r, ok_c);
        let vb = k.var(zero);
        k.if_(ok, |k| {
            let at = mad(k, b_row, n, col);
            let x = k.load(b, at);
            k.set(vb, x);
        });
        let x = k.get(vb);
        k.store(tb, me, x);
        k.barrier();
        let from = k.u32(0);
        k.for_range(from, tile, |k, i| {
            let ai = mad(k, ly, tile, i);
            let bi = mad(k, i, tile, lx);
            let x = k.load(ta, ai);
            let y = k.load(tb, bi);
            let s = k.get(acc);
            let s = k.fma(x, y, s);
            k.set(acc, s);
        });
        k.barrier();
    });
    let ok_r = k.lt(row, m);
    let ok_c = k.lt(col, n);
    let ok = k.and(ok_r, ok_c);
    k.if_(ok, |k| {
        let at = mad(k, row, n, col);
        let s = k.get(acc);
        k.store(c, at, s);
    });
    k.build()
}

/// `x * y + z` on u32.
fn mad(k: &KernelBuilder, x: Val, y: Val, z: Val) -> Val {
    let p = k.mul(x, y);
    k.add(p, z)
}
