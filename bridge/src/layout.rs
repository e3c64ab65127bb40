//! How cubecl lays tensors out in allocations on this runtime.
//!
//! cubecl-wgpu's contiguous policy, with one difference: the last tensor of
//! an allocation is not padded to the binding alignment, so a one-tensor
//! allocation is exactly the tensor (rounded to a whole word). This server
//! trusts a slice again only after a full host write of it; with the
//! allocation sized to its tensor, a host write of the whole tensor is one
//! (cubecl's "a host write makes a stale buffer readable again"). Tensors
//! after the first still start on the binding alignment.

use cubecl_common::device::ServiceId;
use cubecl_environment::stream::StreamId;
use cubecl_runtime::server::{Handle, MemoryLayout, MemoryLayoutDescriptor, MemoryLayoutPolicy};
use cubecl_zspace::{Shape, Strides};

/// Contiguous tensors, the last one unpadded.
#[derive(Debug)]
pub struct ExactLayoutPolicy {
    /// The device's binding alignment: where every tensor starts.
    pub alignment: u64,
}

fn contiguous_strides(shape: &Shape) -> Strides {
    let mut strides: Vec<usize> = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides.into()
}

impl MemoryLayoutPolicy for ExactLayoutPolicy {
    fn apply(
        &self,
        service: ServiceId,
        stream_id: StreamId,
        descriptors: &[MemoryLayoutDescriptor],
    ) -> (Handle, Vec<MemoryLayout>) {
        let align = self.alignment.max(4);
        let sizes: Vec<u64> = descriptors
            .iter()
            .map(|d| (d.shape.iter().product::<usize>() as u64).saturating_mul(d.elem_size as u64))
            .collect();
        let mut starts = Vec::with_capacity(sizes.len());
        let mut end = 0u64;
        for size in &sizes {
            let start = end.next_multiple_of(align);
            starts.push(start);
            end = start.saturating_add(*size);
        }
        let total = end.next_multiple_of(4);
        let base = Handle::new(service, stream_id, total);
        let layouts = descriptors
            .iter()
            .zip(starts.iter().zip(&sizes))
            .map(|(d, (start, size))| {
                let handle = base
                    .clone()
                    .offset_start(*start)
                    .offset_end(total - start - size);
                MemoryLayout::new(handle, contiguous_strides(&d.shape))
            })
            .collect();
        (base, layouts)
    }
}
