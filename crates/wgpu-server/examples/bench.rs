//! Benchmarks: each figure measured through the server and against the
//! closest raw-wgpu loop doing the same work, in the same process, on the
//! same device, in interleaved rounds; medians reported.
//!
//! `cargo xtask bench [--quick] [--filter PREFIX] [--out PATH]` writes
//! `target/bench/report.json` (or PATH) and prints a table. See
//! `docs/benchmarks.md` for what each figure means.

use std::time::{Duration, Instant};

use compute_runtime::{
    Bytes, CopyDescriptor, CubeCount, DeviceId, Handle, KernelArguments, LaunchMode,
    ManagedMemoryHandle, Server, ServerError, ServerStorage, StreamId,
};
use wgpu_server::{BindingAccess, WgpuServer, WgslKernel, WgslPassthrough};

type S = WgpuServer<WgslPassthrough>;
const STREAM: StreamId = StreamId(0);

const TINY: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + 1u; }
}
"#;

struct Figure {
    name: &'static str,
    value: f64,
    unit: &'static str,
    baseline: &'static str,
    baseline_value: f64,
}

struct Options {
    quick: bool,
    filter: Option<String>,
    out: String,
}

fn options() -> Options {
    let mut o = Options {
        quick: false,
        filter: None,
        out: "target/bench/report.json".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--filter" => o.filter = args.next(),
            "--out" => {
                if let Some(p) = args.next() {
                    o.out = p;
                }
            }
            other => eprintln!("bench: ignoring unknown argument `{other}`"),
        }
    }
    o
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Runs `ours` and `raw` alternately for `rounds`, returning both medians.
fn interleaved(
    rounds: usize,
    mut ours: impl FnMut() -> f64,
    mut raw: impl FnMut() -> f64,
) -> (f64, f64) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r % 2 == 0 {
            a.push(ours());
            b.push(raw());
        } else {
            b.push(raw());
            a.push(ours());
        }
    }
    (median(a), median(b))
}

fn alloc(s: &mut S, size: u64) -> Result<Handle, ServerError> {
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), size, STREAM)?;
    Ok(Handle::new(m, size))
}

fn sync(s: &mut S) -> Result<(), ServerError> {
    futures::executor::block_on(s.sync(vec![], STREAM))
}

fn wait(device: &wgpu::Device) {
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
}

fn us(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

/// Raw pipeline + bind group of the tiny kernel over `buffer`.
fn raw_tiny(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> (wgpu::ComputePipeline, wgpu::BindGroup) {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("raw tiny"),
        source: wgpu::ShaderSource::Wgsl(TINY.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("raw tiny"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer,
                offset,
                size: wgpu::BufferSize::new(size),
            }),
        }],
    });
    (pipeline, group)
}

/// The raw baseline of the launch figures: `launches` dispatches in one
/// pass of one encoder, one submit; µs per launch until the loop returns
/// (or until the GPU is done, `with_wait`). Always drains before returning.
fn raw_enqueue_us(
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
fn raw_write(
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

fn launch_figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let launches = 10_000;
    let rounds = if o.quick { 3 } else { 9 };
    let h = alloc(s, 256)?;
    s.write(
        vec![(h.copy_descriptor(), Bytes::from(vec![0u8; 256]))],
        STREAM,
    );
    let kernel = WgslKernel::new(
        "tiny",
        TINY,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let device = s.device().clone();
    let queue = s.queue().clone();
    let raw_buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 256,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let (pipeline, group) = raw_tiny(&device, &raw_buf, 0, 256);
    sync(s)?;

    let ours = |s: &mut S, with_sync: bool| -> f64 {
        let t = Instant::now();
        for _ in 0..launches {
            let args = KernelArguments::buffers(vec![h.binding()]);
            // SAFETY: the kernel bound-checks with arrayLength.
            unsafe {
                s.launch(
                    Box::new(kernel.clone()),
                    CubeCount::x(1),
                    args,
                    STREAM,
                    LaunchMode::Execute,
                )
            };
        }
        let _ = s.flush(STREAM);
        if with_sync {
            let _ = sync(s);
        }
        let e = us(t.elapsed(), launches);
        if !with_sync {
            let _ = sync(s);
        }
        e
    };
    let raw =
        |with_wait: bool| raw_enqueue_us(&device, &queue, &pipeline, &group, launches, with_wait);
    let cell = std::cell::RefCell::new(s);
    let (v, b) = interleaved(
        rounds,
        || ours(&mut cell.borrow_mut(), false),
        || raw(false),
    );
    out.push(Figure {
        name: "launch.enqueue_us",
        value: v,
        unit: "us/launch (lower is better)",
        baseline: "raw.enqueue_us",
        baseline_value: b,
    });
    let (v, b) = interleaved(rounds, || ours(&mut cell.borrow_mut(), true), || raw(true));
    out.push(Figure {
        name: "launch.e2e_us",
        value: v,
        unit: "us/launch (lower is better)",
        baseline: "raw.e2e_us",
        baseline_value: b,
    });
    Ok(())
}

fn sync_figure(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let n = if o.quick { 200 } else { 1000 };
    let rounds = if o.quick { 3 } else { 9 };
    let device = s.device().clone();
    let queue = s.queue().clone();
    let cell = std::cell::RefCell::new(s);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..n {
                let _ = sync(&mut s);
            }
            us(t.elapsed(), n)
        },
        || {
            let t = Instant::now();
            for _ in 0..n {
                queue.submit(std::iter::empty());
                wait(&device);
            }
            us(t.elapsed(), n)
        },
    );
    out.push(Figure {
        name: "sync.roundtrip_us",
        value: v,
        unit: "us (lower is better)",
        baseline: "raw.sync_roundtrip_us",
        baseline_value: b,
    });
    Ok(())
}

