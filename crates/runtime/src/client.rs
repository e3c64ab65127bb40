//! A handle to one device's server that any thread can call.
//!
//! [`ComputeClient::load`] creates the server through
//! [`DeviceService::init`] the first time a device is asked for, and hands
//! out clones sharing it afterwards: one server per device per process. Calls
//! lock the server for the enqueue only; waiting (`read`, `sync`) happens
//! after the lock is released, so one thread blocked on a read never stalls
//! another thread's launches.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;

use crate::{
    BufferBinding, CubeCount, CubeKernel, DeviceId, DeviceService, Handle, KernelArguments,
    LaunchMode, ManagedMemoryHandle, Server, ServerError, StreamId,
};

type Registry = Mutex<HashMap<(TypeId, DeviceId), Arc<dyn Any + Send + Sync>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// A shareable handle to one device's server.
#[derive(Debug)]
pub struct ComputeClient<S> {
    device: DeviceId,
    server: Arc<Mutex<S>>,
}

impl<S> Clone for ComputeClient<S> {
    fn clone(&self) -> Self {
        Self {
            device: self.device,
            server: Arc::clone(&self.server),
        }
    }
}

impl<S: Server + DeviceService> ComputeClient<S> {
    /// The client of `device`, creating its server on first use.
    pub fn load(device: DeviceId) -> Self {
        let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
        let key = (TypeId::of::<S>(), device);
        if let Some(existing) = map.get(&key)
            && let Ok(server) = Arc::clone(existing).downcast::<Mutex<S>>()
        {
            return Self { device, server };
        }
        let server = Arc::new(Mutex::new(S::init(device)));
        map.insert(key, server.clone());
        Self { device, server }
    }
}

impl<S: Server> ComputeClient<S> {
    /// A client over a server built by hand (not registered for `load`).
    pub fn new(device: DeviceId, server: S) -> Self {
        Self {
            device,
            server: Arc::new(Mutex::new(server)),
        }
    }

    /// The device this client talks to.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Exclusive access to the server for calls the client does not wrap.
    pub fn server(&self) -> MutexGuard<'_, S> {
        // A panic while holding the lock is a bug elsewhere; the server's own
        // state stays consistent between calls, so keep serving.
        self.server.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves `size` bytes on `stream`.
    pub fn empty(&self, size: u64, stream: StreamId) -> Result<Handle, ServerError> {
        let memory = ManagedMemoryHandle::new();
        self.server()
            .initialize_memory(memory.clone(), size, stream)?;
        Ok(Handle::new(memory, size))
    }

    /// Reserves memory for `data` and writes it. A write that failed when it
    /// was enqueued is reported here: the handle is [`Server::check`]ed,
    /// which waits for nothing (the stream is not drained), so a failure
    /// only the device can report needs [`sync`](Self::sync).
    pub fn create(&self, data: impl Into<Bytes>, stream: StreamId) -> Result<Handle, ServerError> {
        let data = data.into();
        let handle = self.empty(data.len() as u64, stream)?;
        self.server()
            .write(vec![(handle.copy_descriptor(), data)], stream);
        self.server().check(vec![handle.binding()], stream)?;
        Ok(handle)
    }

    /// Reads the handles' bytes back, blocking this thread only.
    pub fn read(&self, handles: &[Handle], stream: StreamId) -> Result<Vec<Bytes>, ServerError> {
        let descriptors = handles.iter().map(Handle::copy_descriptor).collect();
        let future = self.server().read(descriptors, stream);
        futures::executor::block_on(future)
    }

    /// Reads one handle back.
    pub fn read_one(&self, handle: &Handle, stream: StreamId) -> Result<Bytes, ServerError> {
        let mut out = self.read(std::slice::from_ref(handle), stream)?;
        out.pop().ok_or(ServerError::InvalidArgument {
            reason: "read returned no data".into(),
        })
    }

    /// Launches a kernel.
    ///
    /// # Safety
    ///
    /// As [`Server::launch`].
    pub unsafe fn launch(
        &self,
        kernel: Box<dyn CubeKernel>,
        count: CubeCount,
        args: KernelArguments,
        stream: StreamId,
    ) {
        // SAFETY: forwarded contract.
        unsafe {
            self.server()
                .launch(kernel, count, args, stream, LaunchMode::Execute)
        }
    }

    /// Drains `stream` and reports what failed on it.
    pub fn sync(&self, stream: StreamId) -> Result<(), ServerError> {
        let future = self.server().sync(Vec::new(), stream);
        futures::executor::block_on(future)
    }

    /// Whether the handles' bytes can be trusted now.
    pub fn check(&self, bindings: Vec<BufferBinding>, stream: StreamId) -> Result<(), ServerError> {
        self.server().check(bindings, stream)
    }
}
