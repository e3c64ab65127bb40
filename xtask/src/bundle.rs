//! `cargo xtask device-bundle`: what the H200 device machine needs to run
//! the bench, the examples and the GPU tests.

use std::process::Command;

use crate::{Result, cargo, root, run};

pub(crate) fn device_bundle() -> Result {
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
    // The GPU test binary, debug and release, to run the suite on the
    // device too (symbols kept for backtraces, debug info dropped: what
    // travels must stay under 64 MiB).
    for (release, name) in [(false, "test-gpu"), (true, "test-gpu-release")] {
        let exe = gpu_test_binary(release)?;
        let to = out.join(name);
        std::fs::copy(&exe, &to).map_err(|e| format!("copy {exe}: {e}"))?;
        let _ = Command::new("strip").arg("--strip-debug").arg(&to).status();
    }
    // The MPI figure and suite: `mpi_bench` (release) and the MPI test
    // binary (debug), both with the `mpi` features, and OpenMPI's debs
    // (`.mpi`, unpacked under /opt/mpi there by `xtask/h200/mpi-env.sh`).
    if crate::setup::has_mpi() {
        let mut mpi_bench = cargo();
        mpi_bench.args([
            "build",
            "--release",
            "-p",
            "compute-bench",
            "--features",
            "mpi",
            "--bin",
            "mpi_bench",
        ]);
        run(mpi_bench)?;
        let bin = root().join("target/release/mpi_bench");
        let to = out.join("mpi_bench");
        std::fs::copy(&bin, &to).map_err(|e| format!("copy {}: {e}", bin.display()))?;
        let mut suite = cargo();
        suite.args([
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
        let exe = crate::mpi::test_executable(suite, "mpi")?;
        let to = out.join("test-mpi");
        std::fs::copy(&exe, &to).map_err(|e| format!("copy {}: {e}", exe.display()))?;
        let _ = Command::new("strip").arg("--strip-debug").arg(&to).status();
        let mut debs = Command::new("bash");
        debs.arg(root().join("xtask/h200/fetch-mpi.sh"));
        run(debs)?;
    } else {
        eprintln!("device-bundle: no MPI here (`cargo xtask setup`): no MPI binaries bundled");
    }
    let mut libs = Command::new("bash");
    libs.arg(root().join("xtask/h200/fetch-libs.sh"));
    run(libs)?;
    // What the binaries were built from, for the records the device runs
    // print (`validate.sh`, `run-mpi.sh`).
    let commit = commit_id();
    std::fs::write(out.join("COMMIT"), commit + "\n")
        .map_err(|e| format!("write .h200/COMMIT: {e}"))?;
    eprintln!(
        "device-bundle: .h200/bench, .h200/tour, .h200/mlp, .h200/test-gpu, \
         .h200/test-gpu-release and .gl/ are ready. On the device machine run\n  source \
         xtask/h200/env.sh && .h200/tour && .h200/mlp && .h200/bench --out $OUT/report.json\n\
         and the GPU suite with\n  bash xtask/h200/run-tests.sh .h200/test-gpu 3 1 4\nand MPI \
         (carrying .mpi too) with\n  bash xtask/h200/run-mpi.sh\ncarrying .gl and .h200 (or \
         the files needed: the whole bundle may pass 64 MiB)."
    );
    Ok(())
}

/// The path of the GPU test binary, built (release or debug) by cargo.
fn gpu_test_binary(release: bool) -> Result<String> {
    let mut tests = cargo();
    tests.args(["test", "-p", "compute-tests", "--test", "gpu", "--no-run"]);
    if release {
        tests.arg("--release");
    }
    tests.arg("--message-format=json");
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
    listing
        .lines()
        .filter(|l| l.contains("\"name\":\"gpu\"") && l.contains("\"executable\":\""))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            l[at..].split('"').next().map(str::to_owned)
        })
        .ok_or_else(|| "could not find the gpu test binary in cargo's output".to_owned())
}

/// HEAD's id, `+uncommitted` when tracked files differ from it: what a
/// bundle's binaries were built from, for the records device runs print.
pub(crate) fn commit_id() -> String {
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(root())
        .output()
        .is_ok_and(|o| !o.stdout.is_empty());
    if dirty {
        format!("{head}+uncommitted")
    } else {
        head
    }
}
