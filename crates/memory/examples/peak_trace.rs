//! Prints the `memory.peak_reserved_over_peak_live` figure and its trace's
//! numbers: `cargo run -p compute-memory --release --example peak_trace
//! [seed] [ops]`.

use compute_testkit::trace::{TRACE_OPS, TRACE_SEED, trace_outcome};

fn main() {
    let mut args = std::env::args().skip(1);
    let seed = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(TRACE_SEED);
    let ops = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(TRACE_OPS);
    match trace_outcome(seed, ops) {
        Ok(o) => {
            println!(
                "seed {seed:#x}, {ops} ops ({} reserves, {} frees)",
                o.reserves, o.frees
            );
            println!("peak live     {:>14} bytes", o.peak_live);
            println!("peak reserved {:>14} bytes", o.peak_reserved);
            for p in &o.report.pools {
                println!(
                    "  {:?}: {} live, {} B in use, {} B reserved, {} pages, peak {} B reserved / {} pages",
                    p.kind,
                    p.allocations,
                    p.bytes_in_use,
                    p.bytes_reserved,
                    p.pages,
                    p.peak_bytes_reserved,
                    p.peak_pages
                );
            }
            println!("memory.peak_reserved_over_peak_live = {:.4}", o.ratio());
        }
        Err(e) => {
            eprintln!("trace failed: {e}");
            std::process::exit(1);
        }
    }
}
