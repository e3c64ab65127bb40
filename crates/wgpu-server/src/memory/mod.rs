//! Bytes on the device and on the host: pages as wgpu buffers
//! ([`storage`]), host staging for uploads (`staging`), pooled `MAP_READ`
//! buffers for reads (`readback`), and the two host transfers, `write` and
//! `read` (`transfer`).
//!
//! Pooling (which slice of which page) is `compute-memory`'s; this module
//! only turns its pages into buffers and moves bytes in and out of them.

pub(crate) mod readback;
pub(crate) mod staging;
pub mod storage;
pub(crate) mod transfer;
pub(crate) mod upload;

use std::sync::Arc;

use compute_memory::MemoryManagement;
use compute_runtime::{MemoryId, ReleaseQueue};

/// A server's memory: the pooled manager, the queue dropped handles report
/// to, and the host-side staging pools.
#[derive(Debug)]
pub(crate) struct Memory {
    pub manager: MemoryManagement<storage::WgpuStorage>,
    /// Ids of dropped handles, freed at the next call.
    pub releases: Arc<ReleaseQueue>,
    /// Scratch for draining `releases` without allocating.
    pub released: Vec<MemoryId>,
    pub staging: staging::HostStaging,
    pub readback: readback::ReadbackPool,
    pub upload: upload::UploadPool,
}
