//! `cargo xtask burn`: burn on this server, against upstream burn-wgpu.
//!
//! - builds `bridge/burn`'s `burn-suite` in the bridge workspace (where the
//!   drop-in `cubecl-wgpu` is patched in: burn runs on this server) and
//!   `bridge/upstream`'s `burn-upstream` (the same source, unpatched: burn
//!   runs on the published cubecl-wgpu), both in the bridge's target dir so
//!   the crates that do not depend on cubecl-wgpu are built once;
//! - runs the differential suite on both, on the same adapter, and
//!   compares each case (`burn/compare.rs`): prints `burn suite GROUP: P
//!   passed, F failed, S skipped` and fails on a failure that
//!   `bridge/burn/divergences.txt` does not list;
//! - runs the programs on both and compares them (the MLP's losses, 200
//!   Adam steps, within 1e-4 relative; the transformer encoder at its small
//!   size, its output and one training step), then data-parallel training
//!   on three ranks here (ranks bit-identical, close to one device) and
//!   `bridge/burn/tests` (its collectives ran natively);
//! - sets cubecl's autotune to its minimal level (`CUBECL_AUTOTUNE_LEVEL`)
//!   unless the caller set one.
//!
//! Flags: `--filter PREFIX` (cases whose `group/name` starts with it),
//! `--steps N` (the MLP's steps; 200 by default), `--from DIR` (compare the
//! `ours.txt` and `upstream.txt` a run left in DIR, here or on the device
//! machine, instead of running), `--every N` (every N-th case of each
//! group), `--ci` (what `.ci/run` runs: every 8th case and the programs,
//! this server's build only, against upstream's records on lavapipe kept
//! in `bridge/burn/upstream-ci/`: `burn/recorded.rs`), `--record-upstream`
//! (makes those records), `--bundle` (release builds for the device
//! machine: `burn/bundle.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cubecl::{bridge_cargo, divergences, listed, target_dir};
use crate::{Result, run};

mod bundle;
mod compare;
mod figures;
mod recorded;

use compare::{Verdict, judge, parse};

/// cubecl's autotune effort (`minimal`, `balanced`, `extensive`, `full`).
const AUTOTUNE_ENV: &str = "CUBECL_AUTOTUNE_LEVEL";

/// CI's sample of the suite (`--ci`): every 8th case of each group, so
/// every group runs and `.ci/run` stays under its 30 minutes on two cores
/// (docs/burn.md, "In CI").
const CI_EVERY: usize = 8;

/// The MLP's steps in CI and in the records it is compared with.
const CI_STEPS: usize = 200;

/// The two builds' binaries.
struct Builds {
    ours: PathBuf,
    upstream: PathBuf,
}

pub(crate) fn burn(args: &[String]) -> Result {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if args.iter().any(|a| a == "--bundle") {
        return bundle::bundle();
    }
    if let Some(dir) = value("--from") {
        let dir = Path::new(&dir);
        figures::compare(dir)?;
        if !dir.join("ours.txt").exists() && dir.join("bench-ours.txt").exists() {
            return Ok(());
        }
        return compare_files(dir);
    }
    let steps: usize = value("--steps").and_then(|s| s.parse().ok()).unwrap_or(200);
    if args.iter().any(|a| a == "--record-upstream") {
        crate::setup()?;
        return recorded::record();
    }
    if args.iter().any(|a| a == "--ci") {
        crate::setup()?;
        return recorded::ci();
    }
    let selection = Selection {
        filter: value("--filter").unwrap_or_default(),
        every: value("--every").and_then(|s| s.parse().ok()).unwrap_or(1),
    };
    crate::setup()?;
    let builds = Builds {
        ours: build_ours()?,
        upstream: build_upstream()?,
    };
    let dir = target_dir().join("burn-run");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let suite = suite(&builds, &dir, &selection);
    let programs = mlp(&builds, steps)
        .and_then(|()| transformer(&builds))
        .and_then(|()| data_parallel(&builds.ours));
    suite.and(programs).and_then(|()| native())
}

