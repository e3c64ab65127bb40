//! Host memory the device copies into and out of directly
//! (`VK_EXT_external_memory_host`).
//!
//! A device the server opens asks for the extension where the adapter has
//! it ([`request_importing`]). [`HostImport::of`] then says whether a
//! device can import host memory, and [`HostImport::import`] turns a
//! page-aligned host allocation into a wgpu buffer the device copies into
//! and out of. Which allocation, and who may touch it when, is
//! `memory/pinned.rs`'s.
//!
//! The allocation outlives the Vulkan memory that imports it: wgpu-hal runs
//! the buffer's drop callback once wgpu destroys the buffer (after the last
//! submission that uses it), and the callback frees the Vulkan buffer and
//! memory first, then hands the allocation back to its owner.
//!
//! Ordering with the host is what wgpu's own mapped reads rely on: a read's
//! bytes are read after the submission that copied them has completed (its
//! fence), from host-coherent memory (the only memory types used here); a
//! write's bytes are written before the submission that copies them
//! (Vulkan's host write ordering guarantee).

use compute_runtime::ServerError;

/// Runs once the device no longer reaches an allocation.
pub(crate) type Release = Box<dyn FnOnce() + Send + Sync + 'static>;

/// What a device needs to import host memory.
pub(crate) struct HostImport {
    #[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
    vulkan: vulkan::Importer,
    alignment: u64,
}

impl std::fmt::Debug for HostImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostImport")
            .field("alignment", &self.alignment)
            .finish_non_exhaustive()
    }
}

/// The smallest alignment used for imported memory, whatever the device
/// allows: the host's page, so an allocation never shares a page with
/// unrelated data.
const PAGE: u64 = 4096;

impl HostImport {
    /// How `device` imports host memory; `None` where it cannot (not
    /// Vulkan, or opened without the extension).
    pub fn of(device: &wgpu::Device) -> Option<Self> {
        #[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
        {
            let (vulkan, alignment) = vulkan::Importer::of(device)?;
            Some(HostImport {
                vulkan,
                alignment: alignment.max(PAGE),
            })
        }
        #[cfg(not(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios"))))))]
        {
            let _ = device;
            None
        }
    }

    /// The alignment of an imported allocation's address and size.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// A buffer of `device` (the one this import was asked of) over the
    /// `len` bytes at `ptr`, usable as a copy source and destination.
    /// `release` runs exactly once, after the device no longer reaches the
    /// bytes: when wgpu destroys the buffer, or at once when the import
    /// fails.
    ///
    /// # Safety
    ///
    /// `ptr` is aligned to [`alignment`](Self::alignment), `len` a nonzero
    /// multiple of it, and the bytes stay allocated until `release` runs.
    pub unsafe fn import(
        &self,
        device: &wgpu::Device,
        ptr: std::ptr::NonNull<u8>,
        len: u64,
        release: Release,
    ) -> Result<wgpu::Buffer, ServerError> {
        #[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
        {
            // SAFETY: the caller's promises are the importer's.
            unsafe { self.vulkan.import(device, ptr, len, release) }
        }
        #[cfg(not(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios"))))))]
        {
            let _ = (device, ptr, len);
            release();
            Err(ServerError::unsupported(
                "imported host memory",
                "only Vulkan imports host memory",
            ))
        }
    }
}

