//! The bridge's own behaviour, beside cubecl's suites: what it absorbs
//! between cubecl's contract and the server's.

use cubecl_bridge::BridgeRuntime;
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