/// This server's build of the suite and programs (debug).
fn build_ours() -> Result<PathBuf> {
    let mut ours = bridge_cargo();
    ours.args(["build", "-p", "burn-on-server", "--bin", "burn-suite"]);
    run(ours)?;
    Ok(target_dir().join("debug").join("burn-suite"))
}

/// Upstream's build of the same source (debug, `bridge/upstream`).
fn build_upstream() -> Result<PathBuf> {
    let mut upstream = bridge_cargo();
    upstream.current_dir(crate::root().join("bridge/upstream"));
    upstream.args(["build", "--bin", "burn-upstream"]);
    run(upstream)?;
    Ok(target_dir().join("debug").join("burn-upstream"))
}

/// `exe ARGS` with the environment both builds run in: autotune at its
/// minimal level unless the caller chose one (both builds then try the
/// same few candidates, and a CPU adapter spends minutes, not tens,
/// benchmarking them), and a runtime dir for the Vulkan loader.
fn command(exe: &Path, args: &[&str]) -> Command {
    // Killed past PROGRAM_LIMIT_S: upstream's poll thread can panic inside
    // wgpu-core on lavapipe and leave its process waiting forever.
    let mut c = Command::new("timeout");
    c.args(["--signal=KILL", PROGRAM_LIMIT_S])
        .arg(exe)
        .args(args);
    with_env(c)
}

/// `exe ARGS` unbounded: a suite process, whose watchdog bounds each case
/// (a whole suite runs longer than any one program).
fn suite_command(exe: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.args(args);
    with_env(c)
}

fn with_env(mut c: Command) -> Command {
    c.env(crate::LIB_BACKTRACE, "0");
    if std::env::var_os(AUTOTUNE_ENV).is_none() {
        c.env(AUTOTUNE_ENV, "minimal");
    }
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        c.env(
            "XDG_RUNTIME_DIR",
            std::env::temp_dir().join("xtask-xdg-runtime"),
        );
    }
    c
}

/// The longest one program may run, in seconds.
const PROGRAM_LIMIT_S: &str = "1200";

/// `exe ARGS`, its standard output (its errors shown as they come); run
/// once more when it fails, if it is upstream's build: its poll thread
/// panics inside wgpu-core now and then on lavapipe (`If the queue is
/// empty, the current submission index ..`), without a fault of the
/// program's.
fn output_retrying(builds: &Builds, exe: &Path, args: &[&str]) -> Result<String> {
    match output(exe, args) {
        Err(e) if exe == builds.upstream => {
            eprintln!("  upstream failed ({e}); running it once more");
            output(exe, args)
        }
        other => other,
    }
}

