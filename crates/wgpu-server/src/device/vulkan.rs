//! A wgpu device's own Vulkan handles, for what wgpu-hal keeps private
//! (`robustness.rs`, `host_import.rs`, `shared_memory/`): the one place a
//! device is asked for them, and the one place a buffer made by hand is
//! handed to wgpu.

use std::ffi::CStr;

use ash::vk;
use wgpu::hal::api::Vulkan;

/// The Vulkan device, instance and physical device behind a wgpu device.
pub(crate) struct VkHandles {
    pub device: ash::Device,
    pub instance: ash::Instance,
    pub physical: vk::PhysicalDevice,
}

impl VkHandles {
    /// `device`'s handles where it is a Vulkan 1.1 device (for
    /// `vkGetPhysicalDevice*2` and external memory, core there) with
    /// `extension` enabled; `None` elsewhere. The handles are used only
    /// while `device` is alive.
    pub fn of(device: &wgpu::Device, extension: &CStr) -> Option<Self> {
        // SAFETY: the hal device is only read (its handles and enabled
        // extensions) while `device` is alive.
        let hal = unsafe { device.as_hal::<Vulkan>() }?;
        if !hal.enabled_device_extensions().contains(&extension) {
            return None;
        }
        let shared = hal.shared_instance();
        let (instance, physical) = (shared.raw_instance(), hal.raw_physical_device());
        // SAFETY: `physical` belongs to `instance`.
        let version = unsafe { instance.get_physical_device_properties(physical) }.api_version;
        // ash's entries for the Vulkan 1.1 queries would panic on an older
        // instance.
        if version.min(shared.instance_api_version()) < vk::API_VERSION_1_1 {
            return None;
        }
        Some(VkHandles {
            device: hal.raw_device().clone(),
            instance: instance.clone(),
            physical,
        })
    }

    /// `buffer` (bound to `memory`, of `len` bytes, made on this device
    /// with the Vulkan usages of `usage`) as a wgpu buffer of `wgpu`. Its
    /// drop callback, run once wgpu destroys it (after the last submission
    /// that uses it), destroys the buffer, frees the memory, then runs
    /// `then`.
    ///
    /// # Safety
    ///
    /// `wgpu` is the device these handles belong to; nobody else destroys
    /// `buffer` or frees `memory`; the buffer is never mapped through wgpu.
    pub unsafe fn adopt(
        &self,
        wgpu: &wgpu::Device,
        (buffer, memory): (vk::Buffer, vk::DeviceMemory),
        desc: &wgpu::BufferDescriptor<'_>,
        then: Box<dyn FnOnce() + Send + Sync + 'static>,
    ) -> wgpu::Buffer {
        let raw = self.device.clone();
        let free: wgpu::hal::DropCallback = Box::new(move || {
            // SAFETY: wgpu destroys the buffer once no submission uses it;
            // the memory goes before whatever `then` releases.
            unsafe {
                raw.destroy_buffer(buffer, None);
                raw.free_memory(memory, None);
            }
            then();
        });
        // SAFETY: the caller's promises: bound, owned here, never mapped.
        let hal = unsafe { wgpu::hal::vulkan::Buffer::from_raw_externally_owned(buffer, free) };
        // SAFETY: made on `wgpu`'s Vulkan device with the usages `desc`
        // names.
        unsafe { wgpu.create_buffer_from_hal::<Vulkan>(hal, desc) }
    }
}
