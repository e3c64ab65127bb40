//! The trust model, one test per decided behaviour.
//!
//! Every test also checks what the case must not touch: a bystander buffer
//! reads back intact, and the launches encoded on the same stream just
//! before and just after the case (in the same batch: the servers here
//! submit only when told to, and [`Fixture::end`] asserts that nothing was
//! submitted in between) ran, with correct and trusted outputs. A case that
//! reached wgpu with an invalid command would have invalidated that batch.

use std::sync::Arc;

use crate::common::*;
use compute_runtime::{
    CubeCount, Handle, KernelArguments, LaunchMode, MemoryId, Server, ServerError, ServerStorage,
    StreamId,
};
use wgpu_server::{BindingAccess, WgpuServerOptions, WgslKernel};

const N: usize = 64;
const S1: StreamId = StreamId(1);
const S2: StreamId = StreamId(2);

/// A `tasks_max` no test reaches: a stream submits only when an operation
/// needs it to (a read, a sync, a flush, a conflicting use elsewhere).
const ONE_BATCH: usize = 1 << 20;

fn options() -> WgpuServerOptions {
    WgpuServerOptions::new().tasks_max(ONE_BATCH)
}

/// A server that batches everything, a bystander, and the two neighbours of
/// the case.
struct Fixture {
    s: TestServer,
    bystander: Handle,
    expected: Vec<u32>,
    /// Incremented by the launch encoded just before the case.
    before: Handle,
    /// Incremented by the launch encoded just after the case.
    after: Handle,
    /// The stream of the case and submissions made when it began.
    stream: StreamId,
    mark: u64,
}

fn fixture() -> Fixture {
    fixture_with(options())
}

fn fixture_with(options: WgpuServerOptions) -> Fixture {
    let mut s: TestServer = options.open().expect("server");
    let expected: Vec<u32> = (0..1024).map(|i| i * 7 + 3).collect();
    let bystander = upload(&mut s, u32_bytes(&expected), S0);
    let before = upload(&mut s, u32_bytes(&[10; N]), S0);
    let after = upload(&mut s, u32_bytes(&[20; N]), S0);
    sync(&mut s, S0).expect("setup");
    Fixture {
        s,
        bystander,
        expected,
        before,
        after,
        stream: S0,
        mark: 0,
    }
}

impl Fixture {
    /// Encodes the launch before the case on `stream`.
    fn begin(&mut self, stream: StreamId) {
        self.stream = stream;
        self.mark = self.s.submit_count();
        launch(
            &mut self.s,
            inc_kernel(),
            CubeCount::x(1),
            &[&self.before],
            stream,
        );
    }

    /// Encodes the launch after the case, and checks that the case and its
    /// two neighbours are one batch: nothing was submitted since `begin`.
    fn end(&mut self) {
        self.end_after(0);
    }

    /// [`Fixture::end`] for a case that submits `others` batches of other
    /// streams itself: exactly those, so not the case's stream.
    fn end_after(&mut self, others: u64) {
        let stream = self.stream;
        launch(
            &mut self.s,
            inc_kernel(),
            CubeCount::x(1),
            &[&self.after],
            stream,
        );
        assert_eq!(
            self.s.submit_count(),
            self.mark + others,
            "something submitted the batch between the neighbours of the case"
        );
    }

    /// Sets the neighbours back to their values before `begin`, for a test
    /// of several cases.
    fn reset_neighbours(&mut self) {
        let stream = self.stream;
        self.s.write(
            vec![
                (self.before.copy_descriptor(), u32_bytes(&[10; N]).into()),
                (self.after.copy_descriptor(), u32_bytes(&[20; N]).into()),
            ],
            stream,
        );
    }

    /// The neighbours ran and are trusted; the bystander is intact.
    fn assert_neighbours_and_bystander(&mut self) {
        let stream = self.stream;
        for (h, want) in [(self.before.clone(), 11), (self.after.clone(), 21)] {
            self.s
                .check(vec![h.binding()], stream)
                .expect("neighbour trusted");
            let got = bytes_u32(&read(&mut self.s, &h, stream).expect("neighbour read"));
            assert_eq!(
                got,
                vec![want; N],
                "a launch of the case's batch did not run"
            );
        }
        let got = bytes_u32(&read(&mut self.s, &self.bystander, S0).expect("bystander read"));
        assert_eq!(got, self.expected, "bystander corrupted");
        self.s
            .check(vec![self.bystander.binding()], S0)
            .expect("bystander trusted");
    }
}

// Kernels.

/// `dst = src * 2 + 1`.
const DOUBLE_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] * 2u + 1u; }
}
"#;

fn double_kernel() -> WgslKernel {
    WgslKernel::new(
        "double",
        DOUBLE_WGSL,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    )
}

