//! `cargo xtask mpi-test` and `mpi-bench`: the MPI suite and bench under
//! `mpirun`, with the failure runs (a dead rank, a silent rank) bounded in time.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::setup::{has_mpi, is_root};
use crate::{Result, cargo, root, run};

/// The features that build the MPI transport and everything that uses it.
pub(crate) const MPI_FEATURES: &str =
    "compute-collective/mpi,wgpu-server/mpi,compute-tests/mpi,compute-bench/mpi";

/// Processes of the MPI runs.
pub(crate) const MPI_RANKS: usize = 3;

/// `mpirun -np 3` on this host: as root OpenMPI needs
/// `--allow-run-as-root`; 3 ranks on fewer cores need `--oversubscribe`, and
/// ranks that yield when idle (MPI's blocking calls spin otherwise).
/// `survivors` keeps the job going when a rank exits early or without
/// `MPI_Finalize` (OpenMPI tears the job down at once by default), so the
/// others' own failure path is what ends them.
pub(crate) fn mpirun(exe: &Path, args: &[&str], survivors: bool) -> Command {
    let mut c = Command::new("mpirun");
    c.current_dir(root());
    if is_root() {
        c.arg("--allow-run-as-root");
    }
    c.args(["--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]);
    if survivors {
        c.args([
            "--mca",
            "orte_abort_on_non_zero_status",
            "0",
            "--mca",
            "orte_allowed_exit_without_sync",
            "1",
        ]);
    }
    c.args(["-np", &MPI_RANKS.to_string()]);
    c.arg(exe).args(args);
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join("xtask-xdg-runtime");
        let _ = std::fs::create_dir_all(&dir);
        c.env("XDG_RUNTIME_DIR", dir);
    }
    c
}

/// Runs `c` for at most `limit`, printing and returning its output (stdout
/// and stderr, in that order), its status and how long it took. A command
/// past its limit is killed, and that is an error.
pub(crate) fn run_for(mut c: Command, limit: Duration) -> Result<(ExitStatus, String, Duration)> {
    let shown = format!("{c:?}");
    eprintln!("$ {shown}");
    let started = Instant::now();
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut text);
            }
            text
        })
    };
    let out = pipe(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = pipe(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{shown}: {e}"))? {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let text = out.join().unwrap_or_default() + &err.join().unwrap_or_default();
            eprintln!("{text}");
            return Err(format!("{shown} ran past {limit:?} and was killed"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = started.elapsed();
    let text = out.join().unwrap_or_default() + &err.join().unwrap_or_default();
    eprint!("{text}");
    Ok((status, text, took))
}

/// The executable of the test target `name` that `build` (a `cargo test
/// --no-run --message-format=json`) produces.
pub(crate) fn test_executable(mut build: Command, name: &str) -> Result<PathBuf> {
    let shown = format!("{build:?}");
    eprintln!("$ {shown}");
    let built = build
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !built.status.success() {
        return Err(format!("{shown} failed with {}", built.status));
    }
    let listing = String::from_utf8_lossy(&built.stdout);
    let target = format!("\"name\":\"{name}\"");
    listing
        .lines()
        .filter(|l| l.contains(&target) && l.contains("\"executable\":\""))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            l[at..].split('"').next().map(PathBuf::from)
        })
        .ok_or_else(|| format!("could not find the {name} test binary in cargo's output"))
}

/// The MPI suite (`tests/mpi`): built with the `mpi` features, run under
/// `mpirun -np 3`: the suite, then a rank that dies before its collective
/// and one that never calls (the other ranks must fail with an error within
/// the transport's timeout, 3 s here, and say so), then the dying rank
/// under mpirun's defaults (the job must end, torn down by mpirun).
pub(crate) fn mpi_test() -> Result {
    if !has_mpi() {
        return Err("no MPI here (mpirun, mpicc, libclang): run `cargo xtask setup`".into());
    }
    let started = Instant::now();
    let mut build = cargo();
    build.args([
        "test",
        "-p",
        "compute-tests",
        "--features",
        "mpi",
        "--test",
        "mpi",
        "--no-run",
        "--message-format=json",
    ]);
    let exe = test_executable(build, "mpi")?;
    let built = started.elapsed();

    let mut suite = mpirun(&exe, &["suite"], false);
    // A hang fails in 20 s, not the default minute.
    suite.env("COMPUTE_COLLECTIVE_TIMEOUT_MS", "20000");
    let (status, _, suite_took) = run_for(suite, Duration::from_secs(300))?;
    if !status.success() {
        return Err(format!("the MPI suite failed ({status})"));
    }

    let timeout_ms = 3000u64;
    let bound = Duration::from_secs(60);
    let mut failures = Vec::new();
    for mode in ["dead-rank", "silent-rank"] {
        let mut c = mpirun(&exe, &[mode], true);
        c.env("COMPUTE_COLLECTIVE_TIMEOUT_MS", timeout_ms.to_string());
        let (_, text, took) = run_for(c, bound)?;
        let ok = (0..2).all(|r| text.contains(&format!("failing-rank: rank {r} OK")));
        eprintln!(
            "mpi-test: {mode}: the surviving ranks {} within {:.1} s",
            if ok {
                "failed as they must"
            } else {
                "did NOT report the failure"
            },
            took.as_secs_f64()
        );
        if !ok {
            failures.push(mode);
        }
    }
    // mpirun's defaults: a rank exiting without MPI_Finalize ends the job.
    let mut c = mpirun(&exe, &["dead-rank"], false);
    c.env("COMPUTE_COLLECTIVE_TIMEOUT_MS", "60000");
    let (status, _, took) = run_for(c, bound)?;
    eprintln!(
        "mpi-test: dead-rank under mpirun's defaults: the job ended ({status}) in {:.1} s",
        took.as_secs_f64()
    );
    if status.success() {
        failures.push("dead-rank under mpirun's defaults (the job ended with success)");
    }
    if !failures.is_empty() {
        return Err(format!("MPI failure tests failed: {failures:?}"));
    }
    eprintln!(
        "mpi-test: passed in {:.1} s (build {:.1} s, suite {:.1} s)",
        started.elapsed().as_secs_f64(),
        built.as_secs_f64(),
        suite_took.as_secs_f64()
    );
    Ok(())
}

/// The MPI all-reduce figures: `mpi_bench` (release) under `mpirun -np 3`,
/// written to `target/bench/report-mpi.json` and merged into
/// `target/bench/report.json`.
pub(crate) fn mpi_bench(rest: &[String]) -> Result {
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "compute-bench",
        "--features",
        "mpi",
        "--bin",
        "mpi_bench",
    ]);
    run(build)?;
    let exe = root().join("target/release/mpi_bench");
    let mut args: Vec<&str> = rest.iter().map(String::as_str).collect();
    if !args.contains(&"--out") {
        args.extend(["--out", "target/bench/report-mpi.json"]);
    }
    let mut c = mpirun(&exe, &args, false);
    c.env(
        "COMPUTE_BENCH_MERGE",
        root().join("target/bench/report.json"),
    );
    let (status, _, _) = run_for(c, Duration::from_secs(600))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("mpi_bench failed ({status})"))
    }
}
