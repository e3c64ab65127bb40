//! Cross-stream ordering against a CPU model, from one thread and from
//! eight, and what a lost device does to every call.
//!
//! The random programs (`random_programs_on_three_streams_match_the_model`)
//! check values and trust together: besides writes, launches and reads,
//! they fail launches on purpose, launch with indirect counts (on the page
//! of their output or not, over the device's limit or not), and use the
//! outputs of failed work, against a CPU model of every buffer's values and
//! poison (see `model`). `TRUST_MODEL_OPS=n cargo test -p compute-tests
//! --test gpu trust_model_long_run -- --ignored --nocapture` runs `n`
//! operations of them (about 3,000 a second in a debug build on lavapipe;
//! `TRUST_MODEL_SEED` picks the programs).

use std::time::Duration;

use crate::common::*;
use compute_runtime::{CubeCount, Handle, Server, ServerError, ServerStorage, StreamId};
use compute_testkit::Rng;
use wgpu_server::{BindingAccess, WgslKernel};

const N: usize = 64;

pub(crate) const COPY_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] * 2u + 1u; }
}
"#;

pub(crate) fn copy_kernel() -> WgslKernel {
    WgslKernel::new(
        "copy2x1",
        COPY_WGSL,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    )
}

/// One operation of the model.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Host write of `value` to every element of buffer `dst`.
    Write { dst: usize, value: u32 },
    /// `dst[i] += 1`.
    Inc { dst: usize },
    /// `dst[i] = src[i] * 2 + 1`.
    Copy { src: usize, dst: usize },
    /// Read `src` back and compare with the model.
    Read { src: usize },
}

/// The CPU model: every buffer is uniform, so one value each is enough.
fn model_step(model: &mut [u32], op: Op) -> Option<u32> {
    match op {
        Op::Write { dst, value } => model[dst] = value,
        Op::Inc { dst } => model[dst] = model[dst].wrapping_add(1),
        Op::Copy { src, dst } => model[dst] = model[src].wrapping_mul(2).wrapping_add(1),
        Op::Read { src } => return Some(model[src]),
    }
    None
}

fn run_op(s: &mut TestServer, bufs: &[Handle], stream: StreamId, op: Op) -> Option<Vec<u32>> {
    match op {
        Op::Write { dst, value } => {
            s.write(
                vec![(bufs[dst].copy_descriptor(), u32_bytes(&[value; N]).into())],
                stream,
            );
        }
        Op::Inc { dst } => launch(s, inc_kernel(), CubeCount::x(1), &[&bufs[dst]], stream),
        Op::Copy { src, dst } => launch(
            s,
            copy_kernel(),
            CubeCount::x(1),
            &[&bufs[src], &bufs[dst]],
            stream,
        ),
        Op::Read { src } => {
            return Some(bytes_u32(&read(s, &bufs[src], stream).expect("read")));
        }
    }
    None
}

fn check_sequence(s: &mut TestServer, ops: &[(u64, Op)], nbufs: usize) {
    let bufs: Vec<Handle> = (0..nbufs)
        .map(|i| upload(s, u32_bytes(&[i as u32; N]), StreamId(0)))
        .collect();
    let mut model: Vec<u32> = (0..nbufs as u32).collect();
    for (step, (stream, op)) in ops.iter().enumerate() {
        let expected = model_step(&mut model, *op);
        let got = run_op(s, &bufs, StreamId(*stream), *op);
        if let (Some(e), Some(g)) = (expected, got) {
            assert_eq!(
                g,
                vec![e; N],
                "step {step}: {op:?} on stream {stream} in {ops:?}"
            );
        }
    }
    // Finally every buffer, read from a stream that touched nothing.
    for (i, b) in bufs.iter().enumerate() {
        let g = bytes_u32(&read(s, b, StreamId(99)).expect("final read"));
        assert_eq!(g, vec![model[i]; N], "final buffer {i} after {ops:?}");
    }
    sync(s, StreamId(0)).expect("sync");
}

/// Every pair of operations on every pair of streams among A, B, C, each
/// over the same buffers, then reads from the third stream.
#[test]
fn ordering_matrix_every_pair_on_every_stream_pair() {
    let mut s = server();
    let ops = [
        Op::Write { dst: 0, value: 40 },
        Op::Inc { dst: 0 },
        Op::Copy { src: 0, dst: 1 },
        Op::Copy { src: 1, dst: 0 },
        Op::Read { src: 0 },
    ];
    for a in ops {
        for b in ops {
            for sa in 0..3u64 {
                for sb in 0..3u64 {
                    let third = (sa + sb + 1) % 3;
                    let seq = [
                        (sa, a),
                        (sb, b),
                        (third, Op::Inc { dst: 1 }),
                        (sa, Op::Read { src: 1 }),
                    ];
                    check_sequence(&mut s, &seq, 2);
                }
            }
        }
    }
}

