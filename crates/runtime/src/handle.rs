//! Handles to device memory and the descriptors that name byte ranges of it.
//!
//! A [`ManagedMemoryHandle`] is reference counted: clones share one
//! [`MemoryId`], and when the last clone drops the id is pushed onto the
//! [`ReleaseQueue`] the server attached when it bound the handle. The server
//! drains that queue at its next call, so freeing memory costs the client one
//! mutex push and never a round trip. A handle that was never bound releases
//! nothing.
//!
//! The design buys O(1) frees with no scan of live handles; what it does not
//! buy is eager reuse: a slice freed between two server calls is reusable from
//! the next call on.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::{DType, MemoryId, ServerError};

/// Ids of handles whose last clone dropped, waiting for the server to free
/// their slices.
#[derive(Debug, Default)]
pub struct ReleaseQueue {
    ids: Mutex<Vec<MemoryId>>,
    /// Ids pushed and not drained: lets the drain every server call makes
    /// skip the lock when nothing was freed.
    pending: AtomicUsize,
}

impl ReleaseQueue {
    /// A new, empty queue, shared between a server and the handles it binds.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn push(&self, id: MemoryId) {
        // A poisoned lock only means another thread panicked mid-push; the
        // Vec is still valid, so keep going rather than leak the slice.
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.push(id);
        self.pending.fetch_add(1, Ordering::Release);
    }

    /// Takes every id released since the last call, appending to `out`.
    pub fn drain_into(&self, out: &mut Vec<MemoryId>) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        self.pending.store(0, Ordering::Release);
        out.append(&mut ids);
    }
}

#[derive(Debug)]
struct MemoryHandleInner {
    id: MemoryId,
    release: OnceLock<Arc<ReleaseQueue>>,
    /// Whether a label was ever set (so an unlabelled drop skips the
    /// label registry).
    labelled: AtomicBool,
    /// The element type the slice was created with, when it was typed.
    elem: OnceLock<DType>,
    /// For an untyped slice whose writes are followed (`follow_writes`):
    /// what it was last written as. 0: not followed; 1: followed, not
    /// written as a type yet; `2 + d as u8`: as `d`.
    written: AtomicU8,
}

impl Drop for MemoryHandleInner {
    fn drop(&mut self) {
        if *self.labelled.get_mut() {
            crate::label::retire(self.id);
        }
        if let Some(queue) = self.release.get() {
            queue.push(self.id);
        }
    }
}

/// The client's claim on one slice of device memory.
///
/// Create it with [`ManagedMemoryHandle::new`] and bind it with
/// `Server::initialize_memory`; the slice stays reserved while any clone is
/// alive.
#[derive(Clone, Debug)]
pub struct ManagedMemoryHandle {
    inner: Arc<MemoryHandleInner>,
}

