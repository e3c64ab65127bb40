//! Reads (and, when asked, writes) through host memory imported into the
//! device (`VK_EXT_external_memory_host`, which lavapipe has too): the path
//! a server takes is the one it reports, both paths give the same bytes,
//! blocks are pooled, and a read's bytes outlive their server.
//!
//! Every other test of this binary reads through the imported path where
//! the adapter has it (the default), so the trust, ordering and chunk
//! suites run on it as well.

use compute_runtime::{Handle, HostTransfers, Server};
use futures::executor::block_on;

use crate::common::*;

fn mapped_server() -> TestServer {
    match TestServer::options().imported_host_memory(false).open() {
        Ok(s) => s,
        Err(e) => panic!("no adapter for tests: {e}"),
    }
}

/// The default server, if it imports host memory for reads; `None` (with
/// a message) on adapters that cannot.
fn importing_server() -> Option<TestServer> {
    imports(server())
}

/// A server asked to import host memory for writes too, if it can.
fn importing_writes_server() -> Option<TestServer> {
    match TestServer::options().imported_host_memory(true).open() {
        Ok(s) => imports(s),
        Err(e) => panic!("no adapter for tests: {e}"),
    }
}

fn imports(s: TestServer) -> Option<TestServer> {
    match s.utilities().host_transfers {
        HostTransfers::Imported { .. } => Some(s),
        HostTransfers::Mapped => {
            eprintln!(
                "skipped: {} does not import host memory",
                s.utilities().adapter.name
            );
            None
        }
    }
}

#[test]
fn a_server_reports_the_path_it_reads_through() {
    let s = server();
    let vulkan = s.utilities().adapter.backend == "Vulkan";
    match s.utilities().host_transfers {
        HostTransfers::Imported { alignment } => {
            assert!(vulkan, "only Vulkan imports host memory");
            assert!(
                alignment >= 4096 && alignment.is_power_of_two(),
                "{alignment}"
            );
        }
        HostTransfers::Mapped => eprintln!(
            "{} reads through mapped buffers",
            s.utilities().adapter.name
        ),
    }
    let mapped = mapped_server();
    assert_eq!(mapped.utilities().host_transfers, HostTransfers::Mapped);
    assert_eq!(mapped.imported_host_blocks(), 0);
}

#[test]
fn both_paths_read_the_same_bytes() {
    let Some(mut imported) = importing_server() else {
        return;
    };
    let mut mapped = mapped_server();
    let len = (3 << 20) + 7;
    let data: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
    let hi = upload(&mut imported, data.clone(), S0);
    let hm = upload(&mut mapped, data.clone(), S0);
    for (start, end) in [(0, len), (1, 2), (3, 4099), (4096, 8192), (len - 5, len)] {
        let part = |h: &Handle| Handle {
            offset: start as u64,
            size: (end - start) as u64,
            ..h.clone()
        };
        let a = read(&mut imported, &part(&hi), S0).expect("imported read");
        let b = read(&mut mapped, &part(&hm), S0).expect("mapped read");
        assert!(a[..] == data[start..end], "imported {start}..{end}");
        assert!(b[..] == data[start..end], "mapped {start}..{end}");
    }
    assert!(imported.imported_host_blocks() > 0);
}

#[test]
fn blocks_come_back_to_the_pool_when_their_bytes_drop() {
    let Some(mut s) = importing_server() else {
        return;
    };
    let h = upload(&mut s, vec![7u8; 1 << 16], S0);
    for _ in 0..20 {
        let b = read(&mut s, &h, S0).expect("read");
        assert!(b.iter().all(|&x| x == 7));
    }
    assert_eq!(s.imported_host_blocks(), 1, "one block, reused");
    // Bytes held keep their block: the next read takes another.
    let held = read(&mut s, &h, S0).expect("read");
    let again = read(&mut s, &h, S0).expect("read");
    assert_eq!(s.imported_host_blocks(), 2);
    assert!(held == again);
}

#[test]
fn reads_in_flight_together_each_land_in_their_own_block() {
    let Some(mut s) = importing_server() else {
        return;
    };
    let handles: Vec<Handle> = (0..8u8)
        .map(|i| upload(&mut s, vec![i; 40_000 + usize::from(i)], S0))
        .collect();
    // Every read submitted before any is awaited.
    let futures: Vec<_> = handles
        .iter()
        .map(|h| s.read(vec![h.copy_descriptor()], S0))
        .collect();
    for (i, f) in futures.into_iter().enumerate() {
        let bytes = block_on(f).expect("read").remove(0);
        assert_eq!(bytes.len(), 40_000 + i);
        assert!(bytes.iter().all(|&x| usize::from(x) == i), "read {i}");
    }
}

