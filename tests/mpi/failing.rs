//! Failing processes: a rank that dies or stays silent.

use super::*;

// ------------------------------------------------------ failing processes --

/// Rank 2 exits (`dead`) or sleeps past the others' timeout (silent)
/// instead of calling; ranks 0 and 1 must fail within the timeout
/// (`COMPUTE_COLLECTIVE_TIMEOUT_MS`, which `xtask mpi-test` sets) and
/// report it; MPI is then broken, `finalize` refuses, and they exit
/// without it.
pub(crate) fn failing_rank(ctx: &mut Ctx, dead: bool) -> ExitCode {
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
