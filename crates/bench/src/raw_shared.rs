//! Raw-wgpu collectives between devices of one GPU over shared memory:
//! the baselines of the `collective.*` figures where the server takes its
//! device path (`wgpu-server/src/collective/device_call.rs`). The same
//! bytes and the same device work: each rank copies its `src` into its own
//! exported exchange buffer (every other device imports it), every device
//! is waited for, then each rank folds every rank's buffer into its `dst`
//! (f32 sum, rank order, four words per invocation) or copies them
//! (`all_gather`), and every device is waited for again. Nothing else: no
//! rendezvous, no ordering, no trust, no pieces (the buffers hold the
//! whole call). One thread drives every rank, submitting every rank's work
//! of a phase before waiting for any.

use std::time::{Duration, Instant};

use wgpu_server::testing::export_device_memory;

use crate::raw::{buffer, pipeline, wait};
use crate::raw_collective::{RawGroup, RawOp};

struct Rank {
    rank: usize,
    device: wgpu::Device,
    queue: wgpu::Queue,
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
    /// Rank `j`'s exchange buffer as this device sees it (its own at its
    /// rank).
    exchange: Vec<wgpu::Buffer>,
    fold: wgpu::ComputePipeline,
}

/// The raw ranks, or none where the devices cannot share memory.
pub struct RawShared {
    ranks: Vec<Rank>,
    /// Every rank on one device (one GPU context): no exchange buffers,
    /// each rank's fold reads the others' `src` itself, one submission and
    /// one wait per call ([`RawShared::one_context`]).
    one_context: bool,
}

/// The f32 sum of `n` ranks' buffers, in rank order, four words per
/// invocation.
fn fold_source(n: usize) -> String {
    let mut s = String::from(
        "@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<uniform> count: vec4<u32>;\n",
    );
    for j in 0..n {
        s += &format!(
            "@group(0) @binding({}) var<storage, read> x{j}: array<vec4<f32>>;\n",
            j + 2
        );
    }
    s += "@compute @workgroup_size(256)\n\
          fn main(@builtin(global_invocation_id) id: vec3<u32>, \
          @builtin(num_workgroups) groups: vec3<u32>) {\n\
          \x20   for (var i = id.x; i < count.x; i = i + groups.x * 256u) {\n\
          \x20       var acc = x0[i];\n";
    for j in 1..n {
        s += &format!("        acc = acc + x{j}[i];\n");
    }
    s += "        dst[i] = acc;\n    }\n}\n";
    s
}

impl RawShared {
    /// `src` of every rank filled with `fill(rank)`'s bytes (`max` of
    /// them); `None` where a device cannot export or import the memory.
    pub fn new(
        devices: &[(wgpu::Device, wgpu::Queue)],
        max: u64,
        fill: impl Fn(usize) -> Vec<u8>,
    ) -> Option<Self> {
        let n = devices.len();
        let mut exported = Vec::new();
        let mut own = Vec::new();
        for (device, _) in devices {
            let (buffer, handle) = export_device_memory(device, max).ok()?;
            own.push(buffer);
            exported.push(handle);
        }
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let mut ranks = Vec::new();
        for (r, (device, queue)) in devices.iter().enumerate() {
            let mut exchange = Vec::new();
            for (j, handle) in exported.iter().enumerate() {
                exchange.push(match j == r {
                    true => own[r].clone(),
                    false => handle.import(device, max).ok()?,
                });
            }
            let src = buffer(device, max, storage);
            queue.write_buffer(&src, 0, &fill(r));
            queue.submit(std::iter::empty());
            wait(device);
            ranks.push(Rank {
                rank: r,
                device: device.clone(),
                queue: queue.clone(),
                src,
                dst: buffer(device, max, storage),
                exchange,
                fold: pipeline(device, &fold_source(n)),
            });
        }
        Some(RawShared {
            ranks,
            one_context: false,
        })
    }

    /// `n` ranks on the one `device`: what ranks sharing one device (one
    /// GPU context, one queue) could do, where separate devices of one GPU
    /// are separate contexts the GPU time-slices (`probe.one_context_*`).
    pub fn one_context(
        (device, queue): &(wgpu::Device, wgpu::Queue),
        n: usize,
        max: u64,
        fill: impl Fn(usize) -> Vec<u8>,
    ) -> Self {
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let srcs: Vec<wgpu::Buffer> = (0..n)
            .map(|r| {
                let src = buffer(device, max, storage);
                queue.write_buffer(&src, 0, &fill(r));
                src
            })
            .collect();
        queue.submit(std::iter::empty());
        wait(device);
        let fold = pipeline(device, &fold_source(n));
        let ranks = (0..n)
            .map(|r| Rank {
                rank: r,
                device: device.clone(),
                queue: queue.clone(),
                src: srcs[r].clone(),
                dst: buffer(device, max, storage),
                exchange: srcs.clone(),
                fold: fold.clone(),
            })
            .collect();
        RawShared {
            ranks,
            one_context: true,
        }
    }

