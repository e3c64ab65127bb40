//! The `burn.*` timings of one device call (`bench-ours.txt` and
//! `bench-upstream.txt`, what `run-burn.sh bench` leaves): a table, and
//! `target/bench/burn.json` with each figure beside upstream's (the file
//! docs/bench/burn-*.json copies).

use std::collections::BTreeMap;
use std::path::Path;

use crate::{Result, root};

/// `name value` lines.
fn read(path: &Path) -> Result<BTreeMap<String, f64>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name.to_string(), value.trim().parse().ok()?))
        })
        .collect())
}

/// What a figure's ratio (here over upstream) must be, for the table.
fn target(name: &str) -> &'static str {
    match name {
        "burn.mlp_step_ms" => "<= 0.8",
        "burn.transformer_step_ms" => "<= 1.0",
        "burn.all_reduce_64mib_busbw_gbps" => ">= 2.0",
        _ => "-",
    }
}

fn unit(name: &str) -> &'static str {
    if name.ends_with("_gbps") {
        "GB/s bus bandwidth (higher is better)"
    } else {
        "ms per call, median (lower is better)"
    }
}

/// Prints the table and writes `target/bench/burn.json`, when `dir` holds
/// both builds' timings.
pub(crate) fn compare(dir: &Path) -> Result {
    let (ours, theirs) = (dir.join("bench-ours.txt"), dir.join("bench-upstream.txt"));
    if !ours.exists() || !theirs.exists() {
        return Ok(());
    }
    let (ours, theirs) = (read(&ours)?, read(&theirs)?);
    let text = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_default()
            .trim()
            .replace('"', "'")
    };
    let mut figures = Vec::new();
    println!(
        "{:<36} {:>10} {:>10} {:>7} {:>7}",
        "figure", "here", "upstream", "ratio", "target"
    );
    for (name, value) in &ours {
        let base = theirs.get(name).copied().unwrap_or(f64::NAN);
        let ratio = value / base;
        println!(
            "{name:<36} {value:>10.3} {base:>10.3} {ratio:>7.3} {:>7}",
            target(name)
        );
        figures.push(format!(
            "    {{\"name\": \"{name}\", \"value\": {value}, \"baseline\": \"upstream burn-wgpu \
             (published cubecl-wgpu), same call\", \"baseline_value\": {base}, \"ratio\": \
             {ratio}, \"target\": \"{}\", \"unit\": \"{}\"}}",
            target(name),
            unit(name)
        ));
    }
    let json = format!(
        "{{\n  \"card\": \"{}\",\n  \"commit\": \"{}\",\n  \"figures\": [\n{}\n  ]\n}}\n",
        text("card.txt"),
        text("commit.txt"),
        figures.join(",\n")
    );
    let out = root().join("target/bench");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let file = out.join("burn.json");
    std::fs::write(&file, json).map_err(|e| format!("write {}: {e}", file.display()))?;
    println!("wrote {}", file.display());
    Ok(())
}