#[test]
fn bytes_outlive_their_server() {
    let Some(mut s) = importing_server() else {
        return;
    };
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
    let h = upload(&mut s, data.clone(), S0);
    let bytes = read(&mut s, &h, S0).expect("read");
    drop(h);
    drop(s);
    assert!(
        bytes[..] == data[..],
        "the block lives as long as its bytes"
    );
    // A new server on the (pooled) device reads as before.
    let mut s = server();
    let h = upload(&mut s, data.clone(), S0);
    assert!(read(&mut s, &h, S0).expect("read")[..] == data[..]);
    drop(bytes);
}

/// A destroyed device releases its buffers at once; bytes a read still
/// holds stay valid (their block owns the allocation too), and a read in
/// flight then gives its bytes or `DeviceLost`, never a block's stale ones.
#[test]
fn bytes_held_across_a_destroyed_device_stay_valid() {
    let Some(mut s) = importing_server() else {
        return;
    };
    let data: Vec<u8> = (0..65_536u32).map(|i| (i % 239) as u8).collect();
    let h = upload(&mut s, data.clone(), S0);
    let held = read(&mut s, &h, S0).expect("read");
    // Leave the block in the pool holding the same bytes: a read that
    // handed it back unrun would look right, so write new ones first.
    let other = read(&mut s, &h, S0).expect("read");
    drop(other);
    s.write(
        vec![(h.copy_descriptor(), vec![9u8; data.len()].into())],
        S0,
    );
    let pending = s.read(vec![h.copy_descriptor()], S0);
    s.device().destroy();
    match block_on(pending) {
        Ok(b) => assert!(b[0].iter().all(|&x| x == 9), "the written bytes"),
        Err(e) => assert!(e.is_device_lost(), "{e}"),
    }
    assert!(
        held[..] == data[..],
        "held bytes outlive the device's buffers"
    );
}

/// Writes of a megabyte or more are copied from imported host memory
/// where the server was asked to (`imported_host_memory(true)`): the same
/// bytes as the mapped path, padding included, for aligned and unaligned
/// lengths.
#[test]
fn large_writes_land_the_same_through_both_paths() {
    let Some(mut imported) = importing_writes_server() else {
        return;
    };
    let mut mapped = mapped_server();
    for len in [1 << 20, (3 << 20) + 3, (5 << 20) + 8] {
        let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
        for s in [&mut imported, &mut mapped] {
            let h = alloc(s, len as u64, S0);
            s.write(vec![(h.copy_descriptor(), data.clone().into())], S0);
            let got = read(s, &h, S0).expect("read back");
            assert!(got[..] == data[..], "{len} bytes");
        }
    }
}

/// By default writes go through mapped staging (faster on an H100), reads
/// through imported memory: a large write takes no imported block.
#[test]
fn by_default_large_writes_take_no_imported_block() {
    let Some(mut s) = importing_server() else {
        return;
    };
    let h = alloc(&mut s, 2 << 20, S0);
    s.write(vec![(h.copy_descriptor(), vec![7; 2 << 20].into())], S0);
    sync(&mut s, S0).expect("sync");
    assert_eq!(s.imported_host_blocks(), 0);
    let got = read(&mut s, &h, S0).expect("read");
    assert!(got.iter().all(|&x| x == 7));
    assert_eq!(s.imported_host_blocks(), 1, "the read's block");
}

#[test]
fn a_loop_of_large_writes_reuses_its_blocks() {
    let Some(mut s) = importing_writes_server() else {
        return;
    };
    let h = alloc(&mut s, 2 << 20, S0);
    for i in 0..12u8 {
        s.write(vec![(h.copy_descriptor(), vec![i; 2 << 20].into())], S0);
        sync(&mut s, S0).expect("sync");
    }
    let got = read(&mut s, &h, S0).expect("read");
    assert!(got.iter().all(|&x| x == 11));
    // Written blocks come back once their copies ran (each sync waits for
    // them); the read takes one of its own class.
    assert!(
        s.imported_host_blocks() <= 3,
        "{} blocks for 12 writes and a read",
        s.imported_host_blocks()
    );
}
