//! Shared helpers for the GPU tests: one server per test on the default
//! adapter (lavapipe on CI), transfers, a few kernels; byte packing is
//! `compute_testkit::bytes`, re-exported here.

use compute_runtime::{
    Bytes, CopyDescriptor, CubeCount, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle,
    Server, ServerError, StreamId,
};
use proptest::test_runner::{Config as ProptestConfig, FileFailurePersistence};
use wgpu_server::{BindingAccess, WgpuServer, WgslKernel, WgslPassthrough};

pub use compute_testkit::bytes::{bytes_f32, bytes_u32, f32_bytes, u32_bytes};

pub type TestServer = WgpuServer<WgslPassthrough>;

pub const S0: StreamId = StreamId(0);

/// Proptest's configuration for these tests: `cases` cases, and failures
/// persisted beside the test's module (`streams.rs` ->
/// `streams.proptest-regressions`). Proptest's default would look under
/// `tests/proptest-regressions/` instead, because this binary's root is a
/// `main.rs`.
pub fn proptest_config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

pub fn server() -> TestServer {
    match TestServer::try_init(compute_runtime::DeviceId(0)) {
        Ok(s) => s,
        Err(e) => panic!("no adapter for tests: {e}"),
    }
}

pub fn alloc<S: Server>(s: &mut S, size: u64, stream: StreamId) -> Handle {
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), size, stream)
        .expect("initialize_memory");
    Handle::new(m, size)
}

pub fn upload<S: Server>(s: &mut S, data: impl Into<Bytes>, stream: StreamId) -> Handle {
    let data = data.into();
    let h = alloc(s, data.len() as u64, stream);
    s.write(vec![(h.copy_descriptor(), data)], stream);
    h
}

pub fn read<S: Server>(s: &mut S, h: &Handle, stream: StreamId) -> Result<Bytes, ServerError> {
    let fut = s.read(vec![h.copy_descriptor()], stream);
    let mut v = futures::executor::block_on(fut)?;
    Ok(v.remove(0))
}

pub fn read_desc<S: Server>(
    s: &mut S,
    d: CopyDescriptor,
    stream: StreamId,
) -> Result<Bytes, ServerError> {
    let fut = s.read(vec![d], stream);
    let mut v = futures::executor::block_on(fut)?;
    Ok(v.remove(0))
}

pub fn sync<S: Server>(s: &mut S, stream: StreamId) -> Result<(), ServerError> {
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

/// Whether `device` has `feature`. Where it does not, the test says what it
/// leaves unrun (lavapipe has no cooperative matrices, say; those parts run
/// on the device machine) rather than passing silently.
pub fn has_feature(device: &wgpu::Device, feature: wgpu::Features, not_run: &str) -> bool {
    let has = device.features().contains(feature);
    if !has {
        eprintln!("skipped: no {feature:?} on this adapter: {not_run} not run");
    }
    has
}
