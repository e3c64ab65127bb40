//! cubecl's collectives on this server's (`ServerCommunication`): what
//! cubecl's `ClientGroup` (and so burn's `Tensor::all_reduce` and the rest)
//! runs natively when a runtime's `device_transport` is set.
//!
//! Each call resolves cubecl's ranges exactly (not widened to whole words,
//! as launches bind them: a collective moves exactly the tensor's bytes),
//! names the ranks by the server's device ids (cubecl's id, type and index,
//! as [`inner_device`] packs them, the same on every member) and hands the
//! call to the server, whose failure semantics hold: a failed call poisons
//! every member's `dst` it reaches, which the member's next read reports,
//! and never leaves a member waiting past the communicator's timeout.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use cubecl_common::device::DeviceId;
use cubecl_environment::stream::StreamId;
use cubecl_ir::{ElemType, FloatKind, IntKind, UIntKind};
use cubecl_runtime::server::{
    BufferBinding as CubeBinding, ComputeWait as CubeWait, CopyDescriptor, DeviceTransport, Handle,
    ReduceOperation, Reduction as CubeReduction, ServerCommunication, ServerError,
};
use wgpu_server::runtime::{
    self as inner_rt, ComputeWait, DType, ReduceOp, Reduction, ServerCommunication as _,
    ServerError as Inner,
};

use crate::errors::to_cubecl;
use crate::memory::stream;
use crate::server::BridgeServer;

/// Collective calls (of any kind, `comm_init` included) this process's
/// bridges handed to their servers.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// How many collective calls the bridges of this process handed to their
/// servers: what shows a program's collectives ran natively (cubecl
/// emulates them with reads and writes when a runtime has no device
/// transport, and none of those come here).
pub fn calls() -> u64 {
    CALLS.load(Ordering::Relaxed)
}

fn count() {
    CALLS.fetch_add(1, Ordering::Relaxed);
}

/// The server's device id of cubecl's `id`: type and index packed, unique
/// in the process (what a `BridgeServer` is opened with, so every member
/// names the others the way they name themselves).
pub fn inner_device(id: DeviceId) -> inner_rt::DeviceId {
    inner_rt::DeviceId((u64::from(id.type_id) << 16) | u64::from(id.index_id))
}

/// The element types the server's collectives reduce, as cubecl names
/// them.
const REDUCED: [(ElemType, DType); 8] = [
    (ElemType::Float(FloatKind::F16), DType::F16),
    (ElemType::Float(FloatKind::BF16), DType::BF16),
    (ElemType::Float(FloatKind::F32), DType::F32),
    (ElemType::Float(FloatKind::F64), DType::F64),
    (ElemType::Int(IntKind::I32), DType::I32),
    (ElemType::UInt(UIntKind::U32), DType::U32),
    (ElemType::Int(IntKind::I64), DType::I64),
    (ElemType::UInt(UIntKind::U64), DType::U64),
];

/// What cubecl is told the server's collectives reduce.
pub fn transport() -> DeviceTransport {
    DeviceTransport {
        reduces: REDUCED.iter().map(|(e, _)| *e).collect::<BTreeSet<_>>(),
    }
}

fn reduction(r: CubeReduction) -> Result<Reduction, Inner> {
    let dtype = REDUCED
        .iter()
        .find(|(e, _)| *e == r.dtype)
        .map(|(_, d)| *d)
        .ok_or_else(|| Inner::InvalidArgument {
            reason: format!("this server's collectives do not reduce {:?}", r.dtype),
        })?;
    let op = match r.op {
        ReduceOperation::Sum => ReduceOp::Sum,
        ReduceOperation::Mean => ReduceOp::Mean,
    };
    Ok(Reduction::new(op, dtype))
}

fn wait(w: CubeWait) -> ComputeWait {
    match w {
        CubeWait::Now => ComputeWait::Wait,
        CubeWait::AtSync => ComputeWait::Overlap,
    }
}

fn devices(ids: &[DeviceId]) -> Vec<inner_rt::DeviceId> {
    ids.iter().map(|d| inner_device(*d)).collect()
}

impl BridgeServer {
    /// cubecl's range as the server's, exactly its bytes.
    fn exact(&self, binding: &CubeBinding) -> Result<inner_rt::BufferBinding, Inner> {
        let resolved = self.memory.resolve(binding)?;
        Ok(inner_rt::BufferBinding {
            size: resolved.len,
            ..resolved.binding
        })
    }

