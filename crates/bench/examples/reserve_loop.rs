//! A reserve + free loop for instruction counts: what a figure's time is
//! made of, on any machine, without a GPU's noise.
//!
//! ```text
//! cargo build --release -p compute-bench --example reserve_loop
//! N=100000 valgrind --tool=callgrind --toggle-collect='reserve_loop::the_loop' \
//!     target/release/examples/reserve_loop
//! callgrind_annotate --inclusive=yes callgrind.out.*
//! ```
//!
//! The loop is `memory.reserve_free_ns`'s: 1 MiB reserved and its handle
//! dropped (freed at the next call), with 10,000 live handles of mixed
//! small sizes. Without valgrind it prints ns per iteration.

use compute_runtime::{DeviceId, ManagedMemoryHandle, Server, ServerError, StreamId};
use wgpu_server::{WgpuServer, WgslPassthrough};

#[inline(never)]
fn the_loop(s: &mut WgpuServer<WgslPassthrough>, n: usize) {
    for _ in 0..n {
        let m = ManagedMemoryHandle::new();
        let _ = s.initialize_memory(m.clone(), 1 << 20, StreamId(0));
        drop(m);
    }
}

fn main() -> Result<(), ServerError> {
    let mut s = WgpuServer::<WgslPassthrough>::try_init(DeviceId(0))?;
    let mut live = Vec::with_capacity(10_000);
    for i in 0..10_000u64 {
        let m = ManagedMemoryHandle::new();
        s.initialize_memory(m.clone(), 256 + (i % 64) * 256, StreamId(0))?;
        live.push(m);
    }
    let n = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let t = std::time::Instant::now();
    the_loop(&mut s, n);
    println!(
        "{:.1} ns per reserve + free",
        t.elapsed().as_secs_f64() * 1e9 / n as f64
    );
    Ok(())
}
