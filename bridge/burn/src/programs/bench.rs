//! The burn timings (docs/burn.md, "Figures"): wall-clock per step of the
//! MLP (batch 64), the encoder's forward pass and training step (the
//! issue's full size), and a 64 MiB `Tensor::all_reduce` over two devices
//! of one adapter. Each figure is the median of timed repetitions after
//! warm-up repetitions (autotune and pipeline compilation happen there),
//! each repetition ending in `Device::sync`, so the device's work is in it;
//! the `*_enqueue_ms` beside each program's figure is the same repetitions'
//! median up to that sync (the calling thread's share).
//! Both builds run this same code; only the cubecl-wgpu under it differs.

use std::time::Instant;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::transformer::{TransformerEncoder, TransformerEncoderInput};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::distributed::ReduceOperation;
use burn::tensor::{Device, Tensor};

use super::mlp::{Mlp, task};
use super::transformer::{Sizes, encoder, input};

/// One named figure.
pub struct Figure {
    /// `burn.*` name, as in docs/bench.
    pub name: String,
    /// The value, in the unit the name ends with.
    pub value: f64,
}

/// Every figure (the encoder at `sizes`: the figures at
/// [`super::transformer::FULL`]), `warm` and `timed` repetitions each (the all-reduce's
/// `ranks` devices opened by the caller: they are what differs per build).
pub fn run(
    device: &Device,
    ranks: &[Device],
    sizes: Sizes,
    warm: usize,
    timed: usize,
) -> Vec<Figure> {
    let mlp = mlp_step_ms(device, warm, timed);
    let forward = transformer_forward_ms(device, sizes, warm, timed);
    let step = transformer_step_ms(device, sizes, warm, timed);
    let mut out = Vec::new();
    for (name, t) in [
        ("burn.mlp_step", mlp),
        ("burn.transformer_forward", forward),
        ("burn.transformer_step", step),
    ] {
        out.push(Figure {
            name: format!("{name}_ms"),
            value: t.total,
        });
        out.push(Figure {
            name: format!("{name}_enqueue_ms"),
            value: t.enqueue,
        });
    }
    if ranks.len() >= 2 {
        out.push(Figure {
            name: "burn.all_reduce_64mib_busbw_gbps".into(),
            value: all_reduce_busbw_gbps(ranks, 64 << 20, warm, timed),
        });
    }
    out
}

/// A repetition's median wall time, and the median of its part before the
/// closing sync: the caller's thread queueing the work (burn, cubecl and
/// the runtime under them). Where the two are close the step is bound by
/// the CPU, not the device.
struct Split {
    total: f64,
    enqueue: f64,
}

/// [`Split`] over `timed` runs of `f` then a sync of `device`, after
/// `warm` untimed ones, in ms.
fn split_ms(device: &Device, warm: usize, timed: usize, mut f: impl FnMut()) -> Split {
    let mut enqueue = Vec::new();
    let total = median_ms(warm, timed, || {
        let start = Instant::now();
        f();
        enqueue.push(start.elapsed().as_secs_f64() * 1e3);
        sync(device);
    });
    let enqueue = enqueue.split_off(warm.min(enqueue.len()));
    Split {
        total,
        enqueue: median(enqueue),
    }
}

