//! cubecl's collectives run natively on this server: three devices of one
//! adapter, registered from setups (`init_device`), form a `ClientGroup`
//! (which needs the runtime's device transport), and its calls give the
//! exact results; a call the members disagree on fails on every member at
//! its read, and the next calls still pair.

use cubecl_runtime::client::{Client, ClientGroup, MemberBuffers};
use cubecl_runtime::runtime::Runtime;
use cubecl_runtime::server::ReduceOperation;
use cubecl_wgpu::{RuntimeOptions, WgpuDevice, WgpuRuntime, WgpuSetup, init_device};

/// `n` devices of the server's first adapter, each registered from a
/// setup of its own, in ascending order.
fn members(n: usize) -> Vec<(WgpuDevice, Client)> {
    (0..n)
        .map(|_| {
            let (adapter, device, queue) =
                wgpu_server::adapter::open(wgpu_server::runtime::DeviceId(0), false)
                    .expect("an adapter");
            let backend = adapter.get_info().backend;
            let setup = WgpuSetup {
                instance: wgpu_server::adapter::instance(backend.into()),
                adapter,
                device,
                queue,
                backend,
            };
            let device = init_device(setup, RuntimeOptions::default());
            let client = WgpuRuntime::<cubecl_wgpu::AutoCompiler>::client(&device);
            (device, client)
        })
        .collect()
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn read_f32(client: &Client, h: cubecl_runtime::server::Handle) -> Vec<f32> {
    let bytes = client.read_one(h).expect("the result");
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn a_client_group_all_reduces_gathers_and_broadcasts_natively() {
    let m = members(3);
    let clients: Vec<Client> = m.iter().map(|(_, c)| c.clone()).collect();
    let group = ClientGroup::new(clients.clone()).expect("a device transport");
    let f32_ty = cubecl_ir::ElemType::Float(cubecl_ir::FloatKind::F32);
    assert!(group.reduces(f32_ty));

    // all_reduce (sum, then mean), in place.
    let bufs: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(r, c)| c.create_from_slice(&f32s(&[r as f32 + 1.0; 5])))
        .collect();
    let parts = bufs
        .iter()
        .map(|h| MemberBuffers {
            src: h.clone(),
            dst: h.clone(),
        })
        .collect();
    group.all_reduce(parts, f32_ty, ReduceOperation::Sum);
    for (c, h) in clients.iter().zip(&bufs) {
        assert_eq!(read_f32(c, h.clone()), [6.0; 5]);
    }
    let parts = bufs
        .iter()
        .map(|h| MemberBuffers {
            src: h.clone(),
            dst: h.clone(),
        })
        .collect();
    group.all_reduce(parts, f32_ty, ReduceOperation::Mean);
    for (c, h) in clients.iter().zip(&bufs) {
        assert_eq!(read_f32(c, h.clone()), [6.0; 5]);
    }

    // all_gather: rank order.
    let parts = clients
        .iter()
        .enumerate()
        .map(|(r, c)| MemberBuffers {
            src: c.create_from_slice(&f32s(&[r as f32; 2])),
            dst: c.empty(4 * 6),
        })
        .collect::<Vec<_>>();
    let dsts: Vec<_> = parts.iter().map(|p| p.dst.clone()).collect();
    group.all_gather(parts);
    for (c, h) in clients.iter().zip(dsts) {
        assert_eq!(read_f32(c, h), [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]);
    }

    // broadcast from member 2.
    let src = clients[2].create_from_slice(&f32s(&[9.5, -1.0]));
    let dsts: Vec<_> = clients.iter().map(|c| c.empty(8)).collect();
    group.broadcast(src, dsts.clone());
    for (c, h) in clients.iter().zip(dsts) {
        assert_eq!(read_f32(c, h), [9.5, -1.0]);
    }
}