    /// One call of `op` on `size` bytes (see [`RawOp`]); its wall time.
    pub fn run(&mut self, op: RawOp, size: u64) -> Duration {
        let n = self.ranks.len() as u64;
        let src_len = match op {
            RawOp::AllReduceSum => size,
            RawOp::AllGather => size / n,
        };
        // The parameters and bind groups are made before the clock starts,
        // as a server with cached kernels would have them.
        let groups: Vec<Vec<(wgpu::BindGroup, u64)>> = self
            .ranks
            .iter()
            .map(|r| match op {
                RawOp::AllReduceSum => r.fold_groups(size),
                RawOp::AllGather => Vec::new(),
            })
            .collect();
        let t = Instant::now();
        if self.one_context {
            return self.run_in_one_context(op, size, &groups, t);
        }
        for r in &self.ranks {
            let mut enc = r.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&r.src, 0, &r.exchange[r.rank], 0, src_len);
            r.queue.submit(Some(enc.finish()));
        }
        for r in &self.ranks {
            wait(&r.device);
        }
        for (r, group) in self.ranks.iter().zip(&groups) {
            let mut enc = r.device.create_command_encoder(&Default::default());
            r.encode_combine(&mut enc, op, group, src_len);
            r.queue.submit(Some(enc.finish()));
        }
        for r in &self.ranks {
            wait(&r.device);
        }
        t.elapsed()
    }

    /// [`run`](Self::run) with every rank on one device: every rank's fold
    /// (or copies) in one submission, one wait.
    fn run_in_one_context(
        &self,
        op: RawOp,
        size: u64,
        groups: &[Vec<(wgpu::BindGroup, u64)>],
        t: Instant,
    ) -> Duration {
        let Some(first) = self.ranks.first() else {
            return t.elapsed();
        };
        let src_len = size / self.ranks.len() as u64;
        let mut enc = first.device.create_command_encoder(&Default::default());
        for (r, group) in self.ranks.iter().zip(groups) {
            r.encode_combine(&mut enc, op, group, src_len);
        }
        first.queue.submit(Some(enc.finish()));
        wait(&first.device);
        t.elapsed()
    }
}

impl Rank {
    /// Records this rank's combine: the fold over every rank's buffer
    /// (`groups`, from [`Rank::fold_groups`]) or the copies of every rank's
    /// `src_len` bytes into `dst`.
    fn encode_combine(
        &self,
        enc: &mut wgpu::CommandEncoder,
        op: RawOp,
        groups: &[(wgpu::BindGroup, u64)],
        src_len: u64,
    ) {
        match op {
            RawOp::AllReduceSum => {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&self.fold);
                for (group, invocations) in groups {
                    pass.set_bind_group(0, group, &[]);
                    let workgroups = invocations.div_ceil(256).clamp(1, 8192) as u32;
                    pass.dispatch_workgroups(workgroups, 1, 1);
                }
            }
            RawOp::AllGather => {
                for (j, x) in self.exchange.iter().enumerate() {
                    enc.copy_buffer_to_buffer(x, 0, &self.dst, j as u64 * src_len, src_len);
                }
            }
        }
    }

    /// The fold's bind groups over `size` bytes: one per window the
    /// device can bind at once, each with its count; and each window's
    /// invocations.
    fn fold_groups(&self, size: u64) -> Vec<(wgpu::BindGroup, u64)> {
        fn window(binding: u32, b: &wgpu::Buffer, at: u64, len: u64) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: b,
                    offset: at,
                    size: std::num::NonZeroU64::new(len.max(16)),
                }),
            }
        }
        let limit = self.device.limits().max_storage_buffer_binding_size / 256 * 256;
        let mut out = Vec::new();
        let mut at = 0;
        while at < size {
            let len = (size - at).min(limit);
            let params = buffer(
                &self.device,
                16,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            );
            let mut words = [0u8; 16];
            words[..4].copy_from_slice(&((len / 16) as u32).to_le_bytes());
            self.queue.write_buffer(&params, 0, &words);
            let mut entries = vec![
                window(0, &self.dst, at, len),
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: params.as_entire_binding(),
                },
            ];
            for (j, x) in self.exchange.iter().enumerate() {
                entries.push(window(j as u32 + 2, x, at, len));
            }
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &self.fold.get_bind_group_layout(0),
                entries: &entries,
            });
            out.push((group, len / 16));
            at += len;
        }
        out
    }
}

/// The raw loop a figure is measured against: host-staged, or over shared
/// device memory where the server's ranks take the device path.
pub enum Baseline {
    Host(RawGroup),
    Shared(RawShared),
}

impl Baseline {
    pub fn run(&mut self, op: RawOp, size: u64) -> std::time::Duration {
        match self {
            Baseline::Host(raw) => raw.run(op, size),
            Baseline::Shared(raw) => raw.run(op, size),
        }
    }

    /// `host` or `shared`, the baseline's name for this loop.
    pub fn name(&self, host: &'static str, shared: &'static str) -> &'static str {
        match self {
            Baseline::Host(_) => host,
            Baseline::Shared(_) => shared,
        }
    }
}