fn transfer_figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let size: u64 = 64 << 20;
    let rounds = if o.quick { 3 } else { 7 };
    let data = Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let h = alloc(s, size)?;
    let device = s.device().clone();
    let queue = s.queue().clone();
    let raw_dst = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let gbps = |d: Duration| size as f64 / d.as_secs_f64() / 1e9;
    let cell = std::cell::RefCell::new(s);

    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            s.write(vec![(h.copy_descriptor(), data.clone())], STREAM);
            let _ = sync(&mut s);
            gbps(t.elapsed())
        },
        || gbps(raw_write(&device, &queue, &raw_dst, &data)),
    );
    out.push(Figure {
        name: "transfer.write_64mib_gbps",
        value: v,
        unit: "GB/s (higher is better)",
        baseline: "raw.write_64mib_gbps",
        baseline_value: b,
    });

    let raw_read = || {
        let t = Instant::now();
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&raw_dst, 0, &staging, 0, size);
        queue.submit(Some(enc.finish()));
        staging.map_async(wgpu::MapMode::Read, .., |_| {});
        wait(&device);
        let bytes = staging
            .get_mapped_range(..)
            .map(|v| v.to_vec())
            .unwrap_or_default();
        std::hint::black_box(bytes);
        gbps(t.elapsed())
    };
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            let r = futures::executor::block_on(s.read(vec![h.copy_descriptor()], STREAM));
            // The same work as the raw loop: the bytes end up in a Vec.
            let bytes = r.ok().and_then(|mut v| v.pop()).map(|b| b.to_vec());
            std::hint::black_box(bytes);
            gbps(t.elapsed())
        },
        raw_read,
    );
    out.push(Figure {
        name: "transfer.read_64mib_gbps",
        value: v,
        unit: "GB/s (higher is better)",
        baseline: "raw.read_64mib_gbps",
        baseline_value: b,
    });

    // 4 KiB round trip.
    let small = Bytes::from(vec![7u8; 4096]);
    let hs = alloc(&mut cell.borrow_mut(), 4096)?;
    let raw_small = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4096,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let n = if o.quick { 50 } else { 200 };
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..n {
                s.write(vec![(hs.copy_descriptor(), small.clone())], STREAM);
                let r = futures::executor::block_on(s.read(vec![hs.copy_descriptor()], STREAM));
                std::hint::black_box(r.ok());
            }
            us(t.elapsed(), n)
        },
        || {
            let t = Instant::now();
            for _ in 0..n {
                queue.write_buffer(&raw_small, 0, &small);
                let staging = device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: 4096,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let mut enc = device.create_command_encoder(&Default::default());
                enc.copy_buffer_to_buffer(&raw_small, 0, &staging, 0, 4096);
                queue.submit(Some(enc.finish()));
                staging.map_async(wgpu::MapMode::Read, .., |_| {});
                wait(&device);
                let bytes = staging
                    .get_mapped_range(..)
                    .map(|v| v.to_vec())
                    .unwrap_or_default();
                std::hint::black_box(bytes);
            }
            us(t.elapsed(), n)
        },
    );
    out.push(Figure {
        name: "transfer.roundtrip_4kib_us",
        value: v,
        unit: "us (lower is better)",
        baseline: "raw.roundtrip_4kib_us",
        baseline_value: b,
    });
    let _ = cell.borrow_mut().get_resource(h.binding(), STREAM);
    let _ = CopyDescriptor::contiguous(h.binding());
    Ok(())
}

