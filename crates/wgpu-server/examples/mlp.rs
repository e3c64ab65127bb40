//! An MLP forward pass on the server, through the client API: a batch of 64
//! inputs, 256 -> 512 (ReLU) -> 10 (softmax), from three IR kernels (a
//! tiled matmul over a 2-D grid, bias with an optional ReLU, row softmax
//! from workgroup reductions); checked against the host,
//! profiled, run on two streams at once, captured as a graph and replayed
//! on new inputs, with the memory report at the end.
//!
//! `cargo run -p wgpu-server --example mlp` (a few seconds on lavapipe).

use std::error::Error;

use wgpu_server::prelude::*;

const BATCH: u32 = 64;
const IN: u32 = 256;
const HIDDEN: u32 = 512;
const OUT: u32 = 10;

/// Edge of the matmul's tiles and workgroups.
const T: u32 = 16;

/// `c = a b` (`m x depth` by `depth x n`, row-major): one invocation per
/// element of `c` over an `[n, m]` grid, `T x T` tiles of `a` and `b`
/// staged in workgroup memory (zero past the edges). Scalars `m, n, depth`.
fn matmul() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("matmul", [T, T, 1]);
    let [m, n, depth] = [0; 3].map(|_| k.scalar_arg(Scalar::U32));
    let a = k.input_len(Scalar::F32, k.mul(m, depth));
    let b = k.input_len(Scalar::F32, k.mul(depth, n));
    let c = k.output_len(Scalar::F32, k.mul(m, n));
    let [ta, tb] = [0; 2].map(|_| k.shared(Scalar::F32, T * T));
    let (tx, ty) = (k.x(k.local_id()), k.y(k.local_id()));
    let (col, row) = (k.x(k.global_id()), k.y(k.global_id()));
    let at = k.add(k.mul(ty, T), tx);
    let acc = k.var(0.0f32);
    // Stage `tile[at] = src[r * width + col]` where inside, else 0.
    let stage = |k: &KernelBuilder, tile, src, r, col, (rows, width)| {
        let inside = k.and(k.lt(r, rows), k.lt(col, width));
        let v = |k: &KernelBuilder| k.load(src, k.add(k.mul(r, width), col));
        k.if_else(
            inside,
            |k| k.store(tile, at, v(k)),
            |k| k.store(tile, at, 0.0f32),
        );
    };
    k.for_range_step(0u32, depth, T, |k, t| {
        stage(k, ta, a, row, k.add(t, tx), (m, depth));
        stage(k, tb, b, k.add(t, ty), col, (depth, n));
        k.barrier();
        k.for_range(0u32, T, |k, p| {
            let x = k.load(ta, k.add(k.mul(ty, T), p));
            k.set(
                acc,
                k.fma(x, k.load(tb, k.add(k.mul(p, T), tx)), k.get(acc)),
            );
        });
        k.barrier();
    });
    k.if_(k.and(k.lt(row, m), k.lt(col, n)), |k| {
        k.store(c, k.add(k.mul(row, n), col), k.get(acc))
    });
    k.build()
}

/// `x[i] += bias[i % n]` for `i < len`, then `max(x[i], 0)` when `relu`.
/// Scalars `len, n`.
fn bias(relu: bool) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new(if relu { "bias_relu" } else { "bias" }, [256, 1, 1]);
    let (x, bias) = (k.output(Scalar::F32), k.input(Scalar::F32));
    let [len, n] = [0; 2].map(|_| k.scalar_arg(Scalar::U32));
    let i = k.x(k.global_id());
    k.if_(k.lt(i, len), |k| {
        let y = k.add(k.load(x, i), k.load(bias, k.rem(i, n)));
        k.store(x, i, if relu { k.max(y, 0.0f32) } else { y });
    });
    k.build()
}

/// `out[r, :] = softmax(x[r, :])` over rows of `OUT`: one workgroup per
/// row (grid `[OUT, rows]`), its max and sum by `workgroup_reduce`.
/// Scalar `rows`.
fn softmax() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("softmax", [OUT, 1, 1]);
    let rows = k.scalar_arg(Scalar::U32);
    let x = k.input_len(Scalar::F32, k.mul(rows, OUT));
    let out = k.output_len(Scalar::F32, k.mul(rows, OUT));
    let at = k.add(k.mul(k.y(k.global_id()), OUT), k.x(k.local_id()));
    let v = k.load(x, at);
    let e = k.exp(k.sub(v, k.workgroup_reduce(ReduceOp::Max, v)));
    k.store(out, at, k.div(e, k.workgroup_reduce(ReduceOp::Sum, e)));
    k.build()
}

type Fallible<T = ()> = Result<T, Box<dyn Error>>;

/// The weights (`w1, b1, w2, b2`), on the host and on the device, and the
/// kernels.
struct Model {
    host: [Vec<f32>; 4],
    device: [Handle; 4],
    kernels: [Kernel; 4],
}

/// One batch's input, activations and output.
struct Batch {
    x: Handle,
    h: Handle,
    logits: Handle,
    probs: Handle,
}

