//! The devices this runtime names: cubecl's `WgpuDevice`, resolved against
//! the adapters this server can open (`wgpu_server::adapter`, ranked most
//! capable first, `WGPU_SERVER_ADAPTER` steering it as everywhere).
//!
//! A kind with an index counts adapters of that type only, in the server's
//! ranking: `DiscreteGpu(1)` is the second discrete adapter. `Cpu` is the
//! first CPU adapter, `DefaultDevice` the most capable adapter of any type.
//! A pinned backend (`WgpuDevice::on`) keeps the adapters of that graphics
//! API only. `Existing(id)` names a device registered from a wgpu setup the
//! caller made (`cubecl-wgpu`'s `init_device`), never an adapter.

use cubecl_common::device::{Device, DeviceId};
use cubecl_runtime::device::{WgpuBackend, WgpuDevice, WgpuDeviceKind};

/// What the runtime knows of one adapter when it picks one.
#[derive(Clone, Debug)]
pub struct AdapterFacts {
    /// The adapter's type.
    pub device_type: wgpu::DeviceType,
    /// Its graphics API.
    pub backend: wgpu::Backend,
}

impl AdapterFacts {
    fn of(adapter: &wgpu::Adapter) -> Self {
        let info = adapter.get_info();
        Self {
            device_type: info.device_type,
            backend: info.backend,
        }
    }
}

/// Why no adapter answers a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoAdapter {
    /// A registered device's id, which no adapter answers.
    Existing(u32),
    /// No adapter of the kind (and backend) asked for: `found` of them.
    Missing {
        /// The device asked for.
        device: WgpuDevice,
        /// How many adapters of its kind and backend there are.
        found: usize,
    },
}

impl std::fmt::Display for NoAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAdapter::Existing(id) => write!(
                f,
                "WgpuDevice Existing({id}) names a device registered from a wgpu setup \
                 (init_device), and none was registered under it"
            ),
            NoAdapter::Missing { device, found } => write!(
                f,
                "{device:?}: this machine has {found} adapter(s) of that kind and backend"
            ),
        }
    }
}

fn backend_of(backend: &WgpuBackend) -> Option<wgpu::Backend> {
    match backend {
        WgpuBackend::Auto => None,
        WgpuBackend::Vulkan => Some(wgpu::Backend::Vulkan),
        WgpuBackend::Metal => Some(wgpu::Backend::Metal),
        WgpuBackend::Dx12 => Some(wgpu::Backend::Dx12),
        WgpuBackend::Gl => Some(wgpu::Backend::Gl),
        WgpuBackend::WebGpu => Some(wgpu::Backend::BrowserWebGpu),
    }
}

/// The type an indexed kind counts, and its index.
fn typed(kind: &WgpuDeviceKind) -> Option<(wgpu::DeviceType, usize)> {
    match *kind {
        WgpuDeviceKind::DiscreteGpu(n) => Some((wgpu::DeviceType::DiscreteGpu, n)),
        WgpuDeviceKind::IntegratedGpu(n) => Some((wgpu::DeviceType::IntegratedGpu, n)),
        WgpuDeviceKind::VirtualGpu(n) => Some((wgpu::DeviceType::VirtualGpu, n)),
        WgpuDeviceKind::Other(n) => Some((wgpu::DeviceType::Other, n)),
        WgpuDeviceKind::Cpu => Some((wgpu::DeviceType::Cpu, 0)),
        WgpuDeviceKind::DefaultDevice | WgpuDeviceKind::Existing(_) => None,
    }
}

/// The rank (in `adapters`, the server's ranking) of the adapter `device`
/// names.
pub fn pick(device: &WgpuDevice, adapters: &[AdapterFacts]) -> Result<usize, NoAdapter> {
    if let WgpuDeviceKind::Existing(id) = device.kind {
        return Err(NoAdapter::Existing(id));
    }
    let backend = backend_of(&device.backend);
    let candidates = adapters
        .iter()
        .enumerate()
        .filter(|(_, a)| backend.is_none_or(|b| a.backend == b));
    let (mut found, mut chosen) = (0, None);
    for (rank, a) in candidates {
        let wanted = match typed(&device.kind) {
            Some((ty, index)) => (a.device_type == ty).then_some(index),
            None => Some(0),
        };
        if let Some(index) = wanted {
            if found == index {
                chosen = Some(rank);
            }
            found += 1;
        }
    }
    chosen.ok_or(NoAdapter::Missing {
        device: device.clone(),
        found,
    })
}

/// The facts of every adapter the server can open, ranked.
pub fn adapters() -> Vec<AdapterFacts> {
    wgpu_server::adapter::adapters()
        .iter()
        .map(AdapterFacts::of)
        .collect()
}

