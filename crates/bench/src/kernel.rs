//! `compile.*` and `kernel.*`: IR compilation against handwritten WGSL, the
//! IR's tiled matmul and element-wise add against raw wgpu, and a pipeline
//! cache hit against a whole launch.

use std::cell::RefCell;
use std::time::Instant;

use compute_ir::Lit;
use compute_runtime::{
    Bytes, CubeCount, DeviceId, KernelArguments, LaunchMode, Server, ServerError,
};
use compute_testkit::kernels;
use compute_wgsl::WgpuCompiler;
use wgpu_server::{IrCompiler, WgpuServer};

use crate::harness::{Options, STREAM, alloc, interleaved, sync};
use crate::raw;
use crate::report::Figure;
use crate::shaders::{ADD_VEC4, MATMUL_WGSL};

type Ir = WgpuServer<IrCompiler>;

fn ir_error(e: compute_ir::IrError) -> ServerError {
    ServerError::InvalidArgument {
        reason: e.to_string(),
    }
}

pub fn figures(o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let mut s = Ir::try_init(DeviceId(0))?;
    let cpu = Server::utilities(&s).adapter.device_type == "Cpu";
    compile(&mut s, o, out);
    matmul(&mut s, o, cpu, out)?;
    add(&mut s, o, cpu, out)?;
    reported(&mut s, o, cpu, out)
}

/// The IR add of [`add`] on `s`, `reps` launches then a sync: GB/s moved.
struct IrAdd {
    kernel: compute_ir::Kernel,
    args: KernelArguments,
    groups: u32,
    reps: u32,
    moved: f64,
}

impl IrAdd {
    fn new<C: WgpuCompiler>(s: &mut WgpuServer<C>, cpu: bool) -> Result<Self, ServerError> {
        let kernel =
            kernels::elementwise_add_vec(compute_ir::Scalar::F32, 4, 256).map_err(ir_error)?;
        let elems: u32 = if cpu { 1 << 22 } else { 65_535 * 256 };
        let eb = u64::from(elems) * 4;
        let (xa, xb, xc) = (alloc(s, eb)?, alloc(s, eb)?, alloc(s, eb)?);
        let scalars = kernel
            .pack_scalars(&[Lit::U32(elems / 4)])
            .map_err(ir_error)?;
        let reps = if cpu { 3 } else { 20 };
        Ok(IrAdd {
            kernel,
            args: KernelArguments::buffers(vec![xa.binding(), xb.binding(), xc.binding()])
                .with_scalars(scalars),
            groups: (elems / 4).div_ceil(256),
            reps,
            moved: 12.0 * f64::from(elems) * f64::from(reps),
        })
    }

    fn run<C: WgpuCompiler>(&self, s: &mut WgpuServer<C>) -> f64 {
        let t = Instant::now();
        for _ in 0..self.reps {
            // SAFETY: the kernel guards with n.
            unsafe {
                s.launch(
                    Box::new(self.kernel.clone()),
                    CubeCount::x(self.groups),
                    self.args.clone(),
                    STREAM,
                    LaunchMode::Execute,
                )
            };
        }
        let _ = sync(s);
        self.moved / t.elapsed().as_secs_f64() / 1e9
    }
}

/// `kernel.add_reported_gbps`: the IR add on a server with reported bounds
/// checks (a compare per access, a report slot per launch, a copy and map
/// per batch), against the same add on the default (checked) server.
fn reported(s: &mut Ir, o: &Options, cpu: bool, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let mut r: Ir = wgpu_server::WgpuServerOptions::new()
        .bounds_checks(compute_wgsl::BoundsChecks::Reported)
        .open()?;
    let (on_r, on_s) = (IrAdd::new(&mut r, cpu)?, IrAdd::new(s, cpu)?);
    let (r, s) = (RefCell::new(r), RefCell::new(s));
    let (v, b) = interleaved(
        o.rounds(3, 7),
        || on_r.run(&mut r.borrow_mut()),
        || on_s.run(&mut s.borrow_mut()),
    );
    out.push(Figure::new(
        "kernel.add_reported_gbps",
        v,
        "GB/s moved, 12 B/element, with BoundsChecks::Reported (higher is better)",
        "kernel.add_gbps's IR add on a server with the default BoundsChecks::Checked",
        b,
    ));
    Ok(())
}

