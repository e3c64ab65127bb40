//! Collectives across processes, through MPI: every process of
//! `mpirun -np 3` opens its own server (lavapipe on CI) as the device
//! `local_device(0)` (= its world rank) and the processes run the same
//! tests in the same order.
//!
//! `cargo xtask mpi-test` builds this with `--features mpi` and runs it
//! three times: `suite` (the correctness table of the in-process suite,
//! every op and dtype through the servers; mismatches, poison and
//! abandoned calls the same on every rank; a `comm_init` naming a device no
//! process owns), then `dead-rank` (rank 2 exits before its collective) and
//! `silent-rank` (rank 2 never calls), where ranks 0 and 1 must fail
//! within the transport's timeout and say so. Started outside `mpirun` it
//! says so and exits 0.

#[path = "../gpu/common.rs"]
#[allow(dead_code, unused_imports)]
mod common;
// The in-process suite's oracle (it allows its own dead code).
#[path = "../../crates/collective/tests/common/mod.rs"]
mod oracle;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compute_collective::{CollectiveCall, CommConfig, Communicator, mpi};
use compute_runtime::{
    ComputeWait, DType, DeviceId, Handle, ReduceOp, Reduction, ServerCommunication, ServerError,
};
use wgpu_server::{CollectiveTransport, WgpuServerOptions, WgslPassthrough};

use common::{S0, TestServer, alloc, read, upload};

/// How long the suite waits for MPI itself.
const MPI_WAIT: Duration = Duration::from_secs(60);

struct Ctx {
    rank: usize,
    size: usize,
    /// Every process's device, in world rank order.
    ids: Vec<DeviceId>,
    server: TestServer,
}

impl Ctx {
    /// Every process's `text`, in rank order.
    fn gather(&self, text: &str) -> Vec<String> {
        mpi::gather(text.as_bytes().to_vec(), MPI_WAIT)
            .expect("gather")
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }

    /// Asserts every process saw the same `text`.
    fn same_everywhere(&self, what: &str, text: &str) {
        let all = self.gather(text);
        for (r, t) in all.iter().enumerate() {
            assert_eq!(t, &all[0], "{what}: rank {r} differs from rank 0");
        }
    }

    /// A host communicator over every process, with `timeout`.
    fn comm(&self, timeout: Duration) -> Communicator {
        let config = CommConfig::default().with_timeout(timeout);
        Communicator::join_mpi(&self.ids, self.ids[self.rank], config).expect("join_mpi")
    }
}

