//! `BridgeServer`: cubecl's `Server` contract over this project's
//! `WgpuServer`, call by call.
//!
//! Each call translates cubecl's ids and ranges ([`crate::memory`]), hands
//! the work to the server, and translates the answer back
//! ([`crate::errors`]). Two differences of contract are bridged here:
//! - cubecl reports a failed launch or write only on the buffers it left
//!   unwritten: its `sync` and `flush` answer device faults only. This
//!   server also reports the stream's first failure at the next `sync` or
//!   `flush`; the bridge leaves that report out there, and the failure is
//!   still on the buffers (every read, `check` and `sync` of them answers
//!   it), so nothing is hidden.
//! - cubecl's `sync(handles)` is a barrier then the claim check; the bridge
//!   waits for the server's sync, then asks the server's `check`.

use std::sync::Arc;

use cubecl_common::bytes::Bytes as CubeBytes;
use cubecl_common::device::Device as _;
use cubecl_common::device::{DeviceId, DeviceService, ServerUtilitiesHandle, ServiceId};
use cubecl_common::profile::ProfileDuration;
use cubecl_core::WgpuCompilationOptions;
use cubecl_environment::future::DynFut;
use cubecl_environment::stream::StreamId;
use cubecl_runtime::device::WgpuDevice;
use cubecl_runtime::execution::LaunchMode;
use cubecl_runtime::kernel::CubeKernel;
use cubecl_runtime::logging::ServerLogger;
use cubecl_runtime::memory_management::{
    ManagedMemoryHandle, MemoryAllocationMode, StreamMemoryReport,
};
use cubecl_runtime::server::{
    BufferBinding, CopyDescriptor, CubeCount, KernelArguments, ProfileError, ProfilingToken,
    Server, ServerError, ServerUtilities,
};
use wgpu_server::runtime::{self as inner_rt, Server as _, ServerError as Inner};
use wgpu_server::{LoopBounding, WgpuServer, WgpuServerOptions, WgslPassthrough};

use crate::compile::Kernels;
use crate::errors::{is_device_fault, to_cubecl};
use crate::launch::{InfoBuffers, Queued};
use crate::layout::ExactLayoutPolicy;
use crate::memory::{MemoryTable, stream};

/// The server behind a [`crate::BridgeRuntime`] client.
pub struct BridgeServer {
    /// cubecl's id of this server's device.
    pub(crate) device_id: DeviceId,
    pub(crate) inner: WgpuServer<WgslPassthrough>,
    pub(crate) utilities: Arc<ServerUtilities>,
    pub(crate) memory: MemoryTable,
    pub(crate) kernels: Kernels,
    pub(crate) info: InfoBuffers,
    pub(crate) queued: Vec<Queued>,
}

impl std::fmt::Debug for BridgeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeServer")
            .field("allocations", &self.memory.len())
            .field("queued", &self.queued.len())
            .finish_non_exhaustive()
    }
}

impl BridgeServer {
    /// Opens the adapter `device_id` (a cubecl `WgpuDevice`) names
    /// ([`crate::device`]) and builds a server on it.
    pub fn open(device_id: DeviceId) -> Result<Self, Inner> {
        let device = WgpuDevice::from_id(device_id);
        let rank = crate::device::pick(&device, &crate::device::adapters()).map_err(|e| {
            Inner::DeviceLost {
                reason: e.to_string(),
            }
        })?;
        // cubecl is not told about cooperative matrices (its properties
        // come from the adapter without them), so they are not requested.
        let (adapter, device, queue) =
            wgpu_server::adapter::open(inner_rt::DeviceId(rank as u64), false)?;
        Self::from_parts(device_id, &adapter, device, queue, WgpuServerOptions::new())
    }

