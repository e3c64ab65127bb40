//! Data-parallel training of the MLP on several devices: each rank takes
//! an equal shard of the batch, and the gradients are averaged every step
//! by burn's `Tensor::all_reduce` (natively on this server's collectives:
//! its runtime has a device transport; emulated with transfers upstream).
//! Every rank then applies the same Adam update, so the ranks' weights stay
//! bit-identical, and equal (within rounding) a one-device run on the
//! whole batch.

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::distributed::ReduceOperation;
use burn::tensor::wgpu::{WgpuSetup, wgpu};
use burn::tensor::{Device, Tensor};

use super::mlp::{Mlp, task};

/// `ranks` devices of the first adapter, each opened as a wgpu device of
/// its own and registered as a setup (`Device::wgpu_options().setup(..)`).
pub fn devices(ranks: usize) -> Vec<Device> {
    (0..ranks).map(|_| open()).collect()
}

fn open() -> Device {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter =
        futures::executor::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }));
    let Ok(adapter) = adapter else {
        panic!("no wgpu adapter for the data-parallel ranks")
    };
    let wanted = wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP
        | wgpu::Features::SHADER_INT64
        | wgpu::Features::SHADER_FLOAT32_ATOMIC;
    let (device, queue) =
        match futures::executor::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("data-parallel rank"),
            required_features: adapter.features() & wanted,
            required_limits: adapter.limits(),
            ..Default::default()
        })) {
            Ok(pair) => pair,
            Err(e) => panic!("request_device: {e}"),
        };
    let backend = adapter.get_info().backend;
    let setup = WgpuSetup {
        instance,
        adapter,
        device,
        queue,
        backend,
    };
    match Device::wgpu_options().setup(setup).init() {
        Ok(device) => device,
        Err(e) => panic!("registering a rank's setup: {e}"),
    }
}

/// Averages every float parameter's gradient over the ranks, in place.
struct Average<'a> {
    grads: &'a mut [GradientsParams],
}

impl ModuleVisitor for Average<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let parts: Vec<Tensor<D>> = self
            .grads
            .iter_mut()
            .filter_map(|g| g.remove::<D>(param.id))
            .collect();
        if parts.len() != self.grads.len() {
            return;
        }
        let averaged = Tensor::all_reduce(parts, ReduceOperation::Mean);
        for (g, t) in self.grads.iter_mut().zip(averaged) {
            g.register(param.id, t);
        }
    }
}

/// Every float parameter's values, flattened in visiting order.
struct Flatten(Vec<f32>);

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.extend(param.val().into_data().iter::<f32>());
    }
}

/// The weights of every rank after `steps` steps on a batch of `batch`
/// (split evenly over `devices`), flattened.
pub fn train(devices: &[Device], steps: usize, batch: usize, hidden: usize) -> Vec<Vec<f32>> {
    let ranks = devices.len().max(1);
    let shard = batch / ranks;
    let devices: Vec<Device> = devices.iter().map(|d| d.clone().autodiff()).collect();
    devices[0].seed(7);
    let first = Mlp::new(&devices[0], hidden);
    let mut models: Vec<Mlp> = devices.iter().map(|d| first.clone().fork(d)).collect();
    let mut optims: Vec<_> = devices.iter().map(|_| AdamConfig::new().init()).collect();
    let shards: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| task(d, batch, r * shard, (r + 1) * shard))
        .collect();
    for _ in 0..steps {
        let mut grads: Vec<GradientsParams> = models
            .iter()
            .zip(&shards)
            .zip(&devices)
            .map(|((m, (x, y)), d)| {
                let loss = CrossEntropyLossConfig::new()
                    .init(d)
                    .forward(m.forward(x.clone()), y.clone());
                GradientsParams::from_grads(loss.backward(), m)
            })
            .collect();
        models[0].visit(&mut Average { grads: &mut grads });
        models = models
            .into_iter()
            .zip(grads)
            .zip(optims.iter_mut())
            .map(|((m, g), o)| o.step(1e-2, m, g))
            .collect();
    }
    models
        .iter()
        .map(|m| {
            let mut f = Flatten(Vec::new());
            m.visit(&mut f);
            f.0
        })
        .collect()
}
