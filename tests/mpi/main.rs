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

mod communicator;
mod failing;
mod server;

use communicator::*;
use failing::*;
use server::*;

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
            "a_refused_call_poisons_every_other_rank_and_the_sequence_holds",
            refused,
        ),
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
