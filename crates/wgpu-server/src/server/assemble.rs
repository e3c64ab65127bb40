//! Building a server: opening the adapter ([`WgpuServerOptions::open`],
//! `try_init`) and wiring the layers together onto a device
//! ([`WgpuServerOptions::build`], the seed's `new`). This is the one place
//! the parts of [`WgpuServer`] are made.

use std::sync::Arc;

use compute_memory::MemoryManagement;
use compute_runtime::{
    DeviceId, HostTransfers, LogCategory, LogLevel, MemoryConfiguration, MemoryDeviceProperties,
    ServerError, ServerLogger, ServerUtilities, TimingMethod,
};
use compute_stream::{LateFaults, SchedulerMultiStream};
use compute_wgsl::{DeviceCaps, WgpuCompilationOptions, WgpuCompiler};

use crate::collective::Collectives;
use crate::device::host_import::HostImport;
use crate::device::pool::{DeviceLease, PoolKey};
use crate::device::{
    Gpu, adapter,
    faults::DeviceFaults,
    poller::{DevicePoller, PollLock},
    wait::Waiter,
};
use crate::graph::DeviceCaptures;
use crate::graph::Graphs;
use crate::launch::Kernels;
use crate::memory::Memory;
use crate::memory::pinned::PinnedPool;
use crate::memory::storage::WgpuStorage;
use crate::memory::upload::UploadPool;
use crate::server::ServerTrustKey;
use crate::server::WgpuServer;
use crate::server::options::WgpuServerOptions;
use crate::stream::ScheduledWgpuBackend;
use crate::stream::submit::Submitter;
use crate::stream::timing::BatchTiming;
use crate::timing::{Timing, windows::Profiler};

impl WgpuServerOptions {
    /// Opens the adapter these options name (see [`crate::adapter`]) and
    /// builds a server on a new device of it.
    pub fn open<C: WgpuCompiler + Default>(self) -> Result<WgpuServer<C>, ServerError> {
        let index = self.adapter.map_or(self.device_id.0, |i| i as u64);
        let cooperative = !self.without_matrices;
        let key = PoolKey {
            index: usize::try_from(index).unwrap_or(usize::MAX),
            choice: std::env::var(adapter::ADAPTER_ENV).ok(),
            cooperative,
        };
        let mut lease = DeviceLease::take(key, || adapter::open(DeviceId(index), cooperative))?;
        let info = lease.adapter().get_info();
        let summary = adapter::summary(&info);
        let (device, queue) = (lease.device().clone(), lease.queue().clone());
        let mut options = self;
        if device
            .features()
            .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        {
            options.matrix_configurations = Some(lease.adapter().cooperative_matrix_properties());
        }
        let mut server = options.build::<C>(device, queue, info.backend, summary)?;
        lease.watch(Arc::clone(server.gpu.faults()));
        server.lease = Some(lease);
        Ok(server)
    }

    /// Builds a server on a device the caller opened. `adapter` describes it
    /// in reports.
    pub fn build<C: WgpuCompiler + Default>(
        self,
        device: wgpu::Device,
        queue: wgpu::Queue,
        backend: wgpu::Backend,
        adapter: compute_runtime::AdapterSummary,
    ) -> Result<WgpuServer<C>, ServerError> {
        let limits = device.limits();
        let memory_properties = adapter::memory_properties(&limits);
        let timing = self.timing.unwrap_or(TimingMethod::Device);
        let logger = self
            .logger
            .clone()
            .unwrap_or_else(|| Arc::new(ServerLogger::from_env()));
        let utilities = ServerUtilities {
            logger,
            adapter,
            memory: memory_properties,
            timing_method: timing,
            max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            max_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            host_transfers: HostTransfers::Mapped,
        };
        assemble(
            Wiring {
                memory_properties,
                memory_config: self.memory.clone(),
                compilation: self.compilation,
                tasks_max: self.effective_tasks_max(),
                backend,
                timing,
                captures: self.captures.clone().unwrap_or_default(),
                device_id: self.device_id,
                transport: self.transport,
                collective_timeout: self.collective_timeout,
                collective_chunk_bytes: self.collective_chunk_bytes,
                import_host: self.effective_import_host(),
                cooperative_matrices: self.matrix_configurations.unwrap_or_default(),
            },
            device,
            queue,
            utilities,
        )
    }
}

impl<C: WgpuCompiler + Default> WgpuServer<C> {
    /// Options to build a server with, all at their defaults.
    pub fn options() -> WgpuServerOptions {
        WgpuServerOptions::new()
    }

    /// Opens device `device_id` (see [`crate::adapter`] for how it is
    /// chosen) with the default configuration.
    pub fn try_init(device_id: DeviceId) -> Result<Self, ServerError> {
        WgpuServerOptions::new().device_id(device_id).open()
    }

