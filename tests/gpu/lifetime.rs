//! The driver stays loaded for the life of the process.
//!
//! Root cause of the H200 crash (issue 19): dropping the last `wgpu::Instance`
//! made the Vulkan loader `dlclose` the driver. NVIDIA's (580.159.04) leaves
//! a thread-exit destructor (a pthread key of `libnvidia-glcore`) pointing
//! into the unloaded code, so the next thread that had used the driver
//! jumped into unmapped memory when it exited: SIGSEGV in glibc's
//! `start_thread` epilogue, on the test thread, after the test body
//! returned. The server now keeps one instance per backend set for the
//! life of the process (`wgpu_server::adapter::instance`).
//!
//! lavapipe has no such destructor, so the crash itself cannot show here;
//! what can is its precondition: a shared object that a server's thread
//! loaded is still mapped after every server is gone and the thread ended.

use std::collections::BTreeSet;

use crate::common::*;

/// The shared objects mapped into this process now.
fn mapped_objects() -> BTreeSet<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|path| path.contains(".so"))
        .map(str::to_owned)
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn dropping_every_server_unloads_no_driver() {
    // A thread of its own that opens a server, runs a kernel and reads,
    // drops it and ends: as a test thread does.
    let loaded = std::thread::spawn(|| {
        let mut s = server();
        let x = upload(&mut s, u32_bytes(&[1, 2, 3]), S0);
        launch(
            &mut s,
            inc_kernel(),
            compute_runtime::CubeCount::x(1),
            &[&x],
            S0,
        );
        assert_eq!(bytes_u32(&read(&mut s, &x, S0).expect("read")), [2, 3, 4]);
        let loaded = mapped_objects();
        drop(s);
        loaded
    })
    .join()
    .expect("the server's thread");
    let now = mapped_objects();
    let unloaded: Vec<&String> = loaded.difference(&now).collect();
    assert!(
        unloaded.is_empty(),
        "dropping the server unloaded {unloaded:?}: a driver that left a thread-exit destructor \
         behind (NVIDIA's does) crashes the next thread that ends"
    );
}
