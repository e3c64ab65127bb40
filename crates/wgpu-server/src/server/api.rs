//! The `Server` impl: every method checks the device and its arguments and
//! hands the work to the module that owns it (`launch.rs`, `transfer/`,
//! `profile.rs`, `graph.rs` beside it) inside a write scope where it writes
//! buffers.

use std::sync::Arc;

use compute_runtime::{
    BufferBinding, Bytes, CopyDescriptor, CubeCount, CubeKernel, DynFut, GraphId, KernelArguments,
    LaunchMode, LogCategory, LogLevel, ManagedMemoryHandle, MemoryAllocationMode, ProfileDuration,
    ProfileError, ProfilingToken, Server, ServerError, ServerLogger, ServerUtilities, StreamId,
    StreamMemoryReport,
};
use compute_wgsl::WgpuCompiler;

use compute_stream::settle_batch_failures;

use crate::server::WgpuServer;
use crate::transfer::{read, write};

impl<C: WgpuCompiler> Server for WgpuServer<C> {
    fn sync(
        &mut self,
        handles: Vec<BufferBinding>,
        stream_id: StreamId,
    ) -> DynFut<Result<(), ServerError>> {
        crate::server::sync::sync(self, handles, stream_id)
    }

    fn logger(&self) -> Arc<ServerLogger> {
        Arc::clone(&self.logger)
    }

    fn utilities(&self) -> Arc<ServerUtilities> {
        Arc::clone(&self.utilities)
    }

    /// Host buffers for writes: none larger than the largest reservation
    /// `initialize_memory` would make on the stream, the one limit both
    /// share (`MemoryManagement::max_reservation`).
    fn staging(&mut self, sizes: &[usize], stream_id: StreamId) -> Result<Vec<Bytes>, ServerError> {
        self.enter()?;
        let mode = self
            .graphs
            .allocation_mode(stream_id, self.memory.manager().mode());
        for size in sizes {
            let size = u64::try_from(*size).unwrap_or(u64::MAX);
            self.memory.manager().check_reservation(size, mode)?;
        }
        Ok(sizes
            .iter()
            .map(|s| self.memory.staging_mut().take(*s))
            .collect())
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
        let mode = self
            .graphs
            .allocation_mode(stream_id, self.memory.manager().mode());
        self.memory.manager_mut().bind_in(id, size, mode)?;
        if let Err(e) = memory.attach_release(self.memory.releases()) {
            self.memory.manager_mut().release(id);
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
            .and_then(|()| read::read(&mut self.transfers(), descriptors, stream_id));
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
            // A write refused by its checks moved no byte: its target keeps
            // its trust, and the refusal is reported like any failure.
            let checked = match self.check_write(&descriptor, data.len() as u64, stream_id) {
                Ok(checked) => checked,
                Err(e) => {
                    self.refuse(stream_id, e);
                    continue;
                }
            };
            // Each write is its own scope: a write that fails once bytes may
            // have moved poisons its own destination only.
            let target = descriptor.binding.clone();
            let written = match checked {
                None => Ok(()),
                Some(checked) => {
                    self.scoped_overwrite(stream_id, std::slice::from_ref(&target), |s| {
                        write::write_checked(
                            &mut s.transfers(),
                            checked,
                            &descriptor,
                            &data,
                            stream_id,
                        )
                    })
                }
            };
            // The queue has its own copy now: the allocation can serve the
            // next `staging` call (only if the caller kept no clone).
            if written.is_ok() {
                self.memory.staging_mut().give_back(data);
            }
        }
    }

    fn validate_write(
        &mut self,
        descriptor: &CopyDescriptor,
        len: u64,
        stream_id: StreamId,
    ) -> Result<(), ServerError> {
        self.enter()?;
        self.check_write(descriptor, len, stream_id).map(|_| ())
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
            && (self.kernels.has_held() || !self.kernels.is_compiled(kernel.as_ref()))
        {
            self.kernels.hold(crate::launch::queued::HeldLaunch {
                kernel,
                count,
                args,
                stream: stream_id,
            });
            return;
        }
        crate::server::launch::launch(self, kernel.as_ref(), count, args, stream_id);
    }

    fn compile_queued(&mut self) {
        crate::server::launch::compile_and_encode(self);
    }

    fn flush(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        // A batch held behind a collective goes to the applier, which
        // submits it once the result is in: a flush waits for no rank.
        self.streams.hand_off(stream_id);
        self.streams.backend_mut().flush_host_writes();
        settle_batch_failures(self);
        self.streams.take_deferred(stream_id)
    }

    fn start_profile(&mut self, stream_id: StreamId) -> Result<ProfilingToken, ServerError> {
        self.enter()?;
        self.capture_state(stream_id)
            .allow_host_wait(stream_id, "start_profile")?;
        crate::server::profile::start(self, stream_id)
    }

    fn end_profile(
        &mut self,
        stream_id: StreamId,
        token: ProfilingToken,
    ) -> Result<ProfileDuration, ProfileError> {
        crate::server::profile::end(self, stream_id, token)
    }

    fn abandon_profile(&mut self, stream_id: StreamId, token: ProfilingToken) {
        crate::server::profile::abandon(self, stream_id, token);
    }

    /// The device's report, whatever the stream: every stream allocates from
    /// the one manager (see the trait doc).
    fn memory_report(&mut self, _stream_id: StreamId) -> Option<StreamMemoryReport> {
        self.drain_releases();
        Some(self.memory.manager().report())
    }

    fn stream_ids(&self) -> Vec<StreamId> {
        self.streams.stream_ids()
    }

    fn memory_cleanup(&mut self, _stream_id: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        let pages = self.memory.manager_mut().cleanup();
        for page in &pages {
            self.streams.forget_page(*page);
            self.kernels.forget_page(*page);
        }
        self.logger.log(LogCategory::Memory, LogLevel::Basic, || {
            format!(
                "cleanup: {} page(s) given back, {} bytes still reserved",
                pages.len(),
                self.memory.manager().report().bytes_reserved()
            )
        });
        Ok(())
    }

    fn allocation_mode(&mut self, mode: MemoryAllocationMode, _stream_id: StreamId) {
        self.logger.log(LogCategory::Memory, LogLevel::Basic, || {
            format!("allocation mode: {mode:?}")
        });
        self.memory.manager_mut().set_mode(mode);
    }

    fn graph_prepare(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        crate::server::graph::prepare(self, stream_id)
    }

    fn begin_capture(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        crate::server::graph::begin(self, stream_id)
    }

    fn end_capture(&mut self, stream_id: StreamId) -> Result<GraphId, ServerError> {
        crate::server::graph::end(self, stream_id)
    }

    fn replay(&mut self, graph: GraphId, stream_id: StreamId) -> Result<(), ServerError> {
        crate::server::graph::replay(self, graph, stream_id)
    }

    fn graph_destroy(&mut self, graph: GraphId, _stream_id: StreamId) {
        crate::server::graph::destroy(self, graph);
    }

    fn start_profile_at_launch(
        &mut self,
        stream_id: StreamId,
    ) -> Result<ProfilingToken, ServerError> {
        self.enter()?;
        self.capture_state(stream_id)
            .allow_host_wait(stream_id, "start_profile_at_launch")?;
        crate::server::profile::start_at_launch(self, stream_id)
    }
}
