//! `WgpuStorage`: pages as wgpu buffers.
//!
//! Every page is one buffer usable as storage, copy source and destination
//! and indirect-dispatch arguments, so any slice can serve any operation.
//! Creation runs inside error scopes: a buffer the device refuses becomes
//! [`ServerError::OutOfMemory`] or a validation error, never an uncaptured
//! error.

use compute_runtime::{ComputeStorage, ServerError, StorageHandle, StorageId};
use hashbrown::HashMap;

use crate::device::faults::scoped;

/// A byte range of a page, resolved.
#[derive(Clone, Debug)]
pub struct WgpuResource {
    /// The page's buffer.
    pub buffer: wgpu::Buffer,
    /// First byte of the range.
    pub offset: u64,
    /// Length of the range.
    pub size: u64,
}

/// Pages of one device.
#[derive(Debug)]
pub struct WgpuStorage {
    device: wgpu::Device,
    buffers: HashMap<StorageId, wgpu::Buffer>,
    next: u64,
    alignment: u64,
}

impl WgpuStorage {
    /// The usages every page is created with.
    pub const USAGES: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
        .union(wgpu::BufferUsages::COPY_SRC)
        .union(wgpu::BufferUsages::COPY_DST)
        .union(wgpu::BufferUsages::INDIRECT);

    /// Storage on `device` whose slices align to `alignment`.
    pub fn new(device: wgpu::Device, alignment: u64) -> Self {
        Self {
            device,
            buffers: HashMap::new(),
            next: 0,
            alignment,
        }
    }

    /// The buffer of a page.
    pub fn buffer(&self, id: StorageId) -> Option<&wgpu::Buffer> {
        self.buffers.get(&id)
    }
}

impl ComputeStorage for WgpuStorage {
    type Resource = WgpuResource;

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, ServerError> {
        let buffer = scoped(&self.device, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: Self::USAGES,
                mapped_at_creation: false,
            })
        })
        .map_err(|e| match e {
            ServerError::OutOfMemory { reason, .. } => ServerError::OutOfMemory { size, reason },
            ServerError::Validation { message } => ServerError::OutOfMemory {
                size,
                reason: message,
            },
            other => other,
        })?;
        self.next += 1;
        let id = StorageId(self.next);
        self.buffers.insert(id, buffer);
        Ok(StorageHandle {
            id,
            offset: 0,
            size,
        })
    }

    fn dealloc(&mut self, id: StorageId) {
        // Dropping, not destroying: command buffers already encoded keep the
        // buffer alive until they have run.
        self.buffers.remove(&id);
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<WgpuResource> {
        let buffer = self.buffers.get(&handle.id)?;
        Some(WgpuResource {
            buffer: buffer.clone(),
            offset: handle.offset,
            size: handle.size,
        })
    }
}