/// The id of every adapter the server can open on `backend` (`Auto`: any),
/// in rank order: each kind counts its own type from 0 (`Cpu`, which has
/// no index, is the first CPU adapter only), pinned to `backend`.
pub fn ids(backend: WgpuBackend) -> Vec<DeviceId> {
    ids_of(&adapters(), backend)
}

fn ids_of(facts: &[AdapterFacts], backend: WgpuBackend) -> Vec<DeviceId> {
    let api = backend_of(&backend);
    let mut seen: Vec<wgpu::DeviceType> = Vec::new();
    let mut ids = Vec::new();
    for a in facts.iter().filter(|a| api.is_none_or(|b| a.backend == b)) {
        let n = seen.iter().filter(|t| **t == a.device_type).count();
        seen.push(a.device_type);
        let kind = match a.device_type {
            wgpu::DeviceType::DiscreteGpu => WgpuDeviceKind::DiscreteGpu(n),
            wgpu::DeviceType::IntegratedGpu => WgpuDeviceKind::IntegratedGpu(n),
            wgpu::DeviceType::VirtualGpu => WgpuDeviceKind::VirtualGpu(n),
            wgpu::DeviceType::Other => WgpuDeviceKind::Other(n),
            wgpu::DeviceType::Cpu if n == 0 => WgpuDeviceKind::Cpu,
            wgpu::DeviceType::Cpu => continue,
        };
        ids.push(WgpuDevice::new(kind).on(backend).to_id());
    }
    ids
}

/// The devices of `device_id`'s kind on its backend; the "you choose"
/// device is itself wherever any adapter answers.
pub fn like(device_id: DeviceId) -> Vec<DeviceId> {
    let device = WgpuDevice::from_id(device_id);
    let all = ids(device.backend);
    match device.kind {
        WgpuDeviceKind::DefaultDevice if !all.is_empty() => vec![device_id],
        _ => all
            .into_iter()
            .filter(|id| id.type_id == device_id.type_id)
            .collect(),
    }
}

/// Whether any adapter is a GPU (discrete, integrated, virtual or other):
/// a machine with only a CPU adapter (lavapipe) has nothing worth choosing
/// this runtime for by default, though its devices still open.
pub fn has_gpu() -> bool {
    adapters()
        .iter()
        .any(|a| a.device_type != wgpu::DeviceType::Cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(list: &[(wgpu::DeviceType, wgpu::Backend)]) -> Vec<AdapterFacts> {
        list.iter()
            .map(|(device_type, backend)| AdapterFacts {
                device_type: *device_type,
                backend: *backend,
            })
            .collect()
    }

    #[test]
    fn each_kind_counts_its_own_type_in_rank_order() {
        use wgpu::{Backend::*, DeviceType::*};
        let a = facts(&[
            (DiscreteGpu, Vulkan),
            (DiscreteGpu, Vulkan),
            (Cpu, Vulkan),
            (DiscreteGpu, Gl),
        ]);
        let dev = |k| WgpuDevice::new(k);
        assert_eq!(pick(&dev(WgpuDeviceKind::DefaultDevice), &a), Ok(0));
        assert_eq!(pick(&dev(WgpuDeviceKind::DiscreteGpu(1)), &a), Ok(1));
        assert_eq!(pick(&dev(WgpuDeviceKind::DiscreteGpu(2)), &a), Ok(3));
        assert_eq!(pick(&dev(WgpuDeviceKind::Cpu), &a), Ok(2));
        let gl = dev(WgpuDeviceKind::DiscreteGpu(0)).on(WgpuBackend::Gl);
        assert_eq!(pick(&gl, &a), Ok(3));
        let missing = dev(WgpuDeviceKind::IntegratedGpu(0));
        assert_eq!(
            pick(&missing, &a),
            Err(NoAdapter::Missing {
                device: missing.clone(),
                found: 0
            })
        );
        assert_eq!(
            pick(&dev(WgpuDeviceKind::Existing(3)), &a),
            Err(NoAdapter::Existing(3))
        );
        // Every id picks the adapter it was listed for.
        for (rank, id) in ids_of(&a, WgpuBackend::Auto).iter().enumerate() {
            assert_eq!(pick(&WgpuDevice::from_id(*id), &a), Ok(rank));
        }
        let vulkan = ids_of(&a, WgpuBackend::Vulkan);
        assert_eq!(vulkan.len(), 3);
        assert_eq!(pick(&WgpuDevice::from_id(vulkan[2]), &a), Ok(2));
    }
}
