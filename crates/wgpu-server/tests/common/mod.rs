//! Shared helpers for the integration tests: one server per test on the
//! default adapter (lavapipe on CI), and a few kernels.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use compute_runtime::{
    Bytes, CopyDescriptor, CubeCount, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle,
    Server, ServerError, StreamId,
};
use wgpu_server::{BindingAccess, WgpuServer, WgslKernel, WgslPassthrough};

pub type TestServer = WgpuServer<WgslPassthrough>;

pub const S0: StreamId = StreamId(0);

pub fn server() -> TestServer {
    match TestServer::try_init(compute_runtime::DeviceId(0)) {
        Ok(s) => s,
        Err(e) => panic!("no adapter for tests: {e}"),
    }
}

pub fn f32s(data: &[f32]) -> Bytes {
    Bytes::from(
        data.iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
}

pub fn to_f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn u32s(data: &[u32]) -> Bytes {
    Bytes::from(
        data.iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
}

pub fn to_u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn alloc(s: &mut TestServer, size: u64, stream: StreamId) -> Handle {
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), size, stream)
        .expect("initialize_memory");
    Handle::new(m, size)
}

pub fn upload(s: &mut TestServer, data: Bytes, stream: StreamId) -> Handle {
    let h = alloc(s, data.len() as u64, stream);
    s.write(vec![(h.copy_descriptor(), data)], stream);
    h
}

pub fn read(s: &mut TestServer, h: &Handle, stream: StreamId) -> Result<Bytes, ServerError> {
    let fut = s.read(vec![h.copy_descriptor()], stream);
    let mut v = futures::executor::block_on(fut)?;
    Ok(v.remove(0))
}

pub fn read_desc(
    s: &mut TestServer,
    d: CopyDescriptor,
    stream: StreamId,
) -> Result<Bytes, ServerError> {
    let fut = s.read(vec![d], stream);
    let mut v = futures::executor::block_on(fut)?;
    Ok(v.remove(0))
}

pub fn sync(s: &mut TestServer, stream: StreamId) -> Result<(), ServerError> {
    futures::executor::block_on(s.sync(vec![], stream))
}

pub const ADD_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&c)) {
        c[i] = a[i] + b[i];
    }
}
"#;

pub fn add_kernel() -> WgslKernel {
    WgslKernel::new(
        "add",
        ADD_WGSL,
        "main",
        [64, 1, 1],
        vec![
            BindingAccess::ReadOnly,
            BindingAccess::ReadOnly,
            BindingAccess::ReadWrite,
        ],
    )
}

pub const INC_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) {
        x[id.x] = x[id.x] + 1u;
    }
}
"#;

pub fn inc_kernel() -> WgslKernel {
    WgslKernel::new(
        "inc",
        INC_WGSL,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
}

pub fn launch(
    s: &mut TestServer,
    kernel: WgslKernel,
    count: CubeCount,
    buffers: &[&Handle],
    stream: StreamId,
) {
    let args = KernelArguments::buffers(buffers.iter().map(|h| h.binding()).collect());
    // SAFETY: the test kernels bound-check their accesses with arrayLength.
    unsafe { s.launch(Box::new(kernel), count, args, stream, LaunchMode::Execute) };
}
