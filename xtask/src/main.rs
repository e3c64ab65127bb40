//! `cargo xtask`: the project's one entry point for contributors and CI.
//!
//! - `setup`  makes sure a wgpu adapter exists and MPI can be built and run
//!   (installs Mesa's lavapipe, the Vulkan loader, OpenMPI and libclang on
//!   Debian/Ubuntu as root; prints the command elsewhere);
//! - `ci`     setup, then format check, clippy with warnings denied (also
//!   with the `mpi` features), the docs (`RUSTDOCFLAGS=-D warnings cargo
//!   doc`), every test (doc tests included), the MPI suite (`mpi-test`),
//!   and the `mlp` example;
//! - `mpi-test` the collectives across processes: `tests/mpi` under
//!   `mpirun -np 3` (the suite, then a rank that dies and a rank that never
//!   calls, which the others must survive with an error in bounded time);
//! - `mpi-bench` the MPI all-reduce figures (3 processes, one server each)
//!   under `mpirun -np 3`, merged into `target/bench/report.json`
//!   (`--quick`, `--filter PREFIX`);
//! - `test`   every test;
//! - `demo`   setup, then the tour example on the default adapter (and a
//!   pointer to the `mlp` and `timeline` examples);
//! - `bench`  setup, then the benchmarks (`--quick`, `--filter PREFIX`),
//!   writing `target/bench/report.json` and its chart,
//!   `target/bench/report.svg`;
//! - `device-bundle` builds the bench, the `tour` and `mlp` examples (release)
//!   and the GPU test binary, and gathers what the
//!   H200 device machine needs to run it (see `xtask/h200/`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
        _ => {
            eprintln!(
                "usage: cargo xtask <setup | ci | test | mpi-test | demo | bench [--quick] [--filter PREFIX] | mpi-bench [--quick] [--filter PREFIX] | device-bundle>"
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

type Result<T = ()> = std::result::Result<T, String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    // Mesa's Vulkan WSI looks for a runtime dir even headless; give it one so
    // test output is not buried under its complaints.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join("xtask-xdg-runtime");
        let _ = std::fs::create_dir_all(&dir);
        c.env("XDG_RUNTIME_DIR", dir);
    }
    c
}

fn run(mut c: Command) -> Result {
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

fn has_vulkan_loader() -> bool {
    Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("libvulkan.so.1"))
        .unwrap_or(false)
}

fn has_vulkan_driver() -> bool {
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "json"))
}

/// What a wgpu adapter needs on Debian: Mesa's lavapipe and the loader.
const VULKAN_PACKAGES: &[&str] = &["mesa-vulkan-drivers", "libvulkan1"];
/// What the `mpi` features need: OpenMPI (headers, `mpicc`, `mpirun`) and
/// libclang for the bindings rsmpi generates.
const MPI_PACKAGES: &[&str] = &["libopenmpi-dev", "openmpi-bin", "libclang-dev"];

fn has_command(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// libclang itself (`libclang.so`, `libclang-14.so.1`), which bindgen
/// loads; not `libclang-cpp`, which other packages bring.
fn has_libclang() -> bool {
    Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).lines().any(|l| {
                let name = l.trim_start();
                name.starts_with("libclang.so")
                    || name
                        .strip_prefix("libclang-")
                        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        })
        .unwrap_or(false)
}

fn has_mpi() -> bool {
    has_command("mpirun") && has_command("mpicc") && has_libclang()
}

