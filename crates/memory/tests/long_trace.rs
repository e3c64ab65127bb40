//! A long deterministic trace: 100,000 operations of the benchmark's
//! mixed-size trace (see `compute_testkit::trace`), sampled every 5,000
//! operations, show that bytes reserved stop growing once the working set
//! has been reached (no leak), and that the accounting is exact throughout.

use compute_memory::{BytesStorage, MemoryManagement};
use compute_runtime::MemoryConfiguration;
use compute_testkit::trace::{
    TRACE_LIVE_CAP, TRACE_PROPS, TRACE_SEED, TRACE_WORKING_SET, run_trace,
};

#[test]
fn reserved_bytes_stay_bounded_over_100k_operations() {
    let mut m = MemoryManagement::new(
        BytesStorage::phantom(TRACE_PROPS.alignment),
        TRACE_PROPS,
        &MemoryConfiguration::Default,
    )
    .expect("default configuration");
    // 20 rounds of 5,000 operations, each from its own seed; each round
    // frees what it left live, and no cleanup runs, so every round must be
    // served from what the earlier ones reserved.
    let mut peaks = Vec::new();
    let mut peak_live = 0u64;
    for round in 0..20u64 {
        let out = run_trace(
            &mut m,
            TRACE_SEED ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            5_000,
            TRACE_WORKING_SET,
            TRACE_LIVE_CAP,
        )
        .expect("trace");
        peak_live = peak_live.max(out.peak_live);
        peaks.push(out.peak_reserved);
        let r = m.report();
        assert_eq!(r.bytes_in_use(), 0, "round {round} left bytes in use");
        assert_eq!(r.bytes_reserved(), m.storage().allocated());
    }
    let reserved = *peaks.last().expect("20 rounds");
    // Bounded against the live peak...
    assert!(
        reserved as f64 <= 1.5 * peak_live as f64,
        "{reserved} reserved for a live peak of {peak_live}: {peaks:?}"
    );
    // ...and flat: the last half of the trace reserves at most two more
    // large pages (256 MiB) than the first half did. A leak of even one
    // slice per round would grow without end.
    let half = peaks[9];
    assert!(
        reserved <= half + (256 << 20),
        "reserved kept growing: {peaks:?}"
    );
    // Everything goes back.
    let gone = m.cleanup();
    assert!(!gone.is_empty());
    assert_eq!(m.report().bytes_reserved(), 0);
    assert_eq!(m.storage().allocated(), 0);
}

#[test]
fn the_benchmark_figure_is_deterministic_and_within_target() {
    let a = compute_testkit::trace::peak_trace_ratio(TRACE_SEED, 20_000);
    let b = compute_testkit::trace::peak_trace_ratio(TRACE_SEED, 20_000);
    assert_eq!(a.to_bits(), b.to_bits());
    assert!((1.0..=1.25).contains(&a), "peak reserved / peak live = {a}");
}