const SHARED_COPY: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] + 1u; }
}
"#;

const SPIN: &str = r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var acc = f32(id.x);
    for (var i = 0u; i < p.n; i = i + 1u) { acc = acc * 0.999 + 1.0; }
    x[id.x] = acc;
}
"#;

/// CPU nanoseconds of this process's own threads named in `names` (and the
/// calling thread), from /proc: the driver's threads are left out, since on
/// a CPU adapter they are the "GPU".
fn own_cpu_ns(names: &[&str]) -> Option<u64> {
    let field = |path: std::path::PathBuf| -> Option<u64> {
        std::fs::read_to_string(path)
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let mut total = field("/proc/thread-self/schedstat".into())?;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if names.iter().any(|n| comm.trim() == *n) {
            total += field(task.path().join("schedstat")).unwrap_or(0);
        }
    }
    Some(total)
}

fn stream_figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    // Cross-stream: launches alternate between two streams that read one
    // shared input and write their own outputs (no hazard, so no forced
    // submits); baseline the raw single-pass loop of launch.enqueue_us.
    let launches = 10_000;
    let rounds = if o.quick { 3 } else { 9 };
    let shared = alloc(s, 256)?;
    let outs = [alloc(s, 256)?, alloc(s, 256)?];
    s.write(
        vec![(shared.copy_descriptor(), Bytes::from(vec![0u8; 256]))],
        STREAM,
    );
    let kernel = WgslKernel::new(
        "shared_copy",
        SHARED_COPY,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    );
    let device = s.device().clone();
    let queue = s.queue().clone();
    let raw_buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 256,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let (pipeline, group) = raw_tiny(&device, &raw_buf, 0, 256);
    sync(s)?;
    let cell = std::cell::RefCell::new(&mut *s);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for i in 0..launches {
                let stream = StreamId(1 + (i % 2) as u64);
                let args = KernelArguments::buffers(vec![shared.binding(), outs[i % 2].binding()]);
                // SAFETY: the kernel bound-checks with arrayLength.
                unsafe {
                    s.launch(
                        Box::new(kernel.clone()),
                        CubeCount::x(1),
                        args,
                        stream,
                        LaunchMode::Execute,
                    )
                };
            }
            let _ = s.flush(StreamId(1));
            let _ = s.flush(StreamId(2));
            let e = us(t.elapsed(), launches);
            let _ = futures::executor::block_on(s.sync(vec![], StreamId(1)));
            let _ = futures::executor::block_on(s.sync(vec![], StreamId(2)));
            e
        },
        || raw_enqueue_us(&device, &queue, &pipeline, &group, launches, false),
    );
    out.push(Figure {
        name: "stream.cross_stream_enqueue_us",
        value: v,
        unit: "us/launch (lower is better)",
        baseline: "raw.enqueue_us",
        baseline_value: b,
    });

    // Idle wait: CPU the server's own threads (caller + poller) spend while
    // a sync waits on ~100 ms of GPU work.
    let x = alloc(&mut cell.borrow_mut(), 64 * 4 * 1024)?;
    let spin = WgslKernel::new(
        "spin",
        SPIN,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let run_spin = |s: &mut S, n: u32| -> Duration {
        let mut p = n.to_le_bytes().to_vec();
        p.resize(16, 0);
        let args = KernelArguments::buffers(vec![x.binding()]).with_scalars(p);
        let t = Instant::now();
        // SAFETY: the kernel writes x[id.x] for 1024 workgroups of 64, which x holds.
        unsafe {
            s.launch(
                Box::new(spin.clone()),
                CubeCount::x(1024),
                args,
                STREAM,
                LaunchMode::Execute,
            )
        };
        let _ = futures::executor::block_on(s.sync(vec![], STREAM));
        t.elapsed()
    };
    let mut n = 1u32 << 8;
    loop {
        let d = run_spin(&mut cell.borrow_mut(), n);
        if d >= Duration::from_millis(25) || n >= 1 << 30 {
            let scale = 100.0 / (d.as_secs_f64() * 1e3).max(1e-3);
            n = ((f64::from(n) * scale) as u32).max(1);
            break;
        }
        n = n.saturating_mul(4);
    }
    // One more pass now that everything is warm.
    let d = run_spin(&mut cell.borrow_mut(), n);
    n = ((f64::from(n) * 100.0 / (d.as_secs_f64() * 1e3).max(1e-3)) as u32).max(1);
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    for _ in 0..if o.quick { 2 } else { 5 } {
        let before = own_cpu_ns(&["wgpu-server-pol"]);
        let d = run_spin(&mut cell.borrow_mut(), n);
        let after = own_cpu_ns(&["wgpu-server-pol"]);
        if let (Some(a), Some(b)) = (before, after) {
            cpu.push((b - a) as f64 / 1e6);
            wall.push(d.as_secs_f64() * 1e3);
        }
    }
    if !cpu.is_empty() {
        out.push(Figure {
            name: "stream.idle_wait_cpu_ms",
            value: median(cpu),
            unit: "ms CPU of the server's threads (lower is better)",
            baseline: "wall_ms_waited",
            baseline_value: median(wall),
        });
    }
    Ok(())
}

