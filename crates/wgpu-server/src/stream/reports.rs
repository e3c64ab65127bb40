//! Bounds reports: out-of-bounds accesses only the GPU can see.
//!
//! A kernel compiled with `BoundsChecks::Reported` records, in a 16-byte
//! slot bound at `@group(1)`, how many of its accesses fell outside their
//! array and what the first one was (array, index, length). Each launch of
//! such a kernel in a batch gets a slot of its own: a dynamic offset into a
//! zeroed storage buffer of the batch. When the batch finishes, the slots
//! are copied to a `MAP_READ` buffer; once it has run, the map callback
//! gives each launch its late verdict ([`compute_stream::LateFaults`]):
//! `ServerError::OutOfBoundsAccess` poisoning its writes, or none.
//!
//! What it costs: nothing for batches without such launches; for one that
//! has any, a storage buffer, a readback buffer and a bind group per 256
//! launches, one copy, one map.

use std::sync::Arc;

use compute_runtime::{KernelArray, MemoryId, ServerError, StreamId};
use compute_stream::{LateAudit, LateFaults};
use compute_wgsl::{
    REPORT_BYTES, REPORT_LOCAL_BIT, REPORT_PRESENT_BIT as PRESENT, REPORT_SHARED_BIT,
    REPORT_VECTOR_BIT,
};

/// Distance between slots: the largest `min_storage_buffer_offset_alignment`
/// WebGPU allows, so any device accepts the dynamic offsets.
const STRIDE: u64 = 256;
/// Slots of one report buffer.
const SLOTS: usize = 256;

/// The layout of bind group 1 of a reporting kernel: one storage binding,
/// read-write, at a dynamic offset.
pub(crate) fn report_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("bounds report"),
        entries: &[wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: true,
                min_binding_size: wgpu::BufferSize::new(REPORT_BYTES),
            },
            count: None,
        }],
    })
}

/// One launch's slot: its late verdict's registration and its kernel.
#[derive(Debug)]
struct Slot {
    audit: LateAudit,
    kernel: Arc<str>,
}

/// One report buffer, its readback and bind group, and its slots.
#[derive(Debug)]
struct ReportBuffer {
    storage: wgpu::Buffer,
    readback: wgpu::Buffer,
    group: wgpu::BindGroup,
    slots: Vec<Slot>,
}

/// The report slots of one pending batch.
#[derive(Debug, Default)]
pub(crate) struct BoundsReports {
    buffers: Vec<ReportBuffer>,
}

impl BoundsReports {
    /// A slot for a launch of `kernel` writing `writes`, registered with
    /// `late`: the bind group and dynamic offset to bind at group 1.
    pub fn slot(
        &mut self,
        device: &wgpu::Device,
        kernel: &str,
        writes: &[MemoryId],
        late: &LateFaults,
    ) -> (wgpu::BindGroup, u32) {
        if self.buffers.last().is_none_or(|b| b.slots.len() >= SLOTS) {
            self.buffers.push(ReportBuffer::new(device));
        }
        let last = self.buffers.len() - 1;
        let buffer = &mut self.buffers[last];
        let offset = STRIDE * buffer.slots.len() as u64;
        buffer.slots.push(Slot {
            audit: late.expect(writes),
            kernel: kernel.into(),
        });
        // At most `SLOTS * STRIDE` (64 KiB): fits a u32.
        (buffer.group.clone(), offset as u32)
    }

    /// Encodes the copies of every slot to its readback, after the batch's
    /// commands.
    pub fn finish(&self, encoder: &mut wgpu::CommandEncoder) {
        for b in &self.buffers {
            let bytes = STRIDE * b.slots.len() as u64;
            encoder.copy_buffer_to_buffer(&b.storage, 0, &b.readback, 0, bytes);
        }
    }

    /// The batch will not run: the verdict on each launch is `error`.
    pub fn abandon(self, stream: StreamId, late: &LateFaults, error: &ServerError) {
        for b in self.buffers {
            for slot in b.slots {
                late.verdict(slot.audit, stream, Err(error.clone()));
            }
        }
    }