/// Two read-write bindings: `b += a; a = 0`.
const MOVE_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&b)) { b[id.x] = b[id.x] + a[id.x]; a[id.x] = 0u; }
}
"#;

fn move_kernel() -> WgslKernel {
    WgslKernel::new(
        "move",
        MOVE_WGSL,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite, BindingAccess::ReadWrite],
    )
}

/// Writes 7 everywhere, reading nothing it binds.
const FILL_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = 7u; }
}
"#;

fn fill_kernel() -> WgslKernel {
    WgslKernel::new(
        "fill",
        FILL_WGSL,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
}

fn launch_args(
    s: &mut TestServer,
    kernel: WgslKernel,
    count: CubeCount,
    args: KernelArguments,
    stream: StreamId,
) {
    // SAFETY: every kernel here bounds its accesses (arrayLength, or a
    // fixed array the launch is refused for binding too little of).
    unsafe { s.launch(Box::new(kernel), count, args, stream, LaunchMode::Execute) };
}

fn bindings(handles: &[&Handle]) -> KernelArguments {
    KernelArguments::buffers(handles.iter().map(|h| h.binding()).collect())
}

// Helpers.

/// A kernel writing its one binding that does not compile: launched, it
/// fails with `Compilation` and poisons that binding.
fn broken_kernel() -> WgslKernel {
    WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read_write> y: array<u32>;\n\
         @compute @workgroup_size(64) fn main() { y[0] = 1.5; }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
}

/// Poisons `h` with a launch that fails (`Compilation`), on `stream`, and
/// takes that failure's report so it does not mix with the case's. (Not a
/// refused host write: one refused at the call touches nothing, so it
/// poisons nothing.)
fn poison(s: &mut TestServer, h: &Handle, stream: StreamId) -> Arc<ServerError> {
    launch(s, broken_kernel(), CubeCount::x(1), &[h], stream);
    let err = s.flush(stream).expect_err("the failed launch is reported");
    assert!(
        matches!(err.root_cause(), ServerError::Compilation { .. }),
        "{err}"
    );
    untrusted_cause(s, h)
}

/// The cause `check` gives for `h`, asserting it is `Untrusted` and names
/// `h`.
fn untrusted_cause(s: &mut TestServer, h: &Handle) -> Arc<ServerError> {
    match s.check(vec![h.binding()], S0) {
        Err(ServerError::Untrusted { memory, cause }) => {
            assert_eq!(memory, h.memory.id(), "Untrusted names another slice");
            cause
        }
        other => panic!("expected Untrusted for {}, got {other:?}", h.memory.id()),
    }
}

/// Asserts `h` is poisoned because work reading `input` was refused while
/// `input` was untrusted for `input_cause`.
fn assert_refused_for(
    s: &mut TestServer,
    h: &Handle,
    input: MemoryId,
    input_cause: &Arc<ServerError>,
) {
    let cause = untrusted_cause(s, h);
    match cause.as_ref() {
        ServerError::UntrustedInput { input: got, cause } => {
            assert_eq!(*got, input, "the refusal names another input");
            assert_eq!(cause, input_cause, "the refusal carries another cause");
        }
        other => panic!("expected UntrustedInput, got {other}"),
    }
    assert_eq!(
        cause.root_cause(),
        input_cause.root_cause(),
        "root_cause is the original failure"
    );
}

/// The bytes behind `h`, read with wgpu directly and without the server's
/// trust check: what a refused launch would have changed if it had run.
fn raw_bytes(s: &mut TestServer, h: &Handle) -> Vec<u8> {
    let r = s
        .get_resource(h.binding(), S0)
        .expect("get_resource")
        .resource;
    let size = h.size.next_multiple_of(4);
    let device = s.device().clone();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("raw read"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    encoder.copy_buffer_to_buffer(&r.buffer, r.offset, &staging, 0, size);
    s.queue().submit([encoder.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    rx.recv().expect("map callback").expect("map");
    let view = staging.slice(..).get_mapped_range().expect("mapped");
    view[..h.size as usize].to_vec()
}

fn raw_u32(s: &mut TestServer, h: &Handle) -> Vec<u32> {
    bytes_u32(&raw_bytes(s, h))
}

fn deferred(err: &ServerError) -> (StreamId, &Arc<ServerError>, u32) {
    match err {
        ServerError::Deferred {
            stream,
            cause,
            later,
        } => (*stream, cause, *later),
        other => panic!("expected Deferred, got {other}"),
    }
}

fn indirect_max(s: &TestServer) -> u32 {
    s.device().limits().max_compute_workgroups_per_dimension
}

// The cases.

mod bounds;
mod indirect;
mod keys;
mod layouts;
mod memory;
mod refusal;
