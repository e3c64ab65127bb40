//! `collective.device_switch_roundtrip_4kib_us`: what taking turns between
//! two wgpu devices of one adapter costs, the setting of every
//! single-process collective figure here (ranks are devices of one GPU).
//!
//! A host-staged collective on two ranks submits to one device and waits,
//! then the other. If the driver runs each device as its own context and
//! switches between them, each turn pays the switch, however few bytes
//! move. This figure is a raw 4 KiB round trip (`write_buffer`, copy into
//! a mapped buffer, map, wait) alternating between the two devices, per
//! round trip; its baseline is the same round trip on the first device
//! only. Their difference is the switch; it bounds a small collective from
//! below whatever the server does.
//!
//! `collective.two_device_duplex_gbps` asks the same of large copies: one
//! device copies 64 MiB into a mappable buffer while the other copies 64
//! MiB out of one, from two threads at once, against the same two copies
//! one after the other. Where the allocator puts a mappable buffer is its
//! choice (on the H200 the pair moves more than PCIe carries one way, so
//! at least one side stays in device memory); what the figure asks is
//! only whether the two devices' copies overlap.
//!
//! `collective.two_device_kernels_per_s` asks it without any transfer: a
//! one-workgroup kernel that runs for milliseconds, launched on both
//! devices at once, against the same launches in turn. Either would fit
//! on the GPU beside the other many times over, so about 2x says the
//! devices run at once and about 1x that the driver gives the GPU to one
//! device at a time, which a host-staged collective of these ranks pays
//! on every step.

use std::time::Instant;

use crate::harness::{Options, interleaved};
use crate::raw;
use crate::report::Figure;

/// One device's 4 KiB round trip: a storage buffer and its readback.
struct Trip {
    device: wgpu::Device,
    queue: wgpu::Queue,
    buffer: wgpu::Buffer,
    back: raw::Readback,
}

impl Trip {
    fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Self {
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        Trip {
            device: device.clone(),
            queue: queue.clone(),
            buffer: raw::buffer(device, 4096, usage),
            back: raw::Readback::new(device, 4096),
        }
    }

    fn run(&self, data: &[u8]) {
        self.queue.write_buffer(&self.buffer, 0, data);
        std::hint::black_box(
            self.back
                .read(&self.device, &self.queue, &self.buffer, 4096, |b| b[0]),
        );
    }
}

/// One device's half of the duplex figure: `reps` copies of 64 MiB, each
/// submitted and waited for, between a storage buffer and a host-visible
/// one that is never mapped, so no host memcpy joins the DMA.
struct Copies {
    device: wgpu::Device,
    queue: wgpu::Queue,
    from: wgpu::Buffer,
    to: wgpu::Buffer,
}

const DUPLEX_BYTES: u64 = 64 << 20;

impl Copies {
    fn new(device: &wgpu::Device, queue: &wgpu::Queue, down: bool) -> Self {
        use wgpu::BufferUsages as U;
        let storage = U::STORAGE | U::COPY_SRC | U::COPY_DST;
        let (from, to) = if down {
            (storage, U::MAP_READ | U::COPY_DST)
        } else {
            (U::MAP_WRITE | U::COPY_SRC, storage)
        };
        Copies {
            device: device.clone(),
            queue: queue.clone(),
            from: raw::buffer(device, DUPLEX_BYTES, from),
            to: raw::buffer(device, DUPLEX_BYTES, to),
        }
    }

    fn run(&self, reps: usize) {
        for _ in 0..reps {
            let mut enc = self.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&self.from, 0, &self.to, 0, DUPLEX_BYTES);
            self.queue.submit(Some(enc.finish()));
            raw::wait(&self.device);
        }
    }
}

/// Seconds (medians over `rounds`, interleaved) for `a` and `b` run from
/// two threads at once, and for the two one after the other: the two sides
/// of the two-device figures. `rounds` is odd, so a median is one round's
/// time and the rate it converts to is that round's rate.
fn at_once_and_in_turn(rounds: usize, a: impl Fn() + Sync, b: impl Fn() + Sync) -> (f64, f64) {
    let timed = |f: &dyn Fn()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64()
    };
    let at_once = || {
        timed(&|| {
            std::thread::scope(|s| {
                s.spawn(&a);
                b();
            })
        })
    };
    let in_turn = || {
        timed(&|| {
            a();
            b();
        })
    };
    interleaved(rounds, at_once, in_turn)
}

