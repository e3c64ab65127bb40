//! `WgpuServer`: one device's server, as the parts that own its state.
//!
//! The struct is a handful of parts, each owned by a module: [`Gpu`]
//! (`device/`), [`Memory`] (`memory/`), [`Kernels`] (`launch/`), [`Timing`]
//! (`timing/`), [`Graphs`] (`graph.rs`), and the streams
//! (`compute-stream`'s scheduler over [`ScheduledWgpuBackend`]). The methods
//! here are the preamble every call shares (`enter`), binding resolution, and
//! the write scope; the `Server` impl (`api.rs`) only checks and delegates.
//!
//! [`Gpu`]: crate::device::Gpu
//! [`Memory`]: crate::memory::Memory
//! [`Kernels`]: crate::launch::Kernels
//! [`Timing`]: crate::timing::Timing
//! [`Graphs`]: crate::graph::Graphs

mod api;
mod assemble;
mod collective;
mod communication;
mod device_collective;
mod dispatch;
mod graph;
#[cfg(feature = "testing")]
mod inspect;
mod launch;
pub(crate) mod options;
mod profile;
mod reads;
mod sync;
mod timeline;
mod validate;

use std::sync::Arc;

use compute_graph::{CaptureState, StreamCapture};
use compute_runtime::{
    BufferBinding, ComputeStorage, CopyDescriptor, CubeKernel, DeviceId, DeviceService,
    DeviceServiceStage, DynFut, LogCategory, LogLevel, ManagedResource, MemoryId, ServerError,
    ServerLogger, ServerStorage, ServerUtilities, ServerUtilitiesHandle, StorageHandle, StreamId,
    TimingMethod,
};
use compute_stream::{
    SchedulerMultiStream, TrustKey, WriteScoped, settle_batch_failures, write_scope,
    write_scope_restoring,
};
use compute_wgsl::WgpuCompiler;

use crate::collective::Collectives;
use crate::collective::staging::StageParts;
use crate::device::Gpu;
use crate::device::pool::DeviceLease;
use crate::graph::Graphs;
use crate::launch::Kernels;
use crate::launch::prepare::LaunchParts;
use crate::memory::Memory;
use crate::memory::storage::{WgpuResource, WgpuStorage};
use crate::server::launch::ResolvedLaunch;
use crate::server::options::WgpuServerOptions;
use crate::stream::ScheduledWgpuBackend;
use crate::timing::Timing;
use crate::transfer::Transfers;
use crate::transfer::write::CheckedWrite;

/// Default bound on tasks a stream encodes before it submits.
pub const DEFAULT_TASKS_MAX: usize = 128;

/// Wgpu compute server.
pub struct WgpuServer<C: WgpuCompiler> {
    gpu: Gpu,
    streams: SchedulerMultiStream<ScheduledWgpuBackend>,
    memory: Memory,
    kernels: Kernels<C>,
    timing: Timing,
    graphs: Graphs,
    collectives: Collectives,
    utilities: Arc<ServerUtilities>,
    logger: Arc<ServerLogger>,
    /// Failures settled by write scopes so far.
    failures: u64,
    /// The right to trust bytes again, used by `scoped_overwrite` only.
    trust_key: ServerTrustKey,
    /// The device's lease, when the server opened it (`open`): given back
    /// to the process's pool when the server drops. Last, so every part
    /// that uses the device is gone first.
    lease: Option<DeviceLease>,
}

/// The key of the server's scheduler ([`TrustKey`]), readable only in this
/// module: every restore of trust goes through
/// [`WgpuServer::scoped_overwrite`], a full write by the server itself.
pub(crate) struct ServerTrustKey(TrustKey);

impl ServerTrustKey {
    pub(crate) fn new(key: TrustKey) -> Self {
        Self(key)
    }
}

