//! Device memory that devices of one GPU share (`VK_KHR_external_memory_fd`,
//! opaque fds): the ground floor of collectives between ranks on one GPU
//! (`collective/shared.rs`).
//!
//! [`export`] makes a buffer on one device whose memory is exportable, and
//! an [`Exported`] handle holding an opaque fd of it; [`Exported::import`]
//! makes a buffer over the same bytes on another device. Vulkan allows
//! opaque-fd memory only between devices of the same physical GPU and
//! driver: the handle carries the exporter's device and driver UUIDs, and
//! an import into a device with others is refused.
//!
//! Lifetimes: each buffer owns its Vulkan memory (freed by the buffer's
//! drop callback once wgpu destroys it). An imported allocation holds its
//! own reference to the memory's payload, so the exporter's buffer may go
//! first. The fd is duplicated for each import (an import takes ownership
//! of the fd it is given) and closed with the handle. Imports of one
//! allocation are serialized: the duplicates share one file offset, which
//! lavapipe's import seeks and reads through (concurrent imports failed
//! with `ERROR_INVALID_EXTERNAL_HANDLE`,
//! `shared_memory::imports_of_one_allocation_from_several_threads_at_once_all_succeed`).
//! An fd passed to another process shares the offset too.
//!
//! Ordering between devices is the caller's: a device's writes are visible
//! to another once the writing submission has completed and the reader's
//! submission comes after that (a host wait between them).

use std::sync::Arc;

use compute_runtime::ServerError;

/// What an importer needs to open the same bytes on another device.
#[derive(Debug, Clone)]
pub struct Exported {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    /// Held across each import: every duplicate of `fd` shares one file
    /// offset, and a driver may seek and read through it while importing
    /// (lavapipe reads a header at offset 0), so imports running together
    /// would read at each other's offsets and fail.
    #[cfg(unix)]
    imports: std::sync::Mutex<()>,
    /// The allocation's size and memory type: an opaque-fd import must
    /// match both.
    size: u64,
    type_index: u32,
    /// The exporter's device and driver UUIDs.
    uuids: ([u8; 16], [u8; 16]),
}

impl Exported {
    /// Bytes of the shared allocation (at least the buffer's length).
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// A buffer of `device` over the exported bytes, `len` bytes long.
    /// `Unsupported` where `device` is not Vulkan with
    /// `VK_KHR_external_memory_fd`, or belongs to another GPU or driver
    /// than the exporter's; `InvalidArgument` for a `len` the allocation
    /// cannot hold.
    pub fn import(&self, device: &wgpu::Device, len: u64) -> Result<wgpu::Buffer, ServerError> {
        #[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
        {
            vulkan::import(device, &self.inner, len)
        }
        #[cfg(not(all(unix, not(any(target_os = "macos", target_os = "ios")))))]
        {
            let _ = (device, len);
            Err(unsupported(
                "only Vulkan on Unix shares device memory by fd",
            ))
        }
    }
}

fn unsupported(reason: &'static str) -> ServerError {
    ServerError::unsupported("device memory shared between devices", reason)
}

/// A buffer of `len` bytes on `device` (copy source and destination,
/// storage) whose memory other devices of the same GPU can import, and
/// the handle they import it by. `Unsupported` where the device cannot
/// export (not Vulkan, no `VK_KHR_external_memory_fd`, or the driver
/// exports no such buffer).
pub fn export(device: &wgpu::Device, len: u64) -> Result<(wgpu::Buffer, Exported), ServerError> {
    #[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
    {
        vulkan::export(device, len)
    }
    #[cfg(not(all(unix, not(any(target_os = "macos", target_os = "ios")))))]
    {
        let _ = (device, len);
        Err(unsupported(
            "only Vulkan on Unix shares device memory by fd",
        ))
    }
}

/// `device`'s device and driver UUIDs, where it can export and import
/// such memory: devices with equal ones share it. `Unsupported` elsewhere.
pub fn identity(device: &wgpu::Device) -> Result<([u8; 16], [u8; 16]), ServerError> {
    #[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
    {
        vulkan::identity(device)
    }
    #[cfg(not(all(unix, not(any(target_os = "macos", target_os = "ios")))))]
    {
        let _ = device;
        Err(unsupported(
            "only Vulkan on Unix shares device memory by fd",
        ))
    }
}

#[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
mod vulkan;
