//! `cargo xtask`: the project's one entry point for contributors and CI.
//!
//! - `setup`  makes sure a wgpu adapter exists and MPI can be built and run
//!   (installs Mesa's lavapipe, the Vulkan loader, OpenMPI and libclang on
//!   Debian/Ubuntu as root; prints the command elsewhere);
//! - `ci`     setup, then format check, clippy with warnings denied (also
//!   with the `mpi` features), the docs (`RUSTDOCFLAGS=-D warnings cargo
//!   doc`), every test (doc tests included; the collective suite and the
//!   random-program model twice more on the device path, whole and in 4 KiB
//!   pieces), the MPI suite (`mpi-test`),
//!   and the `mlp`, `transformer_block` and `data_parallel` examples;
//! - `mpi-test` the collectives across processes: `tests/mpi` under
//!   `mpirun -np 3` (the suite, then a rank that dies and a rank that never
//!   calls, which the others must survive with an error in bounded time);
//! - `mpi-bench` the MPI all-reduce figures (3 processes, one server each)
//!   under `mpirun -np 3`, merged into `target/bench/report.json`
//!   (`--quick`, `--filter PREFIX`);
//! - `test`   every test (and the collective passes `ci` runs);
//! - `tidy`   the layout rules (`tidy.rs`; also tests of this crate, so
//!   `ci` runs them);
//! - `demo`   setup, then the tour example on the default adapter (and a
//!   pointer to the `mlp` and `timeline` examples);
//! - `bench`  setup, then the benchmarks (`--quick`, `--filter PREFIX`),
//!   writing `target/bench/report.json` and its chart,
//!   `target/bench/report.svg`;
//! - `cubecl` cubecl's own test suites against this server, through the
//!   bridge (`bridge/`, a workspace of its own; `cubecl.rs`, and
//!   docs/cubecl.md): one line per suite, and a failure for any test that
//!   fails and is not a listed divergence (`--lint`, `--subset`,
//!   `--no-run`, `--bundle`, `--from DIR`);
//! - `burn`   burn on this server against upstream burn-wgpu (`burn.rs`,
//!   docs/burn.md): the differential suite and the programs, both builds
//!   on the same adapter (`--filter PREFIX`, `--every N`, `--steps N`,
//!   `--from DIR`, `--bundle`); `--ci` (what `.ci/run` runs: this
//!   server's build against upstream's records, `burn/recorded.rs`),
//!   `--record-upstream` (makes those records);
//! - `device-bundle` builds the bench, the `tour` and `mlp` examples (release)
//!   and the GPU test binary, and gathers what the
//!   H200 device machine needs to run it (see `xtask/h200/`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod bundle;
mod burn;
mod cubecl;
mod mpi;
mod setup;
mod tidy;
mod tidy_modules;

use bundle::device_bundle;
use mpi::{MPI_FEATURES, mpi_bench, mpi_test};
use setup::setup;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((t, r)) => (t.as_str(), r.to_vec()),
        None => ("help", Vec::new()),
    };
    let result = match task {
        "setup" => setup(),
        "ci" => setup().and_then(|()| ci()),
        "test" => test(),
        "demo" => setup().and_then(|()| demo()),
        "bench" => setup().and_then(|()| bench(&rest)),
        "mpi-test" => mpi_test(),
        "mpi-bench" => setup().and_then(|()| mpi_bench(&rest)),
        "device-bundle" => device_bundle(),
        "cubecl" => cubecl::cubecl(&rest),
        "burn" => burn::burn(&rest),
        "tidy" => tidy::tidy(),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup | ci | test | tidy | mpi-test | demo | bench [--quick] [--filter PREFIX] | mpi-bench [--quick] [--filter PREFIX] | device-bundle | cubecl [--lint] [--subset] [--no-run] [--bundle] [--from DIR] | burn [--filter PREFIX] [--every N] [--steps N] [--ci] [--record-upstream] [--from DIR] [--bundle]>"
            );
            return if task == "help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) type Result<T = ()> = std::result::Result<T, String>;

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Turns off `std::backtrace::Backtrace::capture` in children while
/// leaving panics' backtraces to `RUST_BACKTRACE`: cubecl's SPIR-V
/// compiler (pliron) builds an error, backtrace included, for every failed
/// downcast it tries, and with `RUST_BACKTRACE=1` in the environment the
/// bridge's kernel compiles spent 12-21% longer (`burn-suite transformer
/// small` on lavapipe: debug 66.6 s against 58.4, release 22.0 against 17.3).
pub(crate) const LIB_BACKTRACE: &str = "RUST_LIB_BACKTRACE";

pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c.env(LIB_BACKTRACE, "0");
    // Mesa's Vulkan WSI looks for a runtime dir even headless; give it one so
    // test output is not buried under its complaints.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join("xtask-xdg-runtime");
        let _ = std::fs::create_dir_all(&dir);
        c.env("XDG_RUNTIME_DIR", dir);
    }
    c
}

pub(crate) fn run(mut c: Command) -> Result {
    let shown = format!("{c:?}");
    eprintln!("$ {shown}");
    let status = c
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

fn ci() -> Result {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt)?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)?;
    // The same, with the MPI transport and its users built in.
    let mut clippy_mpi = cargo();
    clippy_mpi.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        MPI_FEATURES,
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy_mpi)?;
    // The docs build without a warning (broken links included).
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(doc)?;
    test()?;
    mpi_test()?;
    // The examples a user is pointed to run, start to end.
    for example in ["mlp", "transformer_block", "data_parallel"] {
        let mut e = cargo();
        e.args(["run", "--quiet", "-p", "wgpu-server", "--example", example]);
        run(e)?;
    }
    Ok(())
}

fn test() -> Result {
    let mut t = cargo();
    t.args(["test", "--workspace"]);
    run(t)?;
    // Collectives between devices that share memory take the device path
    // on GPUs; a CPU adapter (lavapipe, CI's) stays on host staging unless
    // asked: the suite and the model again on the device path (calls of
    // every size, not only from 256 KiB), whole and cut into 4 KiB pieces.
    for piece in [None, Some("4096")] {
        let mut c = cargo();
        c.args([
            "test",
            "-p",
            "compute-tests",
            "--test",
            "gpu",
            "--",
            "collective",
            "model",
        ])
        .env("WGPU_SERVER_COLLECTIVE_PATH", "device")
        .env("WGPU_SERVER_DEVICE_MIN_BYTES", "0");
        if let Some(bytes) = piece {
            c.env("WGPU_SERVER_DEVICE_PIECE_BYTES", bytes);
        }
        run(c)?;
    }
    Ok(())
}

fn demo() -> Result {
    let mut d = cargo();
    d.args(["run", "--quiet", "-p", "wgpu-server", "--example", "tour"]);
    run(d)?;
    eprintln!(
        "\ndemo: next, the client API end to end (IR kernels, a profile window, two streams, a \
         graph replayed on new inputs):\n  cargo run -p wgpu-server --example mlp\n\
         and a timeline of every launch, to open in https://ui.perfetto.dev:\n  \
         cargo run -p wgpu-server --example timeline"
    );
    Ok(())
}

fn bench(rest: &[String]) -> Result {
    let mut b = cargo();
    b.args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "compute-bench",
        "--bin",
        "bench",
        "--",
    ]);
    b.args(rest);
    run(b)
}