impl<C: WgpuCompiler> std::fmt::Debug for WgpuServer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuServer")
            .field("adapter", &self.utilities.adapter.name)
            .field("backend", &self.gpu.backend())
            .field("compiler", self.kernels.compiler())
            .field("options", &self.kernels.options())
            .field("streams", &self.streams.stream_ids())
            .field("pipelines", &self.kernels.pipelines())
            .field("tasks_max", &self.streams.tasks_max())
            .finish_non_exhaustive()
    }
}

impl<C: WgpuCompiler> WgpuServer<C> {
    /// The wgpu device (for interop).
    pub fn device(&self) -> &wgpu::Device {
        self.gpu.device()
    }

    /// The wgpu queue (for interop).
    pub fn queue(&self) -> &wgpu::Queue {
        self.gpu.queue()
    }

    /// Stream batches the scheduler submitted so far (a flush, a sync, a
    /// full batch, ordering across streams).
    pub fn submit_count(&self) -> u64 {
        self.streams.submit_count()
    }

    /// `queue.submit` calls made so far, by anyone: stream batches, host
    /// copies, a profile window's parked batch submitted by its future.
    pub fn queue_submit_count(&self) -> u64 {
        self.streams.backend().last_submission().1
    }

    /// Starts recording a timeline of every launch (per-launch GPU
    /// timestamps; see [`crate::Timeline`]), at most
    /// [`DEFAULT_TIMELINE_CAPACITY`](crate::DEFAULT_TIMELINE_CAPACITY)
    /// launches. Needs timestamp queries.
    pub fn start_timeline(&mut self) -> Result<(), ServerError> {
        self.start_timeline_with_capacity(crate::DEFAULT_TIMELINE_CAPACITY)
    }

    /// [`WgpuServer::start_timeline`] recording at most `capacity` launches:
    /// later ones run unstamped and are counted in
    /// [`Timeline::dropped`](crate::Timeline::dropped). A timeline already
    /// recording keeps its own capacity.
    pub fn start_timeline_with_capacity(&mut self, capacity: usize) -> Result<(), ServerError> {
        crate::server::timeline::start(self, capacity)
    }

    /// Stops recording and resolves the timeline (submits every stream).
    pub fn finish_timeline(&mut self) -> DynFut<Result<crate::Timeline, ServerError>> {
        crate::server::timeline::finish(self)
    }

    /// Whether `kernel`'s pipeline is cached under the server's options: the
    /// lookup a launch makes on a hit.
    pub fn is_compiled(&self, kernel: &dyn CubeKernel) -> bool {
        self.kernels.is_compiled(kernel)
    }

