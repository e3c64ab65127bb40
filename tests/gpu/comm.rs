//! The client's `Communicator`: ranks as indices, element types from typed
//! handles, the server's timeout option; refusals at the call (their
//! effect on the other ranks: `collective/refused.rs`).

use std::time::Duration;

use wgpu_server::prelude::*;

fn clients(devices: &[DeviceId]) -> Vec<DefaultClient> {
    devices
        .iter()
        .map(|d| {
            WgpuServerOptions::new()
                .device_id(*d)
                .adapter(0)
                .client()
                .expect("adapter")
        })
        .collect()
}

#[test]
fn a_reduction_over_an_untyped_buffer_is_refused_at_the_call() {
    let devices = [DeviceId(80), DeviceId(81)];
    let c = clients(&devices);
    let comm = c[0].communicator(&devices).expect("join");
    let raw = c[0].create(vec![0u8; 16]).expect("untyped");
    let e = comm
        .all_reduce(&raw, ReduceOp::Sum)
        .expect_err("no element type");
    assert!(matches!(e, ServerError::InvalidArgument { .. }), "{e}");
    // The refusal took the call's place for rank 1 (whose call would fail,
    // naming rank 0); here the stream has nothing to report, and the bytes
    // are untouched and trusted.
    c[0].check(&[&raw]).expect("untouched");
}

#[test]
fn a_device_outside_the_list_cannot_join() {
    let devices = [DeviceId(82), DeviceId(83)];
    let outsider = WgpuServerOptions::new()
        .device_id(DeviceId(84))
        .adapter(0)
        .client()
        .expect("adapter");
    let e = outsider.communicator(&devices).expect_err("not a member");
    assert!(matches!(e, ServerError::InvalidArgument { .. }), "{e}");
}

#[test]
fn reduce_scatter_and_all_gather_take_the_handles_types() {
    let devices = [DeviceId(85), DeviceId(86), DeviceId(87)];
    let c = clients(&devices);
    let mut out = Vec::new();
    for (rank, c) in c.iter().enumerate() {
        let comm = c.communicator(&devices).expect("join");
        let src = c.create_from_slice(&[rank as i32 + 1; 6]).expect("src");
        let chunk = c.empty_of::<i32>(2).expect("chunk");
        let all = c.empty_of::<i32>(6).expect("all");
        comm.reduce_scatter(&src, &chunk, ReduceOp::Max)
            .expect("reduce_scatter");
        comm.all_gather(&chunk, &all).expect("all_gather");
        out.push(all);
    }
    for (c, all) in c.iter().zip(&out) {
        assert_eq!(c.read_vec::<i32>(all).expect("read"), [3; 6]);
    }
}

/// The timeout is the server's option: a peer that never joins fails the
/// call after it, on the ranks that posted.
#[test]
fn the_collective_timeout_is_an_option_of_the_server() {
    let devices = [DeviceId(88), DeviceId(89)];
    let c = WgpuServerOptions::new()
        .device_id(devices[0])
        .adapter(0)
        .collective_timeout(Duration::from_millis(100))
        .client()
        .expect("adapter");
    let comm = c.communicator(&devices).expect("join");
    let x = c.create_from_slice(&[1.0f32; 4]).expect("x");
    comm.all_reduce(&x, ReduceOp::Sum).expect("posted");
    let e = c.read_vec::<f32>(&x).expect_err("rank 1 never joined");
    assert!(
        matches!(e.root_cause(), ServerError::CollectiveTimeout { .. }),
        "{e}"
    );
}