/// `collective.two_device_duplex_gbps` over the first two of `devices`.
pub fn duplex(devices: &[(wgpu::Device, wgpu::Queue)], o: &Options) -> Option<Figure> {
    let [(d0, q0), (d1, q1), ..] = devices else {
        return None;
    };
    let (down, up) = (Copies::new(d0, q0, true), Copies::new(d1, q1, false));
    let reps = if o.quick { 2 } else { 8 };
    let bytes = (2 * reps) as f64 * DUPLEX_BYTES as f64;
    let (both, turns) = at_once_and_in_turn(o.rounds(3, 7), || down.run(reps), || up.run(reps));
    let (both, turns) = (bytes / both / 1e9, bytes / turns / 1e9);
    Some(Figure::new(
        "collective.two_device_duplex_gbps",
        both,
        "GB/s, 64 MiB copied into a mappable buffer on one device while 64 MiB is copied \
         out of one on the other, from two threads (higher is better)",
        "the same two copies one after the other",
        turns,
    ))
}

/// A kernel of one workgroup that runs a long chain of dependent
/// multiply-adds: milliseconds of one SM's time, no memory traffic.
const SPIN: &str = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) l: u32) {
    var x = l;
    for (var i = 0u; i < 4000000u; i++) { x = x * 1664525u + 1013904223u; }
    out[l] = x;
}
";

/// One device's spinning kernel, launched and waited for `reps` times.
struct Spin {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    group: wgpu::BindGroup,
}

impl Spin {
    fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Self {
        let pipeline = raw::pipeline(device, SPIN);
        let out = raw::buffer(device, 256, wgpu::BufferUsages::STORAGE);
        let group = raw::bind_whole(device, &pipeline, &[&out]);
        Spin {
            device: device.clone(),
            queue: queue.clone(),
            pipeline,
            group,
        }
    }

    fn run(&self, reps: usize) {
        for _ in 0..reps {
            let mut enc = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &self.group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
            }
            self.queue.submit(Some(enc.finish()));
            raw::wait(&self.device);
        }
    }
}

/// `collective.two_device_kernels_per_s` over the first two of `devices`.
pub fn kernels_at_once(devices: &[(wgpu::Device, wgpu::Queue)], o: &Options) -> Option<Figure> {
    let [(d0, q0), (d1, q1), ..] = devices else {
        return None;
    };
    let (a, b) = (Spin::new(d0, q0), Spin::new(d1, q1));
    a.run(1);
    b.run(1);
    let reps = if o.quick { 2 } else { 6 };
    let launches = (2 * reps) as f64;
    let (both, turns) = at_once_and_in_turn(o.rounds(3, 5), || a.run(reps), || b.run(reps));
    let (both, turns) = (launches / both, launches / turns);
    Some(Figure::new(
        "collective.two_device_kernels_per_s",
        both,
        "launches/s of a one-workgroup kernel of milliseconds, on both devices at once \
         from two threads (higher is better)",
        "the same launches in turn",
        turns,
    ))
}

/// The figure over the first two of `devices`; none if there are fewer.
pub fn figure(devices: &[(wgpu::Device, wgpu::Queue)], o: &Options) -> Option<Figure> {
    let [(d0, q0), (d1, q1), ..] = devices else {
        return None;
    };
    let (a, b) = (Trip::new(d0, q0), Trip::new(d1, q1));
    let data = vec![5u8; 4096];
    let n = if o.quick { 50 } else { 200 };
    // µs per round trip of `n` pairs: one on `a`, then one on `second`.
    let pairs = |second: &Trip| {
        let t = Instant::now();
        for _ in 0..n {
            a.run(&data);
            second.run(&data);
        }
        t.elapsed().as_secs_f64() * 1e6 / (2 * n) as f64
    };
    let (alternating, one) = interleaved(o.rounds(3, 7), || pairs(&b), || pairs(&a));
    Some(Figure::new(
        "collective.device_switch_roundtrip_4kib_us",
        alternating,
        "us per raw 4 KiB round trip, alternating between two devices of the adapter \
         (lower is better)",
        "the same round trip on one device",
        one,
    ))
}
