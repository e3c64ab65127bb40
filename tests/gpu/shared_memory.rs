//! Device memory shared between devices of one GPU (opaque fds, which
//! lavapipe exports too): bytes one device writes, another reads, both
//! ways, through buffers over one allocation; an exporter's buffer may go
//! before its importer's; a device of another GPU is refused. Two servers
//! on one adapter stand for two ranks on one GPU.

use compute_runtime::{DeviceId, ServerError};
use wgpu_server::testing::{SharedDeviceMemory, export_device_memory};

use crate::common::*;

fn two_servers() -> (TestServer, TestServer) {
    let open = |id| {
        TestServer::options()
            .device_id(DeviceId(id))
            .adapter(0)
            .open()
            .unwrap_or_else(|e| panic!("no adapter for tests: {e}"))
    };
    (open(0), open(1))
}

/// `len` bytes of `buffer` through a mapped copy on its own device.
fn read_raw(s: &TestServer, buffer: &wgpu::Buffer, len: u64) -> Vec<u8> {
    let device = s.device();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 0, &staging, 0, len);
    s.queue().submit(Some(enc.finish()));
    staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    let out = staging.slice(..).get_mapped_range().expect("view").to_vec();
    staging.unmap();
    out
}

/// Writes `data` into `buffer` on its device and waits for it.
fn write_raw(s: &TestServer, buffer: &wgpu::Buffer, data: &[u8]) {
    s.queue().write_buffer(buffer, 0, data);
    s.queue().submit(None);
    s.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
}

/// The exported buffer and its handle, or `None` (with a message) where
/// the adapter cannot share device memory.
fn exported(s: &TestServer, len: u64) -> Option<(wgpu::Buffer, SharedDeviceMemory)> {
    match export_device_memory(s.device(), len) {
        Ok(x) => Some(x),
        Err(ServerError::Unsupported { what, reason }) => {
            eprintln!("skipped: {what}: {reason}");
            None
        }
        Err(e) => panic!("export: {e}"),
    }
}

#[test]
fn bytes_one_device_writes_another_reads_both_ways() {
    let (a, b) = two_servers();
    let len = 1 << 20;
    let Some((on_a, shared)) = exported(&a, len) else {
        return;
    };
    assert!(shared.size() >= len);
    let on_b = shared.import(b.device(), len).expect("import");
    let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    write_raw(&a, &on_a, &data);
    assert!(read_raw(&b, &on_b, len) == data, "a wrote, b reads");
    let back: Vec<u8> = data.iter().map(|x| x ^ 0xff).collect();
    write_raw(&b, &on_b, &back);
    assert!(read_raw(&a, &on_a, len) == back, "b wrote, a reads");
}

#[test]
fn an_import_outlives_its_exporters_buffer_and_several_imports_share_it() {
    let (a, b) = two_servers();
    let len = 64 << 10;
    let Some((on_a, shared)) = exported(&a, len) else {
        return;
    };
    let first = shared.import(b.device(), len).expect("import");
    let second = shared
        .import(b.device(), len / 2)
        .expect("a shorter import");
    write_raw(&a, &on_a, &vec![5u8; len as usize]);
    drop(on_a);
    a.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    write_raw(&b, &first, &vec![6u8; (len / 2) as usize]);
    let got = read_raw(&b, &second, len / 2);
    assert!(got.iter().all(|&x| x == 6), "two imports, one allocation");
    let tail = read_raw(&b, &first, len);
    assert!(tail[(len / 2) as usize..].iter().all(|&x| x == 5));
}

#[test]
fn an_import_longer_than_the_allocation_is_refused() {
    let (a, b) = two_servers();
    let Some((_on_a, shared)) = exported(&a, 4096) else {
        return;
    };
    let too_long = shared.size() * 2;
    let err = shared.import(b.device(), too_long).expect_err("too long");
    assert!(matches!(err, ServerError::InvalidArgument { .. }), "{err}");
}

/// Imports of one exported allocation from several threads at once all
/// succeed and see its bytes. lavapipe's import reads a header through the
/// fd after seeking it to 0, and every duplicate of one fd shares that
/// offset: imports running together read each other's offsets and fail
/// (`ERROR_INVALID_EXTERNAL_HANDLE`) unless they are serialized.
#[test]
fn imports_of_one_allocation_from_several_threads_at_once_all_succeed() {
    let (a, b) = two_servers();
    let Some((buffer, shared)) = exported(&a, 4096) else {
        return;
    };
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    write_raw(&a, &buffer, &data);
    let device = b.device().clone();
    let failures = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..2000 {
                    if let Err(e) = shared.import(&device, 4096) {
                        eprintln!("import failed: {e}");
                        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(failures.into_inner(), 0, "failed imports of 200");
    let imported = shared.import(&device, 4096).expect("import");
    assert_eq!(read_raw(&b, &imported, 4096), data);
}
