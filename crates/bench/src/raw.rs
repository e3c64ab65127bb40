//! The raw-wgpu baselines: the closest loop that does the same work
//! without the server, on the server's own device and queue.

use std::time::{Duration, Instant};

use crate::harness::us;
use crate::shaders::TINY;

/// Drains the device.
pub fn wait(device: &wgpu::Device) {
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
}

/// A compute pipeline of `source`'s `main`, with the layout derived,
/// compiled as a raw-wgpu author who knows the kernel would: without
/// wgpu's run-time checks. The server drops the loop counter and the index
/// clamps where it proves them useless (`launch/termination.rs`,
/// `launch/indices.rs`); a baseline that kept them would hide every trip
/// count from the driver and time a slower kernel than the best raw loop
/// (the spin kernel ran 8x longer with the counter on an H100).
pub fn pipeline(device: &wgpu::Device, source: &str) -> wgpu::ComputePipeline {
    let descriptor = wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(source.into()),
    };
    // SAFETY: every source given here is the bench's own WGSL (`shaders.rs`,
    // `suite_wgsl`, the IR's output for the same kernels): each loop ends
    // and each index is inside the buffers the bench binds to it.
    let module = unsafe {
        device.create_shader_module_trusted(descriptor, wgpu::ShaderRuntimeChecks::unchecked())
    };
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// A plain buffer.
pub fn buffer(device: &wgpu::Device, size: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage,
        mapped_at_creation: false,
    })
}

/// A bind group of `pipeline`'s group 0 with `buffers` bound whole, in
/// binding order.
pub fn bind_whole(
    device: &wgpu::Device,
    pipeline: &wgpu::ComputePipeline,
    buffers: &[&wgpu::Buffer],
) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    })
}

/// Pipeline + bind group of the tiny kernel over a buffer of its own.
pub fn tiny(device: &wgpu::Device) -> (wgpu::ComputePipeline, wgpu::BindGroup) {
    let buf = buffer(device, 256, wgpu::BufferUsages::STORAGE);
    let pipeline = pipeline(device, TINY);
    let group = bind_whole(device, &pipeline, &[&buf]);
    (pipeline, group)
}

/// The raw baseline of the launch figures: `launches` dispatches in one
/// pass of one encoder, one submit; µs per launch until the loop returns
/// (or until the GPU is done, `with_wait`). Always drains before returning.
pub fn enqueue_us(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    pipeline: &wgpu::ComputePipeline,
    group: &wgpu::BindGroup,
    launches: usize,
    with_wait: bool,
) -> f64 {
    let t = Instant::now();
    let mut enc = device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, group, &[]);
        for _ in 0..launches {
            pass.dispatch_workgroups(1, 1, 1);
        }
    }
    queue.submit(Some(enc.finish()));
    if with_wait {
        wait(device);
    }
    let e = us(t.elapsed(), launches);
    if !with_wait {
        wait(device);
    }
    e
}

/// The raw write baseline: `write_buffer` + empty submit + wait.
pub fn write(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    dst: &wgpu::Buffer,
    data: &[u8],
) -> Duration {
    let t = Instant::now();
    queue.write_buffer(dst, 0, data);
    queue.submit(std::iter::empty());
    wait(device);
    t.elapsed()
}

/// A reusable `MAP_READ` staging buffer: the raw read baselines copy into it,
/// map it, use the bytes and unmap it, creating nothing per round.
pub struct Readback {
    pub staging: wgpu::Buffer,
}

impl Readback {
    pub fn new(device: &wgpu::Device, size: u64) -> Self {
        Readback {
            staging: buffer(
                device,
                size,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
        }
    }

    /// Copies `size` bytes of `src` into the staging buffer, maps it, runs
    /// `use_bytes` on the mapped range, unmaps.
    pub fn read<R>(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        size: u64,
        use_bytes: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, &self.staging, 0, size);
        queue.submit(Some(enc.finish()));
        self.staging
            .slice(0..size)
            .map_async(wgpu::MapMode::Read, |_| {});
        wait(device);
        let out = self
            .staging
            .slice(0..size)
            .get_mapped_range()
            .ok()
            .map(|v| use_bytes(&v));
        self.staging.unmap();
        out
    }
}

/// The raw read through imported host memory: copy into one reused block
/// of host memory imported into the device (the kind the server's reads
/// land in), submit, wait, use the bytes where they lie. `None` where the
/// device does not import host memory.
pub struct ImportedReadback {
    block: wgpu_server::testing::ImportedHostBlock,
}

