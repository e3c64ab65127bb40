//! [`WgpuRuntime`]: cubecl's `Runtime` for this server, under the name and
//! shape cubecl and burn look for.

use core::marker::PhantomData;

use cubecl_bridge::{BridgeRuntime, BridgeServer};
use cubecl_common::device::DeviceId;
use cubecl_ir::TargetProperties;
use cubecl_runtime::client::Client;
use cubecl_runtime::runtime::Runtime;
use cubecl_zspace::{Shape, Strides};

use crate::WgpuDevice;

/// How kernels become WGSL, as a type parameter of [`WgpuRuntime`]. This
/// crate has one way ([`AutoCompiler`]: cubecl-spirv, then naga, through the
/// bridge; docs/cubecl.md), so the parameter selects nothing; it is kept
/// because downstream code names `WgpuRuntime<AutoCompiler>`.
pub trait WgpuCompiler: Send + Sync + Default + Clone + core::fmt::Debug + 'static {}

/// The bridge's compiler (the only one).
#[derive(Clone, Copy, Debug, Default)]
pub struct AutoCompiler;

impl WgpuCompiler for AutoCompiler {}

/// This project's server as cubecl's wgpu runtime: `WgpuRuntime::client`
/// of a [`WgpuDevice`] is a cubecl `Client` on the adapter the device
/// names (`cubecl_bridge::device`), one server per device, shared by every
/// client of it.
pub struct WgpuRuntime<C = AutoCompiler>(PhantomData<fn() -> C>);

impl<C> Clone for WgpuRuntime<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for WgpuRuntime<C> {}

impl<C> Default for WgpuRuntime<C> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<C> core::fmt::Debug for WgpuRuntime<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("WgpuRuntime")
    }
}

impl<C: WgpuCompiler> Runtime for WgpuRuntime<C> {
    type Server = BridgeServer;
    type Device = WgpuDevice;

    fn client(device: &WgpuDevice) -> Client {
        BridgeRuntime::client(device)
    }

    fn can_read_tensor(shape: &Shape, strides: &Strides) -> bool {
        BridgeRuntime::can_read_tensor(shape, strides)
    }

    fn target_properties() -> TargetProperties {
        BridgeRuntime::target_properties()
    }

    fn enumerate_devices(type_id: u16) -> Vec<DeviceId> {
        BridgeRuntime::enumerate_devices(type_id)
    }

    fn enumerate_all_devices() -> Vec<DeviceId> {
        BridgeRuntime::enumerate_all_devices()
    }

    fn enumerate_devices_like(device_id: DeviceId) -> Vec<DeviceId> {
        BridgeRuntime::enumerate_devices_like(device_id)
    }

    fn is_available() -> bool {
        BridgeRuntime::is_available()
    }
}
