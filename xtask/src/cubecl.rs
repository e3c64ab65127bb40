//! `cargo xtask cubecl`: cubecl's own test suites, run against this server
//! through the bridge (`bridge/`, a workspace of its own: the cubecl stack
//! stays out of the main build).
//!
//! - builds the bridge's test binary (`bridge/tests/suites.rs`);
//! - runs it on the default adapter, noting which tests launched a kernel
//!   (`CUBECL_BRIDGE_LAUNCH_LOG`);
//! - runs the tests that passed without launching anything again under
//!   the feature probe (`CUBECL_BRIDGE_PROBE`: every feature claimed,
//!   launches counted and refused): those that launch now had returned
//!   early for a feature the device lacks, and count as skipped;
//! - prints `cubecl suite NAME: P passed, F failed, S skipped` per suite,
//!   and fails when a test fails that `bridge/divergences.txt` does not
//!   list.
//!
//! Flags: `--lint` (first `cargo fmt --check` and `cargo clippy -D
//! warnings` over every member of the bridge's workspace, as CI runs it), `--no-run` (build only), `--bundle` (copy the stripped test
//! binary and its runner into `.h200/` for the device machine), `--from
//! DIR` (count the results a device run left in DIR instead of running),
//! `--subset` (the suites CI runs: `core`, `std`, `profiling`; the default
//! is every suite, `core-wide` included).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cargo, root, run};

mod results;

use results::{Outcome, Suite, parse_results, suite_of};

/// The suites `--subset` keeps.
const SUBSET: &[Suite] = &[Suite::Core, Suite::Std, Suite::Profiling];

/// The test name prefixes of the suite `--subset` leaves out (`core-wide`).
const WIDE: &[&str] = &["core::f16_ty::", "core::i64_ty::", "core::u64_ty::"];

pub(crate) fn cubecl(args: &[String]) -> Result {
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let from = args
        .iter()
        .position(|a| a == "--from")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    if let Some(dir) = from {
        return report(&dir, has("--subset"));
    }
    if has("--lint") {
        lint()?;
    }
    let running = !has("--no-run");
    if running {
        crate::setup()?;
    }
    let exe = build(has("--bundle"), running)?;
    if has("--bundle") {
        bundle(&exe)?;
    }
    if !running {
        return Ok(());
    }
    let dir = target_dir().join("cubecl-run");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    // The subset is also what runs: the wide types' tests are not started.
    let skip: &[&str] = if has("--subset") { WIDE } else { &[] };
    run_suites(&exe, &dir, skip)?;
    report(&dir, has("--subset"))
}

/// Where the bridge builds: the caller's `CARGO_TARGET_DIR`, else
/// `target/cubecl` (beside the main workspace's, never mixed with it).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target").join("cubecl"))
}

pub(crate) fn bridge_cargo() -> Command {
    let mut c = cargo();
    c.current_dir(root().join("bridge"));
    c.env("CARGO_TARGET_DIR", target_dir());
    c
}

/// The house rules in the bridge's workspace too (the main workspace's
/// `fmt` and `clippy` do not reach it): format check, clippy with warnings
/// denied.
fn lint() -> Result {
    let mut fmt = bridge_cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt)?;
    // Every member: the bridge, the drop-in `cubecl-wgpu` and the burn
    // programs (`bridge/upstream`, a workspace of its own, is their source
    // built unpatched).
    let mut clippy = bridge_cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)
}

/// Builds (and, when `run_tests`, runs) the bridge's own tests, builds the
/// suites, and returns the suites binary. The dev profile (dependencies without debug
/// info) for a run here: it builds in about half the time of a release
/// build and runs the suites in seconds on lavapipe. The release profile
/// for the device bundle, whose size is bounded (64 MiB travel).
fn build(release: bool, run_tests: bool) -> Result<PathBuf> {
    let profile = if release {
        "--release"
    } else {
        "--profile=dev"
    };
    if run_tests {
        own_tests(profile)?;
    }
    let mut tests = bridge_cargo();
    tests.args([
        "test",
        profile,
        "--test",
        "suites",
        "--no-run",
        "--message-format=json",
    ]);
    let shown = format!("{tests:?}");
    eprintln!("$ {shown}");
    let built = tests
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !built.status.success() {
        return Err(format!("{shown} failed with {}", built.status));
    }
    String::from_utf8_lossy(&built.stdout)
        .lines()
        .filter(|l| l.contains("\"name\":\"suites\"") && l.contains("\"executable\":\""))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            l[at..].split('"').next().map(PathBuf::from)
        })
        .ok_or_else(|| "could not find the suites binary in cargo's output".to_string())
}