    /// `body` on the exact ranges of `bindings`, its error as cubecl's.
    fn with_exact<const N: usize>(
        &mut self,
        bindings: [&CubeBinding; N],
        body: impl FnOnce(&mut Self, [inner_rt::BufferBinding; N]) -> Result<(), Inner>,
    ) -> Result<(), ServerError> {
        let mut out = Vec::with_capacity(N);
        for b in bindings {
            out.push(self.exact(b).map_err(|e| to_cubecl(&e))?);
        }
        let exact: [inner_rt::BufferBinding; N] = out.try_into().map_err(|_| {
            to_cubecl(&Inner::InvalidArgument {
                reason: "binding count".into(),
            })
        })?;
        body(self, exact).map_err(|e| to_cubecl(&e))
    }
}

impl BridgeServer {
    /// Joins the communicator of this device and `peer` (in device order,
    /// the same list on both ends): cubecl sends and receives between two
    /// devices without setting up a group first, and the server sends
    /// through the pair's own communicator once joined.
    fn join_pair(&mut self, peer: inner_rt::DeviceId) -> Result<(), ServerError> {
        let me = inner_device(self.device_id);
        let pair = if me.0 <= peer.0 {
            vec![me, peer]
        } else {
            vec![peer, me]
        };
        self.inner.comm_init(pair).map_err(|e| to_cubecl(&e))
    }
}

impl ServerCommunication for BridgeServer {
    fn sync_collective(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        count();
        self.inner
            .sync_collective(stream(stream_id))
            .map_err(|e| to_cubecl(&e))
    }

    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        count();
        self.inner
            .comm_init(devices(&device_ids))
            .map_err(|e| to_cubecl(&e))
    }

    fn all_reduce(
        &mut self,
        src: CubeBinding,
        dst: CubeBinding,
        r: CubeReduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
        w: CubeWait,
    ) -> Result<(), ServerError> {
        count();
        let ids = devices(&device_ids);
        self.with_exact([&src, &dst], |s, [src, dst]| {
            let r = reduction(r).map_err(|e| s.inner.refuse_collective(e, ids.clone()))?;
            s.inner
                .all_reduce(src, dst, r, stream(stream_id), ids, wait(w))
        })
    }

    fn all_gather(
        &mut self,
        src: CubeBinding,
        dst: CubeBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        count();
        let ids = devices(&device_ids);
        self.with_exact([&src, &dst], |s, [src, dst]| {
            s.inner.all_gather(src, dst, stream(stream_id), ids)
        })
    }

    fn reduce_scatter(
        &mut self,
        src: CubeBinding,
        dst: CubeBinding,
        r: CubeReduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        count();
        let ids = devices(&device_ids);
        self.with_exact([&src, &dst], |s, [src, dst]| {
            let r = reduction(r).map_err(|e| s.inner.refuse_collective(e, ids.clone()))?;
            s.inner.reduce_scatter(src, dst, r, stream(stream_id), ids)
        })
    }

    fn broadcast(
        &mut self,
        src: Option<CubeBinding>,
        dst: CubeBinding,
        stream_id: StreamId,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        count();
        let ids = devices(&device_ids);
        let root = inner_device(root);
        match src {
            Some(src) => self.with_exact([&src, &dst], |s, [src, dst]| {
                s.inner
                    .broadcast(Some(src), dst, stream(stream_id), root, ids)
            }),
            None => self.with_exact([&dst], |s, [dst]| {
                s.inner.broadcast(None, dst, stream(stream_id), root, ids)
            }),
        }
    }

    fn all_to_all(
        &mut self,
        src: CubeBinding,
        dst: CubeBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        count();
        let ids = devices(&device_ids);
        self.with_exact([&src, &dst], |s, [src, dst]| {
            s.inner.all_to_all(src, dst, stream(stream_id), ids)
        })
    }

    fn send(
        &mut self,
        desc: CopyDescriptor,
        stream_id: StreamId,
        device_id_dst: DeviceId,
    ) -> Result<(), ServerError> {
        count();
        let to = inner_device(device_id_dst);
        self.join_pair(to)?;
        self.with_exact([&desc.handle], |s, [src]| {
            s.inner.send(
                inner_rt::CopyDescriptor::contiguous(src),
                stream(stream_id),
                to,
            )
        })
    }

    fn recv(
        &mut self,
        handle: Handle,
        stream_id: StreamId,
        device_id_src: DeviceId,
    ) -> Result<(), ServerError> {
        count();
        let from = inner_device(device_id_src);
        self.join_pair(from)?;
        // cubecl's transfers hand the receiver a handle it never
        // allocated (`Client::to_client_tensor`): its memory starts here.
        let memory = handle.memory.clone();
        let binding = handle.binding();
        if self.memory.resolve(&binding).is_err() {
            let size = binding.size;
            cubecl_runtime::server::Server::initialize_memory(self, memory, size, stream_id)?;
        }
        self.with_exact([&binding], |s, [dst]| {
            let dst = inner_rt::Handle {
                memory: dst.memory,
                offset: dst.offset,
                size: dst.size,
            };
            s.inner.recv(dst, stream(stream_id), from)
        })
    }
}