    /// A server with `options` (its device id set here) on a device of
    /// `adapter` opened already (by [`open`](Self::open), or by the caller:
    /// `cubecl-wgpu`'s `init_device`), for cubecl's `device_id`.
    pub fn from_parts(
        device_id: DeviceId,
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: WgpuServerOptions,
    ) -> Result<Self, Inner> {
        let info = adapter.get_info();
        let props = crate::properties::device_properties(adapter, &device);
        let inner_features = device.features();
        // The server's own device id (what its collectives pair ranks by):
        // cubecl's id, type and index, which is unique in the process.
        let id = crate::collective::inner_device(device_id);
        let options = match loop_bounding() {
            Some(bounding) => options.loop_bounding(bounding),
            None => options,
        };
        let inner = options.device_id(id).build::<WgslPassthrough>(
            device,
            queue,
            info.backend,
            wgpu_server::adapter::summary(&info),
        )?;
        let alignment = usize::try_from(props.memory.alignment).unwrap_or(256);
        let (mut utilities, _captures) = ServerUtilities::init(
            ServiceId::of::<BridgeServer>(device_id),
            "wgpu-server<wgsl>",
            props,
            Default::default(),
            Arc::new(ServerLogger::default()),
            ExactLayoutPolicy {
                alignment: alignment as u64,
            },
        );
        // cubecl-spirv's options, for SPIR-V that naga's front end reads:
        // version 1.3 (`StorageBuffer` is core; no `UniformId`), vectors of
        // at most 4, and room for the address block as push constants
        // (`spirv/` replaces the block with bindings either way).
        let options = WgpuCompilationOptions {
            supports_u64: inner_features.contains(wgpu::Features::SHADER_INT64),
            vulkan: cubecl_core::VulkanCompilationOptions {
                max_spirv_version: (1, 3),
                max_vector_size: 4,
                push_constant_size: 4096,
                ..Default::default()
            },
            ..Default::default()
        };
        // The server's collectives, natively (`collective.rs`).
        utilities.device_transport = Some(crate::collective::transport());
        Ok(Self {
            device_id,
            inner,
            utilities: Arc::new(utilities),
            memory: MemoryTable::default(),
            kernels: Kernels::new(options),
            info: InfoBuffers::default(),
            queued: Vec::new(),
        })
    }

    /// The server underneath, for what cubecl's contract does not reach.
    pub fn inner(&mut self) -> &mut WgpuServer<WgslPassthrough> {
        &mut self.inner
    }

    fn resolve_all(
        &self,
        handles: &[BufferBinding],
    ) -> Result<Vec<inner_rt::BufferBinding>, Inner> {
        handles
            .iter()
            .map(|h| self.memory.resolve(h).map(|r| r.binding))
            .collect()
    }

    /// A device fault only: what cubecl's `flush` and `sync` report.
    fn device_faults_only(result: Result<(), Inner>) -> Result<(), ServerError> {
        match result {
            Err(e) if is_device_fault(&e) => Err(to_cubecl(&e)),
            _ => Ok(()),
        }
    }
}

impl DeviceService for BridgeServer {
    /// cubecl's signature cannot fail: a machine without an adapter panics
    /// here, naming why (the server's own `DeviceService::init` does the
    /// same). [`BridgeServer::open`] returns the error.
    fn init(device_id: DeviceId) -> Self {
        match Self::open(device_id) {
            Ok(server) => server,
            Err(e) => panic!("the wgpu server could not open {device_id}: {e}"),
        }
    }

    fn utilities(&self) -> ServerUtilitiesHandle {
        self.utilities.clone() as ServerUtilitiesHandle
    }
}

impl Server for BridgeServer {
    fn initialize_memory(
        &mut self,
        memory: ManagedMemoryHandle,
        size: u64,
        stream_id: StreamId,
    ) -> Result<(), ServerError> {
        crate::probe::touched(stream_id.value);
        let inner = &mut self.inner;
        self.memory
            .insert(memory, size, |slice, bytes| {
                inner.initialize_memory(slice, bytes, stream(stream_id))
            })
            .map_err(|e| to_cubecl(&e))
    }

    fn logger(&self) -> Arc<ServerLogger> {
        self.utilities.logger.clone()
    }

    fn utilities(&self) -> Arc<ServerUtilities> {
        self.utilities.clone()
    }

    fn read(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream_id: StreamId,
    ) -> DynFut<Result<Vec<CubeBytes>, ServerError>> {
        match self.read_start(descriptors, stream(stream_id)) {
            Ok(fut) => fut,
            Err(e) => {
                let e = crate::errors::read_error(&e);
                Box::pin(async move { Err(e) })
            }
        }
    }

    fn write(&mut self, descriptors: Vec<(CopyDescriptor, CubeBytes)>, stream_id: StreamId) {
        self.write_all(descriptors, stream(stream_id));
    }

