//! An MLP forward pass on the server, through the client API: a batch of 64
//! inputs, 256 -> 512 (ReLU) -> 10 (softmax), from four IR kernels (matmul,
//! bias, ReLU, row softmax); checked against the host, profiled, run on two
//! streams at once, captured as a graph and replayed on new inputs.
//!
//! `cargo run -p wgpu-server --example mlp` (a few seconds on lavapipe).

use std::error::Error;

use wgpu_server::prelude::*;

const BATCH: u32 = 64;
const IN: u32 = 256;
const HIDDEN: u32 = 512;
const OUT: u32 = 10;

// ---- kernels ----------------------------------------------------------------

/// `c = a * b`, row-major `a: m x k`, `b: k x n`; one invocation per element
/// of `c`. Scalars `m, n, k`.
fn matmul() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("matmul", [16, 16, 1]);
    let (a, b, c) = (
        k.input(Scalar::F32),
        k.input(Scalar::F32),
        k.output(Scalar::F32),
    );
    let (m, n, kk) = (
        k.scalar_arg(Scalar::U32),
        k.scalar_arg(Scalar::U32),
        k.scalar_arg(Scalar::U32),
    );
    let gid = k.global_id();
    let (col, row) = (k.x(gid), k.y(gid));
    let (row_in, col_in) = (k.lt(row, m), k.lt(col, n));
    let inside = k.and(row_in, col_in);
    k.if_(inside, |k| {
        let zero = k.f32(0.0);
        let acc = k.var(zero);
        let (start, a_row) = (k.u32(0), k.mul(row, kk));
        k.for_range(start, kk, |k, p| {
            let (ai, bp) = (k.add(a_row, p), k.mul(p, n));
            let bi = k.add(bp, col);
            let (x, y, s) = (k.load(a, ai), k.load(b, bi), k.get(acc));
            let s = k.fma(x, y, s);
            k.set(acc, s);
        });
        let c_row = k.mul(row, n);
        let (ci, s) = (k.add(c_row, col), k.get(acc));
        k.store(c, ci, s);
    });
    k.build()
}

/// `x[i] += bias[i % n]` for `i < len`: a row-major matrix with rows of
/// `n`. Scalars `len, n`.
fn bias() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("bias", [256, 1, 1]);
    let (x, bias) = (k.output(Scalar::F32), k.input(Scalar::F32));
    let (len, n) = (k.scalar_arg(Scalar::U32), k.scalar_arg(Scalar::U32));
    let gid = k.global_id();
    let i = k.x(gid);
    let inside = k.lt(i, len);
    k.if_(inside, |k| {
        let j = k.rem(i, n);
        let (v, b) = (k.load(x, i), k.load(bias, j));
        let y = k.add(v, b);
        k.store(x, i, y);
    });
    k.build()
}

/// `x[i] = max(x[i], 0)` for `i < len`. Scalar `len`.
fn relu() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("relu", [256, 1, 1]);
    let x = k.output(Scalar::F32);
    let len = k.scalar_arg(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let inside = k.lt(i, len);
    k.if_(inside, |k| {
        let (v, zero) = (k.load(x, i), k.f32(0.0));
        let y = k.max(v, zero);
        k.store(x, i, y);
    });
    k.build()
}

