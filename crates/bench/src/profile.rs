//! `profile.*`: what a profile window costs the caller, and how close a
//! device-timed window is to a raw timestamp pair around the same dispatch.

use std::time::Instant;

use compute_runtime::{CubeCount, KernelArguments, LaunchMode, Server, ServerError, TimingMethod};
use wgpu_server::{BindingAccess, WgslKernel};

use crate::harness::{Options, STREAM, alloc, median, sync, us};
use crate::report::Figure;
use crate::shaders::SPIN;
use crate::{S, raw};

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
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
    for _ in 0..o.rounds(3, 9) {
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
    out.push(Figure::new(
        "profile.window_overhead_us",
        median(with) - base,
        "us CPU per window (lower is better)",
        "launch.enqueue_us",
        base,
    ));

    if s.timing_method() != TimingMethod::Device {
        return Ok(());
    }
    // Accuracy: a heavy kernel timed by an at-launch window vs a raw
    // timestamp-query pair around the same dispatch.
    let heavy = 20_000u32;
    let device = s.device().clone();
    let queue = s.queue().clone();
    let raw = RawTimed::new(&device, &queue, heavy);
    let period = f64::from(queue.get_timestamp_period());
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..o.rounds(3, 7) {
        let Ok(tok) = s.start_profile_at_launch(STREAM) else {
            break;
        };
        launch(s, heavy);
        if let Ok(d) = s.end_profile(STREAM, tok)
            && let Ok(d) = futures::executor::block_on(d.resolve())
        {
            ours.push(d.as_secs_f64() * 1e6);
        }
        if let Some(ticks) = raw.run(&device, &queue) {
            theirs.push(ticks as f64 * period / 1e3);
        }
    }
    if !ours.is_empty() && !theirs.is_empty() {
        let (a, b) = (median(ours), median(theirs));
        out.push(Figure::new(
            "profile.accuracy_ratio",
            a / b,
            format!("ratio (target 0.95..1.05; device window {a:.1} us, raw {b:.1} us)"),
            "ideal (1.0)",
            1.0,
        ));
    }
    Ok(())
}

/// The spin kernel on raw wgpu, bracketed by a pass's timestamp writes.
struct RawTimed {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    pipeline: wgpu::ComputePipeline,
    group: wgpu::BindGroup,
}

impl RawTimed {
    fn new(device: &wgpu::Device, queue: &wgpu::Queue, n: u32) -> Self {
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
        let pipeline = raw::pipeline(device, SPIN);
        let x = raw::buffer(device, 64 * 4 * 1024, wgpu::BufferUsages::STORAGE);
        let uniform = raw::buffer(
            device,
            16,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        let mut p = n.to_le_bytes().to_vec();
        p.resize(16, 0);
        queue.write_buffer(&uniform, 0, &p);
        let group = raw::bind_whole(device, &pipeline, &[&x, &uniform]);
        Self {
            query_set,
            resolve,
            pipeline,
            group,
        }
    }

    /// One timed dispatch; the timestamp ticks between its two stamps.
    fn run(&self, device: &wgpu::Device, queue: &wgpu::Queue) -> Option<u64> {
        let readback = raw::buffer(
            device,
            16,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &self.query_set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.group, &[]);
            pass.dispatch_workgroups(1024, 1, 1);
        }
        enc.resolve_query_set(&self.query_set, 0..2, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &readback, 0, 16);
        queue.submit(Some(enc.finish()));
        readback.map_async(wgpu::MapMode::Read, .., |_| {});
        raw::wait(device);
        let v = readback.get_mapped_range(..).ok()?;
        let t0 = u64::from_le_bytes(v.get(0..8)?.try_into().ok()?);
        let t1 = u64::from_le_bytes(v.get(8..16)?.try_into().ok()?);
        Some(t1.saturating_sub(t0))
    }
}