/// Eight threads, each on its own stream, 1,000 random operations each over
/// shared (read-only) and private buffers, checked against per-thread models.
#[test]
fn eight_threads_each_on_its_own_stream() {
    use compute_runtime::client::ComputeClient;
    let client = ComputeClient::new(compute_runtime::DeviceId(0), server());
    let shared: Vec<Handle> = (0..2u32)
        .map(|i| client.create(u32_bytes(&[100 + i; N])).expect("shared"))
        .collect();
    client.sync().expect("sync");
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let client = client.with_stream(StreamId(t + 1));
            let shared = shared.clone();
            std::thread::spawn(move || {
                let stream = client.stream();
                let private: Vec<Handle> = (0..2)
                    .map(|_| client.create(u32_bytes(&[0; N])).expect("private"))
                    .collect();
                // Buffers 0,1 are shared (read only), 2,3 private.
                let mut model = [100, 101, 0, 0];
                let mut rng = Rng::spread(t);
                let mut next = || rng.next_u64();
                for _ in 0..1000 {
                    let dst = 2 + (next() % 2) as usize;
                    let op = match next() % 5 {
                        0 => Op::Write {
                            dst,
                            value: (next() % 1000) as u32,
                        },
                        1 => Op::Inc { dst },
                        2 => Op::Copy {
                            src: (next() % 4) as usize,
                            dst,
                        },
                        _ if next() % 4 == 0 => Op::Read {
                            src: (next() % 4) as usize,
                        },
                        _ => Op::Inc { dst },
                    };
                    if let Op::Copy { src, dst } = op
                        && src == dst
                    {
                        continue;
                    }
                    let expected = model_step(&mut model, op);
                    let bufs = [
                        shared[0].clone(),
                        shared[1].clone(),
                        private[0].clone(),
                        private[1].clone(),
                    ];
                    let got = {
                        let mut s = client.server();
                        match op {
                            Op::Read { .. } => None,
                            _ => run_op(&mut s, &bufs, stream, op),
                        }
                    };
                    let got = match op {
                        Op::Read { src } => {
                            Some(bytes_u32(&client.read_one(&bufs[src]).expect("read")))
                        }
                        _ => got,
                    };
                    if let (Some(e), Some(g)) = (expected, got) {
                        assert_eq!(g, vec![e; N], "thread {t}: {op:?}");
                    }
                }
                for (i, p) in private.iter().enumerate() {
                    let g = bytes_u32(&client.read_one(p).expect("final"));
                    assert_eq!(g, vec![model[2 + i]; N], "thread {t} private {i}");
                }
                client.sync().expect("thread sync");
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread panicked");
    }
    for (i, h) in shared.iter().enumerate() {
        let g = bytes_u32(&client.read_one(h).expect("shared read"));
        assert_eq!(g, vec![100 + i as u32; N], "shared {i} changed");
    }
}

/// Runs `f` on a thread and fails the test if it has not returned in time.
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("call hung after the device was lost")
}

#[test]
fn device_lost_mid_stream_fails_every_pending_and_later_call() {
    within(60, || {
        let mut s = server();
        let h = upload(&mut s, u32_bytes(&[1; 4096]), S0);
        for _ in 0..50 {
            launch(&mut s, inc_kernel(), CubeCount::x(64), &[&h], S0);
        }
        let pending = s.read(vec![h.copy_descriptor()], S0);
        s.device().destroy();
        // The read queued before the loss either completed or reports it.
        let _ = futures::executor::block_on(pending);
        let lost = |e: &ServerError| e.is_device_lost();
        let e = sync(&mut s, S0).expect_err("sync after loss");
        assert!(lost(&e), "sync: {e}");
        let e = read(&mut s, &h, S0).expect_err("read after loss");
        assert!(lost(&e), "read: {e}");
        launch(&mut s, inc_kernel(), CubeCount::x(1), &[&h], S0);
        let e = s.flush(S0).expect_err("flush after loss");
        assert!(lost(&e), "flush: {e}");
        s.write(
            vec![(h.copy_descriptor(), u32_bytes(&[0; 4096]).into())],
            S0,
        );
        let e = s.flush(S0).expect_err("write after loss");
        assert!(lost(&e), "write: {e}");
        let m = compute_runtime::ManagedMemoryHandle::new();
        let e = s
            .initialize_memory(m, 64, S0)
            .expect_err("alloc after loss");
        assert!(lost(&e), "initialize_memory: {e}");
        let e = s
            .check(vec![h.binding()], S0)
            .expect_err("check after loss");
        assert!(lost(&e), "check: {e}");
        // Permanent: asking again says the same.
        assert!(lost(&sync(&mut s, S0).expect_err("still lost")));
    });
}