/// `out[r, :] = softmax(x[r, :])`, one invocation per row. Scalars
/// `rows, n`.
fn softmax_rows() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("softmax_rows", [64, 1, 1]);
    let (x, out) = (k.input(Scalar::F32), k.output(Scalar::F32));
    let (rows, n) = (k.scalar_arg(Scalar::U32), k.scalar_arg(Scalar::U32));
    let gid = k.global_id();
    let r = k.x(gid);
    let inside = k.lt(r, rows);
    k.if_(inside, |k| {
        let (zero, first) = (k.u32(0), k.mul(r, n));
        let x0 = k.load(x, first);
        let (max, sum) = (k.var(x0), k.f32(0.0));
        let sum = k.var(sum);
        k.for_range(zero, n, |k, j| {
            let i = k.add(first, j);
            let (v, m) = (k.load(x, i), k.get(max));
            let m = k.max(m, v);
            k.set(max, m);
        });
        k.for_range(zero, n, |k, j| {
            let i = k.add(first, j);
            let (v, m) = (k.load(x, i), k.get(max));
            let d = k.sub(v, m);
            let (e, s) = (k.exp(d), k.get(sum));
            let e = k.add(s, e);
            k.set(sum, e);
        });
        k.for_range(zero, n, |k, j| {
            let i = k.add(first, j);
            let (v, m, s) = (k.load(x, i), k.get(max), k.get(sum));
            let d = k.sub(v, m);
            let e = k.exp(d);
            let p = k.div(e, s);
            k.store(out, i, p);
        });
    });
    k.build()
}

// ---- setup: the model and a batch's activations -------------------------------

struct Model {
    w1: Handle,
    b1: Handle,
    w2: Handle,
    b2: Handle,
    matmul: Kernel,
    bias: Kernel,
    relu: Kernel,
    softmax: Kernel,
}

struct Batch {
    x: Handle,
    h: Handle,
    logits: Handle,
    probs: Handle,
}

impl Model {
    fn new(c: &DefaultClient, w: &Weights) -> Result<Self, Box<dyn Error>> {
        Ok(Model {
            w1: c.create_from_slice(&w.w1)?.with_label("w1"),
            b1: c.create_from_slice(&w.b1)?.with_label("b1"),
            w2: c.create_from_slice(&w.w2)?.with_label("w2"),
            b2: c.create_from_slice(&w.b2)?.with_label("b2"),
            matmul: matmul()?,
            bias: bias()?,
            relu: relu()?,
            softmax: softmax_rows()?,
        })
    }

    fn batch(c: &DefaultClient, x: &[f32]) -> Result<Batch, ServerError> {
        Ok(Batch {
            x: c.create_from_slice(x)?.with_label("x"),
            h: c.empty(4 * u64::from(BATCH * HIDDEN))?.with_label("h"),
            logits: c.empty(4 * u64::from(BATCH * OUT))?.with_label("logits"),
            probs: c.empty(4 * u64::from(BATCH * OUT))?.with_label("probs"),
        })
    }

    // ---- launch glue -------------------------------------------------------------

    /// The forward pass: six launches on `c`'s stream (one per line: kernel,
    /// workgroups, buffers, `u32` scalars).
    #[rustfmt::skip]
    fn forward(&self, c: &DefaultClient, b: &Batch) -> Result<(), ServerError> {
        let run = |k: &Kernel, count, bufs: &[&Handle], scalars: &[u32]| {
            let scalars: Vec<Lit> = scalars.iter().map(|v| Lit::U32(*v)).collect();
            let args = KernelArguments::handles(bufs.iter().copied())
                .with_scalars(k.pack_scalars(&scalars)?);
            c.launch(k.clone(), count, args)
        };
        let tiles = |n: u32, m: u32| CubeCount::Static(n.div_ceil(16), m.div_ceil(16), 1);
        let line = |n: u32, group: u32| CubeCount::x(n.div_ceil(group));
        let (hidden, out) = (BATCH * HIDDEN, BATCH * OUT);
        run(&self.matmul,  tiles(HIDDEN, BATCH), &[&b.x, &self.w1, &b.h],      &[BATCH, HIDDEN, IN])?;
        run(&self.bias,    line(hidden, 256),    &[&b.h, &self.b1],            &[hidden, HIDDEN])?;
        run(&self.relu,    line(hidden, 256),    &[&b.h],                      &[hidden])?;
        run(&self.matmul,  tiles(OUT, BATCH),    &[&b.h, &self.w2, &b.logits], &[BATCH, OUT, HIDDEN])?;
        run(&self.bias,    line(out, 256),       &[&b.logits, &self.b2],       &[out, OUT])?;
        run(&self.softmax, line(BATCH, 64),      &[&b.logits, &b.probs],       &[BATCH, OUT])
    }
}

