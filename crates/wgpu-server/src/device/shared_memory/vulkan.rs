//! The Vulkan half of [`super`]: exporting and importing opaque-fd memory
//! through the device's own handles (wgpu-hal enables
//! `VK_KHR_external_memory_fd` where the adapter has it, and keeps its
//! function table private).

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use ash::vk;
use compute_runtime::ServerError;

use super::{Exported, Inner, unsupported};
use crate::device::vulkan::VkHandles;

const HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
const USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw()
        | vk::BufferUsageFlags::STORAGE_BUFFER.as_raw(),
);

/// A device's handles and facts, read once per call.
struct Handles {
    vk: VkHandles,
    fd: ash::khr::external_memory_fd::Device,
    uuids: ([u8; 16], [u8; 16]),
}

impl Handles {
    fn of(device: &wgpu::Device) -> Result<Self, ServerError> {
        // The handles kept are used only while buffers of `device` exist.
        let vk_ = VkHandles::of(device, ash::khr::external_memory_fd::NAME)
            .ok_or_else(|| unsupported("not a Vulkan 1.1 device with VK_KHR_external_memory_fd"))?;
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: `physical` belongs to `instance`; the chained structure is
        // core in Vulkan 1.1 (checked by `of`).
        unsafe {
            vk_.instance
                .get_physical_device_properties2(vk_.physical, &mut props)
        };
        let fd = ash::khr::external_memory_fd::Device::new(&vk_.instance, &vk_.device);
        Ok(Handles {
            vk: vk_,
            fd,
            uuids: (id.device_uuid, id.driver_uuid),
        })
    }

    /// A buffer of `len` bytes made for opaque-fd memory, and what its
    /// memory must be.
    fn buffer(&self, len: u64) -> Result<(vk::Buffer, vk::MemoryRequirements), ServerError> {
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(len)
            .usage(USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: a valid create info on a live device.
        let buffer = unsafe { self.vk.device.create_buffer(&info, None) }
            .map_err(|e| fail(len, "vkCreateBuffer", e))?;
        // SAFETY: `buffer` was just created on this device.
        let needs = unsafe { self.vk.device.get_buffer_memory_requirements(buffer) };
        Ok((buffer, needs))
    }

    /// Whether the driver exports and imports such buffers, and whether it
    /// needs a dedicated allocation for them.
    fn external_features(&self) -> vk::ExternalMemoryFeatureFlags {
        let info = vk::PhysicalDeviceExternalBufferInfo::default()
            .usage(USAGE)
            .handle_type(HANDLE);
        let mut out = vk::ExternalBufferProperties::default();
        // SAFETY: core in Vulkan 1.1 (checked in `of`); writes `out` only.
        unsafe {
            self.vk
                .instance
                .get_physical_device_external_buffer_properties(self.vk.physical, &info, &mut out)
        };
        out.external_memory_properties.external_memory_features
    }

    /// Binds `memory` to `buffer` and wraps the buffer for wgpu; the
    /// buffer's drop callback frees both. On failure both are freed.
    fn wrap(
        &self,
        device: &wgpu::Device,
        buffer: vk::Buffer,
        memory: vk::DeviceMemory,
        len: u64,
    ) -> Result<wgpu::Buffer, ServerError> {
        // SAFETY: both made on this device; offset 0 meets any alignment.
        if let Err(e) = unsafe { self.vk.device.bind_buffer_memory(buffer, memory, 0) } {
            // SAFETY: unused.
            unsafe {
                self.vk.device.destroy_buffer(buffer, None);
                self.vk.device.free_memory(memory, None);
            }
            return Err(fail(len, "vkBindBufferMemory", e));
        }
        let desc = wgpu::BufferDescriptor {
            label: Some("shared device memory"),
            size: len,
            usage: wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        };
        // SAFETY: bound above, made on `device` with the usages `desc`
        // names, owned here, never mapped. Its bytes are undefined until
        // written, as a collective's exchange buffer's are before its
        // first copy.
        Ok(unsafe {
            self.vk
                .adopt(device, (buffer, memory), &desc, Box::new(|| {}))
        })
    }

    fn destroy(&self, buffer: vk::Buffer) {
        // SAFETY: unused and unbound, or bound to memory freed after.
        unsafe { self.vk.device.destroy_buffer(buffer, None) };
    }
}

/// A Vulkan call's failure as the error a caller can act on: memory
/// exhausted, the device lost, or else a fault the driver reported (an
/// import refused as `ERROR_INVALID_EXTERNAL_HANDLE`, say: not memory).
fn fail(len: u64, what: &str, e: vk::Result) -> ServerError {
    let reason = format!("shared device memory: {what}: {e}");
    match e {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY
        | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
        | vk::Result::ERROR_TOO_MANY_OBJECTS => ServerError::OutOfMemory { size: len, reason },
        vk::Result::ERROR_DEVICE_LOST => ServerError::DeviceLost { reason },
        _ => ServerError::DeviceFault { message: reason },
    }
}

pub(super) fn identity(device: &wgpu::Device) -> Result<([u8; 16], [u8; 16]), ServerError> {
    let h = Handles::of(device)?;
    let both =
        vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE;
    if !h.external_features().contains(both) {
        return Err(unsupported(
            "the driver neither exports nor imports such buffers by opaque fd",
        ));
    }
    Ok(h.uuids)
}

pub(super) fn export(
    device: &wgpu::Device,
    len: u64,
) -> Result<(wgpu::Buffer, Exported), ServerError> {
    let h = Handles::of(device)?;
    let features = h.external_features();
    if !features.contains(
        vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE,
    ) {
        return Err(unsupported(
            "the driver neither exports nor imports such buffers by opaque fd",
        ));
    }
    let (buffer, needs) = h.buffer(len.max(4))?;
    // SAFETY: `physical` belongs to `instance`.
    let types = unsafe {
        h.vk.instance
            .get_physical_device_memory_properties(h.vk.physical)
    };
    let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    let pick = |want: vk::MemoryPropertyFlags| {
        (0..types.memory_type_count).find(|&i| {
            needs.memory_type_bits & (1 << i) != 0
                && types.memory_types[i as usize].property_flags.contains(want)
        })
    };
    let Some(type_index) = pick(local).or_else(|| pick(vk::MemoryPropertyFlags::empty())) else {
        h.destroy(buffer);
        return Err(unsupported("no memory type fits an exportable buffer"));
    };
    let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
    let mut allocate = vk::MemoryAllocateInfo::default()
        .allocation_size(needs.size)
        .memory_type_index(type_index)
        .push_next(&mut export);
    if features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY) {
        allocate = allocate.push_next(&mut dedicated);
    }
    // SAFETY: a valid allocate info on a live device.
    let memory = match unsafe { h.vk.device.allocate_memory(&allocate, None) } {
        Ok(m) => m,
        Err(e) => {
            h.destroy(buffer);
            return Err(fail(len, "vkAllocateMemory", e));
        }
    };
    let get = vk::MemoryGetFdInfoKHR::default()
        .memory(memory)
        .handle_type(HANDLE);
    // SAFETY: `memory` was allocated exportable as an opaque fd.
    let fd = match unsafe { h.fd.get_memory_fd(&get) } {
        // SAFETY: the driver hands the new fd's ownership to the caller.
        Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
        Err(e) => {
            h.destroy(buffer);
            // SAFETY: unbound and unused.
            unsafe { h.vk.device.free_memory(memory, None) };
            return Err(fail(len, "vkGetMemoryFdKHR", e));
        }
    };
    let wgpu_buffer = h.wrap(device, buffer, memory, len.max(4))?;
    let inner = Inner {
        fd,
        imports: std::sync::Mutex::new(()),
        size: needs.size,
        type_index,
        uuids: h.uuids,
    };
    Ok((
        wgpu_buffer,
        Exported {
            inner: Arc::new(inner),
        },
    ))
}