/// Every wait in flight when the device is lost (a read's map, a sync, a
/// profile window's timestamps) ends in a `DeviceLost` error or in its result, never in another error a
/// runtime would retry on.
#[test]
fn waits_in_flight_when_the_device_is_lost_fail_with_device_lost() {
    within(60, || {
        for round in 0..8 {
            let mut s = server();
            let h = upload(&mut s, u32_bytes(&[1; 4096]), S0);
            for _ in 0..20 {
                launch(&mut s, inc_kernel(), CubeCount::x(64), &[&h], S0);
            }
            let pending = s.read(vec![h.copy_descriptor()], S0);
            launch(&mut s, inc_kernel(), CubeCount::x(64), &[&h], StreamId(1));
            let synced = s.sync(vec![], StreamId(1));
            let window = s.start_profile(StreamId(2)).expect("window");
            launch(&mut s, inc_kernel(), CubeCount::x(64), &[&h], StreamId(2));
            let timed = s.end_profile(StreamId(2), window).expect("end");
            s.device().destroy();
            match futures::executor::block_on(pending) {
                Ok(bytes) => assert_eq!(bytes_u32(&bytes[0]), vec![21; 4096]),
                Err(e) => assert!(e.is_device_lost(), "round {round}: read: {e:?}"),
            }
            if let Err(e) = futures::executor::block_on(synced) {
                assert!(e.is_device_lost(), "round {round}: sync: {e:?}");
            }
            match futures::executor::block_on(timed.resolve()) {
                Ok(_) => {}
                Err(compute_runtime::ProfileError::Server(e)) => {
                    assert!(e.is_device_lost(), "round {round}: profile: {e:?}")
                }
                Err(e) => panic!("round {round}: profile: {e:?}"),
            }
        }
    });
}

/// Two streams writing neighbouring slices of one page do not force each
/// other's submits (ordering is tracked per byte range, not per page).
#[test]
fn neighbouring_slices_on_two_streams_do_not_force_submits() {
    let mut s = server();
    let a = upload(&mut s, u32_bytes(&[0; 64]), StreamId(1));
    let b = upload(&mut s, u32_bytes(&[0; 64]), StreamId(2));
    let pa = s.get_resource(a.binding(), StreamId(1)).expect("a").handle;
    let pb = s.get_resource(b.binding(), StreamId(2)).expect("b").handle;
    assert_eq!(
        pa.id, pb.id,
        "the sliced pool puts small slices on one page"
    );
    let before = s.submit_count();
    for _ in 0..100 {
        launch(&mut s, inc_kernel(), CubeCount::x(1), &[&a], StreamId(1));
        launch(&mut s, inc_kernel(), CubeCount::x(1), &[&b], StreamId(2));
    }
    let forced = s.submit_count() - before;
    assert!(forced <= 2, "{forced} submits for 200 independent launches");
    assert_eq!(
        bytes_u32(&read(&mut s, &a, StreamId(1)).expect("a")),
        vec![100; 64]
    );
    assert_eq!(
        bytes_u32(&read(&mut s, &b, StreamId(2)).expect("b")),
        vec![100; 64]
    );
}

/// Random programs over values and trust, against a CPU model.
mod model {
    use std::collections::HashMap;
    use std::rc::Rc;

    use crate::common::*;
    use compute_runtime::{
        BufferBinding, Bytes, CopyDescriptor, CubeCount, Handle, KernelArguments, LaunchMode,
        MemoryConfiguration, MemoryId, MemoryPoolOptions, PoolKind, Server, ServerError,
        ServerStorage, StreamId,
    };
    use compute_testkit::Rng;
    use proptest::prelude::*;
    use wgpu_server::{BindingAccess, WgpuServerOptions, WgslKernel};

    use super::{COPY_WGSL, copy_kernel};

    /// Elements of a data buffer; its two halves are modelled apart, so a
    /// write of the first half alone (which does not restore trust) is one
    /// of the operations.
    const N: usize = 64;
    const HALF: usize = N / 2;
    /// Data buffers: 256 bytes each, on one sliced page.
    const DATA: usize = 4;
    /// Count buffers (three `u32`s of an indirect dispatch): two of 12
    /// bytes on the data buffers' page, one on a page of its own.
    const COUNTS: usize = 3;
    const FAR: usize = 2;
    /// Bytes of the count buffer on its own page.
    const FAR_BYTES: usize = 4096;
    const STREAMS: u64 = 3;

    /// Why the model says a buffer is untrusted: the variant of the root
    /// failure, or a refusal because an input was untrusted.
    #[derive(Debug, PartialEq)]
    enum Cause {
        SizeMismatch,
        InvalidArgument,
        BindingTooSmall,
        LayoutMismatch,
        /// An indirect count over the per-dimension limit, known late.
        Late,
        Input {
            input: usize,
            cause: Rc<Cause>,
        },
    }

