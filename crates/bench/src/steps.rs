//! `steps.*`: where the time of a transfer, a sync, a profile window and a
//! reservation goes, step by step, so a change is aimed before it is made.
//! Each figure is one step's time against the whole operation's (the ratio
//! is the step's share); medians over the rounds.

use std::time::{Duration, Instant};

use compute_runtime::{Bytes, ManagedMemoryHandle, Server, ServerError};

use crate::harness::{Options, STREAM, alloc, median, sync};
use crate::report::Figure;
use crate::{S, raw};

const SIZE: u64 = 64 << 20;

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn push(
    out: &mut Vec<Figure>,
    name: &'static str,
    step: Vec<f64>,
    whole: Vec<f64>,
    whole_name: &'static str,
) {
    out.push(Figure::new(
        name,
        median(step),
        "us (share of the whole)",
        whole_name,
        median(whole),
    ));
}

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let rounds = o.rounds(3, 9);
    let device = s.device().clone();
    let queue = s.queue().clone();
    let data = Bytes::from(vec![3u8; SIZE as usize]);
    let h = alloc(s, SIZE)?;

    // write 64 MiB through the server: the call, then the sync that covers it.
    let (mut call, mut wait, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        s.write(vec![(h.copy_descriptor(), data.clone())], STREAM);
        let t1 = Instant::now();
        sync(s)?;
        let t2 = Instant::now();
        call.push(us(t1 - t0));
        wait.push(us(t2 - t1));
        whole.push(us(t2 - t0));
    }
    push(
        out,
        "steps.write_64mib.call_us",
        call,
        whole.clone(),
        "write + sync",
    );
    push(
        out,
        "steps.write_64mib.sync_us",
        wait,
        whole,
        "write + sync",
    );

    // read 64 MiB: the call (encode, submit), the wait, using the bytes.
    let (mut call, mut wait, mut touch, mut whole) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        let fut = s.read(vec![h.copy_descriptor()], STREAM);
        let t1 = Instant::now();
        let bytes = futures::executor::block_on(fut)?;
        let t2 = Instant::now();
        let sum = bytes.first().map(|b| raw::sum_words(b));
        std::hint::black_box(sum);
        let t3 = Instant::now();
        drop(bytes);
        call.push(us(t1 - t0));
        wait.push(us(t2 - t1));
        touch.push(us(t3 - t2));
        whole.push(us(t3 - t0));
    }
    push(
        out,
        "steps.read_64mib.call_us",
        call,
        whole.clone(),
        "read + wait + sum",
    );
    push(
        out,
        "steps.read_64mib.wait_us",
        wait,
        whole.clone(),
        "read + wait + sum",
    );
    push(
        out,
        "steps.read_64mib.sum_us",
        touch,
        whole,
        "read + wait + sum",
    );

    // The raw pieces of the same read: copy + submit, the wait, the map.
    let staging = raw::Readback::new(&device, SIZE);
    let raw_src = raw::buffer(
        &device,
        SIZE,
        wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
    );
    let (mut submit, mut gpu, mut map) = (Vec::new(), Vec::new(), Vec::new());
    let mut whole = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&raw_src, 0, &staging.staging, 0, SIZE);
        queue.submit(Some(enc.finish()));
        let t1 = Instant::now();
        raw::wait(&device);
        let t2 = Instant::now();
        staging
            .staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, |_| {});
        raw::wait(&device);
        let sum = staging
            .staging
            .slice(..)
            .get_mapped_range()
            .ok()
            .map(|v| raw::sum_words(&v));
        std::hint::black_box(sum);
        staging.staging.unmap();
        let t3 = Instant::now();
        submit.push(us(t1 - t0));
        gpu.push(us(t2 - t1));
        map.push(us(t3 - t2));
        whole.push(us(t3 - t0));
    }
    push(
        out,
        "steps.raw_read_64mib.submit_us",
        submit,
        whole.clone(),
        "raw read",
    );
    push(
        out,
        "steps.raw_read_64mib.copy_wait_us",
        gpu,
        whole.clone(),
        "raw read",
    );
    push(
        out,
        "steps.raw_read_64mib.map_sum_us",
        map,
        whole,
        "raw read",
    );

    // The chunk size of a chunked read: each chunk summed on a thread of
    // its own as it lands, against the raw chunked loop of the same chunk.
    for (chunk, name) in [
        (1u64 << 20, "steps.read_chunks_1mib_gbps"),
        (2 << 20, "steps.read_chunks_2mib_gbps"),
        (4 << 20, "steps.read_chunks_4mib_gbps"),
        (8 << 20, "steps.read_chunks_8mib_gbps"),
        (16 << 20, "steps.read_chunks_16mib_gbps"),
    ] {
        let (v, b) = crate::transfer::chunked_read_gbps(s, &h, &raw_src, chunk, rounds);
        out.push(Figure::new(
            name,
            v,
            "GB/s (higher is better)",
            "raw chunked read, same chunk",
            b,
        ));
    }

    // sync with nothing pending, and the raw poll.
    let n = 200;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..n {
            sync(s)?;
        }
        ours.push(us(t.elapsed()) / f64::from(n));
        let t = Instant::now();
        for _ in 0..n {
            raw::sync_poll(&device);
        }
        theirs.push(us(t.elapsed()) / f64::from(n));
    }
    push(out, "steps.sync_idle_us", ours, theirs, "raw poll");

    // What a window's end is made of, on raw wgpu: each piece alone.
    raw_window_pieces(&device, &queue, out);

    // A profile window around nothing: start, end.
    let (mut start, mut end) = (Vec::new(), Vec::new());
    let mut whole = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        let tok = s.start_profile(STREAM)?;
        let t1 = Instant::now();
        let d = s.end_profile(STREAM, tok);
        let t2 = Instant::now();
        std::hint::black_box(d.is_ok());
        start.push(us(t1 - t0));
        end.push(us(t2 - t1));
        whole.push(us(t2 - t0));
    }
    sync(s)?;
    push(
        out,
        "steps.profile_window.start_us",
        start,
        whole.clone(),
        "start + end",
    );
    push(
        out,
        "steps.profile_window.end_us",
        end,
        whole,
        "start + end",
    );

    // Reserve (initialize_memory) and free (the drop, drained by the next call).
    let (mut reserve, mut free) = (Vec::new(), Vec::new());
    let mut whole = Vec::new();
    let n = 2000;
    for _ in 0..rounds {
        let mut handles = Vec::with_capacity(n);
        let t0 = Instant::now();
        for _ in 0..n {
            let m = ManagedMemoryHandle::new();
            let _ = s.initialize_memory(m.clone(), 1 << 20, STREAM);
            handles.push(m);
        }
        let t1 = Instant::now();
        drop(handles);
        let _ = s.memory_report(STREAM); // drains the releases
        let t2 = Instant::now();
        reserve.push(us(t1 - t0) * 1e3 / n as f64);
        free.push(us(t2 - t1) * 1e3 / n as f64);
        whole.push(us(t2 - t0) * 1e3 / n as f64);
    }
    push(
        out,
        "steps.reserve_ns",
        reserve,
        whole.clone(),
        "reserve + free",
    );
    push(out, "steps.free_ns", free, whole, "reserve + free");
    Ok(())
}