impl ManagedMemoryHandle {
    /// A fresh handle with a process-unique id, bound to nothing yet.
    // No `Default`: each call mints a fresh id, which a default should not.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self {
            inner: Arc::new(MemoryHandleInner {
                id: MemoryId::next(),
                release: OnceLock::new(),
                labelled: AtomicBool::new(false),
                elem: OnceLock::new(),
                written: AtomicU8::new(0),
            }),
        }
    }

    /// The id the server knows this slice by.
    pub fn id(&self) -> MemoryId {
        self.inner.id
    }

    /// Names the slice in every error that mentions it (replacing an
    /// earlier label), also one displayed after the handle's last clone
    /// dropped. See [`MemoryId`]'s `Display`.
    pub fn set_label(&self, label: impl Into<Arc<str>>) {
        self.inner.labelled.store(true, Ordering::Relaxed);
        crate::label::set(self.id(), label.into());
    }

    /// The slice's label, if it has one.
    pub fn label(&self) -> Option<Arc<str>> {
        if self.inner.labelled.load(Ordering::Relaxed) {
            crate::label::get(self.id())
        } else {
            None
        }
    }

    /// Types the slice: its bytes hold `elem`s. Launches check it against
    /// the element type each binding of the kernel's module declares, and
    /// the client's typed reads and writes against theirs. A slice is typed
    /// once: typing it again with another type is
    /// [`ServerError::ElementType`].
    pub fn set_elem(&self, elem: DType) -> Result<(), ServerError> {
        match self.inner.elem.get_or_init(|| elem) {
            holds if *holds == elem => Ok(()),
            holds => Err(ServerError::ElementType {
                memory: self.id(),
                holds: *holds,
                asked: elem,
            }),
        }
    }

    /// The slice's element type, if it was typed.
    pub fn elem(&self) -> Option<DType> {
        self.inner.elem.get().copied()
    }

    /// Follows what an untyped slice is written as (the client's `empty`
    /// and `create` do): a kernel binding that writes it, or a typed host
    /// write, records its element type ([`record_write`](Self::record_write)),
    /// and a read-only binding or a typed read as another type is refused
    /// until something writes it as that type. Slices made through the
    /// `Server` trait alone are not followed (a runtime above may
    /// reinterpret its buffers on purpose).
    pub fn follow_writes(&self) {
        let _ = self
            .inner
            .written
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Records that `elem`s were written to the slice, when it is untyped
    /// and followed; else nothing.
    pub fn record_write(&self, elem: DType) {
        // A launch path call: a load, and a store only when the type
        // changes (a slice is usually written as one type, launch after
        // launch).
        let code = 2 + elem as u8;
        let written = &self.inner.written;
        let was = written.load(Ordering::Relaxed);
        if was != 0 && was != code {
            written.store(code, Ordering::Relaxed);
        }
    }

    /// What the untyped, followed slice was last written as; `None` when
    /// it is typed, not followed, or not written as a type yet.
    pub fn written_as(&self) -> Option<DType> {
        if self.elem().is_some() {
            return None;
        }
        match self.inner.written.load(Ordering::Relaxed) {
            0 | 1 => None,
            code => DType::ALL.into_iter().find(|d| 2 + *d as u8 == code),
        }
    }

    /// Attaches the queue the handle's last drop reports to. A handle binds
    /// once: a second bind is [`ServerError::AlreadyInitialized`].
    pub fn attach_release(&self, queue: &Arc<ReleaseQueue>) -> Result<(), ServerError> {
        self.inner
            .release
            .set(Arc::clone(queue))
            .map_err(|_| ServerError::AlreadyInitialized { memory: self.id() })
    }

    /// Whether a server has bound this handle.
    pub fn is_bound(&self) -> bool {
        self.inner.release.get().is_some()
    }

    /// The range of the whole slice, `size` bytes long, as a binding.
    pub fn binding(&self, size: u64) -> BufferBinding {
        BufferBinding {
            memory: self.clone(),
            offset: 0,
            size,
        }
    }
}

/// A contiguous byte range of a managed slice: what a kernel binds and what
/// `check` and `sync` are asked about.
#[derive(Clone, Debug)]
pub struct BufferBinding {
    /// The slice.
    pub memory: ManagedMemoryHandle,
    /// Start of the range, in bytes from the start of the slice.
    pub offset: u64,
    /// Length of the range in bytes.
    pub size: u64,
}

impl BufferBinding {
    /// The id of the slice this range belongs to.
    pub fn memory_id(&self) -> MemoryId {
        self.memory.id()
    }

    /// One past the last byte, or `None` when `offset + size` overflows.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)
    }
}

/// A client-side tensor handle: a slice plus the byte range of it the tensor
/// occupies. Cloning shares the slice.
#[derive(Clone, Debug)]
pub struct Handle {
    /// The slice.
    pub memory: ManagedMemoryHandle,
    /// First byte of the tensor inside the slice.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

impl Handle {
    /// A handle covering the whole of a `size`-byte slice.
    pub fn new(memory: ManagedMemoryHandle, size: u64) -> Self {
        Self {
            memory,
            offset: 0,
            size,
        }
    }

    /// The handle's bytes as a binding.
    pub fn binding(&self) -> BufferBinding {
        BufferBinding {
            memory: self.memory.clone(),
            offset: self.offset,
            size: self.size,
        }
    }

    /// A contiguous copy descriptor for the whole handle, viewed as a flat
    /// array of bytes.
    pub fn copy_descriptor(&self) -> CopyDescriptor {
        CopyDescriptor::contiguous(self.binding())
    }

    /// Labels the handle's slice (see [`ManagedMemoryHandle::set_label`]):
    /// errors about it say `` `hidden` (MemoryId(12)) ``.
    ///
    /// ```
    /// use compute_runtime::{Handle, ManagedMemoryHandle};
    ///
    /// let h = Handle::new(ManagedMemoryHandle::new(), 64).with_label("hidden");
    /// assert_eq!(h.label().as_deref(), Some("hidden"));
    /// assert!(h.memory.id().to_string().starts_with("`hidden` (MemoryId("));
    /// ```
    pub fn with_label(self, label: impl Into<Arc<str>>) -> Self {
        self.memory.set_label(label);
        self
    }