    /// Counts an indirect launch may read.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Count {
        Zero,
        One,
        Three,
        OverX,
        OverZ,
    }

    impl Count {
        fn words(self, max: u32) -> [u32; 3] {
            match self {
                Count::Zero => [0, 1, 1],
                Count::One => [1, 1, 1],
                Count::Three => [3, 1, 1],
                Count::OverX => [max + 1, 1, 1],
                Count::OverZ => [1, 1, max + 1],
            }
        }
    }

    /// One operation; buffers are `0..DATA` (data) then `DATA..` (counts).
    #[derive(Clone, Copy, Debug)]
    enum TOp {
        /// Host write of `value` to all of data buffer `dst`.
        Write { dst: usize, value: u32 },
        /// Host write of `value` to the first half of `dst`.
        WriteHalf { dst: usize, value: u32 },
        /// Host write whose data is shorter than its descriptor: refused
        /// at the call with `SizeMismatch`, reported to the stream; `dst`
        /// (data or count) was never touched, so its trust is unchanged.
        BadWrite { dst: usize },
        /// Host write of count buffer `c`.
        WriteCount { c: usize, count: Count },
        /// `dst[i] += 1`.
        Inc { dst: usize },
        /// `dst[i] = src[i] * 2 + 1`.
        Copy { src: usize, dst: usize },
        /// `dst[i] += 1` over the workgroups count buffer `c` says.
        IndirectInc { c: usize, dst: usize },
        /// `inc` with two buffers: `InvalidArgument`, poisons both.
        BadArity { a: usize, b: usize },
        /// A fixed `array<u32, 64>` bound with 16 bytes of `dst`:
        /// `BindingTooSmall`, poisons `dst`.
        TooSmall { dst: usize },
        /// The copy kernel declaring `src` read-write, which its module
        /// says is read-only: `LayoutMismatch`, poisons both.
        Mismatch { src: usize, dst: usize },
        /// Read buffer `src` (data or count) back.
        Read { src: usize },
        /// `check` of buffer `target`.
        Check { target: usize },
        /// `sync` of the op's stream, naming `target`.
        Sync { target: usize },
    }

    impl TOp {
        /// The operation three random numbers stand for (proptest shrinks
        /// them towards zero: towards plain writes of small values).
        fn from_code([k, a, b]: [u32; 3]) -> TOp {
            let d = |x: u32| x as usize % DATA;
            let any = |x: u32| x as usize % (DATA + COUNTS);
            let count = |x: u32| x as usize % COUNTS;
            let pair = |a: u32, b: u32| {
                let (src, dst) = (d(a), d(b));
                (src, if src == dst { (dst + 1) % DATA } else { dst })
            };
            match k % 100 {
                0..16 => TOp::Write {
                    dst: d(a),
                    value: b % 1000,
                },
                16..20 => TOp::WriteHalf {
                    dst: d(a),
                    value: b % 1000,
                },
                20..22 => TOp::BadWrite { dst: any(a) },
                22..30 => TOp::WriteCount {
                    c: count(a),
                    count: [
                        Count::One,
                        Count::Three,
                        Count::Zero,
                        Count::One,
                        Count::OverX,
                        Count::Three,
                        Count::OverZ,
                        Count::One,
                    ][b as usize % 8],
                },
                30..42 => TOp::Inc { dst: d(a) },
                42..52 => {
                    let (src, dst) = pair(a, b);
                    TOp::Copy { src, dst }
                }
                52..64 => TOp::IndirectInc {
                    c: count(a),
                    dst: d(b),
                },
                64..66 => TOp::BadArity { a: d(a), b: d(b) },
                66..68 => TOp::TooSmall { dst: d(a) },
                68..69 => {
                    let (src, dst) = pair(a, b);
                    TOp::Mismatch { src, dst }
                }
                69..71 => TOp::Write {
                    dst: d(a),
                    value: b % 1000,
                },
                71..85 => TOp::Read { src: any(a) },
                85..95 => TOp::Check { target: any(a) },
                _ => TOp::Sync { target: any(a) },
            }
        }
    }

    fn mismatch_kernel() -> WgslKernel {
        WgslKernel::new(
            "copy_declared_rw",
            COPY_WGSL,
            "main",
            [64, 1, 1],
            vec![BindingAccess::ReadWrite, BindingAccess::ReadWrite],
        )
    }

    fn fixed_kernel() -> WgslKernel {
        WgslKernel::new(
            "fixed64",
            r#"
@group(0) @binding(0) var<storage, read_write> x: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) { x[id.x] = x[id.x] + 1u; }
"#,
            "main",
            [64, 1, 1],
            vec![BindingAccess::ReadWrite],
        )
    }

    /// A failure not reported yet, on its stream.
    #[derive(Debug)]
    struct Failure {
        cause: Rc<Cause>,
        /// Reported by the GPU after its batch ran: where it lands among
        /// the stream's other failures depends on when the verdict arrives.
        late: bool,
    }

    /// What the model knows.
    #[derive(Debug, Default)]
    struct Model {
        /// Both halves of each data buffer.
        values: Vec<[u32; 2]>,
        counts: Vec<Count>,
        /// Every buffer: `Some` while untrusted (the first cause wins).
        poison: Vec<Option<Rc<Cause>>>,
        /// Data buffers written by a launch whose count was over the limit,
        /// whose verdict may not have arrived yet: the stream it ran on.
        late: Vec<Option<u64>>,
        /// Failures per stream not reported by a `sync` yet.
        unreported: HashMap<u64, Vec<Failure>>,
    }

    impl Model {
        fn poison(&mut self, b: usize, cause: &Rc<Cause>) {
            self.poison[b].get_or_insert_with(|| Rc::clone(cause));
        }

        fn fail(&mut self, stream: u64, cause: Rc<Cause>, late: bool) {
            self.unreported
                .entry(stream)
                .or_default()
                .push(Failure { cause, late });
        }

        /// The refusal of work reading `inputs` (in binding order), if one
        /// of them is untrusted.
        fn refusal(&self, inputs: &[usize]) -> Option<Rc<Cause>> {
            inputs.iter().find_map(|i| {
                self.poison[*i].as_ref().map(|c| {
                    Rc::new(Cause::Input {
                        input: *i,
                        cause: Rc::clone(c),
                    })
                })
            })
        }
    }

    /// A server, its buffers, the model, and what disagreed.
    struct Run {
        s: TestServer,
        bufs: Vec<Handle>,
        ids: Vec<MemoryId>,
        m: Model,
        max: u32,
        ops: u64,
        disagreements: Vec<String>,
        /// How often each outcome was seen, for the long run's report.
        seen: Seen,
    }

    /// Outcomes seen, so a long run shows it exercised what it claims.
    #[derive(Debug, Default, Clone, Copy)]
    struct Seen {
        bytes_read: u64,
        untrusted_reads: u64,
        untrusted_checks: u64,
        refused_launches: u64,
        late_launches: u64,
        failing_launches: u64,
        syncs_reporting: u64,
    }

    impl std::ops::AddAssign for Seen {
        fn add_assign(&mut self, o: Seen) {
            self.bytes_read += o.bytes_read;
            self.untrusted_reads += o.untrusted_reads;
            self.untrusted_checks += o.untrusted_checks;
            self.refused_launches += o.refused_launches;
            self.late_launches += o.late_launches;
            self.failing_launches += o.failing_launches;
            self.syncs_reporting += o.syncs_reporting;
        }
    }

    fn config() -> MemoryConfiguration {
        MemoryConfiguration::Custom(vec![
            MemoryPoolOptions {
                kind: PoolKind::Sliced {
                    page_size: 64 << 10,
                    max_slice: 1 << 10,
                },
                max_reserved: None,
            },
            MemoryPoolOptions {
                kind: PoolKind::Exclusive { max_slice: 1 << 30 },
                max_reserved: None,
            },
        ])
    }

    impl Run {
        fn new(tasks_max: usize) -> Self {
            let mut s: TestServer = WgpuServerOptions::new()
                .memory(config())
                .tasks_max(tasks_max)
                .open()
                .expect("server");
            let max = s.device().limits().max_compute_workgroups_per_dimension;
            let mut m = Model::default();
            let mut bufs = Vec::new();
            for i in 0..DATA as u32 {
                bufs.push(upload(&mut s, u32_bytes(&[i; N]), S0));
                m.values.push([i; 2]);
            }
            let initial = [Count::One, Count::Zero, Count::Three];
            for (c, count) in initial.into_iter().enumerate() {
                let h = if c == FAR {
                    alloc(&mut s, FAR_BYTES as u64, S0)
                } else {
                    alloc(&mut s, 12, S0)
                };
                bufs.push(h);
                m.counts.push(count);
            }
            m.poison = vec![None; DATA + COUNTS];
            m.late = vec![None; DATA];
            let ids = bufs.iter().map(|h| h.memory.id()).collect();
            let mut run = Run {
                s,
                bufs,
                ids,
                m,
                max,
                ops: 0,
                disagreements: Vec::new(),
                seen: Seen::default(),
            };
            for (c, count) in initial.into_iter().enumerate() {
                run.write_count(S0, c, count);
            }
            sync(&mut run.s, S0).expect("setup");
            // The near counts share the data buffers' page; the far one
            // does not.
            let page = |r: &mut Run, b: usize| {
                let binding = r.bufs[b].binding();
                r.s.get_resource(binding, S0).expect("page").handle.id
            };
            let data_page = page(&mut run, 0);
            for b in 1..DATA + FAR {
                assert_eq!(page(&mut run, b), data_page, "buffer {b} off the page");
            }
            assert_ne!(page(&mut run, DATA + FAR), data_page);
            run
        }

        fn disagree(&mut self, what: String) {
            self.disagreements.push(what);
        }

        fn write_count(&mut self, stream: StreamId, c: usize, count: Count) {
            let mut words = count.words(self.max).to_vec();
            if c == FAR {
                words.resize(FAR_BYTES / 4, 0);
            }
            let h = self.bufs[DATA + c].clone();
            self.s.write(
                vec![(h.copy_descriptor(), u32_bytes(&words).into())],
                stream,
            );
        }

        /// What the model says `b`'s bytes are.
        fn expected_bytes(&self, b: usize) -> Vec<u32> {
            if b < DATA {
                let [lo, hi] = self.m.values[b];
                let mut v = vec![lo; HALF];
                v.extend([hi; HALF]);
                v
            } else {
                let mut v = self.m.counts[b - DATA].words(self.max).to_vec();
                if b - DATA == FAR {
                    v.resize(FAR_BYTES / 4, 0);
                }
                v
            }
        }

        fn cause_matches(&self, m: &Cause, e: &ServerError) -> bool {
            match (m, e) {
                (Cause::SizeMismatch, ServerError::SizeMismatch { .. })
                | (Cause::InvalidArgument, ServerError::InvalidArgument { .. })
                | (Cause::BindingTooSmall, ServerError::BindingTooSmall { .. })
                | (Cause::LayoutMismatch, ServerError::LayoutMismatch { .. })
                | (Cause::Late, ServerError::LimitExceeded { .. }) => true,
                (
                    Cause::Input { input, cause },
                    ServerError::UntrustedInput {
                        input: id,
                        cause: e,
                    },
                ) => self.ids[*input] == *id && self.cause_matches(cause, e),
                _ => false,
            }
        }

        /// Compares a `check`-like answer about `b` with the model.
        fn compare_trust(&mut self, what: &str, b: usize, got: &Result<(), ServerError>) {
            let agrees = match (&self.m.poison[b], got) {
                (None, Ok(())) => true,
                (Some(c), Err(ServerError::Untrusted { memory, cause })) => {
                    *memory == self.ids[b] && self.cause_matches(c, cause)
                }
                _ => false,
            };
            if !agrees {
                let model = self.m.poison[b].clone();
                self.disagree(format!(
                    "{what} of buffer {b}: the model says {model:?}, the server {got:?}"
                ));
            }
        }

        /// Makes the late verdict on `b`, if one may be pending, known:
        /// reading `b` waits for the work that wrote it (and the read must
        /// say so). Used before any operation whose outcome the verdict's
        /// timing would change.
        fn settle(&mut self, stream: StreamId, b: usize) {
            if b < DATA && self.m.late[b].is_some() {
                self.read(stream, b);
            }
        }

        /// A read of `b`, which waits for the work that wrote it: a late
        /// verdict on `b` is known by then.
        fn read(&mut self, stream: StreamId, b: usize) {
            if b < DATA && self.m.late[b].take().is_some() {
                self.m.poison[b] = Some(Rc::new(Cause::Late));
            }
            let got = read(&mut self.s, &self.bufs[b].clone(), stream);
            match got {
                Ok(bytes) => {
                    self.seen.bytes_read += 1;
                    self.compare_trust("read", b, &Ok(()));
                    let want = self.expected_bytes(b);
                    if self.m.poison[b].is_none() && bytes_u32(&bytes) != want {
                        self.disagree(format!(
                            "read of buffer {b}: the model says {:?}.., the server {:?}..",
                            &want[..4],
                            &bytes_u32(&bytes)[..4.min(bytes.len() / 4)]
                        ));
                    }
                }
                Err(e) => {
                    self.seen.untrusted_reads += 1;
                    self.compare_trust("read", b, &Err(e));
                }
            }
        }

        fn launch(
            &mut self,
            kernel: WgslKernel,
            count: CubeCount,
            args: KernelArguments,
            stream: StreamId,
        ) {
            // SAFETY: every kernel bounds its accesses (arrayLength, or a
            // fixed array the launch is refused for binding too little of).
            unsafe {
                self.s
                    .launch(Box::new(kernel), count, args, stream, LaunchMode::Execute)
            };
        }

        fn args(&self, bufs: &[usize]) -> KernelArguments {
            KernelArguments::buffers(bufs.iter().map(|b| self.bufs[*b].binding()).collect())
        }

        /// Runs a launch that would run (not fail on its own) unless an
        /// input is untrusted: reads `inputs`, writes `writes`; `apply`
        /// updates the values when it runs.
        fn guarded(
            &mut self,
            stream: u64,
            inputs: &[usize],
            writes: &[usize],
            apply: impl FnOnce(&mut Model),
        ) {
            match self.m.refusal(inputs) {
                Some(cause) => {
                    self.seen.refused_launches += 1;
                    for w in writes {
                        self.m.poison(*w, &cause);
                    }
                    self.m.fail(stream, cause, false);
                }
                None => apply(&mut self.m),
            }
        }

        /// A launch that fails whatever its inputs' trust.
        fn failing(&mut self, stream: u64, writes: &[usize], cause: Cause) {
            self.seen.failing_launches += 1;
            let cause = Rc::new(cause);
            for w in writes {
                self.m.poison(*w, &cause);
            }
            self.m.fail(stream, cause, false);
        }

        fn step(&mut self, stream: u64, op: TOp) {
            self.ops += 1;
            let st = StreamId(stream);
            match op {
                TOp::Write { dst, value } => {
                    self.s.write(
                        vec![(
                            self.bufs[dst].copy_descriptor(),
                            u32_bytes(&[value; N]).into(),
                        )],
                        st,
                    );
                    self.m.values[dst] = [value; 2];
                    self.m.poison[dst] = None;
                    self.m.late[dst] = None;
                }
                TOp::WriteHalf { dst, value } => {
                    let half = BufferBinding {
                        memory: self.bufs[dst].memory.clone(),
                        offset: 0,
                        size: 4 * HALF as u64,
                    };
                    self.s.write(
                        vec![(
                            CopyDescriptor::contiguous(half),
                            u32_bytes(&[value; HALF]).into(),
                        )],
                        st,
                    );
                    self.m.values[dst][0] = value;
                }
                TOp::BadWrite { dst } => {
                    self.settle(st, dst);
                    self.s.write(
                        vec![(self.bufs[dst].copy_descriptor(), Bytes::from(vec![0u8; 8]))],
                        st,
                    );
                    // Reported, not poisoning: no byte of `dst` moved.
                    self.m.fail(stream, Rc::new(Cause::SizeMismatch), false);
                }
                TOp::WriteCount { c, count } => {
                    self.write_count(st, c, count);
                    self.m.counts[c] = count;
                    self.m.poison[DATA + c] = None;
                }
                TOp::Inc { dst } => {
                    self.settle(st, dst);
                    let args = self.args(&[dst]);
                    self.launch(inc_kernel(), CubeCount::x(1), args, st);
                    self.guarded(stream, &[dst], &[dst], |m| {
                        m.values[dst] = m.values[dst].map(|v| v.wrapping_add(1));
                    });
                }
                TOp::Copy { src, dst } => {
                    self.settle(st, src);
                    self.settle(st, dst);
                    let args = self.args(&[src, dst]);
                    self.launch(copy_kernel(), CubeCount::x(1), args, st);
                    self.guarded(stream, &[src, dst], &[dst], |m| {
                        m.values[dst] = m.values[src].map(|v| v.wrapping_mul(2).wrapping_add(1));
                    });
                }
                TOp::IndirectInc { c, dst } => {
                    self.settle(st, dst);
                    let args = self.args(&[dst]);
                    let count = CubeCount::Dynamic(self.bufs[DATA + c].binding());
                    self.launch(inc_kernel(), count, args, st);
                    let words = self.m.counts[c].words(self.max);
                    let max = self.max;
                    let mut late = false;
                    self.guarded(stream, &[dst, DATA + c], &[dst], |m| {
                        if words.iter().any(|w| *w > max) {
                            late = true;
                        } else if words.iter().all(|w| *w > 0) {
                            m.values[dst] = m.values[dst].map(|v| v.wrapping_add(1));
                        }
                    });
                    if late {
                        self.seen.late_launches += 1;
                        // Skipped by the GPU: nothing changes, and the
                        // verdict poisons `dst` once the batch has run.
                        self.m.late[dst] = Some(stream);
                        self.m.fail(stream, Rc::new(Cause::Late), true);
                    }
                }
                TOp::BadArity { a, b } => {
                    self.settle(st, a);
                    self.settle(st, b);
                    let args = self.args(&[a, b]);
                    self.launch(inc_kernel(), CubeCount::x(1), args, st);
                    self.failing(stream, &[a, b], Cause::InvalidArgument);
                }
                TOp::TooSmall { dst } => {
                    self.settle(st, dst);
                    let first_16 = BufferBinding {
                        memory: self.bufs[dst].memory.clone(),
                        offset: 0,
                        size: 16,
                    };
                    let args = KernelArguments::buffers(vec![first_16]);
                    self.launch(fixed_kernel(), CubeCount::x(1), args, st);
                    self.failing(stream, &[dst], Cause::BindingTooSmall);
                }
                TOp::Mismatch { src, dst } => {
                    self.settle(st, src);
                    self.settle(st, dst);
                    let args = self.args(&[src, dst]);
                    self.launch(mismatch_kernel(), CubeCount::x(1), args, st);
                    self.failing(stream, &[src, dst], Cause::LayoutMismatch);
                }
                TOp::Read { src } => self.read(st, src),
                TOp::Check { target } => {
                    self.settle(st, target);
                    let got = self.s.check(vec![self.bufs[target].binding()], st);
                    self.seen.untrusted_checks += u64::from(got.is_err());
                    self.compare_trust("check", target, &got);
                }
                TOp::Sync { target } => self.sync(stream, target),
            }
        }

        /// `sync` of `stream` naming `target`: the stream's unreported
        /// failures first, else `target`'s trust.
        fn sync(&mut self, stream: u64, target: usize) {
            if self
                .m
                .late
                .get(target)
                .copied()
                .flatten()
                .is_some_and(|on| on != stream)
            {
                self.settle(StreamId(stream), target);
            }
            let got = futures::executor::block_on(
                self.s
                    .sync(vec![self.bufs[target].binding()], StreamId(stream)),
            );
            // The wait covers every batch of the stream: its verdicts are in.
            for b in 0..DATA {
                if self.m.late[b] == Some(stream) {
                    self.m.late[b] = None;
                    self.m.poison[b] = Some(Rc::new(Cause::Late));
                }
            }
            let failures = self.m.unreported.remove(&stream).unwrap_or_default();
            self.seen.syncs_reporting += u64::from(got.is_err());
            if failures.is_empty() {
                self.compare_trust("sync", target, &got);
                return;
            }
            let agrees = match &got {
                Err(ServerError::Deferred {
                    stream: s,
                    cause,
                    later,
                }) => {
                    let any_late = failures.iter().any(|f| f.late);
                    let first_ok = if any_late {
                        failures.iter().any(|f| self.cause_matches(&f.cause, cause))
                    } else {
                        self.cause_matches(&failures[0].cause, cause)
                    };
                    s.0 == stream && *later as usize + 1 == failures.len() && first_ok
                }
                _ => false,
            };
            if !agrees {
                let model: Vec<_> = failures.iter().map(|f| &f.cause).collect();
                self.disagree(format!(
                    "sync of stream {stream}: the model has {model:?} unreported, the server says {got:?}"
                ));
            }
        }

        /// Reads every buffer from a stream of its own, then syncs every
        /// stream.
        fn finish(&mut self) {
            for b in 0..DATA + COUNTS {
                self.read(StreamId(99), b);
            }
            for stream in 0..STREAMS {
                self.sync(stream, 0);
            }
        }
    }

    /// Runs `ops` (stream, code) on a fresh server; the disagreements.
    fn run_program(tasks_max: usize, ops: &[(u64, [u32; 3])]) -> Run {
        let mut run = Run::new(tasks_max);
        for (stream, code) in ops {
            run.step(stream % STREAMS, TOp::from_code(*code));
        }
        run.finish();
        run
    }

    proptest! {
        #![proptest_config(proptest_config(16))]

        /// Random programs over three streams, four data buffers and three
        /// count buffers: every read and check agrees with the model (bytes
        /// equal its values when it says trusted; an error naming its cause
        /// when it says poisoned), and so does every sync.
        #[test]
        fn random_programs_on_three_streams_match_the_model(
            tasks_max in prop::sample::select(vec![1usize, 4, 128]),
            ops in prop::collection::vec(
                (0u64..STREAMS, any::<[u32; 3]>()),
                1..60,
            )
        ) {
            let run = run_program(tasks_max, &ops);
            let decoded: Vec<_> = ops.iter().map(|(s, c)| (s, TOp::from_code(*c))).collect();
            prop_assert!(
                run.disagreements.is_empty(),
                "{:#?}\nin {decoded:?}",
                run.disagreements
            );
        }
    }

    /// The long run: `TRUST_MODEL_OPS` operations (default 200,000) in
    /// programs of 1,000, seeded by `TRUST_MODEL_SEED` (default 1). Prints
    /// the operations run and the disagreements found.
    #[test]
    #[ignore = "long: run with TRUST_MODEL_OPS=n -- --ignored"]
    fn trust_model_long_run() {
        let total: u64 = std::env::var("TRUST_MODEL_OPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200_000);
        let seed: u64 = std::env::var("TRUST_MODEL_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let mut rng = Rng::spread(seed);
        let (mut ops, mut programs, mut disagreements) = (0u64, 0u64, 0usize);
        let mut seen = Seen::default();
        while ops < total {
            let tasks_max = rng.pick(&[1usize, 4, 16, 128]);
            let len = 1000.min(total - ops) as usize;
            let program: Vec<(u64, [u32; 3])> = (0..len)
                .map(|_| (rng.next_u64() % STREAMS, [rng.u32(), rng.u32(), rng.u32()]))
                .collect();
            let run = run_program(tasks_max, &program);
            ops += run.ops;
            seen += run.seen;
            programs += 1;
            if !run.disagreements.is_empty() {
                disagreements += run.disagreements.len();
                eprintln!(
                    "program {programs} (seed {seed}, tasks_max {tasks_max}): {:#?}",
                    run.disagreements
                );
            }
            if programs % 20 == 0 {
                eprintln!("{ops} operations, {programs} programs, {disagreements} disagreements");
                eprintln!("seen: {seen:?}");
            }
        }
        println!(
            "trust model: {ops} operations in {programs} programs, {disagreements} disagreements"
        );
        println!("seen: {seen:?}");
        assert_eq!(disagreements, 0);
    }
}
