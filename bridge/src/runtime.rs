//! cubecl's `Runtime` over this server.

use cubecl_common::device::DeviceId;
use cubecl_ir::TargetProperties;
use cubecl_runtime::client::Client;
use cubecl_runtime::device::{WgpuBackend, WgpuDevice};
use cubecl_runtime::runtime::Runtime;
use cubecl_zspace::{Shape, Strides};

use crate::server::BridgeServer;

/// This server as a cubecl runtime: `BridgeRuntime::client(&Default::default())`
/// is a cubecl `Client` on the default adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct BridgeRuntime;

impl Runtime for BridgeRuntime {
    type Server = BridgeServer;
    type Device = WgpuDevice;

    fn client(device: &Self::Device) -> Client {
        // Which test this thread runs, for the skipped-test count.
        crate::probe::register_current_thread();
        Client::load::<BridgeServer>(cubecl_common::device::Device::to_id(device))
    }

    /// Contiguous tensors only: the server's copies are contiguous.
    fn can_read_tensor(shape: &Shape, strides: &Strides) -> bool {
        let mut expected = 1usize;
        for (dim, stride) in shape.iter().zip(strides.iter()).rev() {
            if *dim > 1 && *stride != expected {
                return false;
            }
            expected = expected.saturating_mul(*dim);
        }
        true
    }

    /// WGSL guarantees nothing beyond the defaults (cubecl-wgpu's answer
    /// for its WGSL compiler).
    fn target_properties() -> TargetProperties {
        TargetProperties::default()
    }

    fn enumerate_devices(type_id: u16) -> Vec<DeviceId> {
        Self::enumerate_devices_like(DeviceId::new(type_id, 0))
    }

    fn enumerate_all_devices() -> Vec<DeviceId> {
        crate::device::ids(WgpuBackend::Auto)
    }

    fn enumerate_devices_like(device_id: DeviceId) -> Vec<DeviceId> {
        crate::device::like(device_id)
    }

    fn is_available() -> bool {
        crate::device::has_gpu()
    }
}
