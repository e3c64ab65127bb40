//! What memory the trust machinery and graphs keep: host writes without a
//! flush, graph pools.

use super::*;
use compute_runtime::{Bytes, CubeCount, MemoryAllocationMode, PoolKind, Server};

/// Resident set size of this process, in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

#[test]
fn host_writes_without_a_flush_do_not_grow_resident_memory() {
    let mut f = fixture();
    // (writes, bytes each): many small writes reach the count threshold
    // (1024 writes) first, large ones the byte threshold (256 MiB).
    // Unbounded staging would hold every byte written, 1 GiB or more; the
    // bound leaves room for what other tests of this process allocate
    // meanwhile (lavapipe's device memory is host memory). 64 Ki writes of
    // 16 KiB rather than 200,000 of 4 KiB: as many bytes, a third of the
    // calls, to keep the test short in debug builds.
    const ROUNDS: [(usize, usize); 2] = [(64 << 10, 16 << 10), (1200, 1 << 20)];
    const BOUND: u64 = 512 << 20;
    for (writes, size) in ROUNDS {
        let target = alloc(&mut f.s, size as u64, S0);
        let data = Bytes::from(vec![0xA5u8; size]);
        // Warm up (a few flush cycles) before measuring: the allocator
        // keeps what wgpu's staging frees, so growth after this is what is
        // never freed.
        for _ in 0..(2048).min(writes / 2) {
            f.s.write(vec![(target.copy_descriptor(), data.clone())], S0);
        }
        f.begin(S0);
        let before = rss_bytes();
        for _ in 0..writes {
            f.s.write(vec![(target.copy_descriptor(), data.clone())], S0);
        }
        let grown = rss_bytes().saturating_sub(before);
        eprintln!(
            "{writes} writes of {size} bytes: resident +{} MiB",
            grown >> 20
        );
        f.end();
        assert!(
            grown < BOUND,
            "resident memory grew by {} MiB over {writes} writes of {size} bytes ({} MiB written)",
            grown >> 20,
            (writes * size) >> 20
        );
        assert_eq!(
            read(&mut f.s, &target, S0).expect("read").as_ref(),
            &data[..]
        );
        sync(&mut f.s, S0).expect("no failure");
        f.assert_neighbours_and_bystander();
        f.reset_neighbours();
    }
}

fn persistent_pool(s: &mut TestServer) -> Option<compute_runtime::PoolReport> {
    s.memory_report(S0)
        .expect("report")
        .pools
        .into_iter()
        .find(|p| p.kind == PoolKind::Persistent)
}

fn sliced_in_use(s: &mut TestServer) -> u64 {
    s.memory_report(S0)
        .expect("report")
        .pools
        .iter()
        .filter(|p| matches!(p.kind, PoolKind::Sliced { .. }))
        .map(|p| p.bytes_in_use)
        .sum()
}

#[test]
fn graph_prepare_makes_only_that_streams_allocations_persistent_and_cleanup_frees_them_in_auto_mode()
 {
    let mut f = fixture();
    let persistent_before = persistent_pool(&mut f.s).map_or(0, |p| p.bytes_in_use);
    f.s.graph_prepare(S1).expect("prepare");
    f.begin(S0);
    let sliced = sliced_in_use(&mut f.s);
    let a = upload(&mut f.s, u32_bytes(&[1; 1024]), S1);
    assert_eq!(
        persistent_pool(&mut f.s).expect("listed").bytes_in_use,
        persistent_before + 4096,
        "the prepared stream allocates persistently"
    );
    assert_eq!(sliced_in_use(&mut f.s), sliced);
    let b = upload(&mut f.s, u32_bytes(&[2; 1024]), S2);
    let c = upload(&mut f.s, u32_bytes(&[3; 1024]), S0);
    assert_eq!(
        sliced_in_use(&mut f.s),
        sliced + 2 * 4096,
        "other streams stay sliced"
    );
    assert_eq!(
        persistent_pool(&mut f.s).expect("listed").bytes_in_use,
        persistent_before + 4096
    );
    launch(&mut f.s, inc_kernel(), CubeCount::x(16), &[&a], S1);
    launch(&mut f.s, inc_kernel(), CubeCount::x(16), &[&b], S2);
    launch(&mut f.s, inc_kernel(), CubeCount::x(16), &[&c], S0);
    f.end();
    assert_eq!(
        bytes_u32(&read(&mut f.s, &a, S1).expect("a")),
        vec![2; 1024]
    );
    assert_eq!(
        bytes_u32(&read(&mut f.s, &b, S2).expect("b")),
        vec![3; 1024]
    );
    assert_eq!(
        bytes_u32(&read(&mut f.s, &c, S0).expect("c")),
        vec![4; 1024]
    );
    // The stream goes back to the device's mode after its capture.
    f.s.begin_capture(S1).expect("begin");
    f.s.end_capture(S1).expect("end");
    let d = upload(&mut f.s, u32_bytes(&[4; 1024]), S1);
    assert_eq!(sliced_in_use(&mut f.s), sliced + 3 * 4096);
    drop((a, d));
    sync(&mut f.s, S1).expect("sync");
    // Kept while the device allocates persistently...
    f.s.allocation_mode(MemoryAllocationMode::Persistent, S0);
    f.s.memory_cleanup(S0).expect("cleanup");
    let kept = persistent_pool(&mut f.s).expect("listed");
    assert_eq!(kept.bytes_in_use, persistent_before);
    assert!(kept.bytes_reserved >= 4096, "{kept:?}");
    // ...given back by a cleanup in Auto mode.
    f.s.allocation_mode(MemoryAllocationMode::Auto, S0);
    f.s.memory_cleanup(S0).expect("cleanup");
    let freed = persistent_pool(&mut f.s).map_or(0, |p| p.bytes_reserved);
    assert_eq!(freed, 0, "persistent pages kept after an Auto cleanup");
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}
