//! Building a server: opening the adapter (`try_init`, `try_init_with`)
//! and wiring the layers together (`new`, `try_new`).

use std::sync::Arc;

use compute_memory::MemoryManagement;
use compute_runtime::{
    DeviceId, LogCategory, LogLevel, MemoryConfiguration, MemoryDeviceProperties, ReleaseQueue,
    ServerError, ServerLogger, ServerUtilities, TimingMethod,
};
use compute_stream::SchedulerMultiStream;
use compute_wgsl::{DeviceCaps, WgpuCompilationOptions, WgpuCompiler};
use hashbrown::HashMap;

use crate::DeviceCaptures;
use crate::adapter;
use crate::backend::ScheduledWgpuBackend;
use crate::bind::BindGroupCache;
use crate::faults::DeviceFaults;
use crate::pipeline::PipelineCache;
use crate::poller::DevicePoller;
use crate::profile::Profiler;
use crate::server::{DEFAULT_TASKS_MAX, WgpuServer};
use crate::staging::HostStaging;
use crate::storage::WgpuStorage;

impl<C: WgpuCompiler + Default> WgpuServer<C> {
    /// Opens device `device_id` (see [`adapter`] for how it is chosen) with
    /// the default configuration.
    pub fn try_init(device_id: DeviceId) -> Result<Self, ServerError> {
        Self::try_init_with(device_id, MemoryConfiguration::Default, None)
    }

    /// Opens device `device_id` with a memory configuration and, when
    /// given, a forced timing method (else Device when the adapter has
    /// timestamp queries, System otherwise).
    pub fn try_init_with(
        device_id: DeviceId,
        memory_config: MemoryConfiguration,
        timing: Option<TimingMethod>,
    ) -> Result<Self, ServerError> {
        let (adapter, device, queue) = adapter::open(device_id)?;
        let info = adapter.get_info();
        let limits = device.limits();
        let memory_properties = adapter::memory_properties(&limits);
        let timing_method = timing.unwrap_or(
            if device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
                TimingMethod::Device
            } else {
                TimingMethod::System
            },
        );
        let logger = Arc::new(ServerLogger::from_env());
        let utilities = ServerUtilities {
            logger,
            adapter: adapter::summary(&info),
            memory: memory_properties,
            timing_method,
            max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            max_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
        };
        Self::try_new(
            memory_properties,
            memory_config,
            WgpuCompilationOptions::default(),
            device,
            queue,
            tasks_max_from_env(),
            info.backend,
            timing_method,
            utilities,
            DeviceCaptures::default(),
        )
    }
}

impl<C: WgpuCompiler + Default> WgpuServer<C> {
    /// Create a new server.
    ///
    /// # Panics
    ///
    /// When the memory configuration is invalid for the device (the message
    /// says why). [`WgpuServer::try_new`] returns that as an error instead.
    // The seed's constructor signature: one argument per wired layer.
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
        match Self::try_new(
            memory_properties,
            memory_config,
            compilation_options,
            device,
            queue,
            tasks_max,
            backend,
            timing_method,
            utilities,
            captures,
        ) {
            Ok(server) => server,
            Err(e) => panic!("WgpuServer::new: {e}"),
        }
    }

    /// [`WgpuServer::new`], returning an invalid memory configuration as
    /// [`ServerError::InvalidConfiguration`].
    // `new`'s arguments, which are the seed's.
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        memory_properties: MemoryDeviceProperties,
        memory_config: MemoryConfiguration,
        compilation_options: WgpuCompilationOptions,
        device: wgpu::Device,
        queue: wgpu::Queue,
        tasks_max: usize,
        backend: wgpu::Backend,
        timing_method: TimingMethod,
        mut utilities: ServerUtilities,
        captures: DeviceCaptures,
    ) -> Result<Self, ServerError> {
        let storage = WgpuStorage::new(device.clone(), memory_properties.alignment);
        let memory = MemoryManagement::new(storage, memory_properties, &memory_config)?;
        let faults = DeviceFaults::install(&device);
        let poller = DevicePoller::start(device.clone(), Arc::clone(&faults));
        let caps = DeviceCaps {
            limits: device.limits(),
            features: device.features(),
        };
        let timing_method = if timing_method == TimingMethod::Device
            && !caps.features.contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            TimingMethod::System
        } else {
            timing_method
        };
        utilities.timing_method = timing_method;
        utilities.memory = memory_properties;
        let logger = Arc::clone(&utilities.logger);
        let mut scheduled = ScheduledWgpuBackend::new(queue.clone());
        if timing_method == TimingMethod::Device
            && caps
                .features
                .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
            && logger.level(LogCategory::Sync) >= LogLevel::Basic
        {
            scheduled.timing = Some(crate::batch_timing::BatchTiming::new(
                device.clone(),
                queue.get_timestamp_period(),
            ));
        }
        Ok(Self {
            streams: SchedulerMultiStream::new(scheduled, tasks_max),
            device,
            queue,
            memory,
            releases: ReleaseQueue::new(),
            released: Vec::new(),
            compiler: C::default(),
            options: compilation_options,
            caps,
            pipelines: PipelineCache::default(),
            bind_groups: BindGroupCache::default(),
            poller,
            faults,
            utilities: Arc::new(utilities),
            logger,
            profiler: Profiler::new(timing_method),
            held: Vec::new(),
            last_sync_gpu_ns: Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
            staging: HostStaging::default(),
            readback: Default::default(),
            captures,
            capture_states: HashMap::new(),
            recordings: HashMap::new(),
            mode_before_capture: None,
            backend,
            failures: 0,
        })
    }
}

/// `WGPU_SERVER_TASKS_MAX`, else [`DEFAULT_TASKS_MAX`].
fn tasks_max_from_env() -> usize {
    std::env::var("WGPU_SERVER_TASKS_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v: &usize| *v > 0)
        .unwrap_or(DEFAULT_TASKS_MAX)
}
