//! A job of the kernel suite: buffers and a sequence of launches, run
//! through the server (IR kernels) and on raw wgpu (their handwritten
//! WGSL) over copies of the same initial bytes.

use compute_ir::Kernel;
use compute_runtime::{Bytes, CubeCount, Handle, KernelArguments, LaunchMode, Server, ServerError};
use wgpu_server::{IrCompiler, WgpuServer};

use crate::harness::{STREAM, alloc, sync};
use crate::raw;

pub type Ir = WgpuServer<IrCompiler>;

/// One launch: the IR kernel and its WGSL twin (`raw`), over the same
/// dispatch.
pub struct Launch {
    pub kernel: Kernel,
    pub raw: RawLaunch,
}

/// A WGSL launch over buffers of the job (by index, in binding order), with
/// packed scalars: the WGSL side reads them as a uniform after the buffers,
/// the IR side as its scalar block.
#[derive(Clone)]
pub struct RawLaunch {
    pub wgsl: String,
    pub groups: [u32; 3],
    pub bufs: Vec<usize>,
    pub scalars: Vec<u8>,
}

/// Buffers (their initial bytes) and launches in order.
pub struct Job {
    pub buffers: Vec<Vec<u8>>,
    pub launches: Vec<Launch>,
    /// The raw side's own launches, when it is another design than the IR
    /// kernels' twins (a probe's variant); `None`: the twins.
    pub raw: Option<Vec<RawLaunch>>,
}

impl Job {
    fn raw_launches(&self) -> Vec<&RawLaunch> {
        match &self.raw {
            Some(raw) => raw.iter().collect(),
            None => self.launches.iter().map(|l| &l.raw).collect(),
        }
    }
}

/// The job on the server.
pub struct Ours<'j> {
    job: &'j Job,
    handles: Vec<Handle>,
}

impl<'j> Ours<'j> {
    pub fn new(s: &mut Ir, job: &'j Job) -> Result<Self, ServerError> {
        let mut handles = Vec::new();
        for b in &job.buffers {
            let h = alloc(s, b.len() as u64)?;
            s.write(vec![(h.copy_descriptor(), Bytes::from(b.clone()))], STREAM);
            handles.push(h);
        }
        Ok(Ours { job, handles })
    }

    /// The job `reps` times, then a sync.
    pub fn run(&self, s: &mut Ir, reps: u32) -> Result<(), ServerError> {
        for _ in 0..reps {
            for l in &self.job.launches {
                let d = &l.raw;
                let mut args = KernelArguments::buffers(
                    d.bufs.iter().map(|&i| self.handles[i].binding()).collect(),
                );
                if !d.scalars.is_empty() {
                    args = args.with_scalars(d.scalars.clone());
                }
                let [x, y, z] = d.groups;
                // SAFETY: every suite kernel stays inside the buffers its
                // job sizes for it (and the default checked bounds contain
                // it regardless).
                unsafe {
                    s.launch(
                        Box::new(l.kernel.clone()),
                        CubeCount::Static(x, y, z),
                        args,
                        STREAM,
                        LaunchMode::Execute,
                    )
                };
            }
        }
        sync(s)
    }

    pub fn read(&self, s: &mut Ir, buffer: usize) -> Result<Vec<u8>, ServerError> {
        let d = self.handles[buffer].copy_descriptor();
        let got = futures::executor::block_on(s.read(vec![d], STREAM))?;
        Ok(got
            .into_iter()
            .next()
            .map(|b| b.to_vec())
            .unwrap_or_default())
    }
}

/// The job on raw wgpu: every launch's pipeline and bind group made once;
/// a run is one compute pass of all dispatches, one submit, one wait.
pub struct Raw {
    buffers: Vec<wgpu::Buffer>,
    steps: Vec<(wgpu::ComputePipeline, wgpu::BindGroup, [u32; 3])>,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl Raw {
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, job: &Job) -> Self {
        use wgpu::BufferUsages as U;
        let buffers: Vec<wgpu::Buffer> = job
            .buffers
            .iter()
            .map(|b| {
                let buf = raw::buffer(
                    device,
                    b.len() as u64,
                    U::STORAGE | U::COPY_DST | U::COPY_SRC,
                );
                queue.write_buffer(&buf, 0, b);
                buf
            })
            .collect();
        let steps = job
            .raw_launches()
            .into_iter()
            .map(|l| {
                let pipeline = raw::pipeline(device, &l.wgsl);
                let uniform = (!l.scalars.is_empty()).then(|| {
                    let size = l.scalars.len().max(16) as u64;
                    let u = raw::buffer(device, size, U::UNIFORM | U::COPY_DST);
                    queue.write_buffer(&u, 0, &l.scalars);
                    u
                });
                let mut bound: Vec<&wgpu::Buffer> = l.bufs.iter().map(|&i| &buffers[i]).collect();
                bound.extend(uniform.as_ref());
                let group = raw::bind_whole(device, &pipeline, &bound);
                (pipeline, group, l.groups)
            })
            .collect();
        Raw {
            buffers,
            steps,
            device: device.clone(),
            queue: queue.clone(),
        }
    }

    /// The job `reps` times, then a wait.
    pub fn run(&self, reps: u32) {
        let mut enc = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for _ in 0..reps {
                for (pipeline, group, [x, y, z]) in &self.steps {
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, group, &[]);
                    pass.dispatch_workgroups(*x, *y, *z);
                }
            }
        }
        self.queue.submit(Some(enc.finish()));
        raw::wait(&self.device);
    }

    pub fn read(&self, buffer: usize) -> Vec<u8> {
        let b = &self.buffers[buffer];
        raw::Readback::new(&self.device, b.size())
            .read(&self.device, &self.queue, b, b.size(), <[u8]>::to_vec)
            .unwrap_or_default()
    }
}
