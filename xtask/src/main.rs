//! `cargo xtask`: the project's one entry point for contributors and CI.
//!
//! - `setup`  makes sure a wgpu adapter exists (installs Mesa's lavapipe and
//!   the Vulkan loader on Debian/Ubuntu as root; prints the command elsewhere);
//! - `ci`     setup, then format check, clippy with warnings denied, the docs
//!   (`RUSTDOCFLAGS=-D warnings cargo doc`), every test (doc tests
//!   included), and the `mlp` example;
//! - `test`   every test;
//! - `demo`   setup, then the tour example on the default adapter (and a
//!   pointer to the `mlp` and `timeline` examples);
//! - `bench`  setup, then the benchmarks (`--quick`, `--filter PREFIX`),
//!   writing `target/bench/report.json` and its chart,
//!   `target/bench/report.svg`;
//! - `device-bundle` builds the bench binary in release and gathers what the
//!   H200 device machine needs to run it (see `xtask/h200/`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

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
        "device-bundle" => device_bundle(),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup | ci | test | demo | bench [--quick] [--filter PREFIX] | device-bundle>"
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

const APT_PACKAGES: &[&str] = &["mesa-vulkan-drivers", "libvulkan1"];

fn setup() -> Result {
    if has_vulkan_loader() && has_vulkan_driver() {
        eprintln!("setup: Vulkan loader and a driver are present");
        return Ok(());
    }
    let debian = Path::new("/etc/debian_version").exists();
    let root_user = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let install = format!("apt-get install -y {}", APT_PACKAGES.join(" "));
    if !(debian && root_user) {
        return Err(format!(
            "no Vulkan loader/driver found. Install Mesa's lavapipe and the loader, e.g. on \
             Debian/Ubuntu: `sudo apt-get update && sudo {install}` (Fedora: `sudo dnf install \
             mesa-vulkan-drivers vulkan-loader`), then rerun"
        ));
    }
    eprintln!(
        "setup: installing {} (Debian, root)",
        APT_PACKAGES.join(" ")
    );
    let mut update = Command::new("apt-get");
    update.arg("update").arg("-qq");
    run(update)?;
    let mut apt = Command::new("apt-get");
    apt.args(["install", "-y", "-qq"])
        .args(APT_PACKAGES)
        .env("DEBIAN_FRONTEND", "noninteractive");
    run(apt)?;
    if has_vulkan_loader() && has_vulkan_driver() {
        Ok(())
    } else {
        Err("installed the packages but still no Vulkan loader/driver found".into())
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
    // The docs build without a warning (broken links included).
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(doc)?;
    test()?;
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
    ]);
    run(build)?;
    let out = root().join(".h200");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    for (dir, name) in [
        ("target/release", "bench"),
        ("target/release/examples", "tour"),
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
        "device-bundle: .h200/bench, .h200/tour, .h200/test-gpu and .gl/ are ready. On the device \
         machine run\n  source xtask/h200/env.sh && .h200/tour && .h200/test-gpu && .h200/bench \
         --out $OUT/report.json\ncarrying .gl and .h200."
    );
    Ok(())
}