    fn sync(
        &mut self,
        handles: Vec<BufferBinding>,
        stream_id: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        let s = stream(stream_id);
        // The barrier: waited for here, on cubecl's device thread, because
        // the claim check after it needs the server.
        let drained = cubecl_environment::future::block_on(self.inner.sync(Vec::new(), s));
        if let Err(e) = Self::device_faults_only(drained) {
            return Box::pin(async move { Err(e) });
        }
        let checked = self
            .resolve_all(&handles)
            .and_then(|bindings| self.inner.check(bindings, s))
            .map_err(|e| to_cubecl(&e));
        Box::pin(async move { checked })
    }

    fn check(
        &mut self,
        handles: Vec<BufferBinding>,
        stream_id: StreamId,
    ) -> Result<(), ServerError> {
        self.resolve_all(&handles)
            .and_then(|bindings| self.inner.check(bindings, stream(stream_id)))
            .map_err(|e| to_cubecl(&e))
    }

    unsafe fn launch(
        &mut self,
        kernel: Box<dyn CubeKernel>,
        count: CubeCount,
        bindings: KernelArguments,
        stream_id: StreamId,
        launch_mode: LaunchMode,
    ) {
        self.launch_kernel(kernel, count, bindings, stream(stream_id), launch_mode);
    }

    fn flush(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        Self::device_faults_only(self.inner.flush(stream(stream_id)))
    }

    fn compile_queued(&mut self) {
        self.compile_queued_now(inner_rt::StreamId::DEFAULT);
    }

    /// The server's report (device-wide: its streams share one memory
    /// manager), in cubecl's shape.
    fn memory_report(&mut self, stream_id: StreamId) -> Option<StreamMemoryReport> {
        let report = self.inner.memory_report(stream(stream_id))?;
        Some(crate::report::to_cubecl(stream_id, &report))
    }

    fn memory_cleanup(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        self.memory.sweep();
        self.inner
            .memory_cleanup(stream(stream_id))
            .map_err(|e| to_cubecl(&e))
    }

    fn start_profile(&mut self, stream_id: StreamId) -> Result<ProfilingToken, ServerError> {
        self.inner
            .start_profile(stream(stream_id))
            .map(|t| ProfilingToken { id: t.id })
            .map_err(|e| to_cubecl(&e))
    }

    /// A device without timestamp queries has no at-launch window (it
    /// would need the launch's own timestamps): a host-timed window from
    /// now, which also spans the launch, measures it as upstream does
    /// there (cubecl's autotune opens these windows on every device).
    fn start_profile_at_launch(
        &mut self,
        stream_id: StreamId,
    ) -> Result<ProfilingToken, ServerError> {
        let at_launch = self.inner.start_profile_at_launch(stream(stream_id));
        let token = match at_launch {
            Err(Inner::Unsupported { .. }) => self.inner.start_profile(stream(stream_id)),
            other => other,
        };
        token
            .map(|t| ProfilingToken { id: t.id })
            .map_err(|e| to_cubecl(&e))
    }

    fn end_profile(
        &mut self,
        stream_id: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        self.end_window(stream(stream_id), token)
    }

    fn abandon_profile(&mut self, stream_id: StreamId, token: ProfilingToken) {
        self.inner
            .abandon_profile(stream(stream_id), inner_rt::ProfilingToken { id: token.id });
    }

    /// `Persistent` maps to the server's persistent pool; `Dedicated` (an
    /// allocation outside every pool) has no counterpart and routes as
    /// `Auto`.
    fn allocation_mode(&mut self, mode: MemoryAllocationMode, stream_id: StreamId) {
        let mode = match mode {
            MemoryAllocationMode::Persistent => inner_rt::MemoryAllocationMode::Persistent,
            _ => inner_rt::MemoryAllocationMode::Auto,
        };
        self.inner.allocation_mode(mode, stream(stream_id));
    }
}

/// Set to `every` to compile with [`LoopBounding::Every`] (wgpu's loop
/// counter and index clamps in every checked module, as upstream's wgpu
/// runtime has them) or `unproven` (the server's default: only where the
/// server cannot prove that the loops end and the indices are in range),
/// whatever the caller's options say: for measuring what they cost
/// (docs/burn.md).
const LOOP_BOUNDING_ENV: &str = "CUBECL_BRIDGE_LOOP_BOUNDING";

fn loop_bounding() -> Option<LoopBounding> {
    match std::env::var(LOOP_BOUNDING_ENV).as_deref() {
        Ok("unproven") => Some(LoopBounding::Unproven),
        Ok("every") => Some(LoopBounding::Every),
        _ => None,
    }
}
