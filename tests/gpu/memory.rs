//! Memory through the real server: the pooled manager against a model,
//! reports, cleanup, allocation modes, staging, and bad input.

use crate::common::*;
use compute_runtime::{
    Bytes, ManagedMemoryHandle, MemoryAllocationMode, MemoryConfiguration, MemoryPoolOptions,
    PoolKind, Server, ServerError, StreamId,
};
use proptest::prelude::*;

fn with_config(config: MemoryConfiguration) -> TestServer {
    wgpu_server::WgpuServerOptions::new()
        .memory(config)
        .open()
        .expect("server")
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

proptest! {
    #![proptest_config(proptest_config(12))]

    /// Random reserve / free / write / read over mixed sizes (256 B .. 8 MiB
    /// here; the CPU-storage model in compute-memory covers up to 64 MiB):
    /// every read returns exactly what was written to that handle, on
    /// whatever stream, and reserved bytes stay bounded.
    #[test]
    fn random_memory_traffic_reads_back_what_was_written(
        ops in prop::collection::vec((0u8..4, 8u32..23, 0u64..3), 1..60)
    ) {
        let mut s = server();
        let mut live: Vec<(compute_runtime::Handle, Vec<u8>)> = Vec::new();
        let mut peak_live = 0u64;
        for (i, (kind, log_size, stream)) in ops.into_iter().enumerate() {
            let stream = StreamId(stream);
            match kind {
                0 | 1 => {
                    // 256 B .. 8 MiB, 4-byte multiples.
                    let size = ((1usize << log_size) + i * 4).min(8 << 20);
                    let data = pattern(i as u32, size);
                    let h = upload(&mut s, Bytes::from(data.clone()), stream);
                    live.push((h, data));
                }
                2 if !live.is_empty() => {
                    let (h, _) = live.remove(i % live.len());
                    drop(h);
                }
                _ if !live.is_empty() => {
                    let (h, data) = &live[i % live.len()];
                    let got = read(&mut s, h, stream).expect("read");
                    prop_assert_eq!(got.as_ref(), &data[..]);
                }
                _ => {}
            }
            peak_live = peak_live.max(live.iter().map(|(_, d)| d.len() as u64).sum());
        }
        for (h, data) in &live {
            let got = read(&mut s, h, StreamId(7)).expect("final read");
            prop_assert_eq!(got.as_ref(), &data[..]);
        }
        let report = s.memory_report(S0).expect("report");
        // Pages are at most 128 MiB here; a bound that catches a leak.
        prop_assert!(report.bytes_reserved() <= 2 * peak_live + 3 * (128 << 20));
    }
}

#[test]
fn report_lists_pools_in_routing_order_and_cleanup_releases_empty_pages() {
    let mut s = server();
    let before = s.memory_report(S0).expect("report");
    assert!(before.pools.len() >= 2, "{before:?}");
    assert!(matches!(before.pools[0].kind, PoolKind::Sliced { .. }));
    let handles: Vec<_> = (0..8).map(|_| alloc(&mut s, 1 << 20, S0)).collect();
    let mid = s.memory_report(S0).expect("report");
    assert_eq!(mid.bytes_in_use(), 8 << 20);
    assert!(mid.bytes_reserved() >= 8 << 20);
    let peak = mid.pools.iter().map(|p| p.peak_bytes_in_use).sum::<u64>();
    assert_eq!(peak, 8 << 20);
    drop(handles);
    s.memory_cleanup(S0).expect("cleanup");
    let after = s.memory_report(S0).expect("report");
    assert_eq!(after.bytes_in_use(), 0);
    assert_eq!(after.bytes_reserved(), 0, "{after:?}");
    assert_eq!(
        after.pools.iter().map(|p| p.peak_bytes_in_use).sum::<u64>(),
        8 << 20,
        "peaks survive cleanup"
    );
}

#[test]
fn a_slice_freed_by_one_stream_serves_another() {
    let mut s = server();
    let a = upload(&mut s, u32_bytes(&[1; 1024]), StreamId(1));
    let reserved = s.memory_report(S0).expect("report").bytes_reserved();
    launch(
        &mut s,
        inc_kernel(),
        compute_runtime::CubeCount::x(16),
        &[&a],
        StreamId(1),
    );
    drop(a);
    let b = upload(&mut s, u32_bytes(&[5; 1024]), StreamId(2));
    assert_eq!(
        s.memory_report(S0).expect("report").bytes_reserved(),
        reserved,
        "reused, not grown"
    );
    assert_eq!(
        bytes_u32(&read(&mut s, &b, StreamId(2)).expect("read")),
        vec![5; 1024]
    );
}

#[test]
fn persistent_mode_routes_to_the_persistent_pool() {
    let mut s = server();
    s.allocation_mode(MemoryAllocationMode::Persistent, S0);
    let h = alloc(&mut s, 4096, S0);
    let r = s.memory_report(S0).expect("report");
    let persistent = r
        .pools
        .iter()
        .find(|p| p.kind == PoolKind::Persistent)
        .expect("persistent pool listed");
    assert_eq!(persistent.bytes_in_use, 4096);
    drop(h);
    s.allocation_mode(MemoryAllocationMode::Auto, S0);
    let h = alloc(&mut s, 4096, S0);
    let r = s.memory_report(S0).expect("report");
    assert_eq!(
        r.pools[0].bytes_in_use, 4096,
        "auto mode uses the sliced pool"
    );
    drop(h);
}

#[test]
fn out_of_memory_is_precise_and_cleanup_makes_room_again() {
    let pools = vec![MemoryPoolOptions {
        kind: PoolKind::Exclusive { max_slice: 1 << 20 },
        max_reserved: Some(2 << 20),
    }];
    let mut s = with_config(MemoryConfiguration::Custom(pools));
    let bystander = upload(&mut s, u32_bytes(&[3; 256]), S0);
    let big = alloc(&mut s, 1 << 20, S0);
    let m = ManagedMemoryHandle::new();
    let err = s
        .initialize_memory(m.clone(), 1 << 20, S0)
        .expect_err("cap");
    assert!(matches!(err, ServerError::OutOfMemory { .. }), "{err}");
    // Larger than every pool: over the largest reservation, the limit
    // `staging` has too.
    let err = s
        .initialize_memory(ManagedMemoryHandle::new(), 2 << 20, S0)
        .expect_err("too big for any pool");
    assert!(
        matches!(err, ServerError::LimitExceeded { max, .. } if max == 1 << 20),
        "{err}"
    );
    // The server keeps serving.
    assert_eq!(
        bytes_u32(&read(&mut s, &bystander, S0).expect("read")),
        vec![3; 256]
    );
    drop(big);
    s.memory_cleanup(S0).expect("cleanup");
    s.initialize_memory(m, 1 << 20, S0)
        .expect("the same request succeeds after cleanup");
}

#[test]
fn invalid_configurations_are_an_error_at_construction() {
    let pools = vec![MemoryPoolOptions {
        kind: PoolKind::Sliced {
            page_size: 1 << 20,
            max_slice: 2 << 20,
        },
        max_reserved: None,
    }];
    let err = wgpu_server::WgpuServerOptions::new()
        .memory(MemoryConfiguration::Custom(pools))
        .open::<wgpu_server::WgslPassthrough>()
        .expect_err("max slice over page");
    assert!(
        matches!(err, ServerError::InvalidConfiguration { .. }),
        "{err}"
    );
}

#[test]
fn staging_buffers_are_filled_written_and_reused_without_allocating() {
    let mut s = server();
    let h = alloc(&mut s, 1 << 20, S0);
    for round in 0..5u8 {
        let staged = s.staging(&[1 << 20], S0).expect("staging").remove(0);
        let mut fill = staged.try_into_mut().expect("staging bytes are fillable");
        fill.fill(round);
        s.write(vec![(h.copy_descriptor(), fill.freeze())], S0);
        let got = read(&mut s, &h, S0).expect("read");
        assert!(got.iter().all(|b| *b == round));
    }
    assert_eq!(s.staging_allocations(), 1, "one allocation, then reuse");
    let max = s.device().limits().max_buffer_size as usize;
    assert!(matches!(
        s.staging(&[max + 1], S0),
        Err(ServerError::LimitExceeded { .. })
    ));
}

/// `staging` and `initialize_memory` take the same largest size: the
/// largest reservation the memory manager serves (here a pool's max slice,
/// under the device's `max_buffer_size`), and refuse one byte more with the
/// same error; on a prepared stream (persistent pages) the device's limit.
#[test]
fn staging_and_initialize_memory_agree_on_the_largest_size() {
    const LIMIT: u64 = 1 << 20;
    let mut s = with_config(MemoryConfiguration::Custom(vec![MemoryPoolOptions {
        kind: PoolKind::Exclusive { max_slice: LIMIT },
        max_reserved: None,
    }]));
    let staged = s
        .staging(&[LIMIT as usize], S0)
        .expect("staging at the limit");
    assert_eq!(staged[0].len() as u64, LIMIT);
    alloc(&mut s, LIMIT, S0);
    let Err(staging) = s.staging(&[LIMIT as usize + 1], S0) else {
        panic!("staging over the limit accepted");
    };
    let reserving = s
        .initialize_memory(ManagedMemoryHandle::new(), LIMIT + 1, S0)
        .expect_err("initialize_memory over");
    assert_eq!(staging, reserving);
    assert!(
        matches!(staging, ServerError::LimitExceeded { requested, max, .. }
            if requested == LIMIT + 1 && max == LIMIT),
        "{staging}"
    );
    // A prepared stream allocates persistent pages: up to the device's
    // limit, in whole words, for both.
    let prepared = StreamId(3);
    s.graph_prepare(prepared).expect("prepare");
    let max = s.device().limits().max_buffer_size;
    let max = max - max % 4;
    let Err(staging) = s.staging(&[max as usize + 1], prepared) else {
        panic!("staging over the device's limit accepted");
    };
    let reserving = s
        .initialize_memory(ManagedMemoryHandle::new(), max + 1, prepared)
        .expect_err("initialize_memory over");
    assert_eq!(staging, reserving);
    assert!(
        matches!(staging, ServerError::LimitExceeded { max: m, .. } if m == max),
        "{staging}"
    );
}

/// Small writes share a mapped upload arena until the next submit: more
/// than one arena's worth (1 MiB) of odd-sized writes, some to the same
/// slice as a large write before or after them, read back as the last
/// write in program order left them.
#[test]
fn small_writes_through_the_upload_arena_land_in_program_order() {
    let mut s = server();
    let slices: Vec<_> = (0..300u32)
        .map(|i| {
            let len = 4093 + (i as usize % 7);
            (upload(&mut s, pattern(i, len), S0), len)
        })
        .collect();
    // A large write (the mapped upload path) then small ones over it, and
    // small ones then a large one: the last in program order wins.
    let big = 2 << 20;
    let a = upload(&mut s, pattern(1000, big), S0);
    s.write(
        vec![(a.copy_descriptor(), Bytes::from(pattern(1001, big)))],
        S0,
    );
    let b = upload(&mut s, pattern(2000, big), S0);
    let small = alloc(&mut s, 64, S0);
    s.write(
        vec![(small.copy_descriptor(), Bytes::from(pattern(3000, 64)))],
        S0,
    );
    s.write(
        vec![(small.copy_descriptor(), Bytes::from(pattern(3001, 64)))],
        S0,
    );
    for (i, (h, len)) in slices.iter().enumerate() {
        let got = read(&mut s, h, S0).expect("read");
        assert_eq!(&got[..], &pattern(i as u32, *len)[..], "slice {i}");
    }
    assert_eq!(
        &read(&mut s, &a, S0).expect("a")[..],
        &pattern(1001, big)[..]
    );
    assert_eq!(
        &read(&mut s, &b, S0).expect("b")[..],
        &pattern(2000, big)[..]
    );
    assert_eq!(
        &read(&mut s, &small, S0).expect("small")[..],
        &pattern(3001, 64)[..]
    );
}
