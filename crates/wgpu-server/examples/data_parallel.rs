//! Data-parallel training on 3 ranks, checked against the host.
//!
//! The model is linear, `y = W x` with `W` 16x8 (f32), fitted to random
//! targets by gradient descent on `L = 1/(2B) sum_b |W x_b - t_b|^2`. The
//! 24 samples of the batch are split over 3 ranks (three devices of one
//! adapter, one thread driving them in turn). Each of the 20 steps, on
//! every rank, on the device:
//!
//! 1. `grad`: `g = (1/8) sum_b (W x_b - t_b) x_b^T`, the mean over the
//!    rank's 8 samples (one invocation per weight: 128, two full
//!    workgroups, so neither kernel needs a bounds guard);
//! 2. `comm.all_reduce(g, Mean)`: the mean of the ranks' gradients, which
//!    is the mean over the whole batch (the shards are the same size);
//! 3. `update`: `W -= lr g`.
//!
//! Nothing is waited on between steps: the all-reduce is posted with
//! `ComputeWait::Wait`, so the update queued after it on each rank's stream
//! runs once the mean is in. After the last step every rank's `W` must be
//! bit-identical (they all apply the same mean), and close to the same
//! training run on the host in f64: within `1e-5 * max|W|`, since the
//! device adds in f32 (and may fuse a multiply and an add) where the host
//! adds in f64.
//!
//! Run with `cargo run -p wgpu-server --example data_parallel`.

use std::error::Error;

use wgpu_server::prelude::*;

const IN: u32 = 8;
const OUT: u32 = 16;
const RANKS: u32 = 3;
const SHARD: u32 = 8;
const STEPS: usize = 20;
const LR: f32 = 0.5;

/// `row * width + col`.
fn at(k: &KernelBuilder, row: Val, width: u32, col: Val) -> Val {
    k.add(k.mul(row, width), col)
}

/// `g[o*IN + j] = sum_b (sum_m W[o*IN + m] x[b*IN + m] - t[b*OUT + o]) x[b*IN + j] / SHARD`.
fn grad() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("grad", [64, 1, 1]);
    let [w, x, t] = [0; 3].map(|_| k.input(Scalar::F32));
    let (g, i) = (k.output(Scalar::F32), k.x(k.global_id()));
    let (o, j, acc) = (k.div(i, IN), k.rem(i, IN), k.var(k.f32(0.0)));
    k.for_range(0u32, SHARD, |k, b| {
        let y = k.var(k.load(t, at(k, b, OUT, o)));
        k.for_range(0u32, IN, |k, m| {
            let p = k.mul(k.load(w, at(k, o, IN, m)), k.load(x, at(k, b, IN, m)));
            k.set(y, k.sub(k.get(y), p));
        });
        let d = k.mul(k.get(y), k.load(x, at(k, b, IN, j)));
        k.set(acc, k.sub(k.get(acc), d));
    });
    k.store(g, i, k.div(k.get(acc), SHARD as f32));
    k.build()
}

/// `w[i] -= LR * g[i]`.
fn update() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("update", [64, 1, 1]);
    let (g, w) = (k.input(Scalar::F32), k.output(Scalar::F32));
    let i = k.x(k.global_id());
    k.store(w, i, k.sub(k.load(w, i), k.mul(k.load(g, i), LR)));
    k.build()
}

/// The same training on the host, in f64, over the whole batch.
fn host(w0: &[f32], x: &[f32], t: &[f32]) -> Vec<f64> {
    let (n, i, o) = ((RANKS * SHARD) as usize, IN as usize, OUT as usize);
    let f = |v: &[f32]| v.iter().map(|a| f64::from(*a)).collect::<Vec<f64>>();
    let (mut w, x, t) = (f(w0), f(x), f(t));
    for _ in 0..STEPS {
        let mut g = vec![0.0; o * i];
        for (b, r) in (0..n).flat_map(|b| (0..o).map(move |r| (b, r))) {
            let e = (0..i).map(|m| w[r * i + m] * x[b * i + m]).sum::<f64>() - t[b * o + r];
            (0..i).for_each(|m| g[r * i + m] += e * x[b * i + m] / n as f64);
        }
        w.iter_mut()
            .zip(&g)
            .for_each(|(w, g)| *w -= f64::from(LR) * g);
    }
    w
}

/// The fold of the largest difference between the device and the host.
fn far(m: f64, (a, b): (&f32, &f64)) -> f64 {
    m.max((f64::from(*a) - b).abs())
}

fn main() -> Result<(), Box<dyn Error>> {
    let data = |len: u32, k: f32| (0..len).map(|i| (i as f32 * k).sin()).collect::<Vec<f32>>();
    let w0 = data(OUT * IN, 0.7);
    let x = data(RANKS * SHARD * IN, 1.3);
    let t = data(RANKS * SHARD * OUT, 2.9);
    let (grad, update) = (grad()?, update()?);
    let devices: Vec<DeviceId> = (0..u64::from(RANKS)).map(|r| DeviceId(60 + r)).collect();
    let mut ranks = Vec::new();
    for (rank, device) in devices.iter().enumerate() {
        let c = WgpuServerOptions::new()
            .device_id(*device)
            .adapter(0)
            .client()?;
        let shard = |v: &[f32], n: u32| c.create_from_slice(&v[rank * n as usize..][..n as usize]);
        let (xs, ts) = (shard(&x, SHARD * IN)?, shard(&t, SHARD * OUT)?);
        let w = c.create_from_slice(&w0)?;
        let g = c.empty_of::<f32>((OUT * IN).into())?;
        ranks.push((c.communicator(&devices)?, c, w, xs, ts, g));
    }
    for _ in 0..STEPS {
        for (comm, c, w, x, t, g) in &ranks {
            grad.launch(c, OUT * IN, [w, x, t, g], &[])?;
            comm.all_reduce(g, ReduceOp::Mean)?;
            update.launch(c, OUT * IN, [g, w], &[])?;
        }
    }
    let mut got = Vec::new();
    for (_, c, w, ..) in &ranks {
        got.push(c.read_vec::<f32>(w)?);
    }
    let bits = |w: &[f32]| w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    if got.iter().any(|w| bits(w) != bits(&got[0])) {
        return Err("the ranks' weights differ".into());
    }
    let want = host(&w0, &x, &t);
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = got[0].iter().zip(&want).fold(0.0, far);
    println!("{STEPS} steps, {RANKS} ranks: bit-identical, {diff:.1e} from the host");
    if diff > 1e-5 * scale {
        return Err(format!("{diff:e} from the host, over 1e-5 * max|W| = {scale}").into());
    }
    Ok(())
}
