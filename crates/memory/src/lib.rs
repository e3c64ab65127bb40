//! # compute-memory
//!
//! Device memory management over any [`ComputeStorage`]: slices for managed
//! handles, carved from pages the storage allocates.
//!
//! **Owns:** which page and offset serve each [`MemoryId`], when pages are
//! allocated and given back, and the numbers of [`StreamMemoryReport`].
//! **Leaves to the storage:** what a page is (a wgpu buffer, a `Vec<u8>` in
//! tests) and how allocation failure is detected. Ordering (when a freed
//! slice may be reused) is the stream layer's: the manager hands a freed
//! slice out again at once, and the scheduler orders the new user after the
//! old one because they share a page.
//!
//! Pools, one file each: [`sliced`] (many slices per page, best fit),
//! [`exclusive`] (one slice per page), [`persistent`] (reuse by size class
//! for persistent mode); [`management`] routes between them. The documented
//! allocation trace behind the `memory.peak_reserved_over_peak_live`
//! benchmark is test support, in `compute_testkit::trace`.
//!
//! [`ComputeStorage`]: compute_runtime::ComputeStorage
//! [`MemoryId`]: compute_runtime::MemoryId
//! [`StreamMemoryReport`]: compute_runtime::StreamMemoryReport

mod cpu;
mod defaults;
pub mod exclusive;
pub mod management;
pub mod persistent;
mod pool;
pub mod sliced;

pub use cpu::{BytesStorage, CpuResource};
pub use defaults::{DEFAULT_LARGE_PAGE, MIN_DEFAULT_LARGE_PAGE, default_pools};
pub use management::MemoryManagement;