    /// The slice's label, if it has one.
    pub fn label(&self) -> Option<Arc<str>> {
        self.memory.label()
    }

    /// The slice's element type, if it was typed
    /// ([`ManagedMemoryHandle::set_elem`]).
    pub fn elem(&self) -> Option<DType> {
        self.memory.elem()
    }

    /// Elements in the handle, if its slice is typed.
    ///
    /// ```
    /// use compute_runtime::{DType, Handle, ManagedMemoryHandle};
    ///
    /// let h = Handle::new(ManagedMemoryHandle::new(), 64);
    /// assert_eq!(h.len(), None);
    /// h.memory.set_elem(DType::F32)?;
    /// assert_eq!(h.len(), Some(16));
    /// assert!(h.memory.set_elem(DType::U32).is_err()); // typed once
    /// # Ok::<(), compute_runtime::ServerError>(())
    /// ```
    pub fn len(&self) -> Option<u64> {
        self.elem().map(|e| self.size / e.size() as u64)
    }

    /// Whether the handle holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

impl From<&Handle> for BufferBinding {
    fn from(h: &Handle) -> Self {
        h.binding()
    }
}

/// What a host transfer reads or writes: a binding viewed as a strided
/// tensor of `elem_size`-byte elements.
///
/// Only row-major contiguous layouts are transferred today; anything else is
/// refused with [`ServerError::Unsupported`] rather than copied wrongly.
#[derive(Clone, Debug)]
pub struct CopyDescriptor {
    /// The bytes.
    pub binding: BufferBinding,
    /// Extent of each dimension, in elements.
    pub shape: Vec<usize>,
    /// Stride of each dimension, in elements.
    pub strides: Vec<usize>,
    /// Bytes per element.
    pub elem_size: usize,
}

impl CopyDescriptor {
    /// The whole binding as a flat byte array.
    pub fn contiguous(binding: BufferBinding) -> Self {
        let len = usize::try_from(binding.size).unwrap_or(usize::MAX);
        Self {
            binding,
            shape: vec![len],
            strides: vec![1],
            elem_size: 1,
        }
    }

    /// Bytes the described tensor holds, or `None` on overflow.
    pub fn size_bytes(&self) -> Option<u64> {
        let mut n: u64 = u64::try_from(self.elem_size).ok()?;
        for d in &self.shape {
            n = n.checked_mul(u64::try_from(*d).ok()?)?;
        }
        Some(n)
    }

    /// Whether shape and strides describe a dense row-major layout.
    pub fn is_contiguous(&self) -> bool {
        if self.shape.len() != self.strides.len() {
            return false;
        }
        let mut expected = 1usize;
        for (dim, stride) in self.shape.iter().zip(&self.strides).rev() {
            if *dim > 1 && *stride != expected {
                return false;
            }
            expected = expected.saturating_mul(*dim);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_drop_of_a_bound_handle_is_released_once() {
        let queue = ReleaseQueue::new();
        let handle = ManagedMemoryHandle::new();
        let id = handle.id();
        handle.attach_release(&queue).expect("first bind");
        let clone = handle.clone();
        drop(handle);
        let mut out = Vec::new();
        queue.drain_into(&mut out);
        assert!(out.is_empty(), "a live clone keeps the slice");
        drop(clone);
        queue.drain_into(&mut out);
        assert_eq!(out, vec![id]);
    }

    #[test]
    fn a_handle_binds_once() {
        let queue = ReleaseQueue::new();
        let handle = ManagedMemoryHandle::new();
        handle.attach_release(&queue).expect("first bind");
        assert!(matches!(
            handle.attach_release(&queue),
            Err(ServerError::AlreadyInitialized { .. })
        ));
    }

    #[test]
    fn contiguity() {
        let b = ManagedMemoryHandle::new().binding(24);
        let mut d = CopyDescriptor::contiguous(b);
        assert!(d.is_contiguous());
        d.shape = vec![2, 3];
        d.strides = vec![3, 1];
        d.elem_size = 4;
        assert!(d.is_contiguous());
        assert_eq!(d.size_bytes(), Some(24));
        d.strides = vec![1, 2];
        assert!(!d.is_contiguous());
    }
}