fn memory_figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    // Reserve + free of 1 MiB with 10,000 live handles of mixed small sizes.
    let live: Vec<Handle> = (0..10_000u64)
        .map(|i| alloc(s, 256 + (i % 64) * 256))
        .collect::<Result<_, _>>()?;
    let device = s.device().clone();
    let n = if o.quick { 2_000 } else { 10_000 };
    let rounds = if o.quick { 3 } else { 9 };
    let cell = std::cell::RefCell::new(&mut *s);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..n {
                let m = ManagedMemoryHandle::new();
                let _ = s.initialize_memory(m.clone(), 1 << 20, STREAM);
                drop(m); // freed at the next call's drain
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        },
        || {
            let t = Instant::now();
            for _ in 0..n {
                let b = device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: 1 << 20,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                drop(b);
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        },
    );
    out.push(Figure {
        name: "memory.reserve_free_ns",
        value: v,
        unit: "ns per reserve+free (lower is better)",
        baseline: "raw.create_buffer_drop_ns",
        baseline_value: b,
    });
    drop(live);

    let ratio = compute_testkit::trace::peak_trace_ratio(
        compute_testkit::trace::TRACE_SEED,
        compute_testkit::trace::TRACE_OPS,
    );
    out.push(Figure {
        name: "memory.peak_reserved_over_peak_live",
        value: ratio,
        unit: "ratio (lower is better; target <= 1.25)",
        baseline: "ideal (1.0)",
        baseline_value: 1.0,
    });

    // staging + write of 64 MiB against the raw write_buffer loop.
    let size = 64usize << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let h = alloc(&mut cell.borrow_mut(), size as u64)?;
    let queue = cell.borrow().queue().clone();
    let raw_dst = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: size as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let gbps = |d: Duration| size as f64 / d.as_secs_f64() / 1e9;
    let (v, b) = interleaved(
        if o.quick { 3 } else { 7 },
        || {
            let mut s = cell.borrow_mut();
            let t0 = Instant::now();
            let Some(staged) = s.staging(&[size], STREAM).ok().and_then(|mut v| v.pop()) else {
                return f64::NAN;
            };
            let staging_time = t0.elapsed();
            // Filling is the caller's work (the raw loop's data is already
            // in place), so it is not timed.
            let Ok(mut fill) = staged.try_into_mut() else {
                return f64::NAN;
            };
            fill.copy_from_slice(&data);
            let t1 = Instant::now();
            s.write(vec![(h.copy_descriptor(), fill.freeze())], STREAM);
            let _ = sync(&mut s);
            gbps(staging_time + t1.elapsed())
        },
        || gbps(raw_write(&device, &queue, &raw_dst, &data)),
    );
    out.push(Figure {
        name: "transfer.staged_write_64mib_gbps",
        value: v,
        unit: "GB/s (higher is better)",
        baseline: "raw.write_64mib_gbps",
        baseline_value: b,
    });
    Ok(())
}

