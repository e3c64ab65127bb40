//! Benchmarks of the compute server: each figure measured through the
//! server and against the closest raw-wgpu loop doing the same work, in the
//! same process, on the same device, in interleaved rounds; medians
//! reported.
//!
//! `cargo xtask bench [--quick] [--filter PREFIX] [--out PATH]` writes
//! `target/bench/report.json` (or PATH), its chart beside it
//! (`report.svg`, see `chart.rs`), and prints a table. `bench --chart-from
//! REPORT.json [--chart-out OUT.svg]` only draws a report. One module per
//! figure family (the part of a figure's name before the dot); `raw.rs`
//! holds the baselines. See `docs/benchmarks.md` for what each figure
//! means.

mod chart;
mod collective;
mod graph;
mod harness;
mod kernel;
mod launch;
mod matmul_wgsl;
mod memory;
mod one_context;
mod probe_coop;
mod probe_scan;
mod probe_wgsl;
mod profile;
mod raw;
mod raw_collective;
mod raw_shared;
mod report;
mod shaders;
mod steps;
mod stream;
mod suite;
mod suite_wgsl;
mod switch;
mod transfer;
mod workers;

use compute_runtime::{DeviceId, Server, ServerError};
use wgpu_server::{WgpuServer, WgslPassthrough};

/// The server most families measure: WGSL given by the caller.
type S = WgpuServer<WgslPassthrough>;

fn main() -> Result<(), ServerError> {
    // `--chart-from REPORT.json`: draw a report, run nothing.
    if let Some((from, out)) = chart::paths_from_args() {
        return chart::convert(&from, &out)
            .map_err(|reason| ServerError::InvalidArgument { reason });
    }
    let o = harness::Options::from_args();
    let mut s = S::try_init(DeviceId(0))?;
    let a = Server::utilities(&s).adapter.clone();
    println!(
        "adapter: {} ({}, {}, {} {})",
        a.name, a.backend, a.device_type, a.driver, a.driver_info
    );
    let mut figures = Vec::new();
    // A group that fails (or panics) is reported and the rest still run:
    // one broken figure must not cost a device run's other figures.
    let mut failed = Vec::new();
    // First, before any bulk transfer in this process (see the figure).
    if o.wants("transfer.") {
        group(&mut failed, "transfer::fresh_roundtrip", || {
            transfer::fresh_roundtrip(&mut s, &o, &mut figures)
        });
    }
    if o.wants("launch.") {
        group(&mut failed, "launch::figures", || {
            launch::figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("memory.") {
        group(&mut failed, "memory::figures", || {
            memory::figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("profile.") {
        group(&mut failed, "profile::figures", || {
            profile::figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("compile.") || o.wants("kernel.") {
        group(&mut failed, "kernel::figures", || {
            kernel::figures(&o, &mut figures)
        });
    }
    if o.wants("kernel.") || o.asks_for("probe") {
        group(&mut failed, "suite::figures", || {
            suite::figures(&o, &mut figures)
        });
    }
    if o.wants("stream.") {
        group(&mut failed, "stream::figures", || {
            stream::figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("sync.") {
        group(&mut failed, "launch::sync_figures", || {
            launch::sync_figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("graph.") {
        group(&mut failed, "graph::figures", || {
            graph::figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("transfer.") {
        group(&mut failed, "transfer::figures", || {
            transfer::figures(&mut s, &o, &mut figures)
        });
    }
    if o.wants("collective.") || o.asks_for("probe.one_context") {
        group(&mut failed, "collective::figures", || {
            collective::figures(&o, &mut figures)
        });
    }
    // Step timings only when asked: they explain figures, they are not ones.
    if o.asks_for("steps") {
        group(&mut failed, "steps::figures", || {
            steps::figures(&mut s, &o, &mut figures)
        });
    }
    if let Some(f) = &o.filter {
        figures.retain(|x| x.name.starts_with(f.as_str()));
    }
    report::print_table(&figures);
    let json = report::to_json(&a, o.quick, &figures);
    let path = std::path::Path::new(&o.out);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let text = serde_json::to_string_pretty(&json).map_err(|e| ServerError::InvalidArgument {
        reason: format!("serializing the report: {e}"),
    })?;
    std::fs::write(path, text + "\n").map_err(|e| ServerError::InvalidArgument {
        reason: format!("writing {}: {e}", o.out),
    })?;
    println!("\nwrote {}", o.out);
    let svg = path.with_extension("svg");
    let chart =
        chart::svg_of_report(&json).map_err(|reason| ServerError::InvalidArgument { reason })?;
    std::fs::write(&svg, chart).map_err(|e| ServerError::InvalidArgument {
        reason: format!("writing {}: {e}", svg.display()),
    })?;
    println!("wrote {}", svg.display());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ServerError::InvalidArgument {
            reason: format!("figure groups failed: {}", failed.join(", ")),
        })
    }
}

/// Runs one group of figures; a failure or a panic is printed and
/// remembered in `failed` rather than ending the run.
fn group(
    failed: &mut Vec<&'static str>,
    name: &'static str,
    run: impl FnOnce() -> Result<(), ServerError>,
) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    let reason = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "panicked (message above)".to_string(),
    };
    eprintln!("bench: {name} failed: {reason}");
    failed.push(name);
}
