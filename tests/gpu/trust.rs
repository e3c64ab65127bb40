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
    BufferBinding, Bytes, CopyDescriptor, CubeCount, CubeKernel, Handle, KernelArguments,
    LaunchMode, ManagedMemoryHandle, MemoryAllocationMode, MemoryConfiguration, MemoryId, PoolKind,
    ProfileError, Server, ServerError, ServerStorage, StreamId, TimingMethod,
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

#[test]
fn check_answers_ok_or_untrusted_and_a_read_of_untrusted_bytes_is_that_error_never_bytes() {
    let mut f = fixture();
    let good = upload(&mut f.s, u32_bytes(&[5; N]), S1);
    let bad = upload(&mut f.s, u32_bytes(&[6; N]), S1);
    let cause = poison(&mut f.s, &bad, S1);
    f.begin(S0);
    f.s.check(vec![good.binding()], S0).expect("trusted");
    let err =
        f.s.check(vec![good.binding(), bad.binding()], S0)
            .expect_err("one untrusted");
    assert_eq!(
        err,
        ServerError::Untrusted {
            memory: bad.memory.id(),
            cause: Arc::clone(&cause),
        }
    );
    assert!(matches!(cause.as_ref(), ServerError::Compilation { .. }));
    // A read says the same, and returns no bytes, alone or with a trusted
    // descriptor.
    assert_eq!(read(&mut f.s, &bad, S0).expect_err("untrusted"), err);
    let both =
        f.s.read(vec![good.copy_descriptor(), bad.copy_descriptor()], S0);
    assert_eq!(
        futures::executor::block_on(both).expect_err("no bytes"),
        err
    );
    f.end();
    assert_eq!(
        bytes_u32(&read(&mut f.s, &good, S0).expect("trusted read")),
        vec![5; N]
    );
    // Still untrusted: reads report, they do not repair.
    assert_eq!(f.s.check(vec![bad.binding()], S0).expect_err("still"), err);
    f.assert_neighbours_and_bystander();
}

#[test]
fn a_launch_reading_untrusted_bytes_is_refused_and_poisons_its_writes() {
    let mut f = fixture();
    let src = upload(&mut f.s, u32_bytes(&[1; N]), S1);
    let rw = upload(&mut f.s, u32_bytes(&[2; N]), S1);
    let count = upload(&mut f.s, u32_bytes(&[1, 1, 1]), S1);
    let trusted = upload(&mut f.s, u32_bytes(&[3; N]), S1);
    let out = [0, 1, 2, 3].map(|i| upload(&mut f.s, u32_bytes(&[100 + i; N]), S1));
    sync(&mut f.s, S1).expect("setup");
    let src_cause = poison(&mut f.s, &src, S1);
    let rw_cause = poison(&mut f.s, &rw, S1);
    let count_cause = poison(&mut f.s, &count, S1);
    let failures = f.s.failure_count();

    f.begin(S0);
    // A read-only input.
    launch(
        &mut f.s,
        add_kernel(),
        CubeCount::x(1),
        &[&trusted, &src, &out[0]],
        S0,
    );
    // A read-write input: the other read-write binding is poisoned too.
    launch(
        &mut f.s,
        move_kernel(),
        CubeCount::x(1),
        &[&rw, &out[1]],
        S0,
    );
    // The indirect count.
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(count.binding()),
        bindings(&[&out[2]]),
        S0,
    );
    // Poison follows data further: a launch reading a refused launch's
    // output is refused in turn.
    launch(
        &mut f.s,
        double_kernel(),
        CubeCount::x(1),
        &[&out[0], &out[3]],
        S0,
    );
    f.end();

    assert_eq!(f.s.failure_count(), failures + 4);
    assert_refused_for(&mut f.s, &out[0], src.memory.id(), &src_cause);
    assert_refused_for(&mut f.s, &out[1], rw.memory.id(), &rw_cause);
    assert_refused_for(&mut f.s, &out[2], count.memory.id(), &count_cause);
    let out0_cause = untrusted_cause(&mut f.s, &out[0]);
    assert_refused_for(&mut f.s, &out[3], out[0].memory.id(), &out0_cause);
    // An untrusted read-write input stays poisoned by its first cause.
    assert_eq!(untrusted_cause(&mut f.s, &rw), rw_cause);
    // Read-only inputs are not written, so not poisoned.
    f.s.check(vec![trusted.binding()], S0)
        .expect("read-only input stays trusted");

    // Reported once, by the stream's next flush; `later` counts the rest.
    let err = f.s.flush(S0).expect_err("deferred");
    let (stream, cause, later) = deferred(&err);
    assert_eq!(stream, S0);
    assert_eq!(later, 3);
    assert!(
        matches!(cause.as_ref(), ServerError::UntrustedInput { input, .. } if *input == src.memory.id()),
        "{cause}"
    );
    assert_eq!(err.root_cause(), src_cause.as_ref());
    f.s.flush(S0).expect("reported once");

    // None of them ran: every output still holds its old bytes.
    for (i, h) in out.iter().enumerate() {
        assert_eq!(
            raw_u32(&mut f.s, h),
            vec![100 + i as u32; N],
            "out[{i}] written"
        );
    }
    assert_eq!(
        raw_u32(&mut f.s, &rw),
        vec![2; N],
        "the rw input was written"
    );

    // A replay is refused the same way, and reported by the next sync.
    let q = upload(&mut f.s, u32_bytes(&[4; N]), S2);
    let r = upload(&mut f.s, u32_bytes(&[0; N]), S2);
    launch(&mut f.s, double_kernel(), CubeCount::x(1), &[&q, &r], S2); // compile
    sync(&mut f.s, S2).expect("warm-up");
    f.s.begin_capture(S2).expect("begin");
    launch(&mut f.s, double_kernel(), CubeCount::x(1), &[&q, &r], S2);
    let g = f.s.end_capture(S2).expect("end");
    f.s.replay(g, S2).expect("a trusted replay runs");
    assert_eq!(
        bytes_u32(&read(&mut f.s, &r, S2).expect("read")),
        vec![9; N]
    );
    let q_cause = poison(&mut f.s, &q, S1);
    let err = f.s.replay(g, S2).expect_err("refused");
    assert!(
        matches!(&err, ServerError::UntrustedInput { input, .. } if *input == q.memory.id()),
        "{err}"
    );
    assert_refused_for(&mut f.s, &r, q.memory.id(), &q_cause);
    let err = sync(&mut f.s, S2).expect_err("deferred to sync");
    let (stream, _, later) = deferred(&err);
    assert_eq!((stream, later), (S2, 0));
    assert_eq!(err.root_cause(), q_cause.root_cause());
    assert_eq!(raw_u32(&mut f.s, &r), vec![9; N], "the refused replay ran");

    f.assert_neighbours_and_bystander();
}