    /// Create a new server.
    ///
    /// # Panics
    ///
    /// When the memory configuration is invalid for the device (the message
    /// says why). [`WgpuServerOptions::build`] returns that as
    /// [`ServerError::InvalidConfiguration`] instead.
    // The seed's signature: ten positional arguments. Everything else builds
    // through `WgpuServerOptions`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        memory_properties: MemoryDeviceProperties,
        memory_config: MemoryConfiguration,
        compilation_options: WgpuCompilationOptions,
        device: wgpu::Device,
        queue: wgpu::Queue,
        tasks_max: usize,
        backend: wgpu::Backend,
        timing_method: TimingMethod,
        utilities: ServerUtilities,
        captures: DeviceCaptures,
    ) -> Self {
        let wiring = Wiring {
            memory_properties,
            memory_config,
            compilation: compilation_options,
            tasks_max,
            backend,
            timing: timing_method,
            captures,
            // The seed's constructor names no device; collectives see this
            // server as device 0 (build through `WgpuServerOptions` to set it).
            device_id: DeviceId(0),
            transport: None,
            collective_timeout: None,
            collective_chunk_bytes: None,
            import_host: (true, false),
            // The seed's constructor has no adapter to ask.
            cooperative_matrices: Vec::new(),
        };
        match assemble(wiring, device, queue, utilities) {
            Ok(server) => server,
            Err(e) => panic!("WgpuServer::new: {e}"),
        }
    }
}

/// What `new` and `build` both hand to [`assemble`].
struct Wiring {
    memory_properties: MemoryDeviceProperties,
    memory_config: MemoryConfiguration,
    compilation: WgpuCompilationOptions,
    tasks_max: usize,
    backend: wgpu::Backend,
    timing: TimingMethod,
    captures: DeviceCaptures,
    device_id: DeviceId,
    transport: Option<crate::CollectiveTransport>,
    collective_timeout: Option<std::time::Duration>,
    collective_chunk_bytes: Option<usize>,
    /// Whether reads may land in, and writes go through, imported host
    /// memory.
    import_host: (bool, bool),
    cooperative_matrices: Vec<wgpu::wgt::CooperativeMatrixProperties>,
}

/// Makes every part of a server on `device`.
fn assemble<C: WgpuCompiler + Default>(
    w: Wiring,
    device: wgpu::Device,
    queue: wgpu::Queue,
    mut utilities: ServerUtilities,
) -> Result<WgpuServer<C>, ServerError> {
    let storage = WgpuStorage::new(device.clone(), w.memory_properties.alignment);
    let manager = MemoryManagement::new(storage, w.memory_properties, &w.memory_config)?;
    let faults = DeviceFaults::install(&device);
    let poll_lock = PollLock::default();
    let poller = DevicePoller::start(device.clone(), Arc::clone(&faults), poll_lock.clone());
    let caps = DeviceCaps::of(device.limits(), device.features());
    let timestamps = caps.features.contains(wgpu::Features::TIMESTAMP_QUERY);
    // Device timing needs timestamp queries; without them it is System.
    let timing = match w.timing {
        TimingMethod::Device if !timestamps => TimingMethod::System,
        other => other,
    };
    utilities.timing_method = timing;
    utilities.memory = w.memory_properties;
    let pinned = w
        .import_host
        .0
        .then(|| HostImport::of(&device))
        .flatten()
        .map(|import| PinnedPool::new(import, device.clone()));
    utilities.host_transfers =
        pinned
            .as_ref()
            .map_or(HostTransfers::Mapped, |p| HostTransfers::Imported {
                alignment: p.alignment(),
            });
    let logger = Arc::clone(&utilities.logger);
    let host_transfers = utilities.host_transfers;
    logger.log(LogCategory::Memory, LogLevel::Basic, || {
        format!("host transfers: {host_transfers:?}")
    });
    let batch_timing = (timing == TimingMethod::Device
        && caps
            .features
            .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
        && logger.level(LogCategory::Sync) >= LogLevel::Basic)
        .then(|| {
            Arc::new(BatchTiming::new(
                device.clone(),
                queue.get_timestamp_period(),
            ))
        });
    // Late verdicts of the GPU (audited indirect counts) and of collectives
    // poison through the scheduler's own trust registry.
    let late = Arc::new(LateFaults::default());
    let submitter = Submitter::new(
        device.clone(),
        queue.clone(),
        poll_lock.clone(),
        Arc::clone(&late),
        batch_timing,
    );
    let upload = UploadPool::default();
    let scheduled = ScheduledWgpuBackend::new(submitter, upload.clone());
    let (streams, trust_key) = SchedulerMultiStream::with_late_faults(scheduled, w.tasks_max, late);
    let waiter = Waiter::new(
        device.clone(),
        poller.handle(),
        Arc::clone(&faults),
        poll_lock,
    );
    Ok(WgpuServer {
        gpu: Gpu::new(
            (device, queue),
            w.backend,
            faults,
            poller,
            waiter,
            w.cooperative_matrices,
        ),
        streams,
        memory: Memory::new(manager, upload, pinned, w.import_host.1),
        kernels: Kernels::new(C::default(), w.compilation),
        timing: Timing::new(Profiler::new(timing)),
        graphs: Graphs::new(w.captures),
        collectives: Collectives::new(
            w.device_id,
            w.transport,
            w.collective_timeout,
            w.collective_chunk_bytes,
        ),
        utilities: Arc::new(utilities),
        logger,
        failures: 0,
        trust_key: ServerTrustKey::new(trust_key),
        lease: None,
    })
}
