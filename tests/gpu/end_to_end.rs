//! End to end on the real adapter: memory, transfers, launches, sync.

use crate::common::*;
use compute_runtime::{CubeCount, Server, ServerStorage, StreamId};

#[test]
fn write_read_roundtrip_exact_bytes() {
    let mut s = server();
    for len in [1usize, 3, 4, 5, 255, 256, 4096, 100_003] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let h = upload(&mut s, data.clone(), S0);
        assert_eq!(
            read(&mut s, &h, S0).expect("read").as_ref(),
            &data[..],
            "len {len}"
        );
    }
}

#[test]
fn add_kernel_matches_host() {
    let mut s = server();
    let n = 10_000;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 + 1.0).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 17) as f32 - 3.25).collect();
    let ha = upload(&mut s, f32_bytes(&a), S0);
    let hb = upload(&mut s, f32_bytes(&b), S0);
    let hc = alloc(&mut s, (n * 4) as u64, S0);
    launch(
        &mut s,
        add_kernel(),
        CubeCount::x((n as u32).div_ceil(64)),
        &[&ha, &hb, &hc],
        S0,
    );
    let c = bytes_f32(&read(&mut s, &hc, S0).expect("read"));
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(c, expected);
    sync(&mut s, S0).expect("sync");
}

#[test]
fn repeated_launches_reuse_pipeline_and_accumulate() {
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[0; 1000]), S0);
    for _ in 0..100 {
        launch(&mut s, inc_kernel(), CubeCount::x(16), &[&h], S0);
    }
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("read")),
        vec![100; 1000]
    );
    assert_eq!(s.cached_pipelines(), 1);
    s.flush(S0).expect("flush");
}

#[test]
fn streams_are_listed_and_ordered_across_each_other() {
    let mut s = server();
    let a = StreamId(7);
    let b = StreamId(1 << 40);
    let h = upload(&mut s, u32_bytes(&[5; 64]), a);
    launch(&mut s, inc_kernel(), CubeCount::x(1), &[&h], a);
    // Stream b reads what stream a wrote, with a's launch still pending.
    launch(&mut s, inc_kernel(), CubeCount::x(1), &[&h], b);
    assert_eq!(bytes_u32(&read(&mut s, &h, b).expect("read")), vec![7; 64]);
    let ids = s.stream_ids();
    assert!(ids.contains(&a) && ids.contains(&b), "{ids:?}");
}

#[test]
fn freed_memory_is_reused_without_corrupting_pending_work() {
    let mut s = server();
    let keep = upload(&mut s, u32_bytes(&[1; 256]), S0);
    for round in 0..20u32 {
        let tmp = upload(
            &mut s,
            u32_bytes(&[round; 256]),
            StreamId(u64::from(round % 3)),
        );
        launch(
            &mut s,
            inc_kernel(),
            CubeCount::x(4),
            &[&tmp],
            StreamId(u64::from(round % 3)),
        );
        drop(tmp);
    }
    launch(&mut s, inc_kernel(), CubeCount::x(4), &[&keep], S0);
    assert_eq!(
        bytes_u32(&read(&mut s, &keep, S0).expect("read")),
        vec![2; 256]
    );
}

#[test]
fn get_resource_returns_the_buffer_range() {
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[9; 16]), S0);
    let r = s.get_resource(h.binding(), S0).expect("resource");
    assert_eq!(r.resource.size, 64);
    assert!(r.resource.buffer.size() >= r.resource.offset + 64);
    assert!(s.get_resource(h.binding(), StreamId(3)).is_ok());
}

#[test]
fn logger_and_utilities_describe_the_device() {
    let s = server();
    let u = Server::utilities(&s);
    assert!(!u.adapter.name.is_empty());
    assert!(u.memory.alignment >= 4);
    assert!(u.max_workgroups_per_dimension > 0);
    let _ = s.logger();
}

#[test]
fn client_from_any_thread() {
    use compute_runtime::client::ComputeClient;
    let client = ComputeClient::new(compute_runtime::DeviceId(0), server());
    let handles: Vec<_> = (0..4u32)
        .map(|t| {
            let c = client.with_stream(StreamId(u64::from(t)));
            std::thread::spawn(move || {
                let h = c.create(u32_bytes(&[t; 128])).expect("create");
                let out = c.read_one(&h).expect("read");
                assert_eq!(bytes_u32(&out), vec![t; 128]);
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
}

#[test]
fn a_kernel_can_choose_unchecked_accesses_for_itself() {
    use wgpu_server::BoundsChecks;
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[1; 256]), S0);
    let checked = inc_kernel();
    let unchecked = inc_kernel().with_bounds_checks(BoundsChecks::Unchecked);
    assert_ne!(
        compute_runtime::CubeKernel::id(&checked),
        compute_runtime::CubeKernel::id(&unchecked),
        "the policy is part of the kernel's identity"
    );
    launch(&mut s, checked, CubeCount::x(4), &[&h], S0);
    launch(&mut s, unchecked, CubeCount::x(4), &[&h], S0);
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("read")),
        vec![3; 256]
    );
    assert_eq!(s.cached_pipelines(), 2);
}