#[test]
fn a_launch_never_restores_trust_only_a_full_host_write_does() {
    let mut f = fixture();
    let x = upload(&mut f.s, u32_bytes(&[1; N]), S1);
    let cause = poison(&mut f.s, &x, S1);

    f.begin(S0);
    // Binding the whole slice, writing every element without reading it:
    // still refused (its binding is an input), and `x` keeps its cause.
    launch(&mut f.s, fill_kernel(), CubeCount::x(1), &[&x], S0);
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&x], S0);
    f.end();
    assert_eq!(untrusted_cause(&mut f.s, &x), cause);
    let err = f.s.flush(S0).expect_err("the refusals");
    assert_eq!(deferred(&err).2, 1);
    assert_eq!(raw_u32(&mut f.s, &x), vec![1; N], "a refused launch ran");

    // A partial host write does not restore it.
    let half = BufferBinding {
        memory: x.memory.clone(),
        offset: 0,
        size: 4 * N as u64 / 2,
    };
    f.s.write(
        vec![(
            CopyDescriptor::contiguous(half),
            u32_bytes(&[8; N / 2]).into(),
        )],
        S0,
    );
    f.s.flush(S0).expect("the partial write succeeds");
    assert_eq!(untrusted_cause(&mut f.s, &x), cause);
    // Nor does a full one that fails.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[8; 3]).into())], S0);
    assert!(f.s.flush(S0).is_err());
    assert_eq!(untrusted_cause(&mut f.s, &x), cause);
    // A successful full host write does; launches then run on it, and a
    // launch that succeeds keeps it trusted.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[8; N]).into())], S0);
    f.s.check(vec![x.binding()], S0).expect("trusted again");
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&x], S0);
    assert_eq!(
        bytes_u32(&read(&mut f.s, &x, S0).expect("read")),
        vec![9; N]
    );
    launch(&mut f.s, fill_kernel(), CubeCount::x(1), &[&x], S0);
    assert_eq!(
        bytes_u32(&read(&mut f.s, &x, S0).expect("read")),
        vec![7; N]
    );
    sync(&mut f.s, S0).expect("nothing else failed");
    f.assert_neighbours_and_bystander();
}

