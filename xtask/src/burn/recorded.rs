//! CI's burn run (`cargo xtask burn --ci`) against upstream's records.
//!
//! Upstream's build is the oracle, but on lavapipe its poll thread panics
//! inside wgpu-core now and then (`If the queue is empty, the current
//! submission index (..) should be at least the wait submission index`)
//! and its process then waits forever: in one cold CI-sized run on two
//! cores, one suite case hung until its 300 s watchdog and the MLP until
//! its program limit. Its build also costs four of CI's minutes. So CI
//! builds and runs this server's side only and compares it with what
//! upstream's build printed on lavapipe for the same sources, kept in
//! `bridge/burn/upstream-ci/` and made by `cargo xtask burn
//! --record-upstream` (which retries upstream's hangs). The records carry
//! a key over every source that feeds them (the suite and programs, both
//! manifests, upstream's lock file, the sample's size): CI refuses records
//! made from other sources. The whole comparison, both builds live, stays
//! `cargo xtask burn`.

use std::path::{Path, PathBuf};

use super::{
    CI_EVERY, CI_STEPS, Selection, build_ours, build_upstream, check_mlp, check_transformer,
    compare_files, data_parallel, native, output, run_suite,
};
use crate::cubecl::target_dir;
use crate::{Result, root};

/// Where the records live, from the repository's root.
const DIR: &str = "bridge/burn/upstream-ci";

/// Tries per upstream program or lost case when recording.
const TRIES: usize = 4;

/// What upstream's build printed: the suite's records and the programs'
/// outputs.
struct Records {
    suite: String,
    mlp: String,
    transformer: String,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result {
    std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
}

fn mlp_args() -> [String; 2] {
    ["mlp".into(), CI_STEPS.to_string()]
}

fn ci_selection() -> Selection {
    Selection {
        filter: String::new(),
        every: CI_EVERY,
    }
}

/// The suite's sample and the programs on this server's build, compared
/// with the records.
pub(super) fn ci() -> Result {
    let records = load()?;
    let ours = build_ours()?;
    let dir = target_dir().join("burn-run");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    write(&dir.join("upstream.txt"), &records.suite)?;
    // Two tracks of about equal length (two cores): the suite then the
    // MLP, and the encoder then data-parallel training.
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| {
            let suite = run_suite(&ours, &dir.join("ours.txt"), &ci_selection())
                .and_then(|()| compare_files(&dir));
            let [m, steps] = mlp_args();
            let mlp = output(&ours, &[&m, &steps]).and_then(|o| check_mlp(&o, &records.mlp));
            suite.and(mlp)
        });
        let second = output(&ours, &["transformer", "small"])
            .and_then(|o| check_transformer(&o, &records.transformer))
            .and_then(|()| data_parallel(&ours));
        let first = first
            .join()
            .unwrap_or_else(|_| Err("the suite's thread panicked".into()));
        (first, second)
    });
    first.and(second).and_then(|()| native())
}

/// Builds upstream and writes its records of CI's sample and programs,
/// retrying what its hangs lose.
pub(super) fn record() -> Result {
    let exe = build_upstream()?;
    let dir = root().join(DIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let scratch = target_dir().join("burn-record");
    std::fs::create_dir_all(&scratch).map_err(|e| format!("create {}: {e}", scratch.display()))?;
    let suite = record_suite(&exe, &scratch)?;
    let [m, steps] = mlp_args();
    let mlp = retried(&exe, &[&m, &steps])?;
    let transformer = retried(&exe, &["transformer", "small"])?;
    write(&dir.join("suite.txt"), &suite)?;
    write(&dir.join("mlp.txt"), &mlp)?;
    write(&dir.join("transformer.txt"), &transformer)?;
    write(
        &dir.join("key.txt"),
        &format!("key {}\nmesa {}\n", key()?, mesa()),
    )?;
    eprintln!("burn: upstream's records written to {DIR}");
    Ok(())
}

/// The sample's records, with each case a hang lost run again alone.
fn record_suite(exe: &Path, scratch: &Path) -> Result<String> {
    let file = scratch.join("upstream.txt");
    run_suite(exe, &file, &ci_selection())?;
    let mut lines = Vec::new();
    for line in read(&file)?.lines() {
        if !line.contains("\tERROR the process ended") {
            lines.push(line.to_string());
            continue;
        }
        let mut f = line.split('\t');
        let key = format!("{}/{}", f.next().unwrap_or(""), f.next().unwrap_or(""));
        lines.push(rerun_case(exe, scratch, &key).unwrap_or_else(|| line.to_string()));
    }
    Ok(lines.join("\n") + "\n")
}

/// Case `key` alone, until a try records it (None: every try was lost).
fn rerun_case(exe: &Path, scratch: &Path, key: &str) -> Option<String> {
    let one = Selection {
        filter: key.to_string(),
        every: 1,
    };
    let file = scratch.join("one.txt");
    for _ in 0..TRIES {
        if run_suite(exe, &file, &one).is_err() {
            continue;
        }
        let text = read(&file).ok()?;
        let line = text
            .lines()
            .find(|l| !l.contains("\tERROR the process ended"));
        if let Some(line) = line {
            return Some(line.to_string());
        }
    }
    None
}

/// `exe ARGS`'s output, tried up to [`TRIES`] times.
fn retried(exe: &Path, args: &[&str]) -> Result<String> {
    let mut last = String::new();
    for _ in 0..TRIES {
        match output(exe, args) {
            Ok(text) => return Ok(text),
            Err(e) => {
                eprintln!("  upstream failed ({e}); again");
                last = e;
            }
        }
    }
    Err(last)
}

/// The records, refused when the sources they came from have changed.
fn load() -> Result<Records> {
    let dir = root().join(DIR);
    let stored = read(&dir.join("key.txt"))?;
    let field = |name: &str| {
        stored
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let now = key()?;
    if field("key ") != now {
        return Err(format!(
            "{DIR} holds upstream's records of other sources (key {}, the sources now {now}): \
             run `cargo xtask burn --record-upstream` and commit what it writes",
            field("key ")
        ));
    }
    let (then, here) = (field("mesa "), mesa());
    if then != here {
        eprintln!("burn: upstream's records come from Mesa {then}; this machine has {here}");
    }
    Ok(Records {
        suite: read(&dir.join("suite.txt"))?,
        mlp: read(&dir.join("mlp.txt"))?,
        transformer: read(&dir.join("transformer.txt"))?,
    })
}

/// FNV-1a (64 bits) over every source the records depend on, each file's
/// path and bytes, in a fixed order, and the sample's size.
fn key() -> Result<String> {
    let root = root();
    let mut files = Vec::new();
    for dir in ["bridge/burn/src", "bridge/upstream/src"] {
        walk(&root.join(dir), &mut files)?;
    }
    files.sort();
    for file in [
        "bridge/burn/Cargo.toml",
        "bridge/upstream/Cargo.toml",
        "bridge/upstream/Cargo.lock",
    ] {
        files.push(root.join(file));
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap_or(file);
        eat(rel.to_string_lossy().as_bytes());
        eat(&std::fs::read(file).map_err(|e| format!("read {}: {e}", file.display()))?);
    }
    eat(format!("every {CI_EVERY} steps {CI_STEPS}").as_bytes());
    Ok(format!("{hash:016x}"))
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("read {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// The installed lavapipe's package version, where dpkg knows it.
fn mesa() -> String {
    std::process::Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "mesa-vulkan-drivers"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}