fn main() -> ExitCode {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() && std::env::var_os("PMI_SIZE").is_none()
    {
        println!("mpi tests: not started by mpirun; run `cargo xtask mpi-test`. Nothing run.");
        return ExitCode::SUCCESS;
    }
    let mode = std::env::args().nth(1).unwrap_or_else(|| "suite".into());
    let info = match mpi::init(MPI_WAIT) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("mpi tests: MPI did not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let me = mpi::local_device(0).expect("local device");
    let server = WgpuServerOptions::new()
        .device_id(me)
        .adapter(0)
        .transport(CollectiveTransport::Mpi)
        .open::<WgslPassthrough>()
        .expect("server");
    let ids: Vec<DeviceId> = (0..info.size)
        .map(|p| info.layout.device(p, 0).expect("device"))
        .collect();
    let mut ctx = Ctx {
        rank: info.rank,
        size: info.size,
        ids,
        server,
    };
    match mode.as_str() {
        "suite" => suite(ctx),
        "dead-rank" | "silent-rank" => failing_rank(&mut ctx, mode == "dead-rank"),
        other => {
            eprintln!("mpi tests: unknown mode {other:?} (suite, dead-rank, silent-rank)");
            ExitCode::FAILURE
        }
    }
}

type Test = fn(&mut Ctx);

fn suite(mut ctx: Ctx) -> ExitCode {
    let tests: &[(&str, Test)] = &[
        (
            "comm_init_naming_an_unowned_device_fails_on_every_rank",
            unowned_device,
        ),
        ("all_reduce_every_dtype_op_and_size", all_reduce_table),
        ("reduce_scatter_every_dtype_and_op", reduce_scatter_table),
        ("all_gather_concatenates_in_rank_order", all_gather),
        ("broadcast_from_every_root", broadcast),
        ("all_to_all_sends_chunk_r_to_rank_r", all_to_all),
        ("send_recv_pairs_in_order", send_recv),
        ("large_buffers", large_buffers),
        ("mismatch_is_the_same_error_on_every_rank", mismatch),
        ("invalid_call_is_the_same_mismatch_everywhere", invalid_call),
        ("poisoned_input_poisons_every_rank", poisoned),
        (
            "abandoned_call_aborts_every_rank_and_the_sequence_holds",
            abandoned,
        ),
    ];
    let started = Instant::now();
    let mut passed = 0;
    for (name, test) in tests {
        let t = Instant::now();
        if ctx.rank == 0 {
            print!("test {name} ... ");
        }
        match catch_unwind(AssertUnwindSafe(|| test(&mut ctx))) {
            Ok(()) => {
                passed += 1;
                if ctx.rank == 0 {
                    println!("ok ({:.1} s)", t.elapsed().as_secs_f64());
                }
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                eprintln!("rank {}: test {name} FAILED: {msg}", ctx.rank);
                // The other ranks' sequence is lost with this one: end the
                // job (mpirun tears the others down).
                std::process::exit(1);
            }
        }
    }
    drop(ctx.server);
    let finalized = mpi::finalize(MPI_WAIT);
    if ctx.rank == 0 {
        println!(
            "\nmpi suite: {} processes, {:.1} s",
            ctx.size,
            started.elapsed().as_secs_f64()
        );
        println!("test result: ok. {passed} passed; 0 failed");
    }
    match finalized {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rank {}: finalize: {e}", ctx.rank);
            ExitCode::FAILURE
        }
    }
}

// ----------------------------------------------------------- server level --

fn init_all(ctx: &mut Ctx) {
    ctx.server.comm_init(ctx.ids.clone()).expect("comm_init");
}

fn unowned_device(ctx: &mut Ctx) {
    let mut list = ctx.ids.clone();
    list.push(DeviceId(ctx.size as u64 + 4));
    let t = Instant::now();
    let e = ctx.server.comm_init(list).expect_err("no process owns it");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "the refusal waited {:?}",
        t.elapsed()
    );
    assert!(matches!(e, ServerError::CollectiveState { .. }), "{e}");
    assert!(e.to_string().contains("no process owns"), "{e}");
    ctx.same_everywhere("the unowned-device error", &e.to_string());
    // The real communicator, for the tests after this one.
    init_all(ctx);
}

/// Posts every call (`Wait`), then reads every destination.
fn all_reduce_table(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    let mut posted = Vec::new();
    for (k, reduction) in oracle::reductions().into_iter().enumerate() {
        for count in [1usize, 7, 1031] {
            let seed = (k * 100 + count) as u64;
            let src = upload(
                &mut ctx.server,
                oracle::input(reduction, seed, rank, count),
                S0,
            );
            let dst = alloc(&mut ctx.server, (count * reduction.dtype.size()) as u64, S0);
            ctx.server
                .all_reduce(
                    src.binding(),
                    dst.binding(),
                    reduction,
                    S0,
                    ctx.ids.clone(),
                    ComputeWait::Wait,
                )
                .expect("all_reduce");
            posted.push((reduction, seed, count, src, dst));
        }
    }
    for (reduction, seed, count, _src, dst) in posted {
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want = oracle::expected_all(reduction, seed, ranks, count);
        oracle::check(
            reduction,
            &got,
            &want,
            &format!("rank {rank}, {count} elements"),
        );
    }
}