/// The bridge's own tests (its unit tests, `tests/bridge.rs` and
/// `tests/signed.rs`), and the program docs/cubecl.md shows.
fn own_tests(profile: &str) -> Result {
    let mut unit = bridge_cargo();
    unit.args([
        "test", profile, "--lib", "--test", "bridge", "--test", "signed",
    ]);
    run(unit)?;
    let mut example = bridge_cargo();
    example.args(["run", "--quiet", profile, "--example", "double"]);
    run(example)
}

/// Copies the suites binary (debug info stripped) and its runner into
/// `.h200/`, for the device machine.
fn bundle(exe: &Path) -> Result {
    let out = root().join(".h200");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let bin = out.join("cubecl-suites");
    std::fs::copy(exe, &bin).map_err(|e| format!("copy {}: {e}", exe.display()))?;
    let mut strip = Command::new("strip");
    strip.arg("--strip-debug").arg(&bin);
    run(strip)?;
    let script = root().join("xtask/h200/run-cubecl.sh");
    std::fs::copy(&script, out.join("run-cubecl.sh"))
        .map_err(|e| format!("copy {}: {e}", script.display()))?;
    let size = std::fs::metadata(&bin).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "cubecl: .h200/cubecl-suites ({:.1} MiB) and .h200/run-cubecl.sh are ready. On the \
         device machine run\n  bash .h200/run-cubecl.sh .h200/cubecl-suites $OUT\nthen here \
         `cargo xtask cubecl --from DIR` on the files it wrote.",
        size as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// The real run, then the probe of the tests that passed launching
/// nothing. Leaves `results.txt` (one verdict line per test),
/// `launched.txt`, `probe.txt` and `probe-launched.txt` in `dir` (what
/// `run-cubecl.sh` leaves on the device too), and each run's raw output.
fn run_suites(exe: &Path, dir: &Path, skip: &[&str]) -> Result {
    let launched = dir.join("launched.txt");
    let probe_launched = dir.join("probe-launched.txt");
    for f in [&launched, &probe_launched, &dir.join("serial-launched.txt")] {
        let _ = std::fs::remove_file(f);
    }
    let results = run_to_completion(exe, dir, &launched, skip)?;
    let mut text: String = results
        .iter()
        .map(|(name, outcome)| format!("test {name} ... {}\n", outcome.verdict()))
        .collect();
    // What `report` looks for: every test is accounted for.
    text.push_str("test result: (cargo xtask cubecl: every listed test)\n");
    let file = dir.join("results.txt");
    std::fs::write(&file, text).map_err(|e| format!("write {}: {e}", file.display()))?;
    // Passed without touching the device on their own stream: again, one
    // at a time, so work on any stream is theirs.
    let ran = read_lines(&launched);
    let quiet: Vec<&String> = results
        .iter()
        .filter(|(name, outcome)| **outcome == Outcome::Passed && !ran.contains(*name))
        .map(|(name, _)| name)
        .collect();
    let serial_log = dir.join("serial-launched.txt");
    let mut serial = bounded(exe);
    serial
        .env("CUBECL_BRIDGE_LAUNCH_LOG", &serial_log)
        .env("CUBECL_BRIDGE_SERIAL", "1")
        .env("RUST_BACKTRACE", "0")
        .args(["--test-threads", "1", "--exact"])
        .args(&quiet);
    // With no name, the harness would run every test: nothing to run.
    if !quiet.is_empty() {
        capture(serial, &dir.join("serial.txt"))?;
    }
    // Still untouched: under the feature probe.
    let serial_ran = read_lines(&serial_log);
    let untouched: Vec<&&String> = quiet.iter().filter(|n| !serial_ran.contains(**n)).collect();
    let mut probe = bounded(exe);
    probe
        .env("CUBECL_BRIDGE_LAUNCH_LOG", &probe_launched)
        .env("CUBECL_BRIDGE_PROBE", "1")
        .env("CUBECL_BRIDGE_SERIAL", "1")
        .env("RUST_BACKTRACE", "0")
        .args(["--test-threads", "1", "--exact"])
        .args(untouched.iter().map(|n| n.as_str()));
    // The probe's verdicts do not count: claimed features the device lacks
    // fail; only which tests used the device matters.
    if !untouched.is_empty() {
        capture(probe, &dir.join("probe.txt"))?;
    }
    Ok(())
}

/// Tests that time the device (cubecl's `profiling` suite: an empty
/// window under 1 ms, 512 launches measuring more than 32): they run one
/// at a time after the parallel pass, because on a 2-core CI machine the
/// other tests' load made both timings fail once (an empty window of
/// 1.1 ms) while they pass alone and in every other run.
const ALONE: &[&str] = &["profiling::"];

/// Every listed test's outcome. A test that takes the process down (a
/// driver crash: lavapipe dies of SIGFPE on some 64-bit kernels) fails,
/// and the tests it took down with it run again, one at a time, so the one
/// that crashed is the one the harness was printing. The tests of
/// [`ALONE`] are left out of the parallel pass and run one at a time.
fn run_to_completion(
    exe: &Path,
    dir: &Path,
    launched: &Path,
    skip: &[&str],
) -> Result<BTreeMap<String, Outcome>> {
    let listing = Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()
        .map_err(|e| format!("could not list {}: {e}", exe.display()))?;
    let listed: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|name| !skip.iter().any(|p| name.starts_with(p)))
        .map(str::to_owned)
        .collect();
    let mut results = BTreeMap::new();
    for pass in 0.. {
        let remaining: Vec<&String> = listed
            .iter()
            .filter(|n| !results.contains_key(*n))
            .collect();
        if remaining.is_empty() {
            break;
        }
        let mut cmd = bounded(exe);
        cmd.env("CUBECL_BRIDGE_LAUNCH_LOG", launched)
            .env("RUST_BACKTRACE", "0");
        if pass > 0 {
            cmd.args(["--test-threads", "1", "--exact"])
                .args(&remaining);
        } else {
            cmd.args(ALONE.iter().flat_map(|p| ["--skip", p]));
        }
        let out = capture(cmd, &dir.join(format!("run-{pass}.txt")))?;
        results.extend(parse_results(&out));
        let finished = out.contains("\ntest result:");
        if finished && pass > 0 {
            // Every test it was given ran (one at a time, `--exact`).
            break;
        }
        // The parallel pass ran to its end: what it left out (`ALONE`)
        // runs next, one at a time.
        if !finished && pass > 0 {
            // One at a time: the last test line without a verdict crashed.
            let crashed = out
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("test ")?.strip_suffix(" ... "))
                .map(str::to_owned);
            match crashed {
                Some(name) => {
                    eprintln!("  crashed the process: {name}");
                    results.insert(name, Outcome::Failed);
                }
                None => return Err(format!("{} died before its first test", exe.display())),
            }
        }
    }
    Ok(results)
}

