//! Whether the driver bounds buffer accesses itself.
//!
//! wgpu's Vulkan backend leaves a checked module's buffer accesses
//! unclamped where the device has `robustBufferAccess2` (naga's `buffer`
//! policy is then `Unchecked`: the driver returns zero for an
//! out-of-bounds load and drops an out-of-bounds store). The index proof
//! (`launch/indices.rs`) may drop wgpu's clamps only there, since dropping
//! them drops the buffer clamps of other backends too. wgpu-hal keeps the
//! fact private; this asks Vulkan the same question it asks.

/// Whether `device` is a Vulkan device whose driver bounds every buffer
/// access (`VK_EXT_robustness2`'s `robustBufferAccess2`, which wgpu-hal
/// enables whenever the physical device has it). `false` on other
/// backends.
pub(crate) fn driver_bounds_buffers(device: &wgpu::Device) -> bool {
    #[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
    {
        vulkan(device)
    }
    #[cfg(not(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios"))))))]
    {
        let _ = device;
        false
    }
}

#[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
fn vulkan(device: &wgpu::Device) -> bool {
    use ash::vk;
    // SAFETY: the hal device is only read (its instance, physical device and
    // enabled extensions), while `device` is alive.
    let Some(hal) = (unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return false;
    };
    // wgpu-hal enables the extension wherever it is supported; without it
    // the features structure may not be chained.
    if !hal
        .enabled_device_extensions()
        .contains(&ash::ext::robustness2::NAME)
    {
        return false;
    }
    let shared = hal.shared_instance();
    let (instance, physical) = (shared.raw_instance(), hal.raw_physical_device());
    // SAFETY: `physical` belongs to `instance`; the query writes only into
    // the structure it returns.
    let version = unsafe { instance.get_physical_device_properties(physical) }.api_version;
    // `vkGetPhysicalDeviceFeatures2` is core from Vulkan 1.1 on (ash's
    // entry for it would panic on an older instance).
    if version.min(shared.instance_api_version()) < vk::API_VERSION_1_1 {
        return false;
    }
    let mut robustness2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut robustness2);
    // SAFETY: as above; the extension of the chained structure is supported.
    unsafe { instance.get_physical_device_features2(physical, &mut features) };
    robustness2.robust_buffer_access2 == vk::TRUE
}