fn reduce_scatter_table(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    let mut posted = Vec::new();
    for (k, reduction) in oracle::reductions().into_iter().enumerate() {
        for count in [1usize, 5] {
            // 16-bit types: an even chunk, so each rank's destination ends
            // on a 4-byte boundary.
            let count = if reduction.dtype.size() == 2 {
                count * 2
            } else {
                count
            };
            let seed = (k * 7 + count) as u64 + 1;
            let size = reduction.dtype.size();
            let src = upload(
                &mut ctx.server,
                oracle::input(reduction, seed, rank, count * ranks),
                S0,
            );
            let dst = alloc(&mut ctx.server, (count * size) as u64, S0);
            ctx.server
                .reduce_scatter(src.binding(), dst.binding(), reduction, S0, ctx.ids.clone())
                .expect("reduce_scatter");
            posted.push((reduction, seed, count, src, dst));
        }
    }
    for (reduction, seed, count, _src, dst) in posted {
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want = oracle::expected_all(reduction, seed, ranks, count * ranks);
        oracle::check(
            reduction,
            &got,
            &want[rank * count..(rank + 1) * count],
            &format!("rank {rank}, {count} per rank"),
        );
    }
}

fn all_gather(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    for len in [4usize, 13, 4096] {
        let mine = oracle::pattern_bytes(rank as u64 + 7 * len as u64, len);
        let src = upload(&mut ctx.server, mine, S0);
        let dst = alloc(&mut ctx.server, (len * ranks) as u64, S0);
        ctx.server
            .all_gather(src.binding(), dst.binding(), S0, ctx.ids.clone())
            .expect("all_gather");
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want: Vec<u8> = (0..ranks)
            .flat_map(|r| oracle::pattern_bytes(r as u64 + 7 * len as u64, len).to_vec())
            .collect();
        assert_eq!(got.as_ref(), &want[..], "rank {rank}, {len} B");
    }
}

fn broadcast(ctx: &mut Ctx) {
    let rank = ctx.rank;
    for root in 0..ctx.size {
        for len in [4usize, 1001] {
            let data = oracle::pattern_bytes(root as u64 * 31 + len as u64, len);
            let src = (rank == root).then(|| upload(&mut ctx.server, data.clone(), S0));
            let dst = alloc(&mut ctx.server, len as u64, S0);
            ctx.server
                .broadcast(
                    src.as_ref().map(Handle::binding),
                    dst.binding(),
                    S0,
                    ctx.ids[root],
                    ctx.ids.clone(),
                )
                .expect("broadcast");
            let got = read(&mut ctx.server, &dst, S0).expect("read");
            assert_eq!(got, data, "root {root}, rank {rank}, {len} B");
        }
    }
}

fn all_to_all(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    for chunk in [4usize, 12, 4096] {
        let len = chunk * ranks;
        let of = |r: usize| oracle::pattern_bytes(r as u64 * 1000 + chunk as u64, len);
        let src = upload(&mut ctx.server, of(rank), S0);
        let dst = alloc(&mut ctx.server, len as u64, S0);
        ctx.server
            .all_to_all(src.binding(), dst.binding(), S0, ctx.ids.clone())
            .expect("all_to_all");
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want: Vec<u8> = (0..ranks)
            .flat_map(|r| of(r)[rank * chunk..(rank + 1) * chunk].to_vec())
            .collect();
        assert_eq!(got.as_ref(), &want[..], "rank {rank}, chunk {chunk}");
    }
}

