//! A data-parallel training step on 3 ranks, checked against one device.
//!
//! The model is linear, `y = W x` with `W` 16x8 (f32), trained on a squared
//! error `L = 1/(2B) * sum_b |W x_b - t_b|^2` by plain gradient descent.
//! Every rank holds the same initial `W` and its own 8 of the batch's 24
//! samples. One step, on every rank, all on the device:
//!
//! 1. `residual` (IR kernel): `r_b = W x_b - t_b` for the rank's samples;
//! 2. `grad` (IR kernel): `g = (1/B_rank) sum_b r_b x_b^T`, the mean over
//!    the rank's samples;
//! 3. `all_reduce(g, Reduction::mean(F32))`: the mean of the 3 ranks'
//!    gradients, which is the mean over the whole batch (the shards are the
//!    same size);
//! 4. `update` (IR kernel): `W -= lr * g`.
//!
//! One thread drives the 3 ranks in turn, step after step, with nothing
//! waited on in between: each `all_reduce` is `ComputeWait::Wait`, so the
//! update (and the next step) queued after it on a rank's stream runs only
//! once the mean is in. The weights are read back after the last step and
//! compared with a run of the same kernels on ONE device over the whole
//! batch (`grad` then averages all 24 samples).
//!
//! **Tolerance: 4 ULP of the largest weight, not exact.** Both runs do
//! the same arithmetic per sample (the same kernels on the same kind of
//! device), but not the same sum over samples: the single device adds the
//! 24 samples' `r_b x_b^T` in one sequence and divides by 24, the ranks add
//! 8 each and divide by 8, and the host mean adds the three partial means
//! in rank order and divides by 3. Floating-point addition is not
//! associative, so a gradient element may differ in its last bits, and a
//! weight (which then feeds the next step's residuals) by about a unit in
//! the last place of the terms that were summed, which are of the size of
//! the weights, not of the one weight. So the tolerance is in ULP of the
//! largest weight, `max|W|`: a weight that happens to sit near zero gets
//! the same absolute difference as the others, which is many of its own
//! ULP (the example prints both). Exact equality would need every partial
//! sum to be representable, which no data keeps past the first update
//! (`/ 24` is not a power of two). The example prints how many weights are
//! bit-identical and the largest difference, and exits with an error when
//! a weight is further than the tolerance (or the ranks disagree with each
//! other, which must never happen: they all write the same mean).
//!
//! Run with `cargo run -p wgpu-server --example data_parallel`.

use std::error::Error;

use compute_ir::{Kernel, KernelBuilder, Lit, Scalar};
use compute_runtime::{
    Bytes, ComputeWait, CubeCount, DType, DeviceId, Handle, KernelArguments, LaunchMode,
    ManagedMemoryHandle, Reduction, Server, ServerCommunication, StreamId,
};
use compute_testkit::Rng;
use compute_testkit::bytes::{bytes_f32, f32_bytes};
use wgpu_server::{IrCompiler, WgpuServer, WgpuServerOptions};

type Srv = WgpuServer<IrCompiler>;

const STREAM: StreamId = StreamId(0);
/// Inputs and outputs of the model: `W` is `OUT x IN`, row-major.
const IN: u32 = 8;
const OUT: u32 = 16;
const RANKS: usize = 3;
/// Samples per rank.
const SHARD: usize = 8;
const BATCH: usize = RANKS * SHARD;
const STEPS: usize = 5;
const LR: f32 = 0.5;
/// Workgroup size of the three kernels.
const WG: u32 = 64;
/// How far a weight may be from the single-device run's, in units in the
/// last place of the largest weight; see the module doc.
const TOLERANCE_ULP: u32 = 4;