impl ImportedReadback {
    pub fn new(device: &wgpu::Device, size: u64) -> Option<Self> {
        let block = wgpu_server::testing::ImportedHostBlock::standalone(device, size)?.ok()?;
        Some(ImportedReadback { block })
    }

    /// Copies `size` bytes of `src` into the block, waits, runs
    /// `use_bytes` on them.
    pub fn read<R>(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        size: u64,
        use_bytes: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, self.block.buffer(), 0, size);
        let index = queue.submit(Some(enc.finish()));
        device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .ok()?;
        // SAFETY: the copy's submission has completed; nothing else copies
        // into this block.
        let bytes = unsafe { self.block.bytes_after_copies() };
        bytes.get(..size as usize).map(use_bytes)
    }
}

/// Bytes of a chunk one worker uses: a chunk is spread over several
/// workers, so the last chunk's use is short.
pub const USE_PIECE: usize = 1 << 20;

/// The ranges of `len` bytes in pieces of `piece`.
pub fn pieces(len: usize, piece: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len)
        .step_by(piece.max(1))
        .map(move |at| at..(at + piece).min(len))
}

/// The raw chunked read: one reused `MAP_READ` buffer per chunk, every
/// chunk's copy submitted on its own up front, then each chunk waited for,
/// used and unmapped in order, so the use of one overlaps the copies of the
/// next (what `read_chunks` does, with nothing of a server around it).
pub struct ChunkedReadback {
    chunk: u64,
    staging: Vec<wgpu::Buffer>,
}

impl ChunkedReadback {
    pub fn new(device: &wgpu::Device, size: u64, chunk: u64) -> Self {
        let staging = (0..size.div_ceil(chunk))
            .map(|i| {
                let len = chunk.min(size - i * chunk);
                buffer(
                    device,
                    len,
                    wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                )
            })
            .collect();
        ChunkedReadback { chunk, staging }
    }

    /// Copies `src` chunk by chunk and, as each chunk's copy has run, hands
    /// the mapped chunk to `workers` running `use_chunk`, one job per
    /// [`USE_PIECE`]; returns the wrapping sum of what they return.
    pub fn read(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        workers: &mut crate::workers::Workers,
        use_chunk: fn(&[u8]) -> u64,
    ) -> u64 {
        let mut submitted = Vec::with_capacity(self.staging.len());
        for (i, staging) in self.staging.iter().enumerate() {
            let mut enc = device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(src, i as u64 * self.chunk, staging, 0, staging.size());
            submitted.push(queue.submit(Some(enc.finish())));
            staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        }
        let mut given = 0;
        for (staging, index) in self.staging.iter().zip(submitted) {
            let _ = device.poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            });
            if let Ok(view) = staging.slice(..).get_mapped_range() {
                let view = std::sync::Arc::new(view);
                for piece in pieces(view.len(), USE_PIECE) {
                    let view = std::sync::Arc::clone(&view);
                    workers.run(move || use_chunk(&view[piece]));
                    given += 1;
                }
            }
        }
        // Every view is dropped by its job before the job reports.
        let total = workers.gather(given);
        for staging in &self.staging {
            staging.unmap();
        }
        total
    }
}

/// Sums bytes as little-endian u64 words: touches every byte, as a caller
/// using the data in place would, on as many threads as a large copy uses
/// (`hostcopy::max_threads`), so one core's load bandwidth does not hide the
/// transfer's.
pub fn sum_words(bytes: &[u8]) -> u64 {
    sum_words_in(bytes, compute_runtime::hostcopy::MIN_CHUNK)
}

/// [`sum_words`] with pieces of at least `piece` bytes per thread: a chunk
/// of a chunked read is summed on as many threads as the whole read would
/// be.
pub fn sum_words_in(bytes: &[u8], piece: usize) -> u64 {
    let serial = |b: &[u8]| {
        b.chunks_exact(8)
            .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
            .fold(0u64, u64::wrapping_add)
    };
    let threads = (bytes.len() / piece.max(8)).clamp(1, compute_runtime::hostcopy::max_threads());
    if threads == 1 {
        return serial(bytes);
    }
    let chunk = bytes.len().div_ceil(threads).next_multiple_of(8);
    std::thread::scope(|scope| {
        let parts: Vec<_> = bytes
            .chunks(chunk)
            .map(|c| scope.spawn(move || serial(c)))
            .collect();
        parts
            .into_iter()
            .map(|p| p.join().unwrap_or(0))
            .fold(0u64, u64::wrapping_add)
    })
}

/// The raw sync with nothing pending: a poll that waits for whatever is in
/// flight (nothing), without submitting.
pub fn sync_poll(device: &wgpu::Device) {
    wait(device);
}
