//! A cooperative-matrix matmul: `f16 x f16 -> f32` on the device's matrix
//! units, 128 x 128 output tiles staged through workgroup memory as
//! `vec4<f16>` (one 8-byte store per vector: staged as single halves, four
//! stores per vector, the same kernel ran at 121.6 TFLOPS on the H200
//! against 224.8 for this staging in WGSL, docs/benchmarks.md).

use compute_ir::{IrError, Kernel, KernelBuilder, Layout, Matrix, MatrixRole, Scalar, Val};

/// The output tile edge of [`coop_matmul`].
pub const COOP_MATMUL_TILE: u32 = 128;
/// The step along `k`: `k` must be a multiple of it.
pub const COOP_MATMUL_K_STEP: u32 = 32;
const T: u32 = COOP_MATMUL_TILE;
const KS: u32 = COOP_MATMUL_K_STEP;
/// Row strides of the staged tiles, in `vec4<f16>`: padded by 8 halves
/// past 32 and 128 so the rows of a 16 x 16 load start in different banks.
const SA: u32 = (KS + 8) / 4;
const SB: u32 = (T + 8) / 4;

/// `c = a * b` for row-major `a: m x k`, `b: k x n` of `f16` (bound as
/// `vec4<f16>`) and `c: m x n` of `f32`, on a device whose subgroups have
/// `subgroup` invocations and which has 16 x 16 x 16 `f16 -> f32`
/// cooperative matrices.
///
/// A workgroup of four subgroups computes a 128 x 128 tile of `c`; subgroup
/// `(sr, sc)` of its 2 x 2 grid owns a 64 x 64 quarter as 4 x 4
/// accumulators. Each step along `k` stages `a[tile rows, 32]` and `b[32,
/// tile columns]` in workgroup memory (`vec4` loads and stores, every
/// invocation taking its share, all loads before the first store) and does
/// two rounds of 16 multiply-adds per subgroup from there.
///
/// Bindings: 0 `a`, 1 `b` (read), 2 `c` (read-write). Scalars: `m, n, k:
/// u32`; `m` and `n` multiples of 128, `k` of 32 (nothing pads: other
/// sizes read and write the wrong elements). Dispatch `(n / 128, m / 128,
/// 1)`. On a device whose subgroup size is not `subgroup`, every element
/// of `c` the kernel would write is NaN instead: the layout of the
/// subgroups' quarters depends on it, and a wrong product must not pass
/// for a right one.
pub fn coop_matmul(subgroup: u32) -> Result<Kernel, IrError> {
    let wg = 4 * subgroup;
    let k = KernelBuilder::new(format!("matmul_coop_f16_{subgroup}"), [wg, 1, 1]);
    let a = k.input_vec(Scalar::F16, 4);
    let b = k.input_vec(Scalar::F16, 4);
    let c = k.output(Scalar::F32);
    let _m = k.scalar_arg(Scalar::U32);
    let n = k.scalar_arg(Scalar::U32);
    let kk = k.scalar_arg(Scalar::U32);
    let sa = k.shared_vec(Scalar::F16, 4, T * SA);
    let sb = k.shared_vec(Scalar::F16, 4, KS * SB);
    let l = k.local_index();
    let wid = k.workgroup_id();
    let (row0, col0) = (k.mul(k.y(wid), T), k.mul(k.x(wid), T));
    let sg = k.subgroup_id();
    let (sr, sc) = (k.mul(k.div(sg, 2u32), 64u32), k.mul(k.rem(sg, 2u32), 64u32));
    let tiles: Vec<[Matrix; 2]> = (0..4)
        .map(|_| {
            [
                k.matrix(MatrixRole::A, Scalar::F16, 16),
                k.matrix(MatrixRole::B, Scalar::F16, 16),
            ]
        })
        .collect();
    let acc: Vec<Matrix> = (0..16)
        .map(|_| k.matrix(MatrixRole::C, Scalar::F32, 16))
        .collect();
    let right_size = k.eq(k.subgroup_size(), subgroup);
    k.if_(right_size, |k| {
        k.for_range_step(0u32, kk, KS, |k, k0| {
            k.barrier();
            stage(k, (a, b), (sa, sb), (row0, col0, k0), (n, kk), (l, wg));
            k.barrier();
            for half in 0..KS / 16 {
                for (i, [ta, tb]) in tiles.iter().enumerate() {
                    let i = i as u32;
                    let at = k.add(k.mul(k.add(sr, i * 16), SA), half * 4);
                    k.matrix_load(*ta, sa, at, SA, Layout::RowMajor);
                    let bt = k.add(k.div(k.add(sc, i * 16), 4u32), half * 16 * SB);
                    k.matrix_load(*tb, sb, bt, SB, Layout::RowMajor);
                }
                for i in 0..4 {
                    for j in 0..4 {
                        let d = acc[i * 4 + j];
                        k.matrix_multiply_add(d, tiles[i][0], tiles[j][1], d);
                    }
                }
            }
        });
        for i in 0..4u32 {
            for j in 0..4u32 {
                let r = k.add(k.add(row0, sr), i * 16);
                let col = k.add(k.add(col0, sc), j * 16);
                let at = k.add(k.mul(r, n), col);
                k.matrix_store(acc[(i * 4 + j) as usize], c, at, n, Layout::RowMajor);
            }
        }
    });
    k.if_(k.not(right_size), |k| {
        poison(k, c, (row0, col0), n, (l, wg))
    });
    k.build()
}

/// `a[row0.., k0..k0 + 32]` into `sa` and `b[k0.., col0..col0 + 128]` into
/// `sb`, one `vec4<f16>` of each per invocation per round, every round's
/// loads issued before the first store.
fn stage(
    k: &KernelBuilder,
    (a, b): (compute_ir::Buf, compute_ir::Buf),
    (sa, sb): (compute_ir::Shared, compute_ir::Shared),
    (row0, col0, k0): (Val, Val, Val),
    (n, kk): (Val, Val),
    (l, wg): (Val, u32),
) {
    // Both tiles are 1024 vectors: 8 per row of a's, 32 per row of b's.
    let loaded: Vec<_> = (0..1024 / wg)
        .map(|round| {
            let v = k.add(l, round * wg);
            let (r, q) = (k.div(v, 8u32), k.rem(v, 8u32));
            let from = k.add(k.div(k.add(k.mul(k.add(row0, r), kk), k0), 4u32), q);
            let x = k.load(a, from);
            let (br, bq) = (k.div(v, 32u32), k.rem(v, 32u32));
            let from = k.add(k.div(k.add(k.mul(k.add(k0, br), n), col0), 4u32), bq);
            let y = k.load(b, from);
            (k.add(k.mul(r, SA), q), x, k.add(k.mul(br, SB), bq), y)
        })
        .collect();
    for (to_a, x, to_b, y) in loaded {
        k.store(sa, to_a, x);
        k.store(sb, to_b, y);
    }
}

/// NaN over the workgroup's tile of `c`.
fn poison(
    k: &KernelBuilder,
    c: compute_ir::Buf,
    (row0, col0): (Val, Val),
    n: Val,
    (l, wg): (Val, u32),
) {
    let nan = k.bitcast(k.u32(0x7fc0_0000), Scalar::F32);
    k.for_range_step(l, T * T, wg, |k, e| {
        let at = k.add(k.mul(k.add(row0, k.div(e, T)), n), k.add(col0, k.rem(e, T)));
        k.store(c, at, nan);
    });
}
