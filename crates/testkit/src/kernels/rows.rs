//! Row kernels: softmax and layernorm over rows of `f32`, one workgroup
//! per row, each invocation keeping its share of the row in registers
//! (named `vec4<f32>` values), so the row is read once and written once.

use compute_ir::{IrError, Kernel, KernelBuilder, Scalar, Shared, Val};

/// Invocations per workgroup of the row kernels.
pub const ROW_WORKGROUP: u32 = 256;

/// The row geometry: `cols` must be a positive multiple of `4 *`
/// [`ROW_WORKGROUP`]; each invocation holds `cols / 1024` vectors.
fn per_invocation(cols: u32) -> Result<u32, IrError> {
    let step = 4 * ROW_WORKGROUP;
    if cols == 0 || !cols.is_multiple_of(step) {
        return Err(IrError::Structure {
            op: "row kernel",
            reason: format!("cols must be a positive multiple of {step}, got {cols}"),
        });
    }
    Ok(cols / step)
}

/// The row's vectors this invocation holds, loaded into registers:
/// vector `j` is the row's `j * ROW_WORKGROUP + local_index`, so each load
/// is coalesced across the workgroup. One named value per vector (the
/// loops over them unrolled here), not a local array indexed by a loop
/// counter: NVIDIA's compiler left such an array in local memory (the
/// same lesson as the matmuls', `crates/bench/src/matmul_wgsl.rs`).
struct Share {
    vals: Vec<Val>,
    /// Index of this invocation's first vector in the buffer.
    base: Val,
}

impl Share {
    fn load(k: &KernelBuilder, x: compute_ir::Buf, cols: u32) -> Result<Share, IrError> {
        let per = per_invocation(cols)?;
        let row = k.x(k.workgroup_id());
        let base = k.add(k.mul(row, cols / 4), k.local_index());
        let vals = (0..per)
            .map(|j| k.load(x, k.add(base, j * ROW_WORKGROUP)))
            .collect();
        Ok(Share { vals, base })
    }

    /// Folds `f(acc, vector)` over the held vectors from `init`.
    fn fold(
        &self,
        k: &KernelBuilder,
        init: Val,
        f: impl Fn(&KernelBuilder, Val, Val) -> Val,
    ) -> Val {
        self.vals.iter().fold(init, |acc, &v| f(k, acc, v))
    }

    /// Stores `f(j, vector)` for every held vector `j` into `y`.
    fn store(
        &self,
        k: &KernelBuilder,
        y: compute_ir::Buf,
        f: impl Fn(&KernelBuilder, u32, Val) -> Val,
    ) {
        for (j, &v) in (0u32..).zip(&self.vals) {
            k.store(y, k.add(self.base, j * ROW_WORKGROUP), f(k, j, v));
        }
    }
}

fn lanes_sum(k: &KernelBuilder, v: Val) -> Val {
    k.add(k.add(k.x(v), k.y(v)), k.add(k.z(v), k.extract(v, 3)))
}

fn lanes_max(k: &KernelBuilder, v: Val) -> Val {
    k.max(k.max(k.x(v), k.y(v)), k.max(k.z(v), k.extract(v, 3)))
}

/// A tree reduction over the workgroup of tuples held one per invocation
/// (component `i` in `shared[i]`), combined by `f`: every invocation gets
/// the workgroup's result. One barrier per level, in uniform control flow;
/// a second reduction on the same arrays needs a barrier before it.
fn reduce(
    k: &KernelBuilder,
    shared: &[Shared],
    mine: &[Val],
    f: impl Fn(&KernelBuilder, &[Val], &[Val]) -> Vec<Val>,
) -> Vec<Val> {
    let l = k.local_index();
    for (&sh, &v) in shared.iter().zip(mine) {
        k.store(sh, l, v);
    }
    k.barrier();
    let levels = ROW_WORKGROUP.trailing_zeros();
    k.for_range(0u32, levels, |k, level| {
        let stride = k.shr(ROW_WORKGROUP / 2, level);
        k.if_(k.lt(l, stride), |k| {
            let o = k.add(l, stride);
            let a: Vec<Val> = shared.iter().map(|&sh| k.load(sh, l)).collect();
            let b: Vec<Val> = shared.iter().map(|&sh| k.load(sh, o)).collect();
            for (&sh, v) in shared.iter().zip(f(k, &a, &b)) {
                k.store(sh, l, v);
            }
        });
        k.barrier();
    });
    shared.iter().map(|&sh| k.load(sh, 0u32)).collect()
}

