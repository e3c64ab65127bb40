//! The server traits, with the signatures of the `WgpuServer` API page.
//!
//! A server is driven through `&mut self` by one owner at a time (see
//! [`crate::client`] for the shareable wrapper). Calls that only enqueue work
//! (`write`, `launch`) return nothing: their failures poison the bytes they
//! would have written (answered by `check` and `read`; a `write` refused at
//! the call, which touched nothing, poisons nothing) and are reported by
//! the stream's next `flush` or `sync`. Calls that wait return a [`DynFut`]
//! that resolves when the GPU work it waits on has completed.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::{
    AccessChecks, BufferBinding, ComputeStorage, ComputeWait, CopyDescriptor, CubeCount,
    CubeKernel, DeviceId, GraphId, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle,
    ManagedResource, MemoryAllocationMode, ProfileDuration, ProfileError, ProfilingToken,
    Reduction, ServerError, ServerLogger, ServerUtilities, StreamId, StreamMemoryReport,
};

/// A boxed, sendable future: what waiting calls return.
pub type DynFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Type-erased service utilities, as [`DeviceService::utilities`] hands them
/// out (downcast to the service's own type).
pub type ServerUtilitiesHandle = Arc<dyn Any + Send + Sync>;

/// Which pipeline stage a device service runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceServiceStage {
    /// The compute stage: kernels, memory, transfers.
    Compute,
    /// The communication stage: collectives between devices.
    Communication,
}

/// A per-device service, created once per device.
pub trait DeviceService: Send + 'static {
    /// Initializes the service. It is only called once per device.
    fn init(device_id: DeviceId) -> Self;
    /// [`DeviceService::init`] for a device that may not open: the error
    /// instead of a panic. What `ComputeClient::load` calls. The default
    /// is `init` itself, for a service whose `init` cannot fail.
    fn try_init(device_id: DeviceId) -> Result<Self, ServerError>
    where
        Self: Sized,
    {
        Ok(Self::init(device_id))
    }
    /// Get the service utilities.
    fn utilities(&self) -> ServerUtilitiesHandle;
    /// Which pipeline stage this service runs on.
    fn stage() -> DeviceServiceStage
    where
        Self: Sized;
}

