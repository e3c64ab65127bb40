//! A two-layer MLP classifier trained with burn-optim's Adam on a fixed
//! synthetic task (inputs and labels from the host, so both builds train
//! on the same bytes).

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::host::Rng;

/// Inputs per sample.
pub const FEATURES: usize = 32;
/// Classes.
pub const CLASSES: usize = 4;

/// The classifier.
#[derive(Module, Debug)]
pub(crate) struct Mlp {
    hidden: Linear,
    out: Linear,
    act: Relu,
}

impl Mlp {
    pub(crate) fn new(device: &Device, hidden: usize) -> Self {
        Self {
            hidden: LinearConfig::new(FEATURES, hidden).init(device),
            out: LinearConfig::new(hidden, CLASSES).init(device),
            act: Relu::new(),
        }
    }

    pub(crate) fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.act.forward(self.hidden.forward(x)))
    }
}

/// The loss of each of `steps` Adam steps (learning rate 1e-2) on `batch`
/// samples, the model's initial weights from burn's seeded initializer.
pub fn losses(device: &Device, steps: usize, batch: usize, hidden: usize) -> Vec<f32> {
    let device = device.clone().autodiff();
    device.seed(7);
    let (x, labels) = task(&device, batch, 0, batch);
    let mut model = Mlp::new(&device, hidden);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut out = Vec::with_capacity(steps);
    for _ in 0..steps {
        let logits = model.forward(x.clone());
        let loss = loss_fn.forward(logits, labels.clone());
        out.push(loss.clone().into_scalar::<f32>());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-2, model, grads);
    }
    out
}

/// Samples `from..to` of the task's `batch` samples (inputs and labels
/// from the host, the same bytes whatever the device).
pub(crate) fn task(
    device: &Device,
    batch: usize,
    from: usize,
    to: usize,
) -> (Tensor<2>, Tensor<1, Int>) {
    let mut rng = Rng::new(11);
    let x = rng.normals(batch * FEATURES);
    let labels: Vec<i64> = (0..batch)
        .map(|_| rng.below(CLASSES as u64) as i64)
        .collect();
    let n = to - from;
    let x = Tensor::<2>::from_data(
        TensorData::new(x[from * FEATURES..to * FEATURES].to_vec(), [n, FEATURES]),
        device,
    );
    let labels =
        Tensor::<1, Int>::from_data(TensorData::new(labels[from..to].to_vec(), [n]), device);
    (x, labels)
}
