//! A launch's bindings checked and resolved: each inside its slice, at an
//! aligned offset, within the device's binding size, of the element type
//! the module declares and at least its minimum size; no two sharing bytes
//! where one is written; an indirect count of 12 aligned bytes. The one
//! place these checks live: a launch (`prepare.rs`) and the client's
//! checked launch (`server/validate.rs`) both call them.

use compute_runtime::{BufferBinding, KernelArguments, ServerError, StorageHandle};
use compute_wgsl::BindingAccess;

use crate::launch::bind::Range;
use crate::launch::pipeline::CachedPipeline;
use crate::launch::resolve::invalid;
use crate::memory::Memory;
use crate::stream::audit::INDIRECT_BYTES;

/// Each binding resolved to its page range, checked against the device
/// and the module.
pub(crate) fn resolve_bindings(
    limits: &wgpu::Limits,
    memory: &Memory,
    pipeline: &CachedPipeline,
    args: &KernelArguments,
) -> Result<Vec<Range>, ServerError> {
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let max_binding = limits.max_storage_buffer_binding_size;
    let mut ranges: Vec<Range> = Vec::with_capacity(args.buffers.len());
    for (i, b) in args.buffers.iter().enumerate() {
        let h = memory.resolve(b)?;
        if h.offset % align != 0 {
            return Err(invalid(format!(
                "binding of {} starts at byte {} of its page, not a multiple of \
                 min_storage_buffer_offset_alignment ({align})",
                b.memory_id(),
                h.offset
            )));
        }
        if b.size == 0 {
            return Err(invalid(format!("binding of {} is empty", b.memory_id())));
        }
        // Bindings are sized in 4-byte units; the slice's padding covers
        // the round-up.
        let size = b.size.next_multiple_of(4);
        if size > max_binding {
            return Err(ServerError::LimitExceeded {
                limit: "max_storage_buffer_binding_size",
                requested: size,
                max: max_binding,
            });
        }
        let declared = pipeline.sizes.elems.get(i).copied().flatten();
        // A typed slice holds its type; an untyped one the client follows
        // holds what it was last written as, which only a binding that
        // writes it may change.
        let read_only = pipeline.layout.bindings.get(i) == Some(&BindingAccess::ReadOnly);
        let holds = b
            .memory
            .elem()
            .or_else(|| read_only.then(|| b.memory.written_as()).flatten());
        if let (Some(declared), Some(holds)) = (declared, holds)
            && declared != holds
        {
            return Err(ServerError::BindingType {
                kernel: pipeline.name.clone(),
                binding: i as u32,
                memory: b.memory_id(),
                declared,
                holds,
            });
        }
        let min = pipeline.sizes.storage.get(i).copied().unwrap_or(0);
        if size < min {
            return Err(ServerError::BindingTooSmall {
                kernel: pipeline.name.clone(),
                binding: i as u32,
                size: b.size,
                min,
            });
        }
        ranges.push((h.id, h.offset, size));
    }
    check_overlap(pipeline, args, &ranges)?;
    Ok(ranges)
}

/// No two bindings share bytes where one of them is written.
fn check_overlap(
    pipeline: &CachedPipeline,
    args: &KernelArguments,
    ranges: &[Range],
) -> Result<(), ServerError> {
    let writes = |i: usize| pipeline.layout.bindings.get(i) == Some(&BindingAccess::ReadWrite);
    for (j, &(page_j, at_j, size_j)) in ranges.iter().enumerate() {
        for (i, &(page_i, at_i, size_i)) in ranges[..j].iter().enumerate() {
            let shared = page_i == page_j && at_i < at_j + size_j && at_j < at_i + size_i;
            if shared && (writes(i) || writes(j)) {
                return Err(ServerError::BindingsOverlap {
                    kernel: pipeline.name.clone(),
                    first: i as u32,
                    first_memory: args.buffers[i].memory_id(),
                    second: j as u32,
                    second_memory: args.buffers[j].memory_id(),
                    written: if writes(j) { j as u32 } else { i as u32 },
                });
            }
        }
    }
    Ok(())
}

/// The 12 bytes an indirect count is read from, checked: inside its slice,
/// at a 4-byte aligned offset, at least 12 bytes long.
pub(crate) fn indirect_source(
    memory: &Memory,
    binding: &BufferBinding,
) -> Result<StorageHandle, ServerError> {
    let h = memory.resolve(binding)?;
    if h.offset % 4 != 0 || binding.size < INDIRECT_BYTES {
        return Err(invalid(
            "an indirect count needs 12 bytes at a 4-byte aligned offset".into(),
        ));
    }
    Ok(StorageHandle {
        id: h.id,
        offset: h.offset,
        size: INDIRECT_BYTES,
    })
}