/// A ring (even ranks send first, odd ranks receive first, as a rank's
/// calls run in order), then three messages on one link.
fn send_recv(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    let next = (rank + 1) % ranks;
    let prev = (rank + ranks - 1) % ranks;
    let msg =
        |from: usize, k: usize| oracle::pattern_bytes(from as u64 * 10 + k as u64, 64 + 4 * k);
    let mut recvs = Vec::new();
    let do_send = |ctx: &mut Ctx, k: usize| {
        let h = upload(&mut ctx.server, msg(rank, k), S0);
        ctx.server
            .send(h.copy_descriptor(), S0, ctx.ids[next])
            .expect("send");
        h
    };
    let do_recv = |ctx: &mut Ctx, k: usize| {
        let h = alloc(&mut ctx.server, msg(prev, k).len() as u64, S0);
        ctx.server.recv(h.clone(), S0, ctx.ids[prev]).expect("recv");
        h
    };
    let mut sent = Vec::new();
    if rank % 2 == 0 {
        sent.push(do_send(ctx, 0));
        recvs.push((0, do_recv(ctx, 0)));
    } else {
        recvs.push((0, do_recv(ctx, 0)));
        sent.push(do_send(ctx, 0));
    }
    // Three more on the link from the last rank to rank 0, in order.
    for k in 1..4 {
        if rank == ranks - 1 {
            let h = upload(&mut ctx.server, msg(rank, k), S0);
            ctx.server
                .send(h.copy_descriptor(), S0, ctx.ids[0])
                .expect("send");
            sent.push(h);
        } else if rank == 0 {
            let h = alloc(&mut ctx.server, msg(ranks - 1, k).len() as u64, S0);
            ctx.server
                .recv(h.clone(), S0, ctx.ids[ranks - 1])
                .expect("recv");
            recvs.push((k, h));
        }
    }
    ctx.server.sync_collective(S0).expect("sync_collective");
    for (k, h) in recvs {
        let from = if k == 0 { prev } else { ranks - 1 };
        let got = read(&mut ctx.server, &h, S0).expect("read");
        assert_eq!(got, msg(from, k), "rank {rank}, message {k} from {from}");
    }
}

/// Several MiB through the servers: f32 sum and exact i64 mean.
fn large_buffers(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    for reduction in [Reduction::sum(DType::F32), Reduction::mean(DType::I64)] {
        let count = (5 << 20) / reduction.dtype.size() + 3;
        let seed = 99;
        let src = upload(
            &mut ctx.server,
            oracle::input(reduction, seed, rank, count),
            S0,
        );
        let dst = alloc(&mut ctx.server, (count * reduction.dtype.size()) as u64, S0);
        ctx.server
            .all_reduce(
                src.binding(),
                dst.binding(),
                reduction,
                S0,
                ctx.ids.clone(),
                ComputeWait::Wait,
            )
            .expect("all_reduce");
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want = oracle::expected_all(reduction, seed, ranks, count);
        oracle::check(reduction, &got, &want, &format!("rank {rank}"));
    }
}