/// `y[r] = softmax(x[r])` for each row `r` of `cols` `f32`, with the
/// row's maximum subtracted before `exp`.
///
/// One pass over the row in registers keeps a running maximum and the sum
/// of `exp(x - max)` rescaled as the maximum grows; the workgroup combines
/// the pairs in a tree; a second pass over the registers writes
/// `exp(x - max) / sum`.
///
/// Bindings: 0 `x: vec4<f32>` (read), 1 `y: vec4<f32>` (read-write), each
/// `rows * cols` floats. No scalars. Dispatch `rows` workgroups along x.
/// `cols` a positive multiple of 1024.
pub fn softmax(cols: u32) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new(format!("softmax_{cols}"), [ROW_WORKGROUP, 1, 1]);
    let x = k.input_vec(Scalar::F32, 4);
    let y = k.output_vec(Scalar::F32, 4);
    let shared = [
        k.shared(Scalar::F32, ROW_WORKGROUP),
        k.shared(Scalar::F32, ROW_WORKGROUP),
    ];
    let share = Share::load(&k, x, cols)?;
    // A finite floor for the running maximum: no -inf literal in WGSL, and
    // exp(floor - m) is 0 for any real m of the row.
    let m = share.fold(&k, k.f32(f32::MIN), |k, m, v| k.max(m, lanes_max(k, v)));
    let s = share.fold(&k, k.f32(0.0), |k, s, v| {
        k.add(s, lanes_sum(k, k.exp(k.sub(v, k.splat(m, 4)))))
    });
    let r = reduce(&k, &shared, &[m, s], |k, a, b| {
        let mx = k.max(a[0], b[0]);
        let s = k.add(
            k.mul(a[1], k.exp(k.sub(a[0], mx))),
            k.mul(b[1], k.exp(k.sub(b[0], mx))),
        );
        vec![mx, s]
    });
    let (m, s) = (r[0], r[1]);
    let inv = k.splat(k.div(k.f32(1.0), s), 4);
    let m = k.splat(m, 4);
    share.store(&k, y, |k, _, v| k.mul(k.exp(k.sub(v, m)), inv));
    k.build()
}

/// `y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta` for each row
/// `r` of `cols` `f32`: the mean first, then the variance as the mean of
/// squared deviations (both from the registers, two tree reductions), so
/// no cancellation of `E[x^2] - mean^2`.
///
/// Bindings: 0 `x: vec4<f32>` (read, `rows * cols`), 1 `gamma: vec4<f32>`
/// and 2 `beta: vec4<f32>` (read, `cols` each), 3 `y: vec4<f32>`
/// (read-write, `rows * cols`). Scalars: `eps: f32`. Dispatch `rows`
/// workgroups along x. `cols` a positive multiple of 1024.
pub fn layernorm(cols: u32) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new(format!("layernorm_{cols}"), [ROW_WORKGROUP, 1, 1]);
    let x = k.input_vec(Scalar::F32, 4);
    let gamma = k.input_vec(Scalar::F32, 4);
    let beta = k.input_vec(Scalar::F32, 4);
    let y = k.output_vec(Scalar::F32, 4);
    let eps = k.scalar_arg(Scalar::F32);
    let shared = [k.shared(Scalar::F32, ROW_WORKGROUP)];
    let share = Share::load(&k, x, cols)?;
    let zero = k.f32(0.0);
    let n = k.f32(cols as f32);
    let add = |k: &KernelBuilder, a: &[Val], b: &[Val]| vec![k.add(a[0], b[0])];
    let sum = share.fold(&k, zero, |k, s, v| k.add(s, lanes_sum(k, v)));
    let mean = k.div(reduce(&k, &shared, &[sum], add)[0], n);
    let mean4 = k.splat(mean, 4);
    let dev = share.fold(&k, zero, |k, s, v| {
        let d = k.sub(v, mean4);
        k.add(s, lanes_sum(k, k.mul(d, d)))
    });
    k.barrier();
    let dev = reduce(&k, &shared, &[dev], add)[0];
    let rstd = k.splat(k.inverse_sqrt(k.add(k.div(dev, n), eps)), 4);
    let l = k.local_index();
    share.store(&k, y, |k, j, v| {
        let c = k.add(l, j * ROW_WORKGROUP);
        let scaled = k.mul(k.mul(k.sub(v, mean4), rstd), k.load(gamma, c));
        k.add(scaled, k.load(beta, c))
    });
    k.build()
}