/// `exe ARGS`, its standard output (its errors shown as they come).
fn output(exe: &Path, args: &[&str]) -> Result<String> {
    let mut c = command(exe, args);
    let shown = format!("{c:?}");
    eprintln!("$ {shown}");
    let out = c
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{shown} failed with {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Which cases a run takes (the suite binary's `--filter` and `--every`).
struct Selection {
    filter: String,
    every: usize,
}

impl Selection {
    fn args(&self) -> Vec<String> {
        let every = self.every.to_string();
        vec![
            "--filter".into(),
            self.filter.clone(),
            "--every".into(),
            every,
        ]
    }
}

impl Builds {
    /// `f` on both builds at once (each a process of its own, mostly one
    /// thread busy: two cores run both in the time of one), ours first.
    fn both<T: Send>(&self, f: impl Fn(&Path) -> Result<T> + Sync) -> Result<(T, T)> {
        std::thread::scope(|s| {
            let theirs = s.spawn(|| f(&self.upstream));
            let ours = f(&self.ours);
            let theirs = theirs
                .join()
                .unwrap_or_else(|_| Err("the upstream run's thread panicked".into()));
            Ok((ours?, theirs?))
        })
    }
}

fn suite(builds: &Builds, dir: &Path, selection: &Selection) -> Result {
    builds.both(|exe| {
        let name = if exe == builds.ours {
            "ours.txt"
        } else {
            "upstream.txt"
        };
        run_suite(exe, &dir.join(name), selection)
    })?;
    compare_files(dir)
}

/// Runs one build's suite into `file` to the end: when its process dies
/// or its watchdog ends it (a case that hangs), the case it was in is
/// recorded as an error naming how the process ended, and a new process
/// goes on with the rest (the binary skips the cases the file holds).
fn run_suite(exe: &Path, file: &Path, selection: &Selection) -> Result {
    let args = selection.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let keys: Vec<String> = output(exe, &[&["list"], &args[..]].concat())?
        .lines()
        .map(str::to_string)
        .collect();
    if file.exists() {
        std::fs::remove_file(file).map_err(|e| format!("remove {}: {e}", file.display()))?;
    }
    let path = file.to_string_lossy();
    loop {
        let mut c = suite_command(exe, &[&["suite", &*path], &args[..]].concat());
        eprintln!("$ {c:?}");
        let status = c
            .status()
            .map_err(|e| format!("could not start {c:?}: {e}"))?;
        let done: std::collections::HashSet<String> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                Some(format!("{}/{}", f.next()?, f.next()?))
            })
            .collect();
        let Some(lost) = keys.iter().find(|k| !done.contains(*k)) else {
            return Ok(());
        };
        if status.success() {
            return Err(format!("{} ended without running {lost}", exe.display()));
        }
        eprintln!(
            "  {} ended ({status}) in {lost}; going on after it",
            exe.display()
        );
        let (group, name) = lost.split_once('/').unwrap_or((lost, ""));
        let line =
            format!("{group}\t{name}\texact\tERROR the process ended ({status}) in this case\n");
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()))
            .map_err(|e| format!("write {}: {e}", file.display()))?;
    }
}

/// Compares the records two runs left in `dir` (`ours.txt`,
/// `upstream.txt`: what `burn-suite suite` and `burn-upstream suite` write,
/// here or on the device machine): a line per group, and a failure no
/// divergence lists.
fn compare_files(dir: &Path) -> Result {
    let files = [dir.join("ours.txt"), dir.join("upstream.txt")];
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p)
            .map_err(|e| format!("read {}: {e}", p.display()))
            .and_then(|t| parse(&t).map_err(|e| format!("{}: {e}", p.display())))
    };
    let (ours, upstream) = (read(&files[0])?, read(&files[1])?);
    let known = divergences(&crate::root().join("bridge/burn/divergences.txt"))?;
    let mut counts: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    let mut unexpected = Vec::new();
    for (key, record) in &ours {
        let c = counts.entry(record.group.as_str()).or_default();
        match judge(record, upstream.get(key)) {
            Verdict::Passed => {
                c[0] += 1;
                if listed(key, &known).is_some() {
                    eprintln!("  listed as a divergence but passed: {key}");
                }
            }
            Verdict::Skipped(why) => {
                c[2] += 1;
                eprintln!("  skipped {key}: {why}");
            }
            Verdict::Failed(why) => {
                c[1] += 1;
                match listed(key, &known) {
                    Some(reason) => eprintln!("  known: {key} ({reason}): {why}"),
                    None => unexpected.push(format!("{key}: {why}")),
                }
            }
        }
    }
    for (group, [p, f, s]) in &counts {
        println!("burn suite {group}: {p} passed, {f} failed, {s} skipped");
    }
    let total: [usize; 3] = counts
        .values()
        .fold([0; 3], |t, c| [t[0] + c[0], t[1] + c[1], t[2] + c[2]]);
    println!(
        "burn suite (all): {} passed, {} failed, {} skipped",
        total[0], total[1], total[2]
    );
    if unexpected.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} case(s) fail that bridge/burn/divergences.txt does not list:\n  {}",
            unexpected.len(),
            unexpected.join("\n  ")
        ))
    }
}

/// The losses an `mlp` run printed (`step N: loss BITS VALUE`).
fn losses(text: &str) -> Vec<f32> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|bits| u32::from_str_radix(bits, 16).ok())
        .map(f32::from_bits)
        .collect()
}

