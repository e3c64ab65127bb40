//! A register-tiled `f32` matmul: 128 x 128 output tiles, 8 x 8 outputs
//! per invocation held in `vec4` registers, `vec4` loads staged through
//! shared memory 8 columns of `k` at a time.

use compute_ir::{IrError, Kernel, KernelBuilder, Scalar, Val, Var};

/// The output tile edge of [`register_matmul`] (rows and columns).
pub const REGISTER_MATMUL_TILE: u32 = 128;
/// The step along `k`: `k` must be a multiple of it.
pub const REGISTER_MATMUL_K_STEP: u32 = 8;
const WG: u32 = 256;
const T: u32 = REGISTER_MATMUL_TILE;
const KS: u32 = REGISTER_MATMUL_K_STEP;

/// The tile rows (or columns) of output `i` of an invocation at `t` (its
/// row or column of the 16 x 16 grid): two runs of four, 64 apart, so a
/// subgroup's shared-memory reads of one step are contiguous runs.
fn tile_offset(k: &KernelBuilder, t: Val, i: u32) -> Val {
    k.add(k.mul(t, 4u32), (i / 4) * (T / 2) + i % 4)
}

/// `c = a * b` for row-major `a: m x k`, `b: k x n`, `c: m x n` of `f32`,
/// each buffer bound as `vec4<f32>`.
///
/// A workgroup of 256 computes a 128 x 128 tile of `c`; invocation
/// `(tx, ty)` of its 16 x 16 grid owns rows `4 ty .. 4 ty + 4` and `64 + 4
/// ty ..` by columns `4 tx ..` and `64 + 4 tx ..`: 16 `vec4` accumulators.
/// Each step stages `a[tile rows, 8 k]` (transposed) and `b[8 k, tile
/// columns]` in shared memory with one `vec4` load each per invocation,
/// then does 64 fused multiply-adds per `k`.
///
/// Bindings: 0 `a`, 1 `b` (read), 2 `c` (read-write). Scalars: `m, n, k:
/// u32`; `m` and `n` multiples of 128, `k` of 8 (the kernel does not pad:
/// other sizes read and write the wrong elements). Dispatch `(n / 128, m /
/// 128, 1)`.
pub fn register_matmul() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("matmul_registers_128", [WG, 1, 1]);
    let a = k.input_vec(Scalar::F32, 4);
    let b = k.input_vec(Scalar::F32, 4);
    let c = k.output_vec(Scalar::F32, 4);
    let _m = k.scalar_arg(Scalar::U32);
    let n = k.scalar_arg(Scalar::U32);
    let kk = k.scalar_arg(Scalar::U32);
    let sa = k.shared(Scalar::F32, KS * T);
    let sb = k.shared(Scalar::F32, KS * T);
    let l = k.local_index();
    let (tx, ty) = (k.rem(l, 16u32), k.div(l, 16u32));
    let wid = k.workgroup_id();
    let (row0, col0) = (k.mul(k.y(wid), T), k.mul(k.x(wid), T));
    let zero = k.splat(k.f32(0.0), 4);
    let acc: Vec<Var> = (0..16).map(|_| k.var(zero)).collect();
    // What this invocation stages: a's row `l / 2`, k-quad `l % 2`; b's
    // k-row `l / 32`, column quad `l % 32`.
    let (a_row, a_quad) = (k.div(l, 2u32), k.rem(l, 2u32));
    let (b_row, b_quad) = (k.div(l, 32u32), k.rem(l, 32u32));
    let a_at = k.div(
        k.add(k.mul(k.add(row0, a_row), kk), k.mul(a_quad, 4u32)),
        4u32,
    );
    let b_col = k.add(col0, k.mul(b_quad, 4u32));
    k.for_range_step(0u32, kk, KS, |k, k0| {
        k.barrier();
        let va = k.load(a, k.add(a_at, k.div(k0, 4u32)));
        let vb = k.load(b, k.div(k.add(k.mul(k.add(k0, b_row), n), b_col), 4u32));
        for q in 0..4u8 {
            let ka = k.add(k.mul(a_quad, 4u32), u32::from(q));
            k.store(sa, k.add(k.mul(ka, T), a_row), k.extract(va, q));
            let cb = k.add(k.mul(b_quad, 4u32), u32::from(q));
            k.store(sb, k.add(k.mul(b_row, T), cb), k.extract(vb, q));
        }
        k.barrier();
        k.for_range(0u32, KS, |k, s| {
            let at = k.mul(s, T);
            let av: Vec<Val> = (0..8)
                .map(|i| k.load(sa, k.add(at, tile_offset(k, ty, i))))
                .collect();
            let bv: Vec<Val> = (0..2)
                .map(|h| {
                    let lanes: Vec<Val> = (0..4)
                        .map(|j| k.load(sb, k.add(at, tile_offset(k, tx, h * 4 + j))))
                        .collect();
                    k.vec(&lanes)
                })
                .collect();
            for (i, &ai) in av.iter().enumerate() {
                let ai = k.splat(ai, 4);
                for (h, &bh) in bv.iter().enumerate() {
                    let r = acc[i * 2 + h];
                    k.set(r, k.fma(ai, bh, k.get(r)));
                }
            }
        });
    });
    for i in 0..8 {
        let row = k.add(row0, tile_offset(&k, ty, i));
        for h in 0..2 {
            let col = k.add(col0, tile_offset(&k, tx, h * 4));
            let at = k.div(k.add(k.mul(row, n), col), 4u32);
            k.store(c, at, k.get(acc[(i * 2 + h) as usize]));
        }
    }
    k.build()
}