fn setup() -> Result {
    let mut missing: Vec<&str> = Vec::new();
    if has_vulkan_loader() && has_vulkan_driver() {
        eprintln!("setup: Vulkan loader and a driver are present");
    } else {
        missing.extend(VULKAN_PACKAGES);
    }
    if has_mpi() {
        eprintln!("setup: MPI (mpirun, mpicc) and libclang are present");
    } else {
        missing.extend(MPI_PACKAGES);
    }
    if missing.is_empty() {
        return Ok(());
    }
    let debian = Path::new("/etc/debian_version").exists();
    let root_user = is_root();
    let install = format!("apt-get install -y {}", missing.join(" "));
    if !(debian && root_user) {
        return Err(format!(
            "missing: {}. On Debian/Ubuntu: `sudo apt-get update && sudo {install}` (Fedora: \
             `sudo dnf install mesa-vulkan-drivers vulkan-loader openmpi-devel clang-devel`, then \
             `module load mpi/openmpi`), then rerun",
            missing.join(" ")
        ));
    }
    eprintln!("setup: installing {} (Debian, root)", missing.join(" "));
    let mut update = Command::new("apt-get");
    update.arg("update").arg("-qq");
    run(update)?;
    let mut apt = Command::new("apt-get");
    apt.args(["install", "-y", "-qq"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    run(apt)?;
    if !(has_vulkan_loader() && has_vulkan_driver()) {
        return Err("installed the packages but still no Vulkan loader/driver found".into());
    }
    if !has_mpi() {
        return Err("installed the packages but still no mpirun/mpicc/libclang found".into());
    }
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
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
    let mut mlp = cargo();
    mlp.args(["run", "--quiet", "-p", "wgpu-server", "--example", "mlp"]);
    run(mlp)
}

fn test() -> Result {
    let mut t = cargo();
    t.args(["test", "--workspace"]);
    run(t)
}

/// The features that build the MPI transport and everything that uses it.
const MPI_FEATURES: &str =
    "compute-collective/mpi,wgpu-server/mpi,compute-tests/mpi,compute-bench/mpi";

/// Processes of the MPI runs.
const MPI_RANKS: usize = 3;

/// `mpirun -np 3` on this host: as root OpenMPI needs
/// `--allow-run-as-root`; 3 ranks on fewer cores need `--oversubscribe`, and
/// ranks that yield when idle (MPI's blocking calls spin otherwise).
/// `survivors` keeps the job going when a rank exits early or without
/// `MPI_Finalize` (OpenMPI tears the job down at once by default), so the
/// others' own failure path is what ends them.
fn mpirun(exe: &Path, args: &[&str], survivors: bool) -> Command {
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
fn run_for(mut c: Command, limit: Duration) -> Result<(ExitStatus, String, Duration)> {
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
fn test_executable(mut build: Command, name: &str) -> Result<PathBuf> {
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
fn mpi_test() -> Result {
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
fn mpi_bench(rest: &[String]) -> Result {
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

fn device_bundle() -> Result {
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "compute-bench",
        "-p",
        "wgpu-server",
        "--bin",
        "bench",
        "--example",
        "tour",
        "--example",
        "mlp",
    ]);
    run(build)?;
    let out = root().join(".h200");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    for (dir, name) in [
        ("target/release", "bench"),
        ("target/release/examples", "tour"),
        ("target/release/examples", "mlp"),
    ] {
        let bin = root().join(dir).join(name);
        std::fs::copy(&bin, out.join(name)).map_err(|e| format!("copy {}: {e}", bin.display()))?;
    }
    // The GPU test binary, to run the suite on the device too.
    let mut tests = cargo();
    tests.args([
        "test",
        "-p",
        "compute-tests",
        "--test",
        "gpu",
        "--no-run",
        "--message-format=json",
    ]);
    let shown = format!("{tests:?}");
    eprintln!("$ {shown}");
    let built = tests
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "{shown} failed: {}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let listing = String::from_utf8_lossy(&built.stdout);
    let exe = listing
        .lines()
        .filter(|l| l.contains("\"name\":\"gpu\"") && l.contains("\"executable\":\""))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            l[at..].split('"').next().map(str::to_owned)
        })
        .ok_or("could not find the gpu test binary in cargo's output")?;
    std::fs::copy(&exe, out.join("test-gpu")).map_err(|e| format!("copy {exe}: {e}"))?;
    // Debug symbols would take it past what travels to the device (64 MiB).
    let _ = Command::new("strip").arg(out.join("test-gpu")).status();
    let mut libs = Command::new("bash");
    libs.arg(root().join("xtask/h200/fetch-libs.sh"));
    run(libs)?;
    eprintln!(
        "device-bundle: .h200/bench, .h200/tour, .h200/mlp, .h200/test-gpu and .gl/ are ready. On \
         the device machine run\n  source xtask/h200/env.sh && .h200/tour && .h200/mlp && \
         .h200/test-gpu && .h200/bench \
         --out $OUT/report.json\ncarrying .gl and .h200."
    );
    Ok(())
}
