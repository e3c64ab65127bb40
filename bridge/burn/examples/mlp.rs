//! A two-layer MLP classifier trained with Adam on a fixed synthetic task.

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Distribution, Int, Tensor};

#[derive(Module, Debug)]
struct Mlp {
    hidden: Linear,
    out: Linear,
    act: Relu,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(32, 64).init(device),
            out: LinearConfig::new(64, 4).init(device),
            act: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.act.forward(self.hidden.forward(x)))
    }
}

fn main() {
    let device = Device::default().autodiff();
    device.seed(7);
    let x = Tensor::<2>::random([64, 32], Distribution::Normal(0.0, 1.0), &device);
    let labels = Tensor::<1, Int>::random([64], Distribution::Uniform(0.0, 4.0), &device);
    let mut model = Mlp::new(&device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    for step in 0..20 {
        let logits = model.forward(x.clone());
        let loss = loss_fn.forward(logits, labels.clone());
        let value = loss.clone().into_scalar::<f32>();
        println!("step {step}: loss {value:.6}");
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-2, model, grads);
    }
}