/// Reads a batch's probabilities and compares them with the host's.
fn check(
    c: &DefaultClient,
    b: &Batch,
    w: &Weights,
    x: &[f32],
    what: &str,
) -> Result<(), Box<dyn Error>> {
    let got = c.read_vec::<f32>(&b.probs)?;
    let want = host_forward(w, x);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    println!(
        "{what}: {} probabilities, max |device - host| = {worst:.2e}",
        got.len()
    );
    if worst > 1e-4 {
        return Err(format!("{what}: the device disagrees with the host by {worst}").into());
    }
    Ok(())
}

// ---- host reference ---------------------------------------------------------------

struct Weights {
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

/// `len` values in [-scale, scale), deterministic per `seed`.
fn values(len: u32, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..len).map(|_| scale * (2.0 * next() - 1.0)).collect()
}

fn host_matmul(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0.0; m * n];
    for r in 0..m {
        for j in 0..n {
            c[r * n + j] = (0..k).map(|p| a[r * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn host_forward(w: &Weights, x: &[f32]) -> Vec<f32> {
    let (b, i, h, o) = (BATCH as usize, IN as usize, HIDDEN as usize, OUT as usize);
    let mut hidden = host_matmul(x, &w.w1, b, h, i);
    for (k, v) in hidden.iter_mut().enumerate() {
        *v = (*v + w.b1[k % h]).max(0.0);
    }
    let mut logits = host_matmul(&hidden, &w.w2, b, o, h);
    for row in logits.chunks_mut(o) {
        for (k, v) in row.iter_mut().enumerate() {
            *v += w.b2[k];
        }
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
        row.iter_mut().for_each(|v| *v = (*v - max).exp() / sum);
    }
    logits
}

// ---- the program --------------------------------------------------------------------

fn main() -> Result<(), Box<dyn Error>> {
    // Setup: a device, the weights on it, a batch of inputs.
    let c = WgpuServerOptions::new().client()?;
    let w = Weights {
        w1: values(IN * HIDDEN, 1, 0.0625),
        b1: values(HIDDEN, 2, 0.1),
        w2: values(HIDDEN * OUT, 3, 0.0625),
        b2: values(OUT, 4, 0.1),
    };
    let model = Model::new(&c, &w)?;
    let x = values(BATCH * IN, 5, 1.0);
    let batch = Model::batch(&c, &x)?;

    // Profiling: one forward pass inside a profile window (the first run
    // also compiles the kernels), then the same again, warm.
    for run in ["first run", "warm"] {
        let (done, took) = c.profile(|| model.forward(&c, &batch))?;
        done?;
        println!("forward, {run}: {took:?} (profile window)");
    }
    check(&c, &batch, &w, &x, "forward")?;

    // Streams: a second batch on stream 1 while stream 0 runs the first;
    // both read the same weights.
    let side = c.with_stream(StreamId(1));
    let x2 = values(BATCH * IN, 6, 1.0);
    let batch2 = Model::batch(&side, &x2)?;
    model.forward(&side, &batch2)?;
    model.forward(&c, &batch)?;
    check(&side, &batch2, &w, &x2, "stream 1")?;
    check(&c, &batch, &w, &x, "stream 0")?;

    // Graph: prepare, warm up, capture one forward pass, then replay it on
    // new inputs written into the captured input buffer.
    c.graph_prepare()?;
    model.forward(&c, &batch)?;
    let graph = c.capture(|| model.forward(&c, &batch))?;
    for seed in [7, 8] {
        let x = values(BATCH * IN, seed, 1.0);
        c.write_from_slice(&batch.x, &x)?;
        c.replay(graph)?;
        check(&c, &batch, &w, &x, &format!("graph replay, inputs #{seed}"))?;
    }
    c.graph_destroy(graph);
    println!("memory: {}", c.memory_report());
    Ok(())
}
