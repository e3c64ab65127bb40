//! Cross-stream ordering against a CPU model, from one thread and from
//! eight, and what a lost device does to every call. Random programs over
//! values and trust, on several ranks, are `model`.

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
