//! Records a timeline of a small two-stream workload and writes it as a
//! Chrome trace: open `target/timeline.json` in <https://ui.perfetto.dev>.
//!
//! `cargo run -p wgpu-server --example timeline [-- PATH]`

use compute_runtime::{
    Bytes, CubeCount, DeviceId, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle, Server,
    ServerError, StreamId,
};
use wgpu_server::{BindingAccess, WgpuServer, WgslKernel, WgslPassthrough};

const SCALE: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] * 1.5 + 0.25; }
}
"#;

fn main() -> Result<(), ServerError> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/timeline.json".into());
    let mut s = WgpuServer::<WgslPassthrough>::try_init(DeviceId(0))?;
    let kernel = WgslKernel::new(
        "scale",
        SCALE,
        "main",
        [256, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let mut buffers = Vec::new();
    for (i, n) in [1u64 << 16, 1 << 20].into_iter().enumerate() {
        let m = ManagedMemoryHandle::new();
        s.initialize_memory(m.clone(), n * 4, StreamId(i as u64))?;
        let h = Handle::new(m, n * 4);
        s.write(
            vec![(
                h.copy_descriptor(),
                Bytes::from(vec![0u8; (n * 4) as usize]),
            )],
            StreamId(i as u64),
        );
        buffers.push((h, n));
    }
    s.start_timeline()?;
    for round in 0..8u64 {
        for (i, (h, n)) in buffers.iter().enumerate() {
            let stream = StreamId(i as u64);
            let args = KernelArguments::buffers(vec![h.binding()]);
            // SAFETY: the kernel bound-checks with arrayLength.
            unsafe {
                s.launch(
                    Box::new(kernel.clone()),
                    CubeCount::x((*n as u32).div_ceil(256)),
                    args,
                    stream,
                    LaunchMode::Execute,
                )
            };
            let _ = round;
        }
    }
    let timeline = futures::executor::block_on(s.finish_timeline())?;
    if let Some(dir) = std::path::Path::new(&path).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&path, timeline.to_chrome_trace()).map_err(|e| {
        ServerError::InvalidArgument {
            reason: format!("writing {path}: {e}"),
        }
    })?;
    for e in timeline.events.iter().take(4) {
        println!(
            "{:>10.1} us  {:>8.1} us  stream {}  {} {}",
            e.start_ns / 1e3,
            e.duration_ns / 1e3,
            e.stream.0,
            e.kernel,
            e.workgroups
        );
    }
    println!(
        "{} launches written to {path} ({} past the timeline's capacity not recorded)",
        timeline.events.len(),
        timeline.dropped
    );
    Ok(())
}