#[test]
fn a_declared_layout_that_disagrees_with_the_module_is_a_layout_mismatch_poisoning_the_declared_writes()
 {
    let mut f = fixture();
    let a = upload(&mut f.s, u32_bytes(&[1; N]), S0);
    let b = upload(&mut f.s, u32_bytes(&[2; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    // Writes both bindings: src is `read_write` in the source.
    let both_rw = r#"
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] + 1u; src[id.x] = 99u; }
}
"#;
    let with_uniform = r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + p.n; }
}
"#;
    let rw = BindingAccess::ReadWrite;
    let ro = BindingAccess::ReadOnly;
    let scalars = || Bytes::from(u32_bytes(&[5, 0, 0, 0]));
    struct Case {
        kernel: WgslKernel,
        args: KernelArguments,
        /// What the declared layout writes (poisoned), then what it reads
        /// only (left trusted and untouched).
        writes: Vec<Handle>,
        reads: Vec<Handle>,
        reason: &'static str,
    }
    let cases = vec![
        // Declared read-only, `read_write` in the module: the declared
        // write set misses `a`, so `a` must not be written either.
        Case {
            kernel: WgslKernel::new("ro_but_rw", both_rw, "main", [64, 1, 1], vec![ro, rw]),
            args: bindings(&[&a, &b]),
            writes: vec![b.clone()],
            reads: vec![a.clone()],
            reason: "binding 0 is declared read-only but the module declares it read_write",
        },
        // Declared read-write, `read` in the module.
        Case {
            kernel: WgslKernel::new("rw_but_ro", DOUBLE_WGSL, "main", [64, 1, 1], vec![rw, rw]),
            args: bindings(&[&a, &b]),
            writes: vec![a.clone(), b.clone()],
            reads: vec![],
            reason: "binding 0 is declared read_write but the module declares it read-only",
        },
        // One binding too many.
        Case {
            kernel: WgslKernel::new("two_for_one", INC_WGSL, "main", [64, 1, 1], vec![rw, ro]),
            args: bindings(&[&b, &a]),
            writes: vec![b.clone()],
            reads: vec![a.clone()],
            reason: "2 storage binding(s) declared, the module has 1",
        },
        // A scalar block the module does not have.
        Case {
            kernel: WgslKernel::new("no_uniform", INC_WGSL, "main", [64, 1, 1], vec![rw])
                .with_scalars(),
            args: bindings(&[&b]).with_scalars(scalars()),
            writes: vec![b.clone()],
            reads: vec![],
            reason: "a scalar block is declared but the module has no uniform",
        },
        // The module's uniform, undeclared.
        Case {
            kernel: WgslKernel::new(
                "undeclared_uniform",
                with_uniform,
                "main",
                [64, 1, 1],
                vec![rw],
            ),
            args: bindings(&[&b]),
            writes: vec![b.clone()],
            reads: vec![],
            reason: "the module has a uniform block but no scalars are declared",
        },
        // The wrong workgroup size.
        Case {
            kernel: WgslKernel::new("narrow", INC_WGSL, "main", [32, 1, 1], vec![rw]),
            args: bindings(&[&b]),
            writes: vec![b.clone()],
            reads: vec![],
            reason: "workgroup size [32, 1, 1] declared, the module's is [64, 1, 1]",
        },
    ];
    for case in cases {
        let name = case.kernel.name().to_string();
        // Every write set is trusted again before the case.
        for h in [&a, &b] {
            let data = if h.memory.id() == a.memory.id() { 1 } else { 2 };
            f.s.write(
                vec![(h.copy_descriptor(), u32_bytes(&[data; N]).into())],
                S0,
            );
        }
        sync(&mut f.s, S0).expect("rewrite");
        let failures = f.s.failure_count();
        f.begin(S0);
        launch_args(&mut f.s, case.kernel, CubeCount::x(1), case.args, S0);
        f.end();
        assert_eq!(f.s.failure_count(), failures + 1, "{name}");
        for w in &case.writes {
            let cause = untrusted_cause(&mut f.s, w);
            let ServerError::LayoutMismatch { kernel, reason } = cause.as_ref() else {
                panic!("{name}: expected LayoutMismatch, got {cause}");
            };
            assert_eq!(kernel, &name);
            assert!(reason.contains(case.reason), "{name}: {reason}");
        }
        for r in &case.reads {
            f.s.check(vec![r.binding()], S0)
                .expect("a declared read-only binding is not poisoned");
        }
        let err = f.s.flush(S0).expect_err("deferred");
        assert!(
            matches!(err.root_cause(), ServerError::LayoutMismatch { .. }),
            "{name}: {err}"
        );
        // Nothing was dispatched.
        assert_eq!(raw_u32(&mut f.s, &a), vec![1; N], "{name} wrote a");
        assert_eq!(raw_u32(&mut f.s, &b), vec![2; N], "{name} wrote b");
        f.assert_neighbours_and_bystander();
        f.reset_neighbours();
    }
}