fn profile_figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let x = alloc(s, 64 * 4 * 1024)?;
    let spin = WgslKernel::new(
        "spin",
        SPIN,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let launch = |s: &mut S, n: u32| {
        let mut p = n.to_le_bytes().to_vec();
        p.resize(16, 0);
        let args = KernelArguments::buffers(vec![x.binding()]).with_scalars(p);
        // SAFETY: 1024 workgroups of 64 write x[0..65536], which x holds.
        unsafe {
            s.launch(
                Box::new(spin.clone()),
                CubeCount::x(1024),
                args,
                STREAM,
                LaunchMode::Execute,
            )
        };
    };
    launch(s, 1);
    sync(s)?;
    // Overhead: CPU time of start + end around one launch, minus the launch.
    let n = if o.quick { 200 } else { 2000 };
    let mut with = Vec::new();
    let mut without = Vec::new();
    for _ in 0..if o.quick { 3 } else { 9 } {
        let t = Instant::now();
        for _ in 0..n {
            launch(s, 1);
        }
        without.push(us(t.elapsed(), n));
        sync(s)?;
        let t = Instant::now();
        for _ in 0..n {
            let Ok(tok) = s.start_profile(STREAM) else {
                break;
            };
            launch(s, 1);
            let d = s.end_profile(STREAM, tok);
            std::hint::black_box(d.is_ok());
        }
        with.push(us(t.elapsed(), n));
        sync(s)?;
    }
    let base = median(without);
    let overhead = median(with) - base;
    out.push(Figure {
        name: "profile.window_overhead_us",
        value: overhead,
        unit: "us CPU per window (lower is better)",
        baseline: "launch.enqueue_us",
        baseline_value: base,
    });

    // Accuracy: a large kernel timed by a device window vs a raw
    // timestamp-query pair around the same dispatch.
    if s.timing_method() != compute_runtime::TimingMethod::Device {
        return Ok(());
    }
    let heavy = 20_000u32;
    let mut ours = Vec::new();
    let mut raw = Vec::new();
    let device = s.device().clone();
    let queue = s.queue().clone();
    let qs = device.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolve = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(SPIN.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let raw_x = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 64 * 4 * 1024,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let uni = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut p = heavy.to_le_bytes().to_vec();
    p.resize(16, 0);
    queue.write_buffer(&uni, 0, &p);
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: raw_x.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: uni.as_entire_binding(),
            },
        ],
    });
    let period = f64::from(queue.get_timestamp_period());
    for _ in 0..if o.quick { 3 } else { 7 } {
        let Ok(tok) = s.start_profile_at_launch(STREAM) else {
            break;
        };
        launch(s, heavy);
        if let Ok(d) = s.end_profile(STREAM, tok)
            && let Ok(d) = futures::executor::block_on(d.resolve())
        {
            ours.push(d.as_secs_f64() * 1e6);
        }
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &qs,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(1024, 1, 1);
        }
        enc.resolve_query_set(&qs, 0..2, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 16);
        queue.submit(Some(enc.finish()));
        readback.map_async(wgpu::MapMode::Read, .., |_| {});
        wait(&device);
        if let Ok(v) = readback.get_mapped_range(..) {
            let t0 = u64::from_le_bytes(v[0..8].try_into().unwrap_or_default());
            let t1 = u64::from_le_bytes(v[8..16].try_into().unwrap_or_default());
            raw.push(t1.saturating_sub(t0) as f64 * period / 1e3);
        }
    }
    if !ours.is_empty() && !raw.is_empty() {
        let (a, b) = (median(ours), median(raw));
        out.push(Figure {
            name: "profile.accuracy_ratio",
            value: a / b,
            unit: Box::leak(
                format!("ratio (target 0.95..1.05; device window {a:.1} us, raw {b:.1} us)")
                    .into_boxed_str(),
            ),
            baseline: "ideal (1.0)",
            baseline_value: 1.0,
        });
    }
    Ok(())
}

