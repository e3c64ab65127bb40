//! `sync` measures the GPU time it completes when the sync log is on. Its
//! own test binary: it sets `COMPUTE_LOG` before any thread reads it.

// The GPU tests' helpers; this binary uses a few of them.
#[path = "gpu/common.rs"]
#[allow(dead_code, unused_imports)]
mod common;

use common::*;
use compute_runtime::{CubeCount, TimingMethod};

#[test]
fn sync_reports_the_gpu_time_it_completed() {
    // SAFETY: the only test of this binary; no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var("COMPUTE_LOG", "sync=basic") };
    let mut s = server();
    let inside_encoders = s
        .device()
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    let h = upload(&mut s, u32_bytes(&[0; 1 << 16]), S0);
    sync(&mut s, S0).expect("sync");
    if s.timing_method() != TimingMethod::Device || !inside_encoders {
        assert_eq!(s.last_sync_gpu_time(), None);
        eprintln!("no timestamps inside encoders: only the off path is tested");
        return;
    }
    let started = std::time::Instant::now();
    for _ in 0..50 {
        launch(&mut s, inc_kernel(), CubeCount::x(1024), &[&h], S0);
    }
    sync(&mut s, S0).expect("sync");
    let wall = started.elapsed();
    let gpu = s.last_sync_gpu_time().expect("measured");
    eprintln!("50 launches: GPU {gpu:?}, wall {wall:?}");
    assert!(
        gpu > std::time::Duration::ZERO,
        "no GPU time for 50 launches"
    );
    assert!(
        gpu <= wall,
        "GPU {gpu:?} longer than the wall {wall:?} it ran in"
    );
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("read")),
        vec![50; 1 << 16]
    );
}