/// Requests a device of `adapter` as `request_device` does, with
/// `VK_EXT_external_memory_host` enabled as well. `None` where the adapter
/// is not Vulkan, lacks the extension, or refuses a device with it: the
/// caller then requests one as usual.
pub(crate) fn request_importing(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Option<Result<(wgpu::Device, wgpu::Queue), wgpu::RequestDeviceError>> {
    #[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
    {
        vulkan::request(adapter, desc)
    }
    #[cfg(not(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios"))))))]
    {
        let _ = (adapter, desc);
        None
    }
}

#[cfg(any(windows, all(unix, not(any(target_os = "macos", target_os = "ios")))))]
mod vulkan {
    use std::ptr::NonNull;

    use ash::vk;
    use compute_runtime::ServerError;
    use wgpu::hal::api::Vulkan;

    use super::Release;
    use crate::device::vulkan::VkHandles;

    const EXTENSION: &std::ffi::CStr = ash::ext::external_memory_host::NAME;
    const HANDLE: vk::ExternalMemoryHandleTypeFlags =
        vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;

    pub(super) fn request(
        adapter: &wgpu::Adapter,
        desc: &wgpu::DeviceDescriptor<'_>,
    ) -> Option<Result<(wgpu::Device, wgpu::Queue), wgpu::RequestDeviceError>> {
        let open = {
            // SAFETY: the hal adapter is only asked for a device, with the
            // features and limits wgpu would ask for, plus one extension the
            // physical device lists.
            let hal = unsafe { adapter.as_hal::<Vulkan>() }?;
            if !hal
                .physical_device_capabilities()
                .supports_extension(EXTENSION)
            {
                return None;
            }
            let add = Box::new(
                |args: wgpu::hal::vulkan::CreateDeviceCallbackArgs<'_, '_, '_>| {
                    if !args.extensions.contains(&EXTENSION) {
                        args.extensions.push(EXTENSION);
                    }
                },
            );
            // SAFETY: as above; the callback only adds a supported extension
            // (its dependency, external memory, is core in Vulkan 1.1, which
            // wgpu-hal requires).
            unsafe {
                hal.open_with_callback(
                    desc.required_features,
                    &desc.required_limits,
                    &desc.memory_hints,
                    Some(add),
                )
            }
        };
        match open {
            // SAFETY: the device was opened from this adapter with exactly
            // the descriptor's features.
            Ok(open) => Some(unsafe { adapter.create_device_from_hal(open, desc) }),
            Err(e) => {
                tracing::warn!(error = %e, "a device with imported host memory was refused; opening one without");
                None
            }
        }
    }

    /// The device's Vulkan handles and the facts an import needs.
    pub(super) struct Importer {
        vk: VkHandles,
        pointer_properties: vk::PFN_vkGetMemoryHostPointerPropertiesEXT,
        /// Memory types that are host-visible and host-coherent, as bits.
        coherent: u32,
    }

    impl Importer {
        /// The importer of `device` and its minimum import alignment.
        pub(super) fn of(device: &wgpu::Device) -> Option<(Importer, u64)> {
            // The handles kept are used only while buffers of `device`
            // exist (see `import`).
            let vk_ = VkHandles::of(device, EXTENSION)?;
            let (instance, physical) = (&vk_.instance, vk_.physical);
            let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
            let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut host);
            // SAFETY: `physical` belongs to `instance` (Vulkan 1.1, checked
            // by `of`); the chained structure's extension is enabled.
            unsafe { instance.get_physical_device_properties2(physical, &mut properties) };
            let alignment = host.min_imported_host_pointer_alignment;
            // SAFETY: as above.
            let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
            let wanted =
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
            let coherent = memory
                .memory_types_as_slice()
                .iter()
                .enumerate()
                .filter(|(_, t)| t.property_flags.contains(wanted))
                .fold(0u32, |bits, (i, _)| bits | (1 << i));
            // SAFETY: the name is a device-level command of an enabled
            // extension; a missing entry is `None`.
            let entry = unsafe {
                instance.get_device_proc_addr(
                    vk_.device.handle(),
                    c"vkGetMemoryHostPointerPropertiesEXT".as_ptr(),
                )
            }?;
            // SAFETY: the loader returned this command's entry point, whose
            // type is the PFN's.
            let pointer_properties = unsafe {
                std::mem::transmute::<
                    unsafe extern "system" fn(),
                    vk::PFN_vkGetMemoryHostPointerPropertiesEXT,
                >(entry)
            };
            (coherent != 0).then_some((
                Importer {
                    vk: vk_,
                    pointer_properties,
                    coherent,
                },
                alignment,
            ))
        }

        /// See [`super::HostImport::import`].
        pub(super) unsafe fn import(
            &self,
            device: &wgpu::Device,
            ptr: NonNull<u8>,
            len: u64,
            release: Release,
        ) -> Result<wgpu::Buffer, ServerError> {
            // SAFETY: the caller's promises (an aligned live allocation of
            // `len` bytes) are what each call below needs.
            let (buffer, memory) = match unsafe { self.bind(ptr, len) } {
                Ok(made) => made,
                Err(e) => {
                    release();
                    return Err(e);
                }
            };
            let desc = wgpu::BufferDescriptor {
                label: Some("imported host memory"),
                size: len,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            };
            // SAFETY: `buffer` is bound to memory of `len` bytes made on
            // `device` with the transfer usages `desc` names, owned here,
            // never mapped; its bytes (the caller's zeroed allocation) are
            // initialized; `release` runs after the memory is freed.
            Ok(unsafe { self.vk.adopt(device, (buffer, memory), &desc, release) })
        }

        /// A Vulkan buffer bound to the host bytes at `ptr`, and the memory
        /// that imports them; nothing is left behind on failure.
        unsafe fn bind(
            &self,
            ptr: NonNull<u8>,
            len: u64,
        ) -> Result<(vk::Buffer, vk::DeviceMemory), ServerError> {
            let fail = |what: &str, e: vk::Result| ServerError::OutOfMemory {
                size: len,
                reason: format!("importing host memory: {what}: {e}"),
            };
            let mut host = vk::MemoryHostPointerPropertiesEXT::default();
            // SAFETY: `ptr` is a live host allocation aligned as required.
            let r = unsafe {
                (self.pointer_properties)(
                    self.vk.device.handle(),
                    HANDLE,
                    ptr.as_ptr().cast(),
                    &mut host,
                )
            };
            if r != vk::Result::SUCCESS {
                return Err(fail("vkGetMemoryHostPointerPropertiesEXT", r));
            }
            let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
            let info = vk::BufferCreateInfo::default()
                .size(len)
                .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
                .sharing_mode(vk::SharingMode::EXCLUSIVE)
                .push_next(&mut external);
            // SAFETY: a valid create info on a live device.
            let buffer = unsafe { self.vk.device.create_buffer(&info, None) }
                .map_err(|e| fail("vkCreateBuffer", e))?;
            // SAFETY: `buffer` was just created on this device.
            let needs = unsafe { self.vk.device.get_buffer_memory_requirements(buffer) };
            let types = needs.memory_type_bits & host.memory_type_bits & self.coherent;
            if types == 0 || needs.size > len {
                // SAFETY: unused, unbound.
                unsafe { self.vk.device.destroy_buffer(buffer, None) };
                return Err(fail(
                    "no host-coherent memory type fits",
                    vk::Result::ERROR_FORMAT_NOT_SUPPORTED,
                ));
            }
            let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
                .handle_type(HANDLE)
                .host_pointer(ptr.as_ptr().cast());
            let allocate = vk::MemoryAllocateInfo::default()
                .allocation_size(len)
                .memory_type_index(types.trailing_zeros())
                .push_next(&mut import);
            // SAFETY: imports the caller's allocation with a type it allows.
            let memory = match unsafe { self.vk.device.allocate_memory(&allocate, None) } {
                Ok(m) => m,
                Err(e) => {
                    // SAFETY: unused, unbound.
                    unsafe { self.vk.device.destroy_buffer(buffer, None) };
                    return Err(fail("vkAllocateMemory", e));
                }
            };
            // SAFETY: both were made above; offset 0 meets any alignment.
            if let Err(e) = unsafe { self.vk.device.bind_buffer_memory(buffer, memory, 0) } {
                // SAFETY: unused.
                unsafe {
                    self.vk.device.destroy_buffer(buffer, None);
                    self.vk.device.free_memory(memory, None);
                }
                return Err(fail("vkBindBufferMemory", e));
            }
            Ok((buffer, memory))
        }
    }
}
