//! A launch loop for instruction counts: the server's own CPU work per
//! launch, which `launch.enqueue_us` compares with a raw dispatch.
//!
//! ```text
//! cargo build --release -p compute-bench --example launch_loop
//! WGPU_SERVER_TASKS_MAX=100000 valgrind --tool=callgrind \
//!     --toggle-collect='launch_loop::the_loop' target/release/examples/launch_loop
//! callgrind_annotate --inclusive=yes callgrind.out.*
//! ```
//!
//! The loop is `launch.enqueue_us`'s (a tiny kernel, one binding, boxed
//! and argued per launch as a caller does); with a large tasks_max nothing
//! is submitted inside it, so only the encoding side is counted (the raw
//! loop's dispatch records about 50 instructions there). The first 100
//! launches (compilation, the caches) are counted too.

use compute_runtime::{
    Bytes, CubeCount, DeviceId, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle, Server,
    ServerError, StreamId,
};
use wgpu_server::{BindingAccess, WgpuServer, WgslKernel, WgslPassthrough};

const TINY: &str = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + 1u; }
}";

#[inline(never)]
fn the_loop(s: &mut WgpuServer<WgslPassthrough>, h: &Handle, kernel: &WgslKernel, n: usize) {
    for _ in 0..n {
        let args = KernelArguments::buffers(vec![h.binding()]);
        // SAFETY: the kernel bound-checks with arrayLength.
        unsafe {
            s.launch(
                Box::new(kernel.clone()),
                CubeCount::x(1),
                args,
                StreamId(0),
                LaunchMode::Execute,
            )
        };
    }
}

fn main() -> Result<(), ServerError> {
    let mut s = WgpuServer::<WgslPassthrough>::try_init(DeviceId(0))?;
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), 256, StreamId(0))?;
    let h = Handle::new(m, 256);
    s.write(
        vec![(h.copy_descriptor(), Bytes::from(vec![0u8; 256]))],
        StreamId(0),
    );
    let kernel = WgslKernel::new(
        "tiny",
        TINY,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    the_loop(&mut s, &h, &kernel, 100);
    futures::executor::block_on(s.sync(Vec::new(), StreamId(0)))?;
    let n = 5_000;
    let t = std::time::Instant::now();
    the_loop(&mut s, &h, &kernel, n);
    let e = t.elapsed();
    futures::executor::block_on(s.sync(Vec::new(), StreamId(0)))?;
    println!(
        "{:.3} us per launch (encoding)",
        e.as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}
