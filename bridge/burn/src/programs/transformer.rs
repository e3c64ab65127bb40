//! burn-nn's `TransformerEncoder`: a forward pass, and one training step
//! (mean squared error to a fixed target, burn-optim's Adam). Dropout is 0
//! so both builds compute the same function (dropout draws from the
//! device RNG); inputs and targets come from the host.

use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Tensor, TensorData};

use crate::host::Rng;

/// An encoder's shape and its input's.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Encoder layers.
    pub layers: usize,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Sequence length.
    pub seq: usize,
    /// Batch.
    pub batch: usize,
}

/// The size: 4 layers, d_model 256, 4 heads, seq 128, batch 8.
pub const FULL: Sizes = Sizes {
    layers: 4,
    d_model: 256,
    heads: 4,
    seq: 128,
    batch: 8,
};

/// What CI runs on a CPU adapter.
pub const SMALL: Sizes = Sizes {
    layers: 2,
    d_model: 64,
    heads: 4,
    seq: 16,
    batch: 2,
};

/// The encoder, on `device` (burn's seeded initializer).
pub fn encoder(device: &Device, s: Sizes) -> TransformerEncoder {
    device.seed(3);
    TransformerEncoderConfig::new(s.d_model, 4 * s.d_model, s.heads, s.layers)
        .with_dropout(0.0)
        .init(device)
}

/// A host-made `[batch, seq, d_model]` tensor from seed `seed`.
pub fn input(device: &Device, s: Sizes, seed: u64) -> Tensor<3> {
    let n = s.batch * s.seq * s.d_model;
    Tensor::from_data(
        TensorData::new(Rng::new(seed).normals(n), [s.batch, s.seq, s.d_model]),
        device,
    )
}

/// The encoder's output on the host-made input, flattened.
pub fn forward(device: &Device, s: Sizes) -> Vec<f32> {
    let model = encoder(device, s);
    let out = model.forward(TransformerEncoderInput::new(input(device, s, 21)));
    out.into_data().iter::<f32>().collect()
}

/// The loss before and after one Adam step (learning rate 1e-3).
pub fn step(device: &Device, s: Sizes) -> [f32; 2] {
    let device = device.clone().autodiff();
    let model = encoder(&device, s);
    let x = input(&device, s, 21);
    let target = input(&device, s, 22);
    let loss = |m: &TransformerEncoder| {
        let out = m.forward(TransformerEncoderInput::new(x.clone()));
        (out - target.clone()).powi_scalar(2).mean()
    };
    let before = loss(&model);
    let first = before.clone().into_scalar::<f32>();
    let grads = GradientsParams::from_grads(before.backward(), &model);
    let mut optim = AdamConfig::new().init();
    let model = optim.step(1e-3, model, grads);
    [first, loss(&model).into_scalar::<f32>()]
}
