//! `WgpuServer`: the state of one device's server and the `Server` impl.
//!
//! The methods here are short on purpose: each checks the device, drains
//! freed handles, and hands the work to the module that owns it (`launch`,
//! `transfer`) inside a write scope where it writes buffers. Capabilities
//! with issues of their own answer [`ServerError::Unsupported`] (listed in
//! `docs/status.md`).

use std::sync::Arc;

use compute_graph::{CaptureState, StreamCapture};
use compute_memory::MemoryManagement;
use compute_runtime::{
    BufferBinding, Bytes, ComputeStorage, CopyDescriptor, CubeCount, CubeKernel, DeviceId,
    DeviceService, DeviceServiceStage, DynFut, GraphId, KernelArguments, LaunchMode, LogCategory,
    LogLevel, ManagedMemoryHandle, ManagedResource, MemoryAllocationMode, MemoryId,
    ProfileDuration, ProfileError, ProfilingToken, ReleaseQueue, Server, ServerError, ServerLogger,
    ServerStorage, ServerUtilities, ServerUtilitiesHandle, StorageHandle, StreamId,
    StreamMemoryReport, TimingMethod,
};
use compute_stream::{SchedulerMultiStream, WriteScoped, write_scope};
use compute_wgsl::{DeviceCaps, WgpuCompilationOptions, WgpuCompiler};
use hashbrown::HashMap;

use crate::DeviceCaptures;
use crate::backend::ScheduledWgpuBackend;
use crate::bind::BindGroupCache;
use crate::faults::DeviceFaults;
use crate::launch::ResolvedLaunch;
use crate::pipeline::PipelineCache;
use crate::poller::DevicePoller;
use crate::profile::Profiler;
use crate::staging::HostStaging;
use crate::storage::{WgpuResource, WgpuStorage};
use crate::transfer;

/// Default bound on tasks a stream encodes before it submits.
pub const DEFAULT_TASKS_MAX: usize = 128;

/// Wgpu compute server.
pub struct WgpuServer<C: WgpuCompiler> {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) streams: SchedulerMultiStream<ScheduledWgpuBackend>,
    pub(crate) memory: MemoryManagement<WgpuStorage>,
    pub(crate) releases: Arc<ReleaseQueue>,
    pub(crate) released: Vec<MemoryId>,
    pub(crate) compiler: C,
    pub(crate) options: WgpuCompilationOptions,
    pub(crate) caps: DeviceCaps,
    pub(crate) pipelines: PipelineCache,
    pub(crate) bind_groups: BindGroupCache,
    pub(crate) poller: DevicePoller,
    pub(crate) faults: Arc<DeviceFaults>,
    pub(crate) utilities: Arc<ServerUtilities>,
    pub(crate) logger: Arc<ServerLogger>,
    pub(crate) profiler: Profiler,
    /// Queued launches waiting for `compile_queued`, in order.
    pub(crate) held: Vec<crate::queued::HeldLaunch>,
    /// GPU time the last `sync` completed, in ns (`u64::MAX`: not measured).
    pub(crate) last_sync_gpu_ns: Arc<std::sync::atomic::AtomicU64>,
    pub(crate) staging: HostStaging,
    pub(crate) readback: crate::readback::ReadbackPool,
    pub(crate) captures: DeviceCaptures,
    pub(crate) capture_states: HashMap<StreamId, CaptureState>,
    pub(crate) recordings: HashMap<StreamId, StreamCapture<ResolvedLaunch>>,
    /// The allocation mode `graph_prepare` replaced, restored by
    /// `end_capture`.
    pub(crate) mode_before_capture: Option<MemoryAllocationMode>,
    pub(crate) backend: wgpu::Backend,
    pub(crate) failures: u64,
}