/// The compute server.
pub trait Server: Send + 'static {
    /// Drains `stream_id` (and the streams it depends on), then reports any
    /// failure of work on it not reported yet, or a device fault. The
    /// `handles` name bytes the caller is about to use: a poisoned one is
    /// reported too. With device timing on, the GPU time the sync completes
    /// is logged.
    fn sync(
        &mut self,
        handles: Vec<BufferBinding>,
        stream_id: StreamId,
    ) -> DynFut<Result<(), ServerError>>;

    /// Retrieve the server logger.
    fn logger(&self) -> Arc<ServerLogger>;

    /// Retrieve the server utilities.
    fn utilities(&self) -> Arc<ServerUtilities>;

    /// Reserves N Bytes of the provided sizes to be used as staging to load
    /// data.
    fn staging(&mut self, sizes: &[usize], stream_id: StreamId) -> Result<Vec<Bytes>, ServerError>;

    /// Initializes memory on the given stream with the given size.
    fn initialize_memory(
        &mut self,
        memory: ManagedMemoryHandle,
        size: u64,
        stream_id: StreamId,
    ) -> Result<(), ServerError>;

    /// Given bindings, returns the owned resources as bytes.
    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream_id: StreamId,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>>;

    /// Writes the specified bytes into the buffers given.
    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream_id: StreamId);

    /// What `write` would refuse at the call for `len` bytes written where
    /// `descriptor` says, enqueuing nothing and reporting nothing later: a
    /// caller that wants the refusal now (the client's `write`) asks first.
    /// The default refuses nothing, for a server whose `write` checks
    /// nothing at the call.
    fn validate_write(
        &mut self,
        descriptor: &CopyDescriptor,
        len: u64,
        stream_id: StreamId,
    ) -> Result<(), ServerError> {
        let _ = (descriptor, len, stream_id);
        Ok(())
    }

    /// Whether the bytes the handles name can be trusted, right now and with
    /// no barrier: the claim check a read makes, without the read. Instant:
    /// enqueue-time failures only. A device fault needs `sync`, which drains
    /// first.
    fn check(
        &mut self,
        handles: Vec<BufferBinding>,
        stream_id: StreamId,
    ) -> Result<(), ServerError>;

    /// Executes the kernel over the given memory handles.
    ///
    /// # Safety
    ///
    /// The kernel's memory accesses are the caller's responsibility: a kernel
    /// compiled without bounds checks may read or write outside its bindings.
    unsafe fn launch(
        &mut self,
        kernel: Box<dyn CubeKernel>,
        count: CubeCount,
        args: KernelArguments,
        stream_id: StreamId,
        launch_mode: LaunchMode,
    );

    /// Compiles every kernel a [`LaunchMode::Queue`] launch queued, now
    /// rather than inside the next launch, so a measurement that follows times
    /// its own kernels only.
    fn compile_queued(&mut self);

    /// Flush all outstanding tasks in the server.
    fn flush(&mut self, stream_id: StreamId) -> Result<(), ServerError>;

    /// Enable collecting timestamps.
    fn start_profile(&mut self, stream_id: StreamId) -> Result<ProfilingToken, ServerError>;

    /// Disable collecting timestamps.
    fn end_profile(
        &mut self,
        stream_id: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError>;

    /// Drop the window token opened without measuring it, for a caller that
    /// will never close it with `end_profile`.
    fn abandon_profile(&mut self, stream_id: StreamId, token: ProfilingToken);

    /// Structured per-pool report of the given stream's main GPU memory, in
    /// allocation-routing order.
    ///
    /// Memory belongs to the server's memory manager, not to a stream: a
    /// server whose streams share one manager (the wgpu server: one per
    /// device) answers the same device-wide report for every stream. Read it
    /// once; summing it over [`Server::stream_ids`] counts the device once
    /// per stream.
    fn memory_report(&mut self, stream_id: StreamId) -> Option<StreamMemoryReport>;

    /// Stream ids the client should iterate to aggregate per-stream state
    /// across the device (not memory: see [`Server::memory_report`]).
    fn stream_ids(&self) -> Vec<StreamId>;

    /// Ask the server to release memory that it can release.
    fn memory_cleanup(&mut self, stream_id: StreamId) -> Result<(), ServerError>;

    /// Update the memory mode of allocation in the server.
    fn allocation_mode(&mut self, mode: MemoryAllocationMode, stream_id: StreamId);

    /// Prepare `stream_id` for an upcoming graph capture (call before the
    /// warm-up run).
    fn graph_prepare(&mut self, stream_id: StreamId) -> Result<(), ServerError>;

    /// Begin recording the launches issued on `stream_id` into a graph.
    fn begin_capture(&mut self, stream_id: StreamId) -> Result<(), ServerError>;

    /// Stop recording and return the captured graph's id.
    fn end_capture(&mut self, stream_id: StreamId) -> Result<GraphId, ServerError>;

    /// Replay a captured graph on `stream_id` against its original buffers.
    fn replay(&mut self, graph: GraphId, stream_id: StreamId) -> Result<(), ServerError>;

    /// Release a graph and unpin the buffers it retained. A no-op for an
    /// unknown id.
    fn graph_destroy(&mut self, graph: GraphId, stream_id: StreamId);

    /// Enable collecting timestamps from the next kernel launched on the
    /// stream, for a window that holds one launch.
    fn start_profile_at_launch(
        &mut self,
        stream_id: StreamId,
    ) -> Result<ProfilingToken, ServerError>;
}

