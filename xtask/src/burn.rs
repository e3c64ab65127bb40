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
//! machine, instead of running).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cubecl::{bridge_cargo, divergences, listed, target_dir};
use crate::{Result, run};

mod compare;

use compare::{Verdict, judge, parse};

/// cubecl's autotune effort (`minimal`, `balanced`, `extensive`, `full`).
const AUTOTUNE_ENV: &str = "CUBECL_AUTOTUNE_LEVEL";

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
    if let Some(dir) = value("--from") {
        return compare_files(Path::new(&dir));
    }
    let filter = value("--filter").unwrap_or_default();
    let steps: usize = value("--steps").and_then(|s| s.parse().ok()).unwrap_or(200);
    crate::setup()?;
    let builds = build()?;
    let dir = target_dir().join("burn-run");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let suite = suite(&builds, &dir, &filter);
    let programs = mlp(&builds, steps)
        .and_then(|()| transformer(&builds))
        .and_then(|()| data_parallel(&builds));
    suite.and(programs).and_then(|()| native())
}

fn build() -> Result<Builds> {
    let mut ours = bridge_cargo();
    ours.args(["build", "-p", "burn-on-server", "--bin", "burn-suite"]);
    run(ours)?;
    let mut upstream = bridge_cargo();
    upstream.current_dir(crate::root().join("bridge/upstream"));
    upstream.args(["build", "--bin", "burn-upstream"]);
    run(upstream)?;
    let bin = target_dir().join("debug");
    Ok(Builds {
        ours: bin.join("burn-suite"),
        upstream: bin.join("burn-upstream"),
    })
}

/// `exe ARGS`, its standard output (its errors shown as they come).
/// Autotune at its minimal level unless the caller chose one: both builds
/// then try the same few candidates, and a CPU adapter spends minutes, not
/// tens, benchmarking them.
fn output(exe: &Path, args: &[&str]) -> Result<String> {
    let mut c = Command::new(exe);
    c.args(args);
    if std::env::var_os(AUTOTUNE_ENV).is_none() {
        c.env(AUTOTUNE_ENV, "minimal");
    }
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        c.env(
            "XDG_RUNTIME_DIR",
            std::env::temp_dir().join("xtask-xdg-runtime"),
        );
    }
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

fn suite(builds: &Builds, dir: &Path, filter: &str) -> Result {
    for (exe, name) in [
        (&builds.ours, "ours.txt"),
        (&builds.upstream, "upstream.txt"),
    ] {
        let file = dir.join(name);
        output(exe, &["suite", &file.to_string_lossy(), filter])?;
    }
    compare_files(dir)
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
    let ours = losses(&output(&builds.ours, &["mlp", &steps])?);
    let upstream = losses(&output(&builds.upstream, &["mlp", &steps])?);
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
    let ours = output(&builds.ours, &["transformer", "small"])?;
    let theirs = output(&builds.upstream, &["transformer", "small"])?;
    let (a, b) = (values(&ours, "value"), values(&theirs, "value"));
    let off = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| (*x - *y).abs() > 1e-4 + 1e-3 * y.abs())
        .count();
    let (sa, sb) = (values(&ours, "step"), values(&theirs, "step"));
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
fn data_parallel(builds: &Builds) -> Result {
    let out = output(&builds.ours, &["data-parallel", "3", "20"])?;
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