#[test]
fn a_binding_smaller_than_the_module_needs_is_binding_too_small_before_wgpu_sees_it() {
    let mut f = fixture();
    let vec4 = WgslKernel::new(
        "vec4",
        r#"
@group(0) @binding(0) var<storage, read_write> v: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&v)) { v[id.x] = v[id.x] * 2.0; }
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let fixed = WgslKernel::new(
        "fixed64",
        r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    x[id.x] = src[0] + u32(id.x);
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    );
    let scaled = WgslKernel::new(
        "scaled",
        r#"
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + p.n; }
}
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_scalars();
    let v = upload(&mut f.s, Bytes::from(vec![0u8; 8]), S0);
    let src = upload(&mut f.s, u32_bytes(&[1; N]), S0);
    let x = upload(&mut f.s, u32_bytes(&[3; N]), S0);
    let y = upload(&mut f.s, u32_bytes(&[4; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    let first_16 = BufferBinding {
        memory: x.memory.clone(),
        offset: 0,
        size: 16,
    };
    let failures = f.s.failure_count();

    f.begin(S0);
    launch(&mut f.s, vec4, CubeCount::x(1), &[&v], S0);
    launch_args(
        &mut f.s,
        fixed.clone(),
        CubeCount::x(1),
        KernelArguments::buffers(vec![src.binding(), first_16]),
        S0,
    );
    launch_args(
        &mut f.s,
        scaled.clone(),
        CubeCount::x(1),
        bindings(&[&y]).with_scalars(Bytes::from(u32_bytes(&[5]))),
        S0,
    );
    f.end();

    assert_eq!(f.s.failure_count(), failures + 3);
    let expect = |s: &mut TestServer, h: &Handle, want: (&str, u32, u64, u64)| {
        let cause = untrusted_cause(s, h);
        match cause.as_ref() {
            ServerError::BindingTooSmall {
                kernel,
                binding,
                size,
                min,
            } => assert_eq!((kernel.as_str(), *binding, *size, *min), want),
            other => panic!("expected BindingTooSmall, got {other}"),
        }
    };
    expect(&mut f.s, &v, ("vec4", 0, 8, 16));
    expect(&mut f.s, &x, ("fixed64", 1, 16, 256));
    // The scalar block is the binding after the buffers.
    expect(&mut f.s, &y, ("scaled", 1, 4, 16));
    f.s.check(vec![src.binding()], S0)
        .expect("the read-only input is not poisoned");
    let err = f.s.flush(S0).expect_err("deferred");
    assert_eq!(deferred(&err).2, 2);
    assert_eq!(raw_u32(&mut f.s, &x), vec![3; N], "fixed64 ran");
    assert_eq!(raw_u32(&mut f.s, &y), vec![4; N], "scaled ran");
    assert_eq!(raw_bytes(&mut f.s, &v), vec![0; 8], "vec4 ran");

    // Bound with enough, the same kernels run.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[0; N]).into())], S0);
    f.s.write(vec![(y.copy_descriptor(), u32_bytes(&[4; N]).into())], S0);
    launch(&mut f.s, fixed, CubeCount::x(1), &[&src, &x], S0);
    launch_args(
        &mut f.s,
        scaled,
        CubeCount::x(1),
        bindings(&[&y]).with_scalars(Bytes::from(u32_bytes(&[5, 0, 0, 0]))),
        S0,
    );
    let want: Vec<u32> = (1..=N as u32).collect();
    assert_eq!(bytes_u32(&read(&mut f.s, &x, S0).expect("x")), want);
    assert_eq!(bytes_u32(&read(&mut f.s, &y, S0).expect("y")), vec![9; N]);
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn an_indirect_count_on_the_page_of_a_storage_binding_is_copied_to_scratch_and_runs() {
    let mut f = fixture();
    let x = upload(&mut f.s, u32_bytes(&[0; 4 * N]), S0);
    let count2 = upload(&mut f.s, u32_bytes(&[2, 1, 1]), S0);
    let count4 = upload(&mut f.s, u32_bytes(&[4, 1, 1]), S0);
    let none = upload(&mut f.s, u32_bytes(&[0, 1, 1]), S0);
    // Sixteen bytes, the count in the middle (a 4-aligned offset).
    let inner = upload(&mut f.s, u32_bytes(&[9, 1, 1, 1]), S0);
    let page =
        |s: &mut TestServer, h: &Handle| s.get_resource(h.binding(), S0).expect("page").handle.id;
    let x_page = page(&mut f.s, &x);
    for c in [&count2, &count4, &none, &inner] {
        assert_eq!(page(&mut f.s, c), x_page, "the case needs one sliced page");
    }
    sync(&mut f.s, S0).expect("setup");
    let dynamic = |h: &Handle| CubeCount::Dynamic(h.binding());

    f.begin(S0);
    // Two workgroups of 64 of the 256 elements, then four: every one.
    launch_args(
        &mut f.s,
        inc_kernel(),
        dynamic(&count2),
        bindings(&[&x]),
        S0,
    );
    launch_args(
        &mut f.s,
        inc_kernel(),
        dynamic(&count4),
        bindings(&[&x]),
        S0,
    );
    // No workgroups at all.
    launch_args(&mut f.s, inc_kernel(), dynamic(&none), bindings(&[&x]), S0);
    // The count of a binding at an offset: (1, 1, 1).
    let at_4 = BufferBinding {
        memory: inner.memory.clone(),
        offset: 4,
        size: 12,
    };
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(at_4),
        bindings(&[&x]),
        S0,
    );
    f.end();

    let mut want = vec![3; 4 * N];
    want[2 * N..].fill(1);
    want[..N].fill(3);
    want[N..2 * N].fill(2);
    f.s.check(vec![x.binding()], S0).expect("trusted");
    assert_eq!(bytes_u32(&read(&mut f.s, &x, S0).expect("x")), want);
    // The counts are read, not written.
    for (c, v) in [
        (&count2, [2, 1, 1]),
        (&count4, [4, 1, 1]),
        (&none, [0, 1, 1]),
    ] {
        f.s.check(vec![c.binding()], S0).expect("count trusted");
        assert_eq!(bytes_u32(&read(&mut f.s, c, S0).expect("count")), v);
    }
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn an_indirect_count_over_the_limit_poisons_the_launch_writes_late() {
    let mut f = fixture();
    let max = indirect_max(&f.s);
    let over_x = upload(&mut f.s, u32_bytes(&[max + 1, 1, 1]), S0);
    let over_z = upload(&mut f.s, u32_bytes(&[1, 1, max + 1]), S0);
    let x = upload(&mut f.s, u32_bytes(&[5; N]), S0);
    let y = upload(&mut f.s, u32_bytes(&[6; N]), S0);
    let src = upload(&mut f.s, u32_bytes(&[7; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    let is_limit = |e: &ServerError| {
        matches!(
            e,
            ServerError::LimitExceeded { requested, max: m, .. } if *requested == u64::from(max) + 1 && *m == u64::from(max)
        )
    };

    // The sync of the stream reports it.
    f.begin(S0);
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(over_x.binding()),
        bindings(&[&x]),
        S0,
    );
    f.end();
    let err = sync(&mut f.s, S0).expect_err("the sync that ran the batch reports it");
    let (stream, cause, later) = deferred(&err);
    assert_eq!((stream, later), (S0, 0));
    assert!(is_limit(cause), "{cause}");
    sync(&mut f.s, S0).expect("reported once");
    // check after the sync: untrusted, with the limit as its cause.
    let cause = untrusted_cause(&mut f.s, &x);
    assert!(is_limit(&cause), "{cause}");
    f.assert_neighbours_and_bystander();
    // The dispatch was skipped: nothing changed.
    assert_eq!(raw_u32(&mut f.s, &x), vec![5; N]);

    // A read of the writes (no sync first) returns the error, not bytes.
    f.reset_neighbours();
    f.begin(S1);
    launch_args(
        &mut f.s,
        double_kernel(),
        CubeCount::Dynamic(over_z.binding()),
        bindings(&[&src, &y]),
        S1,
    );
    f.end();
    match read(&mut f.s, &y, S1).expect_err("untrusted") {
        ServerError::Untrusted { memory, cause } => {
            assert_eq!(memory, y.memory.id());
            assert!(is_limit(&cause), "{cause}");
        }
        other => panic!("expected Untrusted, got {other}"),
    }
    f.s.check(vec![y.binding()], S1).expect_err("untrusted");
    f.s.check(vec![src.binding()], S1)
        .expect("its read-only input is not poisoned");
    let err = sync(&mut f.s, S1).expect_err("deferred");
    assert!(is_limit(err.root_cause()), "{err}");
    f.assert_neighbours_and_bystander();

    // Poison follows the late verdict: a launch reading `y` now is
    // refused.
    let z = upload(&mut f.s, u32_bytes(&[0; N]), S0);
    launch(&mut f.s, double_kernel(), CubeCount::x(1), &[&y, &z], S0);
    let y_cause = untrusted_cause(&mut f.s, &y);
    assert_refused_for(&mut f.s, &z, y.memory.id(), &y_cause);
    // A refused launch writing `y` leaves it its first cause, the verdict.
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&y], S0);
    assert_eq!(untrusted_cause(&mut f.s, &y), y_cause);
    assert!(is_limit(&y_cause), "{y_cause}");
    let err = sync(&mut f.s, S0).expect_err("two refusals");
    assert_eq!(deferred(&err).2, 1);
    // A full host write trusts `y` again.
    f.s.write(vec![(y.copy_descriptor(), u32_bytes(&[1; N]).into())], S0);
    assert_eq!(bytes_u32(&read(&mut f.s, &y, S0).expect("y")), vec![1; N]);
}

#[test]
fn a_full_host_write_after_an_over_limit_indirect_launch_is_trusted_whenever_the_verdict_arrives() {
    let mut f = fixture();
    let max = indirect_max(&f.s);
    let over = upload(&mut f.s, u32_bytes(&[max + 1, 1, 1]), S0);
    let x = upload(&mut f.s, u32_bytes(&[5; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    f.begin(S0);
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(over.binding()),
        bindings(&[&x]),
        S0,
    );
    f.end();
    // Program order: the skipped launch, then the write. The write wins.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[8; N]).into())], S0);
    let err = sync(&mut f.s, S0).expect_err("the skipped launch is reported");
    assert!(
        matches!(err.root_cause(), ServerError::LimitExceeded { .. }),
        "{err}"
    );
    f.s.check(vec![x.binding()], S0)
        .expect("the later full write restored trust");
    assert_eq!(bytes_u32(&read(&mut f.s, &x, S0).expect("x")), vec![8; N]);
    f.assert_neighbours_and_bystander();
}

/// Resident set size of this process, in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

#[test]
fn host_writes_without_a_flush_do_not_grow_resident_memory() {
    let mut f = fixture();
    // (writes, bytes each): many small writes reach the count threshold
    // (1024 writes) first, large ones the byte threshold (256 MiB).
    // Unbounded staging would hold every byte written, 1 GiB or more; the
    // bound leaves room for what other tests of this process allocate
    // meanwhile (lavapipe's device memory is host memory). 64 Ki writes of
    // 16 KiB rather than 200,000 of 4 KiB: as many bytes, a third of the
    // calls, to keep the test short in debug builds.
    const ROUNDS: [(usize, usize); 2] = [(64 << 10, 16 << 10), (1200, 1 << 20)];
    const BOUND: u64 = 512 << 20;
    for (writes, size) in ROUNDS {
        let target = alloc(&mut f.s, size as u64, S0);
        let data = Bytes::from(vec![0xA5u8; size]);
        // Warm up (a few flush cycles) before measuring: the allocator
        // keeps what wgpu's staging frees, so growth after this is what is
        // never freed.
        for _ in 0..(2048).min(writes / 2) {
            f.s.write(vec![(target.copy_descriptor(), data.clone())], S0);
        }
        f.begin(S0);
        let before = rss_bytes();
        for _ in 0..writes {
            f.s.write(vec![(target.copy_descriptor(), data.clone())], S0);
        }
        let grown = rss_bytes().saturating_sub(before);
        eprintln!(
            "{writes} writes of {size} bytes: resident +{} MiB",
            grown >> 20
        );
        f.end();
        assert!(
            grown < BOUND,
            "resident memory grew by {} MiB over {writes} writes of {size} bytes ({} MiB written)",
            grown >> 20,
            (writes * size) >> 20
        );
        assert_eq!(
            read(&mut f.s, &target, S0).expect("read").as_ref(),
            &data[..]
        );
        sync(&mut f.s, S0).expect("no failure");
        f.assert_neighbours_and_bystander();
        f.reset_neighbours();
    }
}

fn persistent_pool(s: &mut TestServer) -> Option<compute_runtime::PoolReport> {
    s.memory_report(S0)
        .expect("report")
        .pools
        .into_iter()
        .find(|p| p.kind == PoolKind::Persistent)
}

fn sliced_in_use(s: &mut TestServer) -> u64 {
    s.memory_report(S0)
        .expect("report")
        .pools
        .iter()
        .filter(|p| matches!(p.kind, PoolKind::Sliced { .. }))
        .map(|p| p.bytes_in_use)
        .sum()
}

#[test]
fn graph_prepare_makes_only_that_streams_allocations_persistent_and_cleanup_frees_them_in_auto_mode()
 {
    let mut f = fixture();
    let persistent_before = persistent_pool(&mut f.s).map_or(0, |p| p.bytes_in_use);
    f.s.graph_prepare(S1).expect("prepare");
    f.begin(S0);
    let sliced = sliced_in_use(&mut f.s);
    let a = upload(&mut f.s, u32_bytes(&[1; 1024]), S1);
    assert_eq!(
        persistent_pool(&mut f.s).expect("listed").bytes_in_use,
        persistent_before + 4096,
        "the prepared stream allocates persistently"
    );
    assert_eq!(sliced_in_use(&mut f.s), sliced);
    let b = upload(&mut f.s, u32_bytes(&[2; 1024]), S2);
    let c = upload(&mut f.s, u32_bytes(&[3; 1024]), S0);
    assert_eq!(
        sliced_in_use(&mut f.s),
        sliced + 2 * 4096,
        "other streams stay sliced"
    );
    assert_eq!(
        persistent_pool(&mut f.s).expect("listed").bytes_in_use,
        persistent_before + 4096
    );
    launch(&mut f.s, inc_kernel(), CubeCount::x(16), &[&a], S1);
    launch(&mut f.s, inc_kernel(), CubeCount::x(16), &[&b], S2);
    launch(&mut f.s, inc_kernel(), CubeCount::x(16), &[&c], S0);
    f.end();
    assert_eq!(
        bytes_u32(&read(&mut f.s, &a, S1).expect("a")),
        vec![2; 1024]
    );
    assert_eq!(
        bytes_u32(&read(&mut f.s, &b, S2).expect("b")),
        vec![3; 1024]
    );
    assert_eq!(
        bytes_u32(&read(&mut f.s, &c, S0).expect("c")),
        vec![4; 1024]
    );
    // The stream goes back to the device's mode after its capture.
    f.s.begin_capture(S1).expect("begin");
    f.s.end_capture(S1).expect("end");
    let d = upload(&mut f.s, u32_bytes(&[4; 1024]), S1);
    assert_eq!(sliced_in_use(&mut f.s), sliced + 3 * 4096);
    drop((a, d));
    sync(&mut f.s, S1).expect("sync");
    // Kept while the device allocates persistently...
    f.s.allocation_mode(MemoryAllocationMode::Persistent, S0);
    f.s.memory_cleanup(S0).expect("cleanup");
    let kept = persistent_pool(&mut f.s).expect("listed");
    assert_eq!(kept.bytes_in_use, persistent_before);
    assert!(kept.bytes_reserved >= 4096, "{kept:?}");
    // ...given back by a cleanup in Auto mode.
    f.s.allocation_mode(MemoryAllocationMode::Auto, S0);
    f.s.memory_cleanup(S0).expect("cleanup");
    let freed = persistent_pool(&mut f.s).map_or(0, |p| p.bytes_reserved);
    assert_eq!(freed, 0, "persistent pages kept after an Auto cleanup");
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn profile_windows_are_capped_closing_the_oldest_and_their_slots_are_pooled() {
    const CAP: usize = 4096;
    const EXTRA: usize = 8;
    let mut f = fixture();
    let slots = f.s.profile_slots_created();
    f.begin(S0);
    let mut tokens: Vec<_> = (0..CAP + EXTRA)
        .map(|_| f.s.start_profile(S0).expect("start"))
        .collect();
    assert_eq!(f.s.open_profile_windows(), CAP);
    if f.s.timing_method() == TimingMethod::Device {
        f.end();
    }
    let bound = slots + CAP + 1;
    assert!(
        f.s.profile_slots_created() <= bound,
        "{} slots for {} windows",
        f.s.profile_slots_created(),
        CAP + EXTRA
    );
    // The oldest were closed.
    for t in tokens.drain(..EXTRA) {
        let id = t.id;
        match f.s.end_profile(S0, t) {
            Err(ProfileError::UnknownToken { token, stream }) => {
                assert_eq!((token, stream), (id, S0))
            }
            other => panic!("expected UnknownToken, got {other:?}"),
        }
    }
    // The rest are open: the first of them resolves, the others are
    // abandoned.
    let first = tokens.remove(0);
    let d = f.s.end_profile(S0, first).expect("open window");
    futures::executor::block_on(d.resolve()).expect("resolves");
    for t in tokens {
        f.s.abandon_profile(S0, t);
    }
    assert_eq!(f.s.open_profile_windows(), 0);
    // Reopening as many reuses the pooled slots.
    let created = f.s.profile_slots_created();
    let again: Vec<_> = (0..CAP)
        .map(|_| f.s.start_profile(S0).expect("start"))
        .collect();
    assert_eq!(f.s.profile_slots_created(), created, "slots not pooled");
    for t in again {
        f.s.abandon_profile(S0, t);
    }
    if f.s.timing_method() == TimingMethod::System {
        // System windows drain at start: no batch to share.
        launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&f.after], S0);
    }
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn tokens_and_graph_ids_of_another_server_are_unknown_here() {
    let mut f = fixture();
    let mut other: TestServer = options().open().expect("other server");
    let h = upload(&mut other, u32_bytes(&[1; N]), S0);
    launch(&mut other, inc_kernel(), CubeCount::x(1), &[&h], S0);
    sync(&mut other, S0).expect("warm-up");
    other.begin_capture(S0).expect("begin");
    launch(&mut other, inc_kernel(), CubeCount::x(1), &[&h], S0);
    let foreign_graph = other.end_capture(S0).expect("end");
    let foreign_token = other.start_profile(S0).expect("start");
    let foreign_id = foreign_token.id;
    // A graph of this server's own, for comparison.
    let mine = upload(&mut f.s, u32_bytes(&[0; N]), S1);
    f.s.begin_capture(S1).expect("begin");
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&mine], S1);
    let my_graph = f.s.end_capture(S1).expect("end");
    assert_ne!(my_graph, foreign_graph, "graph ids are process-unique");

    f.begin(S0);
    match f.s.end_profile(S0, foreign_token) {
        Err(ProfileError::UnknownToken { token, .. }) => assert_eq!(token, foreign_id),
        other => panic!("expected UnknownToken, got {other:?}"),
    }
    let err = f.s.replay(foreign_graph, S0).expect_err("foreign graph");
    assert_eq!(
        err,
        ServerError::UnknownGraph {
            graph: foreign_graph
        }
    );
    f.s.graph_destroy(foreign_graph, S0);
    f.end();

    // The other server still has both.
    assert_eq!(other.graph_count(), 1, "destroyed through another server");
    assert_eq!(other.open_profile_windows(), 1);
    let t = compute_runtime::ProfilingToken { id: foreign_id };
    let d = other.end_profile(S0, t).expect("its own token");
    futures::executor::block_on(d.resolve()).expect("resolves");
    other.replay(foreign_graph, S0).expect("its own graph");
    assert_eq!(
        bytes_u32(&read(&mut other, &h, S0).expect("read")),
        vec![3; N]
    );
    f.s.replay(my_graph, S1).expect("own graph");
    assert_eq!(
        bytes_u32(&read(&mut f.s, &mine, S1).expect("read")),
        vec![1; N]
    );
    assert_eq!(f.s.graph_count(), 1);
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn sync_refuses_an_out_of_bounds_or_unknown_binding_with_the_error_check_gives() {
    let mut f = fixture();
    let h = upload(&mut f.s, u32_bytes(&[5; 16]), S0);
    let bad = upload(&mut f.s, u32_bytes(&[6; 16]), S1);
    let bad_cause = poison(&mut f.s, &bad, S1);
    sync(&mut f.s, S0).expect("setup");
    let past_end = BufferBinding {
        memory: h.memory.clone(),
        offset: 32,
        size: 64,
    };
    let stranger = ManagedMemoryHandle::new().binding(16);
    let mut other: TestServer = options().open().expect("other server");
    let foreign = upload(&mut other, u32_bytes(&[1; 4]), S0).binding();
    // A failure pending on the stream: a refused sync leaves it for the
    // next one.
    let short = upload(&mut f.s, u32_bytes(&[0; 4]), S0);
    f.s.write(
        vec![(short.copy_descriptor(), Bytes::from(vec![0u8; 3]))],
        S0,
    );

    f.begin(S0);
    for binding in [past_end, stranger, foreign] {
        let checked = f.s.check(vec![binding.clone()], S0).expect_err("check");
        assert!(
            matches!(
                checked,
                ServerError::OutOfBounds { .. } | ServerError::UnknownHandle { .. }
            ),
            "{checked}"
        );
        let synced = futures::executor::block_on(f.s.sync(vec![h.binding(), binding], S0))
            .expect_err("sync");
        assert_eq!(synced, checked);
    }
    f.end();
    let err = sync(&mut f.s, S0).expect_err("the pending failure");
    assert!(
        matches!(err.root_cause(), ServerError::SizeMismatch { .. }),
        "{err}"
    );
    // An untrusted binding: the same error as check, too.
    let synced =
        futures::executor::block_on(f.s.sync(vec![bad.binding()], S0)).expect_err("untrusted");
    assert_eq!(
        synced,
        ServerError::Untrusted {
            memory: bad.memory.id(),
            cause: bad_cause
        }
    );
    futures::executor::block_on(f.s.sync(vec![h.binding()], S0)).expect("a good binding");
    f.assert_neighbours_and_bystander();
}

#[test]
fn idle_streams_beyond_64_are_retired_and_any_stream_id_still_syncs() {
    let mut f = fixture();
    let xs: Vec<Handle> = (0..8)
        .map(|_| upload(&mut f.s, u32_bytes(&[0; N]), S0))
        .collect();
    // A failure on stream 7, not reported yet: its stream is not retired.
    let short = upload(&mut f.s, u32_bytes(&[0; 4]), S0);
    sync(&mut f.s, S0).expect("setup");
    f.s.write(
        vec![(short.copy_descriptor(), Bytes::from(vec![0u8; 3]))],
        StreamId(7),
    );
    f.begin(S0);
    for i in 0..300u64 {
        let stream = StreamId(1000 + i);
        let x = &xs[i as usize % xs.len()];
        launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[x], stream);
        if i % 2 == 0 {
            sync(&mut f.s, stream).expect("sync");
        } else {
            f.s.flush(stream).expect("flush");
        }
        assert!(
            f.s.stream_ids().len() <= 64 + 2,
            "{} streams kept",
            f.s.stream_ids().len()
        );
    }
    // The case's own stream sits idle while the fresh streams come and go,
    // so a sweep submits its pending batch (idle streams' work is submitted
    // rather than kept forever): one submit more than the cases' own.
    f.end_after(301);
    // Retired or not, every id syncs and flushes.
    for i in [0u64, 1, 150, 299] {
        sync(&mut f.s, StreamId(1000 + i)).expect("sync of a retired stream");
        f.s.flush(StreamId(1000 + i))
            .expect("flush of a retired stream");
    }
    sync(&mut f.s, StreamId(123_456)).expect("sync of a stream never used");
    let err = sync(&mut f.s, StreamId(7)).expect_err("kept for its report");
    assert!(
        matches!(err.root_cause(), ServerError::SizeMismatch { .. }),
        "{err}"
    );
    for (k, x) in xs.iter().enumerate() {
        let launches = (0..300).filter(|i| i % xs.len() == k).count() as u32;
        assert_eq!(
            bytes_u32(&read(&mut f.s, x, StreamId(2000)).expect("x")),
            vec![launches; N],
            "a launch on a retired stream was lost"
        );
    }
    f.assert_neighbours_and_bystander();
}

#[test]
fn the_tail_of_an_odd_sized_slice_reads_back() {
    let mut f = fixture_with(options().memory(MemoryConfiguration::ExclusivePages));
    let data: Vec<u8> = (0..1023u32).map(|i| (i * 37 + 11) as u8).collect();
    let h = upload(&mut f.s, Bytes::from(data.clone()), S1);
    sync(&mut f.s, S1).expect("setup");
    let part = |offset: u64, size: u64| {
        CopyDescriptor::contiguous(BufferBinding {
            memory: h.memory.clone(),
            offset,
            size,
        })
    };
    f.begin(S0);
    assert_eq!(read(&mut f.s, &h, S1).expect("whole").as_ref(), &data[..]);
    for (offset, size) in [(1020, 3), (1021, 2), (1022, 1), (1016, 7), (3, 1020)] {
        let got = read_desc(&mut f.s, part(offset, size), S1).expect("tail");
        assert_eq!(
            got.as_ref(),
            &data[offset as usize..(offset + size) as usize],
            "bytes {offset}..+{size}"
        );
    }
    // A write of the tail (it ends the slice, so it may be unaligned).
    f.s.write(vec![(part(1020, 3), Bytes::from(vec![1u8, 2, 3]))], S1);
    let got = read_desc(&mut f.s, part(1020, 3), S1).expect("tail");
    assert_eq!(got.as_ref(), &[1, 2, 3]);
    f.end_after(7);
    sync(&mut f.s, S1).expect("no failure");
    f.assert_neighbours_and_bystander();
}

/// A backend that submits nothing, to make a scheduler (and so a key) of
/// one's own.
struct NoQueue;

impl compute_stream::SchedulerStreamBackend for NoQueue {
    type Stream = ();
    fn create_stream(&mut self, _: StreamId) {}
    fn submit(
        &mut self,
        _: StreamId,
        _: &mut (),
        _: compute_stream::Urgency,
    ) -> Result<compute_stream::Submitted, compute_stream::BatchFailure> {
        Ok(compute_stream::Submitted::Yes)
    }
}

/// Only the server restores trust: every public path another crate has to
/// the server's scheduler (the `WriteScoped` impl, the scopes, the trust
/// registry, late verdicts, released-handle queues) leaves a poisoned
/// binding untrusted. Poisoning from outside stays open.
#[test]
fn no_public_call_restores_trust() {
    use compute_stream::{WriteScoped, write_scope, write_scope_ids, write_scope_restoring};
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[1; N]), S0);
    let binding = &[h.binding()];
    let id = h.memory.id();
    let planted = ServerError::unsupported("outside", "poisoned by another crate");
    let _ = write_scope(&mut s, S0, binding, |_| Err::<(), _>(planted.clone()));
    let untrusted = |s: &mut TestServer, how: &str| {
        let err = s.check(vec![h.binding()], S0).expect_err(how);
        assert_eq!(err.root_cause(), &planted, "{how}: {err}");
    };
    untrusted(&mut s, "poisoned from outside");

    // The scopes another crate may call: a full write claimed, no key.
    write_scope(&mut s, S0, binding, |_| Ok(())).expect("ran");
    untrusted(&mut s, "write_scope");
    write_scope_ids(&mut s, S0, &[id], |_| Ok(())).expect("ran");
    untrusted(&mut s, "write_scope_ids");
    // A key of its own scheduler opens nothing here.
    let (_, foreign) = compute_stream::SchedulerMultiStream::new(NoQueue, 1);
    let refused = write_scope_restoring(&mut s, &foreign, S0, binding, |_, _| true, |_| Ok(()));
    assert!(
        matches!(refused, Err(ServerError::ForeignTrustKey { .. })),
        "{refused:?}"
    );
    untrusted(&mut s, "write_scope_restoring with a foreign key");

    // Released-handle queues: the handle cannot be attached to another
    // queue, and draining one forgets only what was on it.
    let queue = compute_runtime::ReleaseQueue::new();
    assert!(h.memory.attach_release(&queue).is_err(), "bound once");
    let stray = ManagedMemoryHandle::new();
    stray.attach_release(&queue).expect("a handle of its own");
    drop(stray);
    let mut freed = Vec::new();
    s.write_streams().drain_released(&queue, &mut freed);
    assert!(!freed.contains(&id));
    untrusted(&mut s, "drain_released");

    // Late verdicts: registering work of one's own and giving a good
    // verdict on it clears nothing.
    let late = std::sync::Arc::clone(s.write_streams().trust().late());
    let audit = late.expect(&[id]);
    late.verdict(audit, S0, Ok(()));
    let _ = late.take_reports();
    untrusted(&mut s, "late verdicts");
    // Nor does ending a pending mark without the key.
    let e = s
        .write_streams()
        .end_pending(&foreign, id)
        .expect_err("foreign key");
    assert!(matches!(e, ServerError::ForeignTrustKey { .. }), "{e}");
    untrusted(&mut s, "end_pending with a foreign key");

    // The server's own full write still restores.
    s.write(vec![(h.copy_descriptor(), u32_bytes(&[2; N]).into())], S0);
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("trusted")),
        vec![2; N]
    );
}
