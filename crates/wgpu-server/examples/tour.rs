//! A tour of the server on the default adapter: pick the device, move bytes,
//! run a real kernel, check its result, and see what bad input gets.
//!
//! Run with `cargo xtask demo` (or `cargo run -p wgpu-server --example tour`).

use compute_runtime::{
    Bytes, CubeCount, DeviceId, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle, Server,
    ServerError, StreamId,
};
use compute_testkit::bytes::{bytes_f32, f32_bytes};
use wgpu_server::{BindingAccess, WgpuServer, WgslKernel, WgslPassthrough};

const SAXPY: &str = r#"
struct Params { alpha: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.n) {
        y[id.x] = p.alpha * x[id.x] + y[id.x];
    }
}
"#;

fn main() -> Result<(), ServerError> {
    let mut server = WgpuServer::<WgslPassthrough>::try_init(DeviceId(0))?;
    let u = Server::utilities(&server);
    println!(
        "adapter: {} ({}, {}, driver {} {})",
        u.adapter.name,
        u.adapter.backend,
        u.adapter.device_type,
        u.adapter.driver,
        u.adapter.driver_info
    );
    println!(
        "limits: max buffer {} MiB, max binding {} MiB, binding alignment {} B, timing {:?}",
        u.memory.max_buffer_size >> 20,
        u.memory.max_binding_size >> 20,
        u.memory.alignment,
        u.timing_method
    );

    let stream = StreamId::DEFAULT;
    let n: u32 = 1 << 20;
    let alpha = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001 + 1.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();

    let alloc = |s: &mut WgpuServer<WgslPassthrough>, bytes: u64| -> Result<Handle, ServerError> {
        let m = ManagedMemoryHandle::new();
        s.initialize_memory(m.clone(), bytes, stream)?;
        Ok(Handle::new(m, bytes))
    };
    let hx = alloc(&mut server, u64::from(n) * 4)?;
    let hy = alloc(&mut server, u64::from(n) * 4)?;
    server.write(
        vec![
            (hx.copy_descriptor(), Bytes::from(f32_bytes(&x))),
            (hy.copy_descriptor(), Bytes::from(f32_bytes(&y))),
        ],
        stream,
    );

    let kernel = WgslKernel::new(
        "saxpy",
        SAXPY,
        "main",
        [256, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    )
    .with_scalars();
    let mut scalars = alpha.to_le_bytes().to_vec();
    scalars.extend_from_slice(&n.to_le_bytes());
    let args = KernelArguments::buffers(vec![hx.binding(), hy.binding()]).with_scalars(scalars);
    // SAFETY: the kernel checks `id.x < n` before every access.
    unsafe {
        server.launch(
            Box::new(kernel),
            CubeCount::x(n.div_ceil(256)),
            args,
            stream,
            LaunchMode::Execute,
        )
    };
    let out = futures::executor::block_on(server.read(vec![hy.copy_descriptor()], stream))?;
    let got = bytes_f32(&out[0]);
    // A GPU may contract `alpha * x + y` into one fused multiply-add (NVIDIA
    // does, lavapipe does not): both roundings are exact answers.
    let wrong = got
        .iter()
        .zip(x.iter().zip(&y))
        .filter(|(g, (xi, yi))| **g != alpha * **xi + **yi && **g != alpha.mul_add(**xi, **yi))
        .count();
    println!(
        "saxpy over {n} floats: {wrong} mismatches against the host (separate or fused multiply-add)"
    );
    if wrong != 0 {
        return Err(ServerError::InvalidArgument {
            reason: format!("{wrong} wrong results"),
        });
    }

    // Bad input is a precise error, and the bytes it would have written say so.
    let broken = WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n@compute @workgroup_size(1) fn main() { y[0] = 1u; }",
        "main",
        [1, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    // SAFETY: refused at compile time; nothing runs.
    unsafe {
        server.launch(
            Box::new(broken),
            CubeCount::x(1),
            KernelArguments::buffers(vec![hy.binding()]),
            stream,
            LaunchMode::Execute,
        )
    };
    match server.check(vec![hy.binding()], stream) {
        Err(e) => println!(
            "after a kernel that does not compile, check(y) says:\n  {}",
            e.root_cause()
        ),
        Ok(()) => println!("unexpected: y still trusted"),
    }
    let _ = server.flush(stream);
    futures::executor::block_on(server.sync(vec![], stream))?;
    println!("tour done: {} submissions", server.submit_count());
    Ok(())
}