/// The tiled matmul of `compute_testkit::kernels::tiled_matmul`, written by
/// hand: 16x16 tiles of a and b in workgroup memory, two barriers per step,
/// fma accumulation, zero padding at the edges.
const MATMUL_WGSL: &str = r#"
struct P { m: u32, n: u32, k: u32, pad: u32 }
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
var<workgroup> ta: array<f32, 256>;
var<workgroup> tb: array<f32, 256>;
@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.y * 16u + lid.y;
    let col = wid.x * 16u + lid.x;
    let me = lid.y * 16u + lid.x;
    var acc = 0.0;
    let steps = (p.k + 15u) / 16u;
    for (var t = 0u; t < steps; t = t + 1u) {
        let ac = t * 16u + lid.x;
        var va = 0.0;
        if (row < p.m && ac < p.k) { va = a[row * p.k + ac]; }
        ta[me] = va;
        let br = t * 16u + lid.y;
        var vb = 0.0;
        if (br < p.k && col < p.n) { vb = b[br * p.n + col]; }
        tb[me] = vb;
        workgroupBarrier();
        for (var i = 0u; i < 16u; i = i + 1u) {
            acc = fma(ta[lid.y * 16u + i], tb[i * 16u + lid.x], acc);
        }
        workgroupBarrier();
    }
    if (row < p.m && col < p.n) { c[row * p.n + col] = acc; }
}
"#;

type Ir = WgpuServer<wgpu_server::IrCompiler>;

fn ir_alloc(s: &mut Ir, size: u64) -> Result<Handle, ServerError> {
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), size, STREAM)?;
    Ok(Handle::new(m, size))
}

fn raw_pipeline(device: &wgpu::Device, source: &str) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