    /// GPU time of the work the last `sync` completed (batches submitted
    /// since the sync before it), when batch timing is on: device timing,
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`, and the `sync` log category at
    /// `basic` or more when the server was built (`COMPUTE_LOG=sync=basic`).
    pub fn last_sync_gpu_time(&self) -> Option<std::time::Duration> {
        match self
            .timing
            .last_sync_gpu_ns()
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            u64::MAX => None,
            ns => Some(std::time::Duration::from_nanos(ns)),
        }
    }

    /// How profile windows are timed.
    pub fn timing_method(&self) -> TimingMethod {
        self.timing.profiler().method
    }

    /// Frees the slices of handles dropped since the last call.
    pub(crate) fn drain_releases(&mut self) {
        let streams = &mut self.streams;
        let freed = self
            .memory
            .free_released(|queue, ids| streams.drain_released(queue, ids));
        for id in freed {
            self.logger
                .log(LogCategory::Memory, LogLevel::Full, || format!("free {id}"));
        }
    }

    /// Checks the device and frees dropped handles: the preamble of every
    /// call. Uncaptured errors (a fault no error scope could pin on one
    /// operation) are reported to every stream's next `flush` / `sync`;
    /// batches that failed to submit are told to `on_failure`.
    pub(crate) fn enter(&mut self) -> Result<(), ServerError> {
        self.gpu.faults().lost()?;
        if self.gpu.faults().any() {
            self.spread_faults();
        }
        settle_batch_failures(self);
        self.drain_releases();
        // Held (queued) launches come before anything issued after them.
        if self.kernels.has_held() {
            crate::server::launch::compile_and_encode(self);
        }
        Ok(())
    }

    /// Defers uncaptured errors to every stream, and faults a `sync`
    /// reported to its own stream to the others.
    #[cold]
    fn spread_faults(&mut self) {
        if let Err(fault) = self.gpu.faults().take_uncaptured() {
            self.streams.defer_error_everywhere(&Arc::new(fault));
        }
        for (reported, fault) in self.gpu.faults().take_owed() {
            let fault = Arc::new(fault);
            for other in self.streams.stream_ids() {
                if other != reported {
                    self.streams.defer_error(other, &fault);
                }
            }
        }
    }

    /// Resolves a binding to its page range, checking it lies inside its
    /// slice (see [`Memory::resolve`]).
    pub(crate) fn resolve(&self, binding: &BufferBinding) -> Result<StorageHandle, ServerError> {
        self.memory.resolve(binding)
    }

    /// The parts a launch's resolution borrows (`launch/prepare.rs`).
    pub(crate) fn launch_parts(&mut self) -> LaunchParts<'_, C> {
        LaunchParts {
            gpu: &self.gpu,
            memory: &mut self.memory,
            kernels: &mut self.kernels,
            logger: &self.logger,
        }
    }

    /// The parts staging a collective's input borrows
    /// (`collective/staging.rs`).
    pub(crate) fn stage_parts(&mut self) -> StageParts<'_> {
        StageParts {
            gpu: &self.gpu,
            memory: &mut self.memory,
            streams: &mut self.streams,
            collectives: &mut self.collectives,
        }
    }

    /// The parts a host transfer borrows (`transfer/`).
    pub(crate) fn transfers(&mut self) -> Transfers<'_> {
        Transfers {
            gpu: &self.gpu,
            memory: &mut self.memory,
            streams: &mut self.streams,
        }
    }

    /// Whether a binding covers its whole slice (a full overwrite).
    pub(crate) fn covers(&self, binding: &BufferBinding) -> bool {
        binding.offset == 0
            && self.memory.manager().size_of(binding.memory_id()) == Some(binding.size)
    }

    /// Runs work that writes `writes` on the device (a launch, a replay) in
    /// a write scope. Success trusts nothing again: nothing says the work
    /// wrote every byte of a slice.
    pub(crate) fn scoped<R>(
        &mut self,
        stream: StreamId,
        writes: &[BufferBinding],
        body: impl FnOnce(&mut Self) -> Result<R, ServerError>,
    ) -> Result<R, ServerError> {
        write_scope(self, stream, writes, body)
    }

    /// Runs a host write of `writes` in a write scope: success trusts a
    /// slice again when the write covered all of it.
    pub(crate) fn scoped_overwrite<R>(
        &mut self,
        stream: StreamId,
        writes: &[BufferBinding],
        body: impl FnOnce(&mut Self) -> Result<R, ServerError>,
    ) -> Result<R, ServerError> {
        let key = self.trust_key.0.clone();
        write_scope_restoring(self, &key, stream, writes, |s, b| s.covers(b), body)
    }

    /// The `Overlap` collective `memory` was pending on has written it or
    /// failed: its trust is what the rest of the record says.
    pub(crate) fn end_pending(&mut self, memory: MemoryId) -> Result<(), ServerError> {
        let key = self.trust_key.0.clone();
        self.streams.end_pending(&key, memory)
    }

    /// Checks a host write before anything moves (see
    /// [`check_write`](crate::transfer::write::check_write)),
    /// refusing one on a capturing stream too.
    pub(crate) fn check_write(
        &mut self,
        descriptor: &CopyDescriptor,
        len: u64,
        stream: StreamId,
    ) -> Result<Option<CheckedWrite>, ServerError> {
        if self.is_capturing(stream) {
            return Err(ServerError::CaptureState {
                stream,
                reason: "host writes cannot be recorded into a graph".into(),
            });
        }
        crate::transfer::write::check_write(&mut self.transfers(), descriptor, len)
    }

    /// Reports `error` for work refused before it touched anything: to the
    /// stream's next `flush`/`sync` and to `on_failure`, poisoning nothing.
    pub(crate) fn refuse(&mut self, stream: StreamId, error: ServerError) {
        let cause = Arc::new(error);
        self.streams.defer_error(stream, &cause);
        self.on_failure(stream, &cause);
    }

    /// `Ok` when every slice in `reads` is trusted; else the refusal of
    /// work that would read untrusted bytes, naming the first such input and
    /// why it is untrusted.
    pub(crate) fn check_inputs(&self, reads: &[MemoryId]) -> Result<(), ServerError> {
        if self.streams.trust().is_empty() {
            return Ok(());
        }
        for input in reads {
            if let Err(ServerError::Untrusted { cause, .. }) = self.streams.check(*input) {
                return Err(ServerError::UntrustedInput {
                    input: *input,
                    cause,
                });
            }
        }
        Ok(())
    }

    pub(crate) fn capture_state(&self, stream: StreamId) -> CaptureState {
        self.graphs.state(stream)
    }

    /// Whether launches on `stream` are being recorded.
    pub(crate) fn is_capturing(&self, stream: StreamId) -> bool {
        self.capture_state(stream) == CaptureState::Capturing
    }
}

impl<C: WgpuCompiler> WriteScoped for WgpuServer<C> {
    type Streams = SchedulerMultiStream<ScheduledWgpuBackend>;
    type Capture = StreamCapture<ResolvedLaunch>;

    fn write_streams(&mut self) -> &mut Self::Streams {
        &mut self.streams
    }

    fn capturing(&mut self, stream: StreamId) -> Option<&mut Self::Capture> {
        self.graphs.recording(stream)
    }

    fn on_failure(&mut self, stream: StreamId, error: &ServerError) {
        self.failures += 1;
        self.timing.profiler_mut().invalidate(stream, error);
        self.logger.log(LogCategory::Launch, LogLevel::Basic, || {
            format!("operation on {stream} failed: {error}")
        });
    }
}

impl<C: WgpuCompiler + Default> DeviceService for WgpuServer<C> {
    /// Opens the device.
    ///
    /// # Panics
    ///
    /// When the device cannot be opened (no adapter, or none with that
    /// index): the seed's signature cannot return an error. The message says
    /// how to install an adapter. [`DeviceService::try_init`] (what
    /// `ComputeClient::load` calls) and [`WgpuServer::try_init`] return the
    /// error instead.
    fn init(device_id: DeviceId) -> Self {
        match WgpuServerOptions::new().device_id(device_id).open() {
            Ok(s) => s,
            Err(e) => panic!("WgpuServer::init({device_id}): {e}"),
        }
    }

    /// Opens the device, or says why it cannot ([`WgpuServer::try_init`]).
    fn try_init(device_id: DeviceId) -> Result<Self, ServerError> {
        WgpuServerOptions::new().device_id(device_id).open()
    }

    fn utilities(&self) -> ServerUtilitiesHandle {
        Arc::clone(&self.utilities) as ServerUtilitiesHandle
    }

    fn stage() -> DeviceServiceStage {
        DeviceServiceStage::Compute
    }
}

impl<C: WgpuCompiler> ServerStorage for WgpuServer<C> {
    type Storage = WgpuStorage;

    /// The buffer range behind `binding`. Work pending on any stream that
    /// touches the page is submitted first, so what the caller encodes on the
    /// buffer is ordered after it.
    fn get_resource(
        &mut self,
        binding: BufferBinding,
        _stream_id: StreamId,
    ) -> Result<ManagedResource<WgpuResource>, ServerError> {
        self.enter()?;
        let handle = self.resolve(&binding)?;
        self.streams.prepare_host_write(&[handle]);
        let resource =
            self.memory
                .manager_mut()
                .storage()
                .get(&handle)
                .ok_or(ServerError::UnknownHandle {
                    memory: binding.memory_id(),
                })?;
        Ok(ManagedResource { resource, handle })
    }
}