fn median(mut times: Vec<f64>) -> f64 {
    if times.is_empty() {
        return f64::NAN;
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The median of `timed` runs of `f` after `warm` untimed ones, in ms.
fn median_ms(warm: usize, timed: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warm {
        f();
    }
    median(
        (0..timed.max(1))
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

fn sync(device: &Device) {
    if let Err(e) = device.sync() {
        panic!("sync: {e}");
    }
}

/// One Adam step of the MLP (hidden 128) on a batch of 64: forward, loss,
/// backward, update.
fn mlp_step_ms(device: &Device, warm: usize, timed: usize) -> Split {
    let device = device.clone().autodiff();
    device.seed(7);
    let (x, labels) = task(&device, 64, 0, 64);
    let mut model = Some(Mlp::new(&device, 128));
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    split_ms(&device, warm, timed, || {
        let Some(m) = model.take() else { return };
        let loss = loss_fn.forward(m.forward(x.clone()), labels.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        model = Some(optim.step(1e-2, m, grads));
    })
}

fn transformer_forward_ms(device: &Device, s: Sizes, warm: usize, timed: usize) -> Split {
    let model = encoder(device, s);
    let x = input(device, s, 21);
    // Each output kept alive past its sync, so no build may skip its work.
    let mut last = None;
    let split = split_ms(device, warm, timed, || {
        last = Some(model.forward(TransformerEncoderInput::new(x.clone())));
    });
    drop(last);
    split
}

/// Forward, mean squared error, backward and one Adam update.
fn transformer_step_ms(device: &Device, s: Sizes, warm: usize, timed: usize) -> Split {
    let device = device.clone().autodiff();
    let mut model: Option<TransformerEncoder> = Some(encoder(&device, s));
    let x = input(&device, s, 21);
    let target = input(&device, s, 22);
    let mut optim = AdamConfig::new().init();
    split_ms(&device, warm, timed, || {
        let Some(m) = model.take() else { return };
        let out = m.forward(TransformerEncoderInput::new(x.clone()));
        let loss = (out - target.clone()).powi_scalar(2).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        model = Some(optim.step(1e-3, m, grads));
    })
}

/// The training step's phases, each ended by a sync (what the step's
/// figure is made of, to find where two builds differ): forward with
/// autodiff and the loss, backward, the Adam update; median ms each.
pub fn transformer_phases(device: &Device, s: Sizes, warm: usize, timed: usize) -> [f64; 3] {
    let device = device.clone().autodiff();
    let mut model = encoder(&device, s);
    let x = input(&device, s, 21);
    let target = input(&device, s, 22);
    let mut optim = AdamConfig::new().init();
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..warm + timed.max(1) {
        let t = Instant::now();
        let out = model.forward(TransformerEncoderInput::new(x.clone()));
        let loss = (out - target.clone()).powi_scalar(2).mean();
        sync(&device);
        let forward = t.elapsed();
        let t = Instant::now();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        sync(&device);
        let backward = t.elapsed();
        let t = Instant::now();
        model = optim.step(1e-3, model, grads);
        sync(&device);
        let update = t.elapsed();
        if i >= warm {
            for (v, d) in times.iter_mut().zip([forward, backward, update]) {
                v.push(d.as_secs_f64() * 1e3);
            }
        }
    }
    times.map(median)
}

/// Bus bandwidth of a sum over `ranks` of `bytes` of f32 each (the NCCL
/// convention: 2 (n - 1) / n of the bytes per rank, over the time).
fn all_reduce_busbw_gbps(ranks: &[Device], bytes: usize, warm: usize, timed: usize) -> f64 {
    let n = bytes / 4;
    let parts: Vec<Tensor<1>> = ranks
        .iter()
        .enumerate()
        .map(|(r, d)| Tensor::<1>::ones([n], d).mul_scalar(r as f32 + 1.0))
        .collect();
    for d in ranks {
        sync(d);
    }
    let ms = median_ms(warm, timed, || {
        let out = Tensor::all_reduce(parts.clone(), ReduceOperation::Sum);
        for d in ranks {
            sync(d);
        }
        drop(out);
    });
    // The figure counts only if the sum is right (1 + 2 + .. + ranks).
    let want = (ranks.len() * (ranks.len() + 1) / 2) as f32;
    for out in Tensor::all_reduce(parts, ReduceOperation::Sum) {
        let got: Vec<f32> = out.narrow(0, n - 4, 4).into_data().iter::<f32>().collect();
        if got.iter().any(|v| *v != want) {
            panic!("all_reduce: {got:?}, want {want}");
        }
    }
    let r = ranks.len() as f64;
    2.0 * (r - 1.0) / r * bytes as f64 / (ms * 1e-3) / 1e9
}