    /// After the batch is submitted: maps every readback; the callback gives
    /// each launch its verdict.
    pub fn submitted(self, stream: StreamId, late: &Arc<LateFaults>) {
        for b in self.buffers {
            let late = Arc::clone(late);
            let readback = b.readback.clone();
            let slots = b.slots;
            b.readback.map_async(wgpu::MapMode::Read, .., move |r| {
                // A failed map means the device is gone (every later call
                // says so): no verdict but that.
                let view = r
                    .ok()
                    .and_then(|()| readback.slice(..).get_mapped_range().ok());
                for (i, slot) in slots.into_iter().enumerate() {
                    let outcome = match view.as_ref().and_then(|v| record(v, i)) {
                        None => Ok(()),
                        Some(r) => Err(r.error(&slot.kernel)),
                    };
                    late.verdict(slot.audit, stream, outcome);
                }
            });
        }
    }
}

impl ReportBuffer {
    fn new(device: &wgpu::Device) -> Self {
        let size = STRIDE * SLOTS as u64;
        // New buffers are zeroed by wgpu: every slot starts with no record.
        let storage = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("bounds reports"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("bounds reports readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("bounds reports"),
            layout: &report_layout(device),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &storage,
                    offset: 0,
                    size: wgpu::BufferSize::new(REPORT_BYTES),
                }),
            }],
        });
        ReportBuffer {
            storage,
            readback,
            group,
            slots: Vec::new(),
        }
    }
}

/// What one slot recorded.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    count: u32,
    array: KernelArray,
    index: u32,
    len: u32,
}

impl Record {
    fn error(&self, kernel: &str) -> ServerError {
        ServerError::OutOfBoundsAccess {
            kernel: kernel.to_string(),
            array: self.array,
            index: self.index,
            len: self.len,
            // Zero only if the count wrapped past 2^32.
            count: if self.count == 0 {
                u32::MAX
            } else {
                self.count
            },
        }
    }
}

/// Slot `i`'s record, if the launch accessed anything out of bounds.
fn record(view: &[u8], i: usize) -> Option<Record> {
    let at = i * STRIDE as usize;
    let word = |w: usize| -> Option<u32> {
        let b: [u8; 4] = view.get(at + 4 * w..at + 4 * w + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(b))
    };
    let (count, array) = (word(0)?, word(1)?);
    if array & PRESENT == 0 {
        return None;
    }
    let id = array & !(PRESENT | REPORT_SHARED_BIT | REPORT_LOCAL_BIT | REPORT_VECTOR_BIT);
    Some(Record {
        count,
        array: if array & REPORT_SHARED_BIT != 0 {
            KernelArray::Shared(id)
        } else if array & REPORT_LOCAL_BIT != 0 {
            KernelArray::Local(id)
        } else if array & REPORT_VECTOR_BIT != 0 {
            KernelArray::Vector
        } else {
            KernelArray::Binding(id)
        },
        index: word(2)?,
        len: word(3)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(words: [u32; 4]) -> Vec<u8> {
        let mut v = vec![0u8; STRIDE as usize];
        for (i, w) in words.iter().enumerate() {
            v[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        v
    }

    #[test]
    fn an_empty_slot_is_no_record() {
        assert_eq!(record(&slot([0; 4]), 0), None);
    }

    #[test]
    fn a_record_names_its_array() {
        let r = record(&slot([3, PRESENT | 2, 70, 64]), 0).expect("record");
        assert_eq!(
            r,
            Record {
                count: 3,
                array: KernelArray::Binding(2),
                index: 70,
                len: 64
            }
        );
        let s = record(&slot([1, PRESENT | REPORT_SHARED_BIT | 1, 9, 8]), 0).expect("record");
        assert_eq!(s.array, KernelArray::Shared(1));
    }

    #[test]
    fn a_wrapped_count_still_fails_the_launch() {
        let r = record(&slot([0, PRESENT, 5, 4]), 0).expect("record");
        assert!(matches!(
            r.error("k"),
            ServerError::OutOfBoundsAccess {
                count: u32::MAX,
                ..
            }
        ));
    }
}
