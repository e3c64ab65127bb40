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
    // wgpu-hal enables the extension wherever it is supported; without it
    // the features structure may not be chained.
    let Some(vk_) = super::vulkan::VkHandles::of(device, ash::ext::robustness2::NAME) else {
        return false;
    };
    let mut robustness2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut robustness2);
    // SAFETY: `physical` belongs to `instance` (Vulkan 1.1, checked by
    // `of`); the chained structure's extension is enabled; the query
    // writes only into the structure it returns.
    unsafe {
        vk_.instance
            .get_physical_device_features2(vk_.physical, &mut features)
    };
    robustness2.robust_buffer_access2 == vk::TRUE
}