/// A server that can check a launch without enqueuing it: the check the
/// client makes so that a launch whose arguments do not fit its kernel is
/// an error at the call rather than at the next `flush`, and so that a
/// bounds-checked kernel can be launched without `unsafe`.
///
/// # Safety
///
/// `Ok(AccessChecks::Checked)` is a promise that launching `kernel` with
/// these arguments on this server cannot read or write memory outside its
/// bindings: [`crate::client::ComputeClient::launch`] relies on it to be a
/// safe function.
pub unsafe trait LaunchValidation: Server {
    /// Checks `kernel` against `count` and `args` as `launch` would before
    /// encoding it (argument counts, bindings, sizes, limits; compiling the
    /// kernel if it is not yet), enqueuing nothing, and says whether its
    /// accesses are checked at run time.
    fn validate_launch(
        &mut self,
        kernel: &dyn CubeKernel,
        count: &CubeCount,
        args: &KernelArguments,
        stream_id: StreamId,
    ) -> Result<AccessChecks, ServerError>;
}

/// Collective operations between the servers of several devices.
pub trait ServerCommunication {
    /// Ensure that all queued collective operations have been executed.
    fn sync_collective(&mut self, stream_id: StreamId) -> Result<(), ServerError>;

    /// Initialize the communication between the devices in `device_ids`.
    fn comm_init(&mut self, device_ids: Vec<DeviceId>) -> Result<(), ServerError>;

    /// Reduce every rank's `src` element-wise and write the result to every
    /// rank's `dst`.
    fn all_reduce(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        reduction: Reduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
        wait: ComputeWait,
    ) -> Result<(), ServerError>;

    /// Writes every rank's `src`, concatenated in rank order, to `dst`.
    fn all_gather(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError>;

    /// Reduces every rank's `src` and writes this rank's chunk to `dst`.
    fn reduce_scatter(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        reduction: Reduction,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError>;

    /// Writes `root`'s `src` to `dst` on every rank. Only `root` has a `src`.
    fn broadcast(
        &mut self,
        src: Option<BufferBinding>,
        dst: BufferBinding,
        stream_id: StreamId,
        root: DeviceId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError>;

    /// Sends chunk r of `src` to rank r and writes the chunk received from
    /// rank r to chunk r of `dst`.
    fn all_to_all(
        &mut self,
        src: BufferBinding,
        dst: BufferBinding,
        stream_id: StreamId,
        device_ids: Vec<DeviceId>,
    ) -> Result<(), ServerError>;

    /// Sends data from this server to a destination server.
    fn send(
        &mut self,
        desc: CopyDescriptor,
        stream_id: StreamId,
        device_id_dst: DeviceId,
    ) -> Result<(), ServerError>;

    /// Receive data from another server.
    fn recv(
        &mut self,
        handle: Handle,
        stream_id: StreamId,
        device_id_src: DeviceId,
    ) -> Result<(), ServerError>;

    /// Takes the place of a group call over `device_ids` that this rank's
    /// caller refused before it reached the server (a check of the
    /// client's own, such as a reduction over an untyped buffer): the call
    /// is posted as refused, so every rank's call at its place fails with
    /// [`ServerError::CollectiveInput`] naming this rank and `error`, and
    /// the ranks' next calls pair as usual. Returns `error`, for the caller
    /// to return. With no communicator over `device_ids` nothing is posted
    /// (there is nobody to tell).
    fn refuse_collective(&mut self, error: ServerError, device_ids: Vec<DeviceId>) -> ServerError;
}

/// Direct access to a server's storage.
pub trait ServerStorage {
    /// The storage type defines how data is stored and accessed.
    type Storage: ComputeStorage;

    /// Given a resource handle, returns the storage resource.
    fn get_resource(
        &mut self,
        binding: BufferBinding,
        stream_id: StreamId,
    ) -> Result<ManagedResource<<Self::Storage as ComputeStorage>::Resource>, ServerError>;
}
