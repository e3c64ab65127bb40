//! The devices this runtime names: the adapters this server can open, in
//! the order it ranks them (`wgpu_server::adapter`).

use cubecl_common::device::{Device, DeviceId};

/// The type id of this runtime's devices: 0, the one cubecl's
/// `enumerate_all_devices` asks for. (cubecl keys a device's service by the
/// server type too, so cubecl-wgpu's devices of the same id are others.)
pub const TYPE_ID: u16 = 0;

/// A device of this runtime: the adapter at `index` in the server's ranking
/// (0, the default, is the most capable one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BridgeDevice {
    /// The adapter's rank.
    pub index: u16,
}

impl Device for BridgeDevice {
    fn from_id(device_id: DeviceId) -> Self {
        Self {
            index: device_id.index_id,
        }
    }

    fn to_id(&self) -> DeviceId {
        DeviceId::new(TYPE_ID, self.index)
    }
}

/// The ids of every adapter the server can open.
pub fn enumerate() -> Vec<DeviceId> {
    let count = wgpu_server::adapter::adapters().len();
    (0..count)
        .filter_map(|i| u16::try_from(i).ok())
        .map(|index| BridgeDevice { index }.to_id())
        .collect()
}
