//! `ServerCommunication` on the server: the seed's surface, checking and
//! delegating to `collective.rs` (one call on the server thread) and to the
//! part [`Collectives`](crate::collective::Collectives).

use std::sync::Arc;

use compute_collective::CollectiveCall;
use compute_runtime::{
    BufferBinding, ComputeWait, CopyDescriptor, DeviceId, Handle, Reduction, ServerCommunication,
    ServerError, StreamId,
};
use compute_wgsl::WgpuCompiler;

use crate::collective::Joined;
use crate::collective::applier::Context;
use crate::server::WgpuServer;
use crate::server::collective::{Operands, Peers};

/// The seed's surface; one call's work on the server thread is
/// `collective.rs` (and `collective/staging.rs` for its input), the gates it leaves
/// and their outcomes `collective/applier.rs`.
impl<C: WgpuCompiler> ServerCommunication for WgpuServer<C> {
    fn sync_collective(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        self.sync_collectives(stream_id)
    }

    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        self.enter()?;
        let device = crate::collective::Device {
            device: self.gpu.device().clone(),
            submitter: self.streams.backend().submitter().clone(),
            poller: self.gpu.poller().handle(),
            cpu: self.utilities.adapter.device_type == "Cpu",
        };
        let joined = self
            .collectives
            .join(&device_ids, &device, |outcome_wait| Context {
                submitter: self.streams.backend().submitter().clone(),
                outcome_wait,
                upload: self.memory.upload().clone(),
                poller: self.gpu.poller().handle(),
            })?;
        if let Some(Joined { wait, handoffs }) = joined {
            self.streams
                .backend_mut()
                .enable_collectives(wait, handoffs);
        }
        Ok(())
    }

    fn all_reduce(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        reduction: Reduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
        wait: ComputeWait,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::AllReduce {
            reduction,
            len: src.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(call, Peers::Ranks(&device_ids), operands, stream_id, wait)
    }

    fn all_gather(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::AllGather {
            src_len: src.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn reduce_scatter(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        reduction: Reduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::ReduceScatter {
            reduction,
            dst_len: dst.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn broadcast(
        &mut self,
        src: Option<BufferBinding>,
        dst: BufferBinding,
        stream_id: StreamId,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::Broadcast {
            // A root outside the list is a rank past the last: the call is
            // posted, invalid, so every rank fails with the same mismatch and
            // the ranks' calls stay paired (refused here, it took no turn,
            // and the other ranks' broadcast paired with this rank's next
            // call).
            root: device_ids
                .iter()
                .position(|d| *d == root)
                .unwrap_or(device_ids.len()),
            len: dst.size as usize,
            has_src: src.is_some(),
        };
        let operands = Operands::new(src, Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn all_to_all(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::AllToAll {
            len: src.size as usize,
        };
        let operands = Operands::new(Some(src), Some(dst));
        self.collective(
            call,
            Peers::Ranks(&device_ids),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }

    fn send(
        &mut self,
        desc: CopyDescriptor,
        stream_id: StreamId,
        device_id_dst: DeviceId,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::Send {
            peer: usize::MAX, // set from the communicator by `collective`
            len: desc.binding.size as usize,
        };
        let operands = Operands::new(Some(desc.binding), None);
        self.collective(
            call,
            Peers::Peer(device_id_dst),
            operands,
            stream_id,
            ComputeWait::Overlap,
        )
    }

    fn refuse_collective(&mut self, error: ServerError, device_ids: Vec<DeviceId>) -> ServerError {
        // The refused call takes its place in the group's per-call path
        // decisions too (`collective/shared.rs`), or this rank's next call
        // would read the decision the others made for this one.
        let _ = self.collectives.device_of(&device_ids);
        if let Ok(comm) = self.collectives.by_ranks(&device_ids) {
            // A stopped engine answers no rank: nobody to tell.
            let _ = comm.post_refused(Arc::new(error.clone()));
        }
        error
    }

    fn recv(
        &mut self,
        handle: Handle,
        stream_id: StreamId,
        device_id_src: DeviceId,
    ) -> Result<(), ServerError> {
        let call = CollectiveCall::Recv {
            peer: usize::MAX, // set from the communicator by `collective`
            len: handle.size as usize,
        };
        let operands = Operands::new(None, Some(handle.binding()));
        self.collective(
            call,
            Peers::Peer(device_id_src),
            operands,
            stream_id,
            ComputeWait::Wait,
        )
    }
}