/// `exe` under `timeout`: a test that hangs ends its run after
/// [`RUN_LIMIT_S`], and counts as failed like one that crashed.
fn bounded(exe: &Path) -> Command {
    let mut c = Command::new("timeout");
    c.args(["--signal=KILL", RUN_LIMIT_S]).arg(exe);
    c
}

/// The longest one run of the suites binary may take, in seconds.
const RUN_LIMIT_S: &str = "900";

/// Runs `cmd`, writing its stdout and stderr to `file`; returns stdout.
/// Shows the command without its test names (hundreds, for the probe).
fn capture(mut cmd: Command, file: &Path) -> Result<String> {
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let named = args.iter().filter(|a| a.contains("::")).count();
    let mut shown: Vec<&str> = args
        .iter()
        .filter(|a| !a.contains("::"))
        .map(String::as_str)
        .collect();
    let count = format!("<{named} tests>");
    if named > 0 {
        shown.push(&count);
    }
    let shown = shown.join(" ");
    eprintln!("$ {shown}   # output in {}", file.display());
    let out = cmd
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = format!(
        "{stdout}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(file, text).map_err(|e| format!("write {}: {e}", file.display()))?;
    Ok(stdout)
}

fn read_lines(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The known divergences listed in `path` (`bridge/divergences.txt` for
/// cubecl's suites): one test name a line (a trailing `*` matches a
/// prefix), then ` | ` and the kind and the rule it follows; `#` starts a
/// comment.
pub(crate) fn divergences(path: &Path) -> Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('|') {
            Some((name, why)) => (name.trim().to_owned(), why.trim().to_owned()),
            None => (l.to_owned(), String::new()),
        })
        .collect())
}

