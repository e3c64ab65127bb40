//! The GL fallback with several servers of its one adapter at work at
//! once, each with its poller thread. wgpu-hal's GL adapters share their
//! instance's one EGL context, each behind a lock of its own: servers
//! whose devices came from separate enumerations of the adapter made the
//! context current on two threads at once, and wgpu-hal panicked on the
//! poller thread (`device/adapter.rs`, `enumerated`). Its own test binary:
//! it sets `WGPU_BACKEND=gl` before any instance exists. Skipped, with a
//! message, where no GL adapter is found.

// The GPU tests' helpers; this binary uses a few of them.
#[path = "gpu/common.rs"]
#[allow(dead_code, unused_imports)]
mod common;

use common::*;
use compute_runtime::{CubeCount, DeviceId, Server};

#[test]
fn several_servers_of_the_gl_fallback_work_at_once() {
    // SAFETY: the only test of this binary; no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var("WGPU_BACKEND", "gl") };
    let open = |id: u64| {
        TestServer::options()
            .device_id(DeviceId(id))
            .adapter(0)
            .open()
    };
    let first = match open(0) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: no GL adapter: {e}");
            return;
        }
    };
    assert_eq!(first.utilities().adapter.backend, "Gl");
    drop(first);
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut s = open(t).expect("a server of the GL adapter");
                for round in 0..20u32 {
                    let h = upload(&mut s, u32_bytes(&[round; 4096]), S0);
                    launch(&mut s, inc_kernel(), CubeCount::x(64), &[&h], S0);
                    let got = bytes_u32(&read(&mut s, &h, S0).expect("read"));
                    assert_eq!(got, vec![round + 1; 4096], "server {t}, round {round}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a server thread panicked");
    }
}