/// The raw wgpu pieces a device-timed window's end is made of, each timed
/// alone over many repetitions (us per piece): a 16-byte `MAP_READ`
/// readback created and dropped, an empty pass writing a timestamp, a
/// query resolve with its copy, a command encoder created and finished
/// empty and holding all of these, and an empty `queue.submit`.
fn raw_window_pieces(device: &wgpu::Device, queue: &wgpu::Queue, out: &mut Vec<Figure>) {
    const N: u32 = 500;
    let per = |t: Instant| us(t.elapsed()) / f64::from(N);
    let query_set = device.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolve = raw::buffer(
        device,
        16,
        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
    );
    let readback = raw::buffer(
        device,
        16,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let mut pieces = Vec::new();
    let t = Instant::now();
    for _ in 0..N {
        drop(raw::buffer(
            device,
            16,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        ));
    }
    pieces.push(("steps.raw_window.readback_create_us", per(t)));
    let timestamps = device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    if timestamps {
        let mut enc = device.create_command_encoder(&Default::default());
        let t = Instant::now();
        for _ in 0..N {
            let _pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &query_set,
                    beginning_of_pass_write_index: Some(1),
                    end_of_pass_write_index: None,
                }),
            });
        }
        pieces.push(("steps.raw_window.stamp_pass_us", per(t)));
        let t = Instant::now();
        for _ in 0..N {
            enc.resolve_query_set(&query_set, 0..2, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 16);
        }
        pieces.push(("steps.raw_window.resolve_copy_us", per(t)));
        queue.submit(Some(enc.finish()));
        raw::wait(device);
        // What a parked window's end finishes: an encoder holding the two
        // stamp passes, the resolve and its copy.
        let t = Instant::now();
        let mut finished = Vec::with_capacity(N as usize);
        for _ in 0..N {
            let mut enc = device.create_command_encoder(&Default::default());
            for index in [0, 1] {
                let _pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &query_set,
                        beginning_of_pass_write_index: Some(index),
                        end_of_pass_write_index: None,
                    }),
                });
            }
            enc.resolve_query_set(&query_set, 0..2, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 16);
            finished.push(enc.finish());
        }
        pieces.push(("steps.raw_window.stamped_encoder_us", per(t)));
        queue.submit(finished);
        raw::wait(device);
    }
    let t = Instant::now();
    let mut finished = Vec::with_capacity(N as usize);
    for _ in 0..N {
        finished.push(device.create_command_encoder(&Default::default()).finish());
    }
    pieces.push(("steps.raw_window.encoder_us", per(t)));
    queue.submit(finished);
    raw::wait(device);
    let t = Instant::now();
    for _ in 0..N {
        queue.submit(std::iter::empty());
    }
    pieces.push(("steps.raw_window.empty_submit_us", per(t)));
    raw::wait(device);
    for (name, value) in pieces {
        out.push(Figure::new(
            name,
            value,
            "us per piece",
            "one piece alone, raw wgpu",
            value,
        ));
    }
}