pub(crate) fn listed<'a>(name: &str, list: &'a [(String, String)]) -> Option<&'a str> {
    list.iter()
        .find(|(pattern, _)| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        })
        .map(|(_, why)| why.as_str())
}

/// Counts what a run left in `dir`, prints a line per suite, and fails on
/// a failure no divergence lists.
fn report(dir: &Path, subset: bool) -> Result {
    let text = std::fs::read_to_string(dir.join("results.txt"))
        .map_err(|e| format!("read {}: {e}", dir.join("results.txt").display()))?;
    if !text.contains("\ntest result:") {
        return Err(format!(
            "{}: the run ended before its last test (a crash?); its counts would be partial",
            dir.join("results.txt").display()
        ));
    }
    let results = parse_results(&text);
    let mut ran = read_lines(&dir.join("launched.txt"));
    ran.extend(read_lines(&dir.join("serial-launched.txt")));
    let probed = read_lines(&dir.join("probe-launched.txt"));
    let known = divergences(&root().join("bridge/divergences.txt"))?;
    let mut counts: BTreeMap<Suite, [usize; 3]> = BTreeMap::new();
    // Passed without ever using the device, under the probe too: host-side
    // tests, and tests gated on what the probe cannot claim (more devices,
    // some matrix units). Counted as passed, and listed.
    let mut untouched: BTreeMap<Suite, Vec<&str>> = BTreeMap::new();
    let mut unexpected = Vec::new();
    let mut now_passing = Vec::new();
    for (name, outcome) in &results {
        let suite = suite_of(name);
        if subset && !SUBSET.contains(&suite) {
            continue;
        }
        let c = counts.entry(suite).or_default();
        match outcome {
            Outcome::Passed if !ran.contains(name) && probed.contains(name) => c[2] += 1,
            Outcome::Passed => {
                c[0] += 1;
                if !ran.contains(name) {
                    untouched.entry(suite).or_default().push(name);
                }
                if listed(name, &known).is_some() {
                    now_passing.push(name.clone());
                }
            }
            Outcome::Failed => {
                c[1] += 1;
                match listed(name, &known) {
                    Some(why) => eprintln!("  known: {name} ({why})"),
                    None => unexpected.push(name.clone()),
                }
            }
            Outcome::Ignored => {}
        }
    }
    for name in &now_passing {
        eprintln!("  listed as a divergence but passed: {name}");
    }
    let listing: String = untouched
        .values()
        .flatten()
        .map(|n| format!("{n}\n"))
        .collect();
    let file = dir.join("untouched.txt");
    std::fs::write(&file, listing).map_err(|e| format!("write {}: {e}", file.display()))?;
    for (suite, [p, f, s]) in &counts {
        println!(
            "cubecl suite {}: {p} passed, {f} failed, {s} skipped",
            suite.name()
        );
        if let Some(names) = untouched.get(suite) {
            eprintln!(
                "  ({} of the {p} passed never used the device, even under the probe: {})",
                names.len(),
                file.display()
            );
        }
    }
    if unexpected.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} failure(s) not listed in bridge/divergences.txt:\n  {}",
            unexpected.len(),
            unexpected.join("\n  ")
        ))
    }
}