/// Rank 1 sums 8 elements, the others 4: every rank's destination fails
/// with the same `CollectiveMismatch`, and the next call works.
fn mismatch(ctx: &mut Ctx) {
    let rank = ctx.rank;
    let n = if rank == 1 { 8usize } else { 4 };
    let src = upload(&mut ctx.server, vec![1u8; 4 * n], S0);
    let dst = alloc(&mut ctx.server, 4 * n as u64, S0);
    ctx.server
        .all_reduce(
            src.binding(),
            dst.binding(),
            Reduction::sum(DType::U32),
            S0,
            ctx.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
    let e = read(&mut ctx.server, &dst, S0).expect_err("mismatch");
    let root = e.root_cause().clone();
    assert!(
        matches!(root, ServerError::CollectiveMismatch { .. }),
        "rank {rank}: {e}"
    );
    assert!(root.to_string().contains("ranks disagree"), "{root}");
    ctx.same_everywhere("the mismatch", &root.to_string());
    still_works(ctx);
}

/// A clean all_reduce through the servers.
fn still_works(ctx: &mut Ctx) {
    let src = upload(&mut ctx.server, 1u32.to_le_bytes().to_vec(), S0);
    let dst = alloc(&mut ctx.server, 4, S0);
    ctx.server
        .all_reduce(
            src.binding(),
            dst.binding(),
            Reduction::sum(DType::U32),
            S0,
            ctx.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
    let got = read(&mut ctx.server, &dst, S0).expect("clean call");
    assert_eq!(got.as_ref(), &(ctx.size as u32).to_le_bytes());
}

// ------------------------------------------------------ communicator level --

fn u32_call(len: usize) -> CollectiveCall {
    CollectiveCall::AllReduce {
        reduction: Reduction::sum(DType::U32),
        len,
    }
}

/// Rank 1 posts a sum over 6 bytes of f32 (not whole elements): it is
/// refused at `post` on rank 1 and fails with the same words everywhere.
fn invalid_call(ctx: &mut Ctx) {
    let mut comm = ctx.comm(Duration::from_secs(30));
    let call = if ctx.rank == 1 {
        CollectiveCall::AllReduce {
            reduction: Reduction::sum(DType::F32),
            len: 6,
        }
    } else {
        CollectiveCall::AllReduce {
            reduction: Reduction::sum(DType::F32),
            len: 8,
        }
    };
    let text = match comm.post(call) {
        Err(e) => e.to_string(),
        Ok((c, p)) => {
            c.provide(Ok(Bytes::from(vec![0u8; 8])));
            p.wait(Duration::from_secs(30))
                .expect_err("mismatch")
                .to_string()
        }
    };
    assert!(text.contains("rank 1 posted an invalid call"), "{text}");
    ctx.same_everywhere("the invalid call", &text);
}

/// Rank 2's input fails: every rank's outcome is poisoned with
/// `CollectiveInput { rank: 2 }`, reading the same everywhere.
fn poisoned(ctx: &mut Ctx) {
    let mut comm = ctx.comm(Duration::from_secs(30));
    let (c, p) = comm.post(u32_call(4)).expect("post");
    if ctx.rank == 2 {
        c.provide(Err(Arc::new(ServerError::DeviceLost {
            reason: "unplugged (test)".into(),
        })));
    } else {
        c.provide(Ok(Bytes::from_static(&[1, 0, 0, 0])));
    }
    let outcome = p.wait(Duration::from_secs(30)).expect("outcome");
    let poison = outcome.poisoned.expect("poisoned");
    assert!(
        matches!(poison, ServerError::CollectiveInput { rank: 2, .. }),
        "{poison}"
    );
    assert!(poison.to_string().contains("unplugged (test)"), "{poison}");
    ctx.same_everywhere("the poison", &poison.to_string());
}

/// Rank 1 never provides its input: it times out (1 s), every other rank
/// (waiting up to 20 s) fails as soon as rank 1's abort reaches it, with
/// the same `CollectiveAborted`, and the next call on the communicator
/// still pairs.
fn abandoned(ctx: &mut Ctx) {
    let timeout = if ctx.rank == 1 { 1 } else { 20 };
    let mut comm = ctx.comm(Duration::from_secs(timeout));
    let (c, p) = comm.post(u32_call(4)).expect("post");
    let kept = if ctx.rank == 1 {
        Some(c)
    } else {
        c.provide(Ok(Bytes::from_static(&[1, 0, 0, 0])));
        None
    };
    let t = Instant::now();
    let e = p.wait(Duration::from_secs(30)).expect_err("abandoned");
    let waited = t.elapsed();
    drop(kept);
    if ctx.rank == 1 {
        assert!(
            matches!(e, ServerError::CollectiveTimeout { rank: 1, .. }),
            "{e}"
        );
    } else {
        assert!(matches!(e, ServerError::CollectiveAborted { .. }), "{e}");
        assert!(e.to_string().contains("rank 1"), "{e}");
    }
    assert!(waited < Duration::from_secs(8), "waited {waited:?}");
    let aborted = if ctx.rank == 1 {
        String::new()
    } else {
        e.to_string()
    };
    let all = ctx.gather(&aborted);
    let others: Vec<&String> = all.iter().filter(|s| !s.is_empty()).collect();
    assert!(others.windows(2).all(|w| w[0] == w[1]), "{others:?}");
    // The sequence still holds: the next call pairs.
    let (c, p) = comm.post(u32_call(4)).expect("post");
    c.provide(Ok(Bytes::from_static(&[2, 0, 0, 0])));
    let out = p.wait(Duration::from_secs(30)).expect("next call");
    assert_eq!(out.bytes.as_ref(), &(2 * ctx.size as u32).to_le_bytes());
}

// ------------------------------------------------------ failing processes --

/// Rank 2 exits (`dead`) or sleeps past the others' timeout (silent)
/// instead of calling; ranks 0 and 1 must fail within the timeout
/// (`COMPUTE_COLLECTIVE_TIMEOUT_MS`, which `xtask mpi-test` sets) and
/// report it; MPI is then broken, `finalize` refuses, and they exit
/// without it.
fn failing_rank(ctx: &mut Ctx, dead: bool) -> ExitCode {
    let timeout = CommConfig::from_env().timeout;
    ctx.server.comm_init(ctx.ids.clone()).expect("comm_init");
    if ctx.rank == 2 {
        if dead {
            eprintln!("rank 2: exiting before its collective");
            std::process::exit(3);
        }
        eprintln!("rank 2: never calling; sleeping past the others' timeout");
        std::thread::sleep(timeout * 2 + Duration::from_secs(1));
        std::process::exit(0);
    }
    let t = Instant::now();
    let src = upload(&mut ctx.server, vec![1u8; 1024], S0);
    let dst = alloc(&mut ctx.server, 1024, S0);
    ctx.server
        .all_reduce(
            src.binding(),
            dst.binding(),
            Reduction::new(ReduceOp::Sum, DType::F32),
            S0,
            ctx.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
    let result = read(&mut ctx.server, &dst, S0);
    let waited = t.elapsed();
    let e = match result {
        Ok(_) => {
            eprintln!("rank {}: the all_reduce succeeded without rank 2", ctx.rank);
            std::process::exit(1);
        }
        Err(e) => e,
    };
    let timed_out = matches!(e.root_cause(), ServerError::CollectiveTimeout { .. });
    let bounded = waited < timeout * 2 + Duration::from_secs(5);
    // A later call on the broken transport fails at once.
    let t2 = Instant::now();
    let again = ctx.server.all_reduce(
        src.binding(),
        dst.binding(),
        Reduction::sum(DType::F32),
        S0,
        ctx.ids.clone(),
        ComputeWait::Wait,
    );
    let later = again.and_then(|()| read(&mut ctx.server, &dst, S0).map(|_| ()));
    let later_fast = later.is_err() && t2.elapsed() < Duration::from_secs(2);
    let finalize = mpi::finalize(Duration::from_secs(2));
    println!(
        "failing-rank: rank {} failed after {} ms: {} | later call: {} in {} ms | finalize: {}",
        ctx.rank,
        waited.as_millis(),
        e.root_cause(),
        later
            .err()
            .map_or("succeeded".into(), |e| e.root_cause().to_string()),
        t2.elapsed().as_millis(),
        finalize
            .as_ref()
            .err()
            .map_or("done".into(), ToString::to_string),
    );
    if timed_out && bounded && later_fast && finalize.is_err() {
        println!("failing-rank: rank {} OK", ctx.rank);
        // Without MPI_Finalize: a peer is gone (see docs/mpi.md).
        std::process::exit(0);
    }
    eprintln!(
        "failing-rank: rank {} NOT OK (timed out: {timed_out}, bounded: {bounded}, later call \
         fast: {later_fast}, finalize refused: {})",
        ctx.rank,
        finalize.is_err()
    );
    std::process::exit(1);
}
