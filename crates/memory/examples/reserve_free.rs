//! Times reserve + free of 1 MiB with 10,000 live handles on a phantom
//! `BytesStorage` (the manager's share of `memory.reserve_free_ns`, without
//! a device): `cargo run -p compute-memory --release --example reserve_free`.

use std::time::Instant;

use compute_memory::{BytesStorage, MemoryManagement};
use compute_runtime::{MemoryConfiguration, MemoryId};
use compute_testkit::Rng;
use compute_testkit::trace::TRACE_PROPS;

fn main() {
    let storage = BytesStorage::phantom(TRACE_PROPS.alignment);
    let Ok(mut m) = MemoryManagement::new(storage, TRACE_PROPS, &MemoryConfiguration::Default)
    else {
        eprintln!("configuration refused");
        std::process::exit(1);
    };
    // 10,000 live handles, log-uniform 256 B .. 1 MiB, with every third
    // freed again so the free ranges are fragmented.
    let mut rng = Rng::new(7);
    let mut keep = Vec::new();
    for i in 0..15_000 {
        let id = MemoryId::next();
        if m.bind(id, rng.log_uniform(256, 1 << 20)).is_err() {
            eprintln!("bind failed");
            std::process::exit(1);
        }
        if i % 3 == 2 {
            m.release(id);
        } else {
            keep.push(id);
        }
    }
    let mut samples = Vec::new();
    for _ in 0..101 {
        let start = Instant::now();
        for _ in 0..1000 {
            let id = MemoryId::next();
            if m.bind(id, 1 << 20).is_err() {
                eprintln!("bind failed");
                std::process::exit(1);
            }
            m.release(id);
        }
        samples.push(start.elapsed().as_nanos() as f64 / 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "{} live handles; reserve + free of 1 MiB: median {:.0} ns",
        keep.len(),
        samples[samples.len() / 2]
    );
}