fn mlp(builds: &Builds, steps: usize) -> Result {
    let steps = steps.to_string();
    let (ours, upstream) = builds.both(|exe| output_retrying(builds, exe, &["mlp", &steps]))?;
    check_mlp(&ours, &upstream)
}

/// The MLP's losses here (`ours`, a run's output) against upstream's.
fn check_mlp(ours: &str, upstream: &str) -> Result {
    let (ours, upstream) = (losses(ours), losses(upstream));
    let worst = ours
        .iter()
        .zip(&upstream)
        .map(|(a, b)| ((a - b).abs() / b.abs().max(f32::MIN_POSITIVE)) as f64)
        .fold(0.0f64, f64::max);
    println!(
        "burn program mlp: {} Adam steps, final loss {:?} here, {:?} upstream, worst relative \
         difference {worst:.2e}",
        ours.len(),
        ours.last(),
        upstream.last()
    );
    if ours.len() != upstream.len() || ours.is_empty() {
        return Err(format!(
            "mlp: {} losses here, {} upstream",
            ours.len(),
            upstream.len()
        ));
    }
    if worst > 1e-4 {
        return Err(format!(
            "mlp: losses differ by {worst:.2e} relative (limit 1e-4)"
        ));
    }
    Ok(())
}

/// Values of `name` lines (`name ... BITS ...`: the hex bits of an f32 in
/// the third field) of a program's output, in order.
fn values(text: &str, name: &str) -> Vec<f32> {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|bits| u32::from_str_radix(bits, 16).ok())
        .map(f32::from_bits)
        .collect()
}

/// The encoder (small size): its output within 1e-3 relative (plus 1e-4
/// absolute) of upstream's, and the losses of one training step within
/// 1e-4 relative.
fn transformer(builds: &Builds) -> Result {
    let (ours, theirs) =
        builds.both(|exe| output_retrying(builds, exe, &["transformer", "small"]))?;
    check_transformer(&ours, &theirs)
}

/// The encoder's outputs here (`ours`, a run's output) against upstream's.
fn check_transformer(ours: &str, theirs: &str) -> Result {
    let (a, b) = (values(ours, "value"), values(theirs, "value"));
    let off = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| (*x - *y).abs() > 1e-4 + 1e-3 * y.abs())
        .count();
    let (sa, sb) = (values(ours, "step"), values(theirs, "step"));
    let worst_step = sa
        .iter()
        .zip(&sb)
        .map(|(x, y)| f64::from((x - y).abs() / y.abs().max(f32::MIN_POSITIVE)))
        .fold(0.0, f64::max);
    println!(
        "burn program transformer: {} outputs, {off} outside tolerance; one Adam step {:?} \
         here, {:?} upstream (worst relative difference {worst_step:.2e})",
        a.len(),
        sa,
        sb
    );
    if a.is_empty() || a.len() != b.len() || off > 0 || sa.len() != 2 || sa.len() != sb.len() {
        return Err("transformer: the builds disagree".into());
    }
    if worst_step > 1e-4 {
        return Err(format!(
            "transformer: step losses differ by {worst_step:.2e} relative"
        ));
    }
    Ok(())
}

/// Data-parallel training on three ranks of one adapter (here: natively on
/// the server's collectives), which checks itself: ranks bit-identical,
/// within 1e-3 of one device.
fn data_parallel(ours: &Path) -> Result {
    let out = output(ours, &["data-parallel", "3", "20"])?;
    for line in out.lines() {
        println!("burn program data-parallel: {line}");
    }
    Ok(())
}

/// The bridge workspace's tests of burn (`bridge/burn/tests`): that its
/// collectives ran natively.
fn native() -> Result {
    let mut t = bridge_cargo();
    t.args(["test", "-p", "burn-on-server", "--test", "native"]);
    if std::env::var_os(AUTOTUNE_ENV).is_none() {
        t.env(AUTOTUNE_ENV, "minimal");
    }
    run(t)
}
