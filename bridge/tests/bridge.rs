//! The bridge's own behaviour, beside cubecl's suites: what it absorbs
//! between cubecl's contract and the server's.

use cubecl_bridge::BridgeRuntime;
use cubecl_environment::future::block_on;
use cubecl_runtime::memory_management::MemoryScope;
use cubecl_runtime::runtime::Runtime;

/// Bytes in use on the device, by the server's report.
fn in_use(client: &cubecl_runtime::client::Client) -> u64 {
    client
        .memory_report(MemoryScope::CurrentStream)
        .streams
        .iter()
        .map(|s| {
            s.pools
                .dynamic
                .iter()
                .map(|p| p.usage.bytes_in_use)
                .sum::<u64>()
        })
        .sum()
}

#[test]
fn allocations_cubecl_drops_are_freed_on_the_server() {
    let client = BridgeRuntime::client(&Default::default());
    let handles: Vec<_> = (0..100).map(|_| client.empty(1 << 20)).collect();
    let held = in_use(&client);
    // Device-wide (the server's streams share one memory manager), so
    // other tests' buffers may count too: bounds, not exact figures.
    assert!(held >= 100 * (1 << 20), "{held} in use with 100 MiB held");
    drop(handles);
    client.memory_cleanup().expect("cleanup");
    // The sweep runs at cleanup; the server frees at its next call.
    let _ = client.empty(4);
    let after = in_use(&client);
    assert!(
        after < held / 2,
        "{held} in use with the handles, {after} after dropping them"
    );
}

#[test]
fn a_zero_byte_allocation_reads_as_empty() {
    let client = BridgeRuntime::client(&Default::default());
    let empty = client.empty(0);
    assert!(client.read_one(empty).expect("an empty read").is_empty());
    let data = client.create_from_slice(&[1, 2, 3]);
    assert_eq!(&*client.read_one(data).expect("a 3-byte read"), &[1, 2, 3]);
}

/// cubecl's autotune opens at-launch windows on every device; on one
/// without timestamp queries (burn's data-parallel ranks open such
/// devices) the window is timed by the host instead of refused, which
/// made autotune panic.
#[test]
fn an_at_launch_window_on_a_device_without_timestamps_is_timed_by_the_host() {
    use cubecl_common::device::Device;
    use cubecl_runtime::server::Server;
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter = block_on(instance.request_adapter(&Default::default())).expect("an adapter");
    let (device, queue) =
        block_on(adapter.request_device(&Default::default())).expect("a device without features");
    assert!(!device.features().contains(wgpu::Features::TIMESTAMP_QUERY));
    let id = cubecl_runtime::device::WgpuDevice::default().to_id();
    let mut server = cubecl_bridge::BridgeServer::from_parts(
        id,
        &adapter,
        device,
        queue,
        wgpu_server::WgpuServerOptions::new(),
    )
    .expect("a server");
    let stream = cubecl_environment::stream::StreamId::current();
    let token = server
        .start_profile_at_launch(stream)
        .expect("a host-timed window");
    let duration = server
        .end_profile(stream, token)
        .expect("the window closes");
    assert!(block_on(duration.resolve()).is_some(), "a measurement");
}