fn kernel_figures(o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    use compute_ir::Lit;
    use compute_testkit::kernels;
    use compute_wgsl::WgpuCompiler;
    let mut s = Ir::try_init(DeviceId(0))?;
    let device = s.device().clone();
    let queue = s.queue().clone();
    let cpu = Server::utilities(&s).adapter.device_type == "Cpu";
    let rounds = if o.quick { 3 } else { 7 };
    let caps = compute_wgsl::DeviceCaps {
        limits: device.limits(),
        features: device.features(),
    };
    let err = |e: compute_ir::IrError| ServerError::InvalidArgument {
        reason: e.to_string(),
    };

    // compile.matmul_us: IR build + WGSL + module + pipeline, against
    // module + pipeline of the handwritten WGSL.
    let (v, b) = interleaved(
        rounds,
        || {
            let t = Instant::now();
            let Ok(k) = kernels::tiled_matmul() else {
                return f64::NAN;
            };
            let mut c = wgpu_server::IrCompiler;
            let Ok(compiled) = c.compile(&k, &Default::default(), &caps) else {
                return f64::NAN;
            };
            std::hint::black_box(raw_pipeline(&device, &compiled.source));
            t.elapsed().as_secs_f64() * 1e6
        },
        || {
            let t = Instant::now();
            std::hint::black_box(raw_pipeline(&device, MATMUL_WGSL));
            t.elapsed().as_secs_f64() * 1e6
        },
    );
    out.push(Figure {
        name: "compile.matmul_us",
        value: v,
        unit: "us (lower is better)",
        baseline: "raw.module_pipeline_us (handwritten WGSL)",
        baseline_value: b,
    });

    // kernel.matmul_gflops.
    let kernel = kernels::tiled_matmul().map_err(err)?;
    let dim: u32 = if cpu { 256 } else { 2048 };
    let bytes = u64::from(dim * dim) * 4;
    let (ha, hb, hc) = (
        ir_alloc(&mut s, bytes)?,
        ir_alloc(&mut s, bytes)?,
        ir_alloc(&mut s, bytes)?,
    );
    let ones = Bytes::from(vec![0u8; bytes as usize]);
    s.write(
        vec![
            (ha.copy_descriptor(), ones.clone()),
            (hb.copy_descriptor(), ones),
        ],
        STREAM,
    );
    let scalars = kernel
        .pack_scalars(&[Lit::U32(dim), Lit::U32(dim), Lit::U32(dim)])
        .map_err(err)?;
    let reps = if cpu { 2 } else { 20 };
    let groups = dim.div_ceil(16);
    let run_ours = |s: &mut Ir| {
        for _ in 0..reps {
            let args = KernelArguments::buffers(vec![ha.binding(), hb.binding(), hc.binding()])
                .with_scalars(scalars.clone());
            // SAFETY: the kernel guards every access with the m, n, k it is given.
            unsafe {
                s.launch(
                    Box::new(kernel.clone()),
                    CubeCount::Static(groups, groups, 1),
                    args,
                    STREAM,
                    LaunchMode::Execute,
                )
            };
        }
        let _ = futures::executor::block_on(s.sync(vec![], STREAM));
    };
    run_ours(&mut s);
    let raw = raw_pipeline(&device, MATMUL_WGSL);
    let mk = |usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage,
            mapped_at_creation: false,
        })
    };
    let (ra, rb, rc) = (
        mk(wgpu::BufferUsages::STORAGE),
        mk(wgpu::BufferUsages::STORAGE),
        mk(wgpu::BufferUsages::STORAGE),
    );
    let uni = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(
        &uni,
        0,
        &[
            dim.to_le_bytes(),
            dim.to_le_bytes(),
            dim.to_le_bytes(),
            [0; 4],
        ]
        .concat(),
    );
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &raw.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: ra.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: rb.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: rc.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: uni.as_entire_binding(),
            },
        ],
    });
    let run_raw = || {
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&raw);
            pass.set_bind_group(0, &group, &[]);
            for _ in 0..reps {
                pass.dispatch_workgroups(groups, groups, 1);
            }
        }
        queue.submit(Some(enc.finish()));
        wait(&device);
    };
    run_raw();
    let flops = 2.0 * f64::from(dim).powi(3) * f64::from(reps);
    let cell = std::cell::RefCell::new(&mut s);
    let (v, b) = interleaved(
        rounds,
        || {
            let t = Instant::now();
            run_ours(&mut cell.borrow_mut());
            flops / t.elapsed().as_secs_f64() / 1e9
        },
        || {
            let t = Instant::now();
            run_raw();
            flops / t.elapsed().as_secs_f64() / 1e9
        },
    );
    out.push(Figure {
        name: "kernel.matmul_gflops",
        value: v,
        unit: Box::leak(format!("GFLOP/s, {dim}^3 (higher is better)").into_boxed_str()),
        baseline: "raw.matmul_gflops",
        baseline_value: b,
    });

    // compile.cache_hit_ns: the pipeline lookup a launch does on a hit.
    let n = 100_000;
    let t = Instant::now();
    let mut hits = 0;
    for _ in 0..n {
        hits += usize::from(cell.borrow().is_compiled(&kernel));
    }
    let hit_ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(n);
    std::hint::black_box(hits);
    let t = Instant::now();
    let reps_enq = 2000;
    {
        let mut s = cell.borrow_mut();
        for _ in 0..reps_enq {
            let args = KernelArguments::buffers(vec![ha.binding(), hb.binding(), hc.binding()])
                .with_scalars(scalars.clone());
            // SAFETY: as above; a 1x1 dispatch.
            unsafe {
                s.launch(
                    Box::new(kernel.clone()),
                    CubeCount::Static(1, 1, 1),
                    args,
                    STREAM,
                    LaunchMode::Execute,
                )
            };
        }
    }
    let launch_ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(reps_enq);
    let _ = futures::executor::block_on(cell.borrow_mut().sync(vec![], STREAM));
    out.push(Figure {
        name: "compile.cache_hit_ns",
        value: hit_ns,
        unit: "ns per lookup (lower is better)",
        baseline: "launch_ns (whole launch of the same kernel)",
        baseline_value: launch_ns,
    });

    // kernel.add_gbps: c = a + b, 12 bytes per element, against a copy that
    // moves the same 12 bytes per element (6 read + 6 written).
    let add = kernels::elementwise_add(compute_ir::Scalar::F32, 256).map_err(err)?;
    let elems: u32 = if cpu { 1 << 22 } else { 65_535 * 256 };
    let eb = u64::from(elems) * 4;
    let (xa, xb, xc) = {
        let mut s = cell.borrow_mut();
        (
            ir_alloc(&mut s, eb)?,
            ir_alloc(&mut s, eb)?,
            ir_alloc(&mut s, eb)?,
        )
    };
    let add_scalars = add.pack_scalars(&[Lit::U32(elems)]).map_err(err)?;
    let add_reps = if cpu { 3 } else { 20 };
    let csrc = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: eb * 3 / 2,
        usage: wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let cdst = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: eb * 3 / 2,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let moved = 12.0 * f64::from(elems) * f64::from(add_reps);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..add_reps {
                let args = KernelArguments::buffers(vec![xa.binding(), xb.binding(), xc.binding()])
                    .with_scalars(add_scalars.clone());
                // SAFETY: the kernel guards with n.
                unsafe {
                    s.launch(
                        Box::new(add.clone()),
                        CubeCount::x(elems / 256),
                        args,
                        STREAM,
                        LaunchMode::Execute,
                    )
                };
            }
            let _ = futures::executor::block_on(s.sync(vec![], STREAM));
            moved / t.elapsed().as_secs_f64() / 1e9
        },
        || {
            let t = Instant::now();
            let mut enc = device.create_command_encoder(&Default::default());
            for _ in 0..add_reps {
                enc.copy_buffer_to_buffer(&csrc, 0, &cdst, 0, eb * 3 / 2);
            }
            queue.submit(Some(enc.finish()));
            wait(&device);
            moved / t.elapsed().as_secs_f64() / 1e9
        },
    );
    out.push(Figure {
        name: "kernel.add_gbps",
        value: v,
        unit: "GB/s moved, 12 B/element (higher is better)",
        baseline: "raw.copy_gbps (same bytes moved)",
        baseline_value: b,
    });
    Ok(())
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