/// `r[b * OUT + o] = sum_k W[o * IN + k] * x[b * IN + k] - t[b * OUT + o]`
/// for `b < n`, one invocation per element of `r`.
///
/// Bindings: 0 `w` (read), 1 `x` (read), 2 `t` (read), 3 `r` (write).
/// Scalars: `n: u32` (samples). Dispatch `ceil(n * OUT / 64)`.
fn residual_kernel() -> Result<Kernel, compute_ir::IrError> {
    let k = KernelBuilder::new("residual", [WG, 1, 1]);
    let w = k.input(Scalar::F32);
    let x = k.input(Scalar::F32);
    let t = k.input(Scalar::F32);
    let r = k.output(Scalar::F32);
    let n = k.scalar_arg(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let outs = k.u32(OUT);
    let ins = k.u32(IN);
    let total = k.mul(n, outs);
    let inside = k.lt(i, total);
    k.if_(inside, |k| {
        let b = k.div(i, outs);
        let o = k.rem(i, outs);
        let w_row = k.mul(o, ins);
        let x_row = k.mul(b, ins);
        let zero = k.f32(0.0);
        let acc = k.var(zero);
        let first = k.u32(0);
        k.for_range(first, ins, |k, j| {
            let wi = k.add(w_row, j);
            let xi = k.add(x_row, j);
            let a = k.load(w, wi);
            let v = k.load(x, xi);
            let p = k.mul(a, v);
            let s = k.get(acc);
            let s = k.add(s, p);
            k.set(acc, s);
        });
        let y = k.get(acc);
        let target = k.load(t, i);
        let d = k.sub(y, target);
        k.store(r, i, d);
    });
    k.build()
}

/// `g[o * IN + j] = (sum_{b < n} r[b * OUT + o] * x[b * IN + j]) / n`: the
/// mean over the samples of `r_b x_b^T`, one invocation per weight.
///
/// Bindings: 0 `r` (read), 1 `x` (read), 2 `g` (write). Scalars: `n: u32`,
/// `count: f32` (`n` as a float). Dispatch `ceil(OUT * IN / 64)`.
fn grad_kernel() -> Result<Kernel, compute_ir::IrError> {
    let k = KernelBuilder::new("grad", [WG, 1, 1]);
    let r = k.input(Scalar::F32);
    let x = k.input(Scalar::F32);
    let g = k.output(Scalar::F32);
    let n = k.scalar_arg(Scalar::U32);
    let count = k.scalar_arg(Scalar::F32);
    let gid = k.global_id();
    let i = k.x(gid);
    let weights = k.u32(OUT * IN);
    let inside = k.lt(i, weights);
    k.if_(inside, |k| {
        let ins = k.u32(IN);
        let outs = k.u32(OUT);
        let o = k.div(i, ins);
        let j = k.rem(i, ins);
        let zero = k.f32(0.0);
        let acc = k.var(zero);
        let first = k.u32(0);
        k.for_range(first, n, |k, b| {
            let rb = k.mul(b, outs);
            let ri = k.add(rb, o);
            let xb = k.mul(b, ins);
            let xi = k.add(xb, j);
            let e = k.load(r, ri);
            let v = k.load(x, xi);
            let p = k.mul(e, v);
            let s = k.get(acc);
            let s = k.add(s, p);
            k.set(acc, s);
        });
        let s = k.get(acc);
        let mean = k.div(s, count);
        k.store(g, i, mean);
    });
    k.build()
}

/// `w[i] = w[i] - lr * g[i]` for `i < n`.
///
/// Bindings: 0 `g` (read), 1 `w` (read-write). Scalars: `lr: f32`,
/// `n: u32`. Dispatch `ceil(n / 64)`.
fn update_kernel() -> Result<Kernel, compute_ir::IrError> {
    let k = KernelBuilder::new("update", [WG, 1, 1]);
    let g = k.input(Scalar::F32);
    let w = k.output(Scalar::F32);
    let lr = k.scalar_arg(Scalar::F32);
    let n = k.scalar_arg(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let inside = k.lt(i, n);
    k.if_(inside, |k| {
        let gi = k.load(g, i);
        let wi = k.load(w, i);
        let step = k.mul(lr, gi);
        let next = k.sub(wi, step);
        k.store(w, i, next);
    });
    k.build()
}

/// The three kernels.
struct Kernels {
    residual: Kernel,
    grad: Kernel,
    update: Kernel,
}

/// One model replica on one server: its weights, its samples, and the
/// buffers a step uses.
struct Replica {
    server: Srv,
    w: Handle,
    x: Handle,
    t: Handle,
    r: Handle,
    g: Handle,
    /// Samples this replica trains on.
    n: usize,
}

impl Replica {
    fn new(
        id: DeviceId,
        w0: &[f32],
        x: &[f32],
        t: &[f32],
        n: usize,
    ) -> Result<Self, Box<dyn Error>> {
        let mut server = WgpuServerOptions::new()
            .device_id(id)
            .adapter(0)
            .open::<IrCompiler>()?;
        let w = upload(&mut server, w0)?;
        let x = upload(&mut server, x)?;
        let t = upload(&mut server, t)?;
        let r = alloc(&mut server, n * OUT as usize)?;
        let g = alloc(&mut server, (OUT * IN) as usize)?;
        Ok(Replica {
            server,
            w,
            x,
            t,
            r,
            g,
            n,
        })
    }

    /// Residuals, then the gradient (mean over this replica's samples) into
    /// `g`.
    fn gradient(&mut self, k: &Kernels) -> Result<(), Box<dyn Error>> {
        let n = self.n as u32;
        let (w, x, t, r, g) = (&self.w, &self.x, &self.t, &self.r, &self.g);
        launch(
            &mut self.server,
            &k.residual,
            (n * OUT).div_ceil(WG),
            &[w, x, t, r],
            &[Lit::U32(n)],
        )?;
        launch(
            &mut self.server,
            &k.grad,
            (OUT * IN).div_ceil(WG),
            &[r, x, g],
            &[Lit::U32(n), Lit::f32(n as f32)],
        )
    }

    /// `W -= lr * grad`.
    fn update(&mut self, k: &Kernels, grad: &Handle) -> Result<(), Box<dyn Error>> {
        let w = &self.w;
        launch(
            &mut self.server,
            &k.update,
            (OUT * IN).div_ceil(WG),
            &[grad, w],
            &[Lit::f32(LR), Lit::U32(OUT * IN)],
        )
    }

    fn weights(&mut self) -> Result<Vec<f32>, Box<dyn Error>> {
        let out =
            futures::executor::block_on(self.server.read(vec![self.w.copy_descriptor()], STREAM))?;
        Ok(out.first().map(|b| bytes_f32(b)).unwrap_or_default())
    }
}

fn alloc(s: &mut Srv, floats: usize) -> Result<Handle, Box<dyn Error>> {
    let m = ManagedMemoryHandle::new();
    let bytes = 4 * floats as u64;
    s.initialize_memory(m.clone(), bytes, STREAM)?;
    Ok(Handle::new(m, bytes))
}

fn upload(s: &mut Srv, data: &[f32]) -> Result<Handle, Box<dyn Error>> {
    let h = alloc(s, data.len())?;
    s.write(
        vec![(h.copy_descriptor(), Bytes::from(f32_bytes(data)))],
        STREAM,
    );
    Ok(h)
}

fn launch(
    s: &mut Srv,
    kernel: &Kernel,
    groups: u32,
    buffers: &[&Handle],
    scalars: &[Lit],
) -> Result<(), Box<dyn Error>> {
    let args = KernelArguments::buffers(buffers.iter().map(|h| h.binding()).collect())
        .with_scalars(kernel.pack_scalars(scalars)?);
    // SAFETY: IR kernels compile with checked bounds (the default options),
    // and every kernel here also checks its index against its sizes.
    unsafe {
        s.launch(
            Box::new(kernel.clone()),
            CubeCount::Static(groups, 1, 1),
            args,
            STREAM,
            LaunchMode::Execute,
        )
    };
    Ok(())
}

/// The loss `1/(2B) sum |W x_b - t_b|^2` over the whole batch, on the host.
fn loss(w: &[f32], x: &[f32], t: &[f32]) -> f64 {
    let (i, o) = (IN as usize, OUT as usize);
    let mut sum = 0.0f64;
    for b in 0..BATCH {
        for r in 0..o {
            let y: f64 = (0..i)
                .map(|j| f64::from(w[r * i + j]) * f64::from(x[b * i + j]))
                .sum();
            sum += (y - f64::from(t[b * o + r])).powi(2);
        }
    }
    sum / (2 * BATCH) as f64
}

/// The spacing of f32 values at `x` (its unit in the last place).
fn ulp(x: f32) -> f32 {
    let x = x.abs();
    if x.is_finite() {
        f32::from_bits(x.to_bits() + 1) - x
    } else {
        f32::NAN
    }
}

/// Distance in units in the last place between two finite floats (0 for
/// `0.0` and `-0.0`).
fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| {
        let bits = x.to_bits();
        let mag = i64::from(bits & 0x7fff_ffff);
        if bits >> 31 == 1 { -mag } else { mag }
    };
    key(a).abs_diff(key(b))
}

fn main() -> Result<(), Box<dyn Error>> {
    let (i, o) = (IN as usize, OUT as usize);
    let mut rng = Rng::new(0x5eed);
    let mut uniform = || (2.0 * rng.unit() - 1.0) as f32;
    // Targets from a teacher `W*`, the student starting elsewhere.
    let teacher: Vec<f32> = (0..o * i).map(|_| uniform()).collect();
    let w0: Vec<f32> = (0..o * i).map(|_| 0.5 * uniform()).collect();
    let x: Vec<f32> = (0..BATCH * i).map(|_| uniform()).collect();
    let t: Vec<f32> = (0..BATCH)
        .flat_map(|b| {
            let x = &x;
            let teacher = &teacher;
            (0..o).map(move |r| {
                (0..i)
                    .map(|j| teacher[r * i + j] * x[b * i + j])
                    .sum::<f32>()
            })
        })
        .collect();

    let kernels = Kernels {
        residual: residual_kernel()?,
        grad: grad_kernel()?,
        update: update_kernel()?,
    };

    // Three ranks: separate devices of one adapter, each with its shard.
    let ids: Vec<DeviceId> = (0..RANKS as u64).map(|r| DeviceId(700 + r)).collect();
    let mut ranks = Vec::new();
    for (r, id) in ids.iter().enumerate() {
        let xs = &x[r * SHARD * i..(r + 1) * SHARD * i];
        let ts = &t[r * SHARD * o..(r + 1) * SHARD * o];
        ranks.push(Replica::new(*id, &w0, xs, ts, SHARD)?);
    }
    for rank in ranks.iter_mut() {
        rank.server.comm_init(ids.clone())?;
    }
    // Where each rank's all_reduce writes the mean gradient.
    let means = ranks
        .iter_mut()
        .map(|rank| alloc(&mut rank.server, o * i))
        .collect::<Result<Vec<_>, _>>()?;
    let adapter = Server::utilities(&ranks[0].server).adapter.clone();
    println!(
        "adapter: {} ({}); {RANKS} ranks, one wgpu device each",
        adapter.name, adapter.backend
    );
    println!(
        "model y = W x, W {OUT}x{IN} f32; batch {BATCH} samples, {SHARD} per rank; \
         {STEPS} steps of W -= {LR} * mean gradient"
    );

    // One thread, ranks in turn, nothing waited on until the weights are
    // read: each rank's update waits on its stream for the all_reduce.
    for _ in 0..STEPS {
        for (rank, mean) in ranks.iter_mut().zip(&means) {
            rank.gradient(&kernels)?;
            rank.server.all_reduce(
                rank.g.binding(),
                mean.binding(),
                Reduction::mean(DType::F32),
                STREAM,
                ids.clone(),
                ComputeWait::Wait,
            )?;
            rank.update(&kernels, mean)?;
        }
    }
    let mut trained = Vec::new();
    for rank in ranks.iter_mut() {
        trained.push(rank.weights()?);
    }
    if trained.iter().any(|w| *w != trained[0]) {
        return Err("the ranks' weights differ from each other".into());
    }
    println!(
        "data-parallel: {STEPS} steps on {RANKS} ranks (residual, grad, all_reduce mean, update \
         per step); the ranks' weights are bit-identical"
    );

    // The same steps on one device over the whole batch.
    let mut single = Replica::new(DeviceId(799), &w0, &x, &t, BATCH)?;
    for _ in 0..STEPS {
        single.gradient(&kernels)?;
        let g = single.g.clone();
        single.update(&kernels, &g)?;
    }
    let reference = single.weights()?;

    let dp = &trained[0];
    if dp.len() != o * i || reference.len() != o * i {
        return Err("a weight readback has the wrong length".into());
    }
    let identical = dp.iter().zip(&reference).filter(|(a, b)| a == b).count();
    // The unit of the tolerance: one ULP at the largest weight's magnitude.
    let scale = dp
        .iter()
        .chain(&reference)
        .fold(0.0f32, |m, w| m.max(w.abs()));
    let unit = ulp(scale);
    let worst = dp
        .iter()
        .zip(&reference)
        .map(|(a, b)| f64::from((a - b).abs()) / f64::from(unit))
        .fold(0.0f64, f64::max);
    let (own, at) = dp
        .iter()
        .zip(&reference)
        .map(|(a, b)| (ulps(*a, *b), *b))
        .fold((0, 0.0f32), |m, d| if d.0 > m.0 { d } else { m });
    println!(
        "loss over the batch: {:.6} before, {:.6} after (data-parallel), {:.6} (single device)",
        loss(&w0, &x, &t),
        loss(dp, &x, &t),
        loss(&reference, &x, &t)
    );
    println!(
        "against a single-device run of the same kernels on all {BATCH} samples: {identical} of \
         {} weights bit-identical; largest difference {worst:.2} ULP of max|W| = {scale} \
         (tolerance {TOLERANCE_ULP}); in a weight's own ULP at most {own}, for a weight of {at:e}",
        o * i
    );
    if worst > f64::from(TOLERANCE_ULP) || dp.iter().any(|w| !w.is_finite()) {
        return Err(format!(
            "weights do not match a single-device run: {worst:.2} ULP of max|W| apart \
             (tolerance {TOLERANCE_ULP})"
        )
        .into());
    }
    println!("weights match a single-device run");
    Ok(())
}