/// `compile.matmul_us`: IR build + WGSL + module + pipeline, against
/// module + pipeline of the handwritten WGSL.
fn compile(s: &mut Ir, o: &Options, out: &mut Vec<Figure>) {
    let device = s.device().clone();
    let caps = compute_wgsl::DeviceCaps::of(device.limits(), device.features());
    let (v, b) = interleaved(
        o.rounds(3, 7),
        || {
            let t = Instant::now();
            let Ok(k) = kernels::tiled_matmul() else {
                return f64::NAN;
            };
            let Ok(compiled) = IrCompiler.compile(&k, &Default::default(), &caps) else {
                return f64::NAN;
            };
            std::hint::black_box(raw::pipeline(&device, &compiled.source));
            t.elapsed().as_secs_f64() * 1e6
        },
        || {
            let t = Instant::now();
            std::hint::black_box(raw::pipeline(&device, MATMUL_WGSL));
            t.elapsed().as_secs_f64() * 1e6
        },
    );
    out.push(Figure::new(
        "compile.matmul_us",
        v,
        "us (lower is better)",
        "raw.module_pipeline_us (handwritten WGSL)",
        b,
    ));
}

/// `kernel.matmul_gflops` and `compile.cache_hit_ns`.
fn matmul(s: &mut Ir, o: &Options, cpu: bool, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let device = s.device().clone();
    let queue = s.queue().clone();
    let kernel = kernels::tiled_matmul().map_err(ir_error)?;
    let dim: u32 = if cpu { 256 } else { 2048 };
    let bytes = u64::from(dim * dim) * 4;
    let (ha, hb, hc) = (alloc(s, bytes)?, alloc(s, bytes)?, alloc(s, bytes)?);
    let zeros = Bytes::from(vec![0u8; bytes as usize]);
    s.write(
        vec![
            (ha.copy_descriptor(), zeros.clone()),
            (hb.copy_descriptor(), zeros),
        ],
        STREAM,
    );
    let scalars = kernel
        .pack_scalars(&[Lit::U32(dim), Lit::U32(dim), Lit::U32(dim)])
        .map_err(ir_error)?;
    let reps = if cpu { 2 } else { 20 };
    let groups = dim.div_ceil(16);
    let launch = |s: &mut Ir, count: CubeCount| {
        let args = KernelArguments::buffers(vec![ha.binding(), hb.binding(), hc.binding()])
            .with_scalars(scalars.clone());
        // SAFETY: the kernel guards every access with the m, n, k it is given.
        unsafe {
            s.launch(
                Box::new(kernel.clone()),
                count,
                args,
                STREAM,
                LaunchMode::Execute,
            )
        };
    };
    let run_ours = |s: &mut Ir| {
        for _ in 0..reps {
            launch(s, CubeCount::Static(groups, groups, 1));
        }
        let _ = sync(s);
    };
    run_ours(s);
    let pipeline = raw::pipeline(&device, MATMUL_WGSL);
    let storage = || raw::buffer(&device, bytes, wgpu::BufferUsages::STORAGE);
    let (ra, rb, rc) = (storage(), storage(), storage());
    let uniform = raw::buffer(
        &device,
        16,
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    let dims = [
        dim.to_le_bytes(),
        dim.to_le_bytes(),
        dim.to_le_bytes(),
        [0; 4],
    ]
    .concat();
    queue.write_buffer(&uniform, 0, &dims);
    let group = raw::bind_whole(&device, &pipeline, &[&ra, &rb, &rc, &uniform]);
    let run_raw = || {
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            for _ in 0..reps {
                pass.dispatch_workgroups(groups, groups, 1);
            }
        }
        queue.submit(Some(enc.finish()));
        raw::wait(&device);
    };
    run_raw();
    let flops = 2.0 * f64::from(dim).powi(3) * f64::from(reps);
    let cell = RefCell::new(&mut *s);
    let (v, b) = interleaved(
        o.rounds(3, 7),
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
    out.push(Figure::new(
        "kernel.matmul_gflops",
        v,
        format!("GFLOP/s, {dim}^3 (higher is better)"),
        "raw.matmul_gflops",
        b,
    ));

    // The pipeline lookup a launch does on a hit, against a whole launch.
    let n = 100_000;
    let t = Instant::now();
    let mut hits = 0;
    for _ in 0..n {
        hits += usize::from(cell.borrow().is_compiled(&kernel));
    }
    let hit_ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(n);
    std::hint::black_box(hits);
    let launches = 2000;
    let t = Instant::now();
    for _ in 0..launches {
        launch(&mut cell.borrow_mut(), CubeCount::Static(1, 1, 1));
    }
    let launch_ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(launches);
    let _ = sync(&mut cell.borrow_mut());
    out.push(Figure::new(
        "compile.cache_hit_ns",
        hit_ns,
        "ns per lookup (lower is better)",
        "launch_ns (whole launch of the same kernel)",
        launch_ns,
    ));
    Ok(())
}

/// `kernel.add_gbps`: c = a + b from the IR over `vec4<f32>` buffers
/// (`input_vec`), 12 bytes moved per element, against the same add
/// handwritten over `vec4<f32>` on raw wgpu.
fn add(s: &mut Ir, o: &Options, cpu: bool, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let device = s.device().clone();
    let queue = s.queue().clone();
    let add = kernels::elementwise_add_vec(compute_ir::Scalar::F32, 4, 256).map_err(ir_error)?;
    let elems: u32 = if cpu { 1 << 22 } else { 65_535 * 256 };
    let eb = u64::from(elems) * 4;
    let (xa, xb, xc) = (alloc(s, eb)?, alloc(s, eb)?, alloc(s, eb)?);
    let scalars = add.pack_scalars(&[Lit::U32(elems / 4)]).map_err(ir_error)?;
    let reps = if cpu { 3 } else { 20 };
    let pipeline = raw::pipeline(&device, ADD_VEC4);
    let storage = || raw::buffer(&device, eb, wgpu::BufferUsages::STORAGE);
    let (ra, rb, rc) = (storage(), storage(), storage());
    let group = raw::bind_whole(&device, &pipeline, &[&ra, &rb, &rc]);
    let vec4_groups = (elems / 4).div_ceil(256);
    let moved = 12.0 * f64::from(elems) * f64::from(reps);
    let cell = RefCell::new(&mut *s);
    let (v, b) = interleaved(
        o.rounds(3, 7),
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..reps {
                let args = KernelArguments::buffers(vec![xa.binding(), xb.binding(), xc.binding()])
                    .with_scalars(scalars.clone());
                // SAFETY: the kernel guards with n.
                unsafe {
                    s.launch(
                        Box::new(add.clone()),
                        CubeCount::x(vec4_groups),
                        args,
                        STREAM,
                        LaunchMode::Execute,
                    )
                };
            }
            let _ = sync(&mut s);
            moved / t.elapsed().as_secs_f64() / 1e9
        },
        || {
            let t = Instant::now();
            let mut enc = device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &group, &[]);
                for _ in 0..reps {
                    pass.dispatch_workgroups(vec4_groups, 1, 1);
                }
            }
            queue.submit(Some(enc.finish()));
            raw::wait(&device);
            moved / t.elapsed().as_secs_f64() / 1e9
        },
    );
    out.push(Figure::new(
        "kernel.add_gbps",
        v,
        "GB/s moved, 12 B/element (higher is better)",
        "raw.add_vec4_gbps (handwritten vec4 WGSL, same bytes)",
        b,
    ));
    Ok(())
}