fn main() -> Result<(), ServerError> {
    let o = options();
    let mut s = S::try_init(DeviceId(0))?;
    let a = Server::utilities(&s).adapter.clone();
    println!(
        "adapter: {} ({}, {}, {} {})",
        a.name, a.backend, a.device_type, a.driver, a.driver_info
    );
    let wanted = |prefix: &str| {
        o.filter
            .as_deref()
            .is_none_or(|f| prefix.starts_with(f) || f.starts_with(prefix))
    };
    let mut figures = Vec::new();
    if wanted("launch.") {
        launch_figures(&mut s, &o, &mut figures)?;
    }
    if wanted("memory.") {
        memory_figures(&mut s, &o, &mut figures)?;
    }
    if wanted("profile.") {
        profile_figures(&mut s, &o, &mut figures)?;
    }
    if wanted("compile.") || wanted("kernel.") {
        kernel_figures(&o, &mut figures)?;
    }
    if wanted("stream.") {
        stream_figures(&mut s, &o, &mut figures)?;
    }
    if wanted("sync.") {
        sync_figure(&mut s, &o, &mut figures)?;
    }
    if wanted("transfer.") {
        transfer_figures(&mut s, &o, &mut figures)?;
    }
    if let Some(f) = &o.filter {
        figures.retain(|x| x.name.starts_with(f.as_str()));
    }

    println!(
        "\n{:<32} {:>12} {:>12} {:>8}  unit / baseline",
        "figure", "value", "baseline", "ratio"
    );
    for f in &figures {
        println!(
            "{:<32} {:>12.3} {:>12.3} {:>8.3}  {} / {}",
            f.name,
            f.value,
            f.baseline_value,
            f.value / f.baseline_value,
            f.unit,
            f.baseline
        );
    }
    let body: Vec<String> = figures
        .iter()
        .map(|f| {
            format!(
                "    {{\"name\": {}, \"value\": {}, \"unit\": {}, \"baseline\": {}, \"baseline_value\": {}, \"ratio\": {}}}",
                json_str(f.name),
                json_num(f.value),
                json_str(f.unit),
                json_str(f.baseline),
                json_num(f.baseline_value),
                json_num(f.value / f.baseline_value)
            )
        })
        .collect();
    let json = format!(
        "{{\n  \"adapter\": {{\"name\": {}, \"backend\": {}, \"device_type\": {}, \"driver\": {}, \"driver_info\": {}}},\n  \"quick\": {},\n  \"figures\": [\n{}\n  ]\n}}\n",
        json_str(&a.name),
        json_str(&a.backend),
        json_str(&a.device_type),
        json_str(&a.driver),
        json_str(&a.driver_info),
        o.quick,
        body.join(",\n")
    );
    let path = std::path::Path::new(&o.out);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(path, json).map_err(|e| ServerError::InvalidArgument {
        reason: format!("writing {}: {e}", o.out),
    })?;
    println!("\nwrote {}", o.out);
    Ok(())
}
