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
