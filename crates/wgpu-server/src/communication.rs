//! `ServerCommunication`: collectives are not built yet; every call answers
//! [`ServerError::Unsupported`] (listed in `docs/status.md`).

use compute_runtime::{
    BufferBinding, ComputeWait, CopyDescriptor, DeviceId, Handle, Reduction, ServerCommunication,
    ServerError, StreamId,
};
use compute_wgsl::WgpuCompiler;

use crate::WgpuServer;

const WHY: &str = "collectives are not built yet (collectives issue)";

impl<C: WgpuCompiler> ServerCommunication for WgpuServer<C> {
    fn sync_collective(&mut self, _stream_id: StreamId) -> Result<(), ServerError> {
        Err(ServerError::unsupported("sync_collective", WHY))
    }

    fn comm_init(&mut self, _device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        Err(ServerError::unsupported("comm_init", WHY))
    }

    fn all_reduce(
        &mut self,
        _src: BufferBinding,
        _dst: BufferBinding,
        _reduction: Reduction,
        _stream_id: StreamId,
        _device_ids: Vec<DeviceId>,
        _wait: ComputeWait,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("all_reduce", WHY))
    }

    fn all_gather(
        &mut self,
        _src: BufferBinding,
        _dst: BufferBinding,
        _stream_id: StreamId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("all_gather", WHY))
    }

    fn reduce_scatter(
        &mut self,
        _src: BufferBinding,
        _dst: BufferBinding,
        _reduction: Reduction,
        _stream_id: StreamId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("reduce_scatter", WHY))
    }

    fn broadcast(
        &mut self,
        _src: Option<BufferBinding>,
        _dst: BufferBinding,
        _stream_id: StreamId,
        _root: DeviceId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("broadcast", WHY))
    }

    fn all_to_all(
        &mut self,
        _src: BufferBinding,
        _dst: BufferBinding,
        _stream_id: StreamId,
        _device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("all_to_all", WHY))
    }

    fn send(
        &mut self,
        _desc: CopyDescriptor,
        _stream_id: StreamId,
        _device_id_dst: DeviceId,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("send", WHY))
    }

    fn recv(
        &mut self,
        _handle: Handle,
        _stream_id: StreamId,
        _device_id_src: DeviceId,
    ) -> Result<(), ServerError> {
        Err(ServerError::unsupported("recv", WHY))
    }
}