impl<C: WgpuCompiler> std::fmt::Debug for WgpuServer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuServer")
            .field("adapter", &self.utilities.adapter.name)
            .field("backend", &self.backend)
            .field("compiler", &self.compiler)
            .field("options", &self.options)
            .field("streams", &self.streams.stream_ids())
            .field("pipelines", &self.pipelines.len())
            .field("bind_groups", &self.bind_groups.len())
            .field("tasks_max", &self.streams.tasks_max())
            .finish_non_exhaustive()
    }
}

impl<C: WgpuCompiler> WgpuServer<C> {
    /// The wgpu device (for interop and tests).
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The wgpu queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Failures settled by write scopes so far (each was told to
    /// `on_failure`).
    pub fn failure_count(&self) -> u64 {
        self.failures
    }

    /// Queue submissions made so far.
    pub fn submit_count(&self) -> u64 {
        self.streams.submit_count()
    }

    /// Compiled pipelines in the cache.
    pub fn cached_pipelines(&self) -> usize {
        self.pipelines.len()
    }

    /// Host allocations `staging` had to make (the rest came from its pool).
    pub fn staging_allocations(&self) -> u64 {
        self.staging.allocations
    }

    /// Starts recording a timeline of every launch (per-launch GPU
    /// timestamps; see [`crate::Timeline`]). Needs timestamp queries.
    pub fn start_timeline(&mut self) -> Result<(), ServerError> {
        crate::timeline::start(self)
    }

    /// Stops recording and resolves the timeline (submits every stream).
    pub fn finish_timeline(&mut self) -> DynFut<Result<crate::Timeline, ServerError>> {
        crate::timeline::finish(self)
    }

    /// Whether `kernel`'s pipeline is cached under the server's options: the
    /// lookup a launch makes on a hit.
    pub fn is_compiled(&self, kernel: &dyn CubeKernel) -> bool {
        self.pipelines.get(kernel.id(), &self.options).is_some()
    }

    /// GPU time of the work the last `sync` completed (batches submitted
    /// since the sync before it), when batch timing is on: device timing,
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`, and the `sync` log category at
    /// `basic` or more when the server was built (`COMPUTE_LOG=sync=basic`).
    pub fn last_sync_gpu_time(&self) -> Option<std::time::Duration> {
        match self
            .last_sync_gpu_ns
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            u64::MAX => None,
            ns => Some(std::time::Duration::from_nanos(ns)),
        }
    }

    /// Queued launches not encoded yet.
    pub fn held_launches(&self) -> usize {
        self.held.len()
    }

    /// Timestamp slots ever created by profile windows (they are pooled).
    pub fn profile_slots_created(&self) -> usize {
        self.profiler.slots_created()
    }

    /// Profile windows open now.
    pub fn open_profile_windows(&self) -> usize {
        self.profiler.open_windows()
    }

    /// How profile windows are timed.
    pub fn timing_method(&self) -> TimingMethod {
        self.profiler.method
    }

    /// The graph registry this server records into.
    pub fn captures(&self) -> &DeviceCaptures {
        &self.captures
    }

    /// Frees the slices of handles dropped since the last call.
    pub(crate) fn drain_releases(&mut self) {
        self.streams
            .drain_released(&self.releases, &mut self.released);
        for id in self.released.drain(..) {
            self.logger
                .log(LogCategory::Memory, LogLevel::Full, || format!("free {id}"));
            self.memory.release(id);
        }
    }

    /// Checks the device and frees dropped handles: the preamble of every
    /// call.
    pub(crate) fn enter(&mut self) -> Result<(), ServerError> {
        self.faults.lost()?;
        self.drain_releases();
        // Held (queued) launches come before anything issued after them.
        if !self.held.is_empty() {
            crate::queued::compile_and_encode(self);
        }
        Ok(())
    }

    /// Resolves a binding to its page range, checking it lies inside its
    /// slice.
    pub(crate) fn resolve(&self, binding: &BufferBinding) -> Result<StorageHandle, ServerError> {
        let memory = binding.memory_id();
        let slice = self
            .memory
            .get(memory)
            .ok_or(ServerError::UnknownHandle { memory })?;
        let capacity = self.memory.size_of(memory).unwrap_or(slice.size);
        match binding.end() {
            Some(end) if end <= capacity => Ok(StorageHandle {
                id: slice.id,
                offset: slice.offset + binding.offset,
                size: binding.size,
            }),
            _ => Err(ServerError::OutOfBounds {
                memory,
                offset: binding.offset,
                size: binding.size,
                capacity,
            }),
        }
    }

    /// Whether a binding covers its whole slice (a full overwrite).
    pub(crate) fn covers(&self, binding: &BufferBinding) -> bool {
        binding.offset == 0 && self.memory.size_of(binding.memory_id()) == Some(binding.size)
    }

    /// Runs a buffer-writing operation in a write scope.
    pub(crate) fn scoped<R>(
        &mut self,
        stream: StreamId,
        writes: &[BufferBinding],
        body: impl FnOnce(&mut Self) -> Result<R, ServerError>,
    ) -> Result<R, ServerError> {
        write_scope(self, stream, writes, |s, b| s.covers(b), body)
    }

    pub(crate) fn capture_state(&self, stream: StreamId) -> CaptureState {
        self.capture_states
            .get(&stream)
            .copied()
            .unwrap_or_default()
    }

    /// Whether launches on `stream` are being recorded.
    pub(crate) fn is_capturing(&self, stream: StreamId) -> bool {
        self.capture_state(stream) == CaptureState::Capturing
    }

    /// Graphs stored in the device's registry.
    pub fn graph_count(&self) -> usize {
        self.captures.len()
    }
}

impl<C: WgpuCompiler> WriteScoped for WgpuServer<C> {
    type Streams = SchedulerMultiStream<ScheduledWgpuBackend>;
    type Capture = StreamCapture<ResolvedLaunch>;

    fn write_streams(&mut self) -> &mut Self::Streams {
        &mut self.streams
    }

    fn capturing(&mut self, stream: StreamId) -> Option<&mut Self::Capture> {
        self.recordings.get_mut(&stream)
    }

    fn on_failure(&mut self, stream: StreamId, error: &ServerError) {
        self.failures += 1;
        self.profiler.invalidate(stream, error);
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
    /// When no adapter can be opened (the seed's `init` cannot fail); the
    /// message says how to install one. [`WgpuServer::try_init`] returns the
    /// error instead.
    fn init(device_id: DeviceId) -> Self {
        match Self::try_init(device_id) {
            Ok(s) => s,
            Err(e) => panic!("WgpuServer::init({device_id}): {e}"),
        }
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
        let resource = self
            .memory
            .storage()
            .get(&handle)
            .ok_or(ServerError::UnknownHandle {
                memory: binding.memory_id(),
            })?;
        Ok(ManagedResource { resource, handle })
    }
}

impl<C: WgpuCompiler> Server for WgpuServer<C> {
    fn sync(
        &mut self,
        handles: Vec<BufferBinding>,
        stream_id: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        if let Err(e) = self.enter().and_then(|()| {
            self.capture_state(stream_id)
                .allow_host_wait(stream_id, "sync")
        }) {
            return Box::pin(async move { Err(e) });
        }
        self.streams.submit(stream_id);
        let deferred = self.streams.take_deferred(stream_id);
        let poisoned: Result<(), ServerError> = handles
            .iter()
            .try_for_each(|h| self.streams.check(h.memory_id()));
        // Host writes of any stream may be what the caller waits for; they
        // reach the GPU only with a submission.
        let host_writes = self.streams.backend().host_writes_pending;
        let index = if host_writes {
            self.streams.backend_mut().flush_host_writes()
        } else {
            let (_, stream) = self.streams.encoder(stream_id);
            stream.last_submission.clone()
        };
        let done = self.poller.wait(index);
        let faults = Arc::clone(&self.faults);
        let logger = Arc::clone(&self.logger);
        let gpu = self.streams.backend().timing.as_ref().map(|t| t.counter());
        let last_gpu = Arc::clone(&self.last_sync_gpu_ns);
        let started = std::time::Instant::now();
        Box::pin(async move {
            match done.await {
                Ok(r) => r?,
                Err(_) => faults.lost()?,
            }
            // Map callbacks of the batches this wait covered ran inside the
            // poll, so their GPU time is in the counter now.
            let gpu_ns = gpu.map(|c| c.swap(0, std::sync::atomic::Ordering::Relaxed));
            if let Some(ns) = gpu_ns {
                last_gpu.store(ns, std::sync::atomic::Ordering::Relaxed);
            }
            logger.log(LogCategory::Sync, LogLevel::Basic, || match gpu_ns {
                Some(ns) => format!(
                    "sync {stream_id}: drained in {:?}, completing {:?} of GPU work",
                    started.elapsed(),
                    std::time::Duration::from_nanos(ns)
                ),
                None => format!("sync {stream_id}: drained in {:?}", started.elapsed()),
            });
            faults.lost()?;
            faults.take_uncaptured()?;
            deferred?;
            poisoned
        })
    }

    fn logger(&self) -> Arc<ServerLogger> {
        Arc::clone(&self.logger)
    }

    fn utilities(&self) -> Arc<ServerUtilities> {
        Arc::clone(&self.utilities)
    }

    fn staging(
        &mut self,
        sizes: &[usize],
        _stream_id: StreamId,
    ) -> Result<Vec<Bytes>, ServerError> {
        self.enter()?;
        let max = usize::try_from(self.utilities.memory.max_buffer_size).unwrap_or(usize::MAX);
        if let Some(big) = sizes.iter().find(|s| **s > max) {
            return Err(ServerError::LimitExceeded {
                limit: "max_buffer_size",
                requested: *big as u64,
                max: max as u64,
            });
        }
        Ok(sizes.iter().map(|s| self.staging.take(*s)).collect())
    }

    fn initialize_memory(
        &mut self,
        memory: ManagedMemoryHandle,
        size: u64,
        stream_id: StreamId,
    ) -> Result<(), ServerError> {
        self.enter()?;
        if memory.is_bound() {
            return Err(ServerError::AlreadyInitialized {
                memory: memory.id(),
            });
        }
        let id = memory.id();
        self.memory.bind(id, size)?;
        if let Err(e) = memory.attach_release(&self.releases) {
            self.memory.release(id);
            return Err(e);
        }
        self.logger.log(LogCategory::Memory, LogLevel::Full, || {
            format!("initialize {id} ({size} bytes) on {stream_id}")
        });
        Ok(())
    }

    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream_id: StreamId,
    ) -> DynFut<Result<Vec<Bytes>, ServerError>> {
        let prepared = self
            .enter()
            .and_then(|()| {
                self.capture_state(stream_id)
                    .allow_host_wait(stream_id, "read")
            })
            .and_then(|()| transfer::read(self, descriptors, stream_id));
        match prepared {
            Ok(future) => future,
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, Bytes)>, stream_id: StreamId) {
        if let Err(e) = self.enter() {
            self.streams.defer_error(stream_id, &Arc::new(e));
            return;
        }
        for (descriptor, data) in descriptors {
            // Each write is its own scope: one bad descriptor poisons its
            // own destination only.
            let target = descriptor.binding.clone();
            let written = self.scoped(stream_id, std::slice::from_ref(&target), |s| {
                if s.is_capturing(stream_id) {
                    return Err(ServerError::CaptureState {
                        stream: stream_id,
                        reason: "host writes cannot be recorded into a graph".into(),
                    });
                }
                transfer::write(s, &descriptor, &data, stream_id)
            });
            // The queue has its own copy now: the allocation can serve the
            // next `staging` call (only if the caller kept no clone).
            if written.is_ok() {
                self.staging.give_back(data);
            }
        }
    }

    fn check(
        &mut self,
        handles: Vec<BufferBinding>,
        _stream_id: StreamId,
    ) -> Result<(), ServerError> {
        self.enter()?;
        for h in &handles {
            self.resolve(h)?;
            self.streams.check(h.memory_id())?;
        }
        Ok(())
    }

    unsafe fn launch(
        &mut self,
        kernel: Box<dyn CubeKernel>,
        count: CubeCount,
        args: KernelArguments,
        stream_id: StreamId,
        launch_mode: LaunchMode,
    ) {
        if launch_mode == LaunchMode::Queue
            && !self.is_capturing(stream_id)
            && (!self.held.is_empty() || self.pipelines.get(kernel.id(), &self.options).is_none())
        {
            self.held.push(crate::queued::HeldLaunch {
                kernel,
                count,
                args,
                stream: stream_id,
            });
            return;
        }
        crate::launch::launch(self, kernel.as_ref(), count, args, stream_id);
    }

    fn compile_queued(&mut self) {
        crate::queued::compile_and_encode(self);
    }

    fn flush(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        self.streams.submit(stream_id);
        self.streams.backend_mut().flush_host_writes();
        self.streams.take_deferred(stream_id)
    }

    fn start_profile(&mut self, stream_id: StreamId) -> Result<ProfilingToken, ServerError> {
        self.enter()?;
        self.capture_state(stream_id)
            .allow_host_wait(stream_id, "start_profile")?;
        crate::profiling::start(self, stream_id)
    }

    fn end_profile(
        &mut self,
        stream_id: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        crate::profiling::end(self, stream_id, token)
    }

    fn abandon_profile(&mut self, stream_id: StreamId, token: ProfilingToken) {
        crate::profiling::abandon(self, stream_id, token);
    }

    fn memory_report(&mut self, _stream_id: StreamId) -> Option<StreamMemoryReport> {
        self.drain_releases();
        Some(self.memory.report())
    }

    fn stream_ids(&self) -> Vec<StreamId> {
        self.streams.stream_ids()
    }

    fn memory_cleanup(&mut self, _stream_id: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        let pages = self.memory.cleanup();
        for page in &pages {
            self.streams.forget_page(*page);
            self.bind_groups.forget_page(*page);
        }
        self.logger.log(LogCategory::Memory, LogLevel::Basic, || {
            format!(
                "cleanup: {} page(s) given back, {} bytes still reserved",
                pages.len(),
                self.memory.report().bytes_reserved()
            )
        });
        Ok(())
    }

    fn allocation_mode(&mut self, mode: MemoryAllocationMode, _stream_id: StreamId) {
        self.logger.log(LogCategory::Memory, LogLevel::Basic, || {
            format!("allocation mode: {mode:?}")
        });
        self.memory.set_mode(mode);
    }

    fn graph_prepare(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        crate::graph::prepare(self, stream_id)
    }

    fn begin_capture(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        crate::graph::begin(self, stream_id)
    }

    fn end_capture(&mut self, stream_id: StreamId) -> Result<GraphId, ServerError> {
        crate::graph::end(self, stream_id)
    }

    fn replay(&mut self, graph: GraphId, stream_id: StreamId) -> Result<(), ServerError> {
        crate::graph::replay(self, graph, stream_id)
    }

    fn graph_destroy(&mut self, graph: GraphId, _stream_id: StreamId) {
        // Dropping the graph unpins its slices; a replay already encoded or
        // submitted is ordered before any later user of those pages by the
        // scheduler (the wgpu guarantee the seed names). Unknown ids: no-op.
        let _ = self.captures.remove(graph);
    }

    fn start_profile_at_launch(
        &mut self,
        stream_id: StreamId,
    ) -> Result<ProfilingToken, ServerError> {
        self.enter()?;
        self.capture_state(stream_id)
            .allow_host_wait(stream_id, "start_profile_at_launch")?;
        crate::profiling::start_at_launch(self, stream_id)
    }
}
