//! A handle to one device's server that any thread can call: typed buffers,
//! checked launches, streams, profiling, graphs, memory and collectives.
//!
//! [`ComputeClient::load`] creates the server through
//! [`DeviceService::try_init`] the first time a device is asked for, and hands
//! out clones sharing it afterwards: one server per device per process
//! ([`ComputeClient::new`] wraps a server built by hand). Calls lock the
//! server for the enqueue only; waiting (`read`, `sync`, a profile's
//! duration) happens after the lock is released, so one thread blocked on a
//! read never stalls another thread's launches.
//!
//! A client is bound to one stream ([`StreamId::DEFAULT`] at first); every
//! call goes to that stream. [`ComputeClient::with_stream`] gives a client
//! of the same server on another stream: work on different streams may run
//! in any order except where it touches the same bytes, which the server
//! orders for you.
//!
//! Errors are the server's [`ServerError`]s. Buffers can be labelled
//! ([`Handle::with_label`](crate::Handle::with_label)): every error that names a labelled buffer names
//! it by its label. A launch is checked before it is enqueued (through
//! [`LaunchValidation`](crate::LaunchValidation)), so a launch whose arguments do not fit its kernel
//! is a [`ServerError::Launch`] naming the kernel, at the call.
//!
//! ```
//! use wgpu_server::prelude::*;
//!
//! let client = WgpuServerOptions::new().client()?;
//! let x = client.create_from_slice(&[1u32, 2, 3])?.with_label("x");
//! assert_eq!(client.read_vec::<u32>(&x)?, [1, 2, 3]);
//! # Ok::<(), ServerError>(())
//! ```

// One file per family of calls: `buffers.rs` (create, write, read, check,
// memory), `streams.rs` (flush, sync, profile windows), `graphs.rs`,
// `launch.rs` (checked launches), `collective.rs`, `communicator.rs` (the
// `Communicator` handle over them).
mod buffers;
mod collective;
mod communicator;
mod graphs;
mod launch;
mod streams;

pub use communicator::Communicator;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::{DeviceId, DeviceService, Server, ServerError, StreamId};

type Registry = Mutex<HashMap<(TypeId, DeviceId), Arc<dyn Any + Send + Sync>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// A shareable handle to one device's server, bound to one stream. Clones
/// share the server.
#[derive(Debug)]
pub struct ComputeClient<S> {
    device: DeviceId,
    stream: StreamId,
    server: Arc<Mutex<S>>,
}

impl<S> Clone for ComputeClient<S> {
    fn clone(&self) -> Self {
        Self {
            device: self.device,
            stream: self.stream,
            server: Arc::clone(&self.server),
        }
    }
}

impl<S: Server + DeviceService> ComputeClient<S> {
    /// The client of `device`, creating its server on first use (through
    /// [`DeviceService::try_init`]); a device that cannot be opened is the
    /// service's error, and nothing is registered, so a later call tries
    /// again.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let a = ComputeClient::<DefaultServer>::load(DeviceId(0))?;
    /// let b = ComputeClient::<DefaultServer>::load(DeviceId(0))?; // the same server
    /// let x = a.create_from_slice(&[5u32])?;
    /// assert_eq!(b.read_vec::<u32>(&x)?, [5]);
    /// assert!(ComputeClient::<DefaultServer>::load(DeviceId(99)).is_err());
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn load(device: DeviceId) -> Result<Self, ServerError> {
        let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
        let key = (TypeId::of::<S>(), device);
        if let Some(existing) = map.get(&key)
            && let Ok(server) = Arc::clone(existing).downcast::<Mutex<S>>()
        {
            return Ok(Self {
                device,
                stream: StreamId::DEFAULT,
                server,
            });
        }
        let server = Arc::new(Mutex::new(S::try_init(device)?));
        map.insert(key, server.clone());
        Ok(Self {
            device,
            stream: StreamId::DEFAULT,
            server,
        })
    }
}

impl<S: Server> ComputeClient<S> {
    /// A client over a server built by hand (not registered for `load`):
    /// any options, any compiler.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let server = WgpuServerOptions::new()
    ///     .timing(TimingMethod::System)
    ///     .open::<WgslPassthrough>()?; // WGSL kernels only
    /// let client = ComputeClient::new(DeviceId(0), server);
    /// assert_eq!(client.stream(), StreamId::DEFAULT);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn new(device: DeviceId, server: S) -> Self {
        Self {
            device,
            stream: StreamId::DEFAULT,
            server: Arc::new(Mutex::new(server)),
        }
    }

    /// The device this client talks to.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// The stream this client's calls go to.
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// A client of the same server whose calls go to `stream`. Streams are
    /// independent queues of work: the server orders work of different
    /// streams only where it touches the same bytes.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let side = client.with_stream(StreamId(1));
    /// let a = client.create_from_slice(&[1.0f32; 4])?;
    /// let b = side.create_from_slice(&[2.0f32; 4])?; // enqueued on stream 1
    /// // Reading `a` on stream 1 is ordered after stream 0's write of it.
    /// assert_eq!(side.read_vec::<f32>(&a)?, [1.0; 4]);
    /// side.sync()?;
    /// assert_eq!(client.read_vec::<f32>(&b)?, [2.0; 4]);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn with_stream(&self, stream: StreamId) -> Self {
        Self {
            device: self.device,
            stream,
            server: Arc::clone(&self.server),
        }
    }

    /// Exclusive access to the server for calls the client does not wrap.
    /// Hold it briefly: every other caller of this server waits.
    pub fn server(&self) -> MutexGuard<'_, S> {
        // A panic while holding the lock is a bug elsewhere; the server's own
        // state stays consistent between calls, so keep serving.
        self.server.lock().unwrap_or_else(|e| e.into_inner())
    }
}