impl Model {
    fn new(c: &DefaultClient) -> Fallible<Self> {
        let host = [(IN * HIDDEN, 1), (HIDDEN, 2), (HIDDEN * OUT, 3), (OUT, 4)].map(values);
        let [w1, b1, w2, b2] = host.each_ref().map(|w| c.create_from_slice(w));
        let device = [w1?, b1?, w2?, b2?];
        let kernels = [matmul()?, bias(true)?, bias(false)?, softmax()?];
        Ok(Model {
            host,
            device,
            kernels,
        })
    }

    fn batch(c: &DefaultClient, x: &[f32]) -> Result<Batch, ServerError> {
        let out = |n: u32, label| c.empty_of::<f32>(n.into()).map(|h| h.with_label(label));
        Ok(Batch {
            x: c.create_from_slice(x)?.with_label("x"),
            h: out(BATCH * HIDDEN, "h")?,
            logits: out(BATCH * OUT, "logits")?,
            probs: out(BATCH * OUT, "probs")?,
        })
    }

    /// The forward pass: five launches on `c`'s stream.
    #[rustfmt::skip]
    fn forward(&self, c: &DefaultClient, b: &Batch) -> Result<(), ServerError> {
        let ([matmul, bias_relu, bias, softmax], [w1, b1, w2, b2]) = (&self.kernels, &self.device);
        let (hidden, out) = (BATCH * HIDDEN, BATCH * OUT);
        matmul.launch(c, [HIDDEN, BATCH], [&b.x, w1, &b.h], &[BATCH.into(), HIDDEN.into(), IN.into()])?;
        bias_relu.launch(c, hidden, [&b.h, b1], &[hidden.into(), HIDDEN.into()])?;
        matmul.launch(c, [OUT, BATCH], [&b.h, w2, &b.logits], &[BATCH.into(), OUT.into(), HIDDEN.into()])?;
        bias.launch(c, out, [&b.logits, b2], &[out.into(), OUT.into()])?;
        softmax.launch(c, [OUT, BATCH], [&b.logits, &b.probs], &[BATCH.into()])
    }

    /// Reads a batch's probabilities and compares them with the host's.
    fn check(&self, c: &DefaultClient, b: &Batch, x: &[f32], what: &str) -> Fallible {
        let want = host_forward(&self.host, x);
        let worst = c
            .read_vec::<f32>(&b.probs)?
            .iter()
            .zip(&want)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        println!("{what}: max |device - host| = {worst:.2e}");
        if worst > 1e-4 {
            return Err(format!("{what}: the device disagrees with the host by {worst}").into());
        }
        Ok(())
    }
}

/// `len` values in [-0.5, 0.5], deterministic per `seed`.
fn values((len, seed): (u32, u32)) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed * 131) as f32 * 0.618).sin() / 2.0)
        .collect()
}

/// `a (m x k) * b (k x n)`.
fn host_matmul(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f32> {
    let dot = |r: usize, j: usize| (0..k).map(|p| a[r * k + p] * b[p * n + j]).sum::<f32>();
    (0..m * n).map(|i| dot(i / n, i % n)).collect()
}

fn host_forward([w1, b1, w2, b2]: &[Vec<f32>; 4], x: &[f32]) -> Vec<f32> {
    let (b, i, h, o) = (BATCH as usize, IN as usize, HIDDEN as usize, OUT as usize);
    let mut hidden = host_matmul(x, w1, (b, h, i));
    for (k, v) in hidden.iter_mut().enumerate() {
        *v = (*v + b1[k % h]).max(0.0);
    }
    let mut logits = host_matmul(&hidden, w2, (b, o, h));
    for row in logits.chunks_mut(o) {
        row.iter_mut().zip(b2).for_each(|(v, b)| *v += b);
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
        row.iter_mut().for_each(|v| *v = (*v - max).exp() / sum);
    }
    logits
}

fn main() -> Fallible {
    // Setup: a device, the weights on it, a batch of inputs.
    let c = WgpuServerOptions::new().client()?;
    let model = Model::new(&c)?;
    let x = values((BATCH * IN, 5));
    let batch = Model::batch(&c, &x)?;

    // Profiling: one forward pass inside a profile window (the first run
    // also compiles the kernels), then the same again, warm.
    for run in ["first run", "warm"] {
        let (done, took) = c.profile(|| model.forward(&c, &batch))?;
        done?;
        println!("forward, {run}: {took:?} (profile window)");
    }
    model.check(&c, &batch, &x, "forward")?;

    // Streams: a second batch on stream 1 while stream 0 runs the first;
    // both read the same weights.
    let side = c.with_stream(StreamId(1));
    let x2 = values((BATCH * IN, 6));
    let batch2 = Model::batch(&side, &x2)?;
    model.forward(&side, &batch2)?;
    model.forward(&c, &batch)?;
    model.check(&side, &batch2, &x2, "stream 1")?;
    model.check(&c, &batch, &x, "stream 0")?;

    // Graph: prepare, warm up, capture one forward pass, then replay it on
    // new inputs written into the captured input buffer.
    c.graph_prepare()?;
    model.forward(&c, &batch)?;
    let graph = c.capture(|| model.forward(&c, &batch))?;
    for seed in [7, 8] {
        let x = values((BATCH * IN, seed));
        c.write_from_slice(&batch.x, &x)?;
        c.replay(graph)?;
        model.check(&c, &batch, &x, &format!("graph replay, inputs #{seed}"))?;
    }
    c.graph_destroy(graph);
    println!("memory: {}", c.memory_report());
    Ok(())
}