pub(super) fn import(
    device: &wgpu::Device,
    from: &Inner,
    len: u64,
) -> Result<wgpu::Buffer, ServerError> {
    let h = Handles::of(device)?;
    if h.uuids != from.uuids {
        return Err(unsupported(
            "the device belongs to another GPU or driver than the exporter's",
        ));
    }
    let features = h.external_features();
    let (buffer, needs) = h.buffer(len.max(4))?;
    if needs.size > from.size {
        h.destroy(buffer);
        return Err(ServerError::InvalidArgument {
            reason: format!(
                "a buffer of {len} bytes does not fit the {} bytes of shared device memory",
                from.size
            ),
        });
    }
    if needs.memory_type_bits & (1 << from.type_index) == 0 {
        h.destroy(buffer);
        return Err(unsupported(
            "the device cannot bind the exporter's memory type",
        ));
    }
    // Until the import is done with the fd's shared offset (`Inner::imports`).
    let _serial = from
        .imports
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let fd = match from.fd.try_clone() {
        Ok(fd) => fd,
        Err(e) => {
            h.destroy(buffer);
            return Err(ServerError::OutOfMemory {
                size: len,
                reason: format!("shared device memory: duplicating its fd: {e}"),
            });
        }
    };
    let raw_fd = fd.as_raw_fd();
    let mut import = vk::ImportMemoryFdInfoKHR::default()
        .handle_type(HANDLE)
        .fd(raw_fd);
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
    let mut allocate = vk::MemoryAllocateInfo::default()
        .allocation_size(from.size)
        .memory_type_index(from.type_index)
        .push_next(&mut import);
    if features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY) {
        allocate = allocate.push_next(&mut dedicated);
    }
    // SAFETY: imports an opaque fd of memory with this size and type, made
    // by a device of the same GPU and driver (UUIDs checked above).
    match unsafe { h.vk.device.allocate_memory(&allocate, None) } {
        Ok(memory) => {
            // A successful import owns the fd now.
            let _ = fd.into_raw_fd();
            h.wrap(device, buffer, memory, len.max(4))
        }
        Err(e) => {
            h.destroy(buffer);
            // Vulkan leaves the fd the application's after a failed import,
            // but lavapipe closes it anyway: closing it here again could
            // close whatever took its number since. It is left open (one
            // fd per failed import) rather than risk that.
            let _ = fd.into_raw_fd();
            Err(fail(len, "vkAllocateMemory (import)", e))
        }
    }
}
