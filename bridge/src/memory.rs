//! cubecl's memory, as this server's slices.
//!
//! cubecl mints a `ManagedMemoryHandle` per allocation and carves tensors out
//! of it as byte ranges (`BufferBinding`'s offsets). The bridge gives each
//! allocation one slice of this server and keeps the pair here, keyed by
//! cubecl's id. A cubecl allocation is freed when its last handle and
//! binding drop; the table holds one clone to see that (`is_free`), and
//! [`MemoryTable::sweep`] then drops the server's handle, which frees the
//! slice at the server's next call.
//!
//! Two things cubecl does that this server refuses are absorbed here, and
//! only here:
//! - a zero-byte allocation becomes a 4-byte slice the table remembers as
//!   empty (a read of it returns no bytes, a binding of it binds 4 bytes no
//!   kernel is told about: cubecl passes every length in the metadata);
//! - sizes and ranges are rounded up to whole 4-byte words (wgpu copies and
//!   binds whole words); the rounding stays inside the allocation, whose
//!   tensors cubecl aligns to the device's binding alignment.
//!
//! An allocation the server refused keeps the refusal: every later use of
//! it (a read, a check, a launch binding it) answers that error.

use std::collections::HashMap;
use std::sync::Arc;

use cubecl_runtime::memory_management::{ManagedMemoryHandle as CubeHandle, ManagedMemoryId};
use cubecl_runtime::server::BufferBinding as CubeBinding;
use wgpu_server::runtime::{BufferBinding, ManagedMemoryHandle, ServerError as Inner, StreamId};

/// One cubecl allocation.
#[derive(Debug)]
struct Entry {
    /// cubecl's handle, held to see when every other one has dropped.
    cubecl: CubeHandle,
    /// The server's slice, or why the server refused it.
    slice: Result<ManagedMemoryHandle, Arc<Inner>>,
    /// Bytes the slice holds (at least 4, whole words).
    allocated: u64,
}

/// A cubecl byte range, resolved against the table.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The server's binding: whole words, never empty.
    pub binding: BufferBinding,
    /// The bytes cubecl asked for (may be zero, or not a whole word).
    pub len: u64,
}

/// cubecl allocation id -> this server's slice.
#[derive(Debug, Default)]
pub struct MemoryTable {
    entries: HashMap<ManagedMemoryId, Entry>,
    /// Allocations since the last sweep: a sweep walks the whole table, so
    /// it runs once per [`SWEEP_EVERY`] allocations, and on cleanup.
    since_sweep: usize,
}

/// How many allocations pass between two sweeps of freed entries.
const SWEEP_EVERY: usize = 64;

/// The smallest slice the bridge asks for: one word.
const WORD: u64 = 4;

impl MemoryTable {
    /// Registers cubecl's `memory` of `size` bytes, asking `init` for a
    /// slice of at least one whole word. A refusal is kept for the
    /// allocation and returned.
    pub fn insert(
        &mut self,
        memory: CubeHandle,
        size: u64,
        init: impl FnOnce(ManagedMemoryHandle, u64) -> Result<(), Inner>,
    ) -> Result<(), Inner> {
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY {
            self.sweep();
        }
        let id = memory.descriptor().id;
        if self.entries.contains_key(&id) {
            return Err(Inner::InvalidArgument {
                reason: format!("cubecl memory {} is already initialized", id.value),
            });
        }
        let allocated = size.max(WORD).next_multiple_of(WORD);
        let slice = ManagedMemoryHandle::new();
        // Errors about the slice then name cubecl's allocation.
        slice.set_label(format!("cubecl memory {}", id.value));
        let result = init(slice.clone(), allocated);
        let slice = match &result {
            Ok(()) => Ok(slice),
            Err(e) => Err(Arc::new(e.clone())),
        };
        self.entries.insert(
            id,
            Entry {
                cubecl: memory,
                slice,
                allocated,
            },
        );
        result
    }

    /// Drops the server's slice of every allocation cubecl let go of.
    pub fn sweep(&mut self) {
        self.since_sweep = 0;
        self.entries.retain(|_, entry| !entry.cubecl.is_free());
    }

    /// The server's binding for cubecl's range `binding`.
    pub fn resolve(&self, binding: &CubeBinding) -> Result<Resolved, Inner> {
        let id = binding.memory.id();
        let entry = self
            .entries
            .get(&id)
            .ok_or_else(|| Inner::InvalidArgument {
                reason: format!(
                    "cubecl memory {} was never initialized on this server",
                    id.value
                ),
            })?;
        // The refusal of the allocation is what every use of it answers.
        let slice = entry.slice.as_ref().map_err(|cause| Inner::clone(cause))?;
        // cubecl's offsets count from the ends of the allocation it asked
        // for; a malformed binding is refused, never wrapped around.
        let start = binding.offset_start.unwrap_or(0);
        let end = binding
            .size
            .checked_sub(binding.offset_end.unwrap_or(0))
            .filter(|end| *end >= start)
            .ok_or_else(|| Inner::InvalidArgument {
                reason: format!(
                    "cubecl binding of memory {} has offsets {:?}..{:?} outside its {} bytes",
                    id.value, binding.offset_start, binding.offset_end, binding.size
                ),
            })?;
        let len = end - start;
        let (offset, size) = if len == 0 {
            // A word no kernel is told about: the start when it fits (it is
            // aligned), else the slice's first.
            if start + WORD <= entry.allocated {
                (start, WORD)
            } else {
                (0, WORD)
            }
        } else {
            let size = len.next_multiple_of(WORD);
            if start + size > entry.allocated {
                return Err(Inner::OutOfBounds {
                    memory: slice.id(),
                    offset: start,
                    size: len,
                    capacity: entry.allocated,
                });
            }
            (start, size)
        };
        Ok(Resolved {
            binding: BufferBinding {
                memory: slice.clone(),
                offset,
                size,
            },
            len,
        })
    }

    /// Live allocations.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The stream of this server that cubecl's `stream` maps to: the same
/// number, so a cubecl stream is one server stream.
pub fn stream(stream: cubecl_environment::stream::StreamId) -> StreamId {
    StreamId(stream.value)
}
