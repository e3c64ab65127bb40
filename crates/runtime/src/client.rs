//! A handle to one device's server that any thread can call: typed buffers,
//! checked launches, streams, profiling, graphs, memory and collectives.
//!
//! [`ComputeClient::load`] creates the server through
//! [`DeviceService::init`] the first time a device is asked for, and hands
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
//! ([`Handle::with_label`]): every error that names a labelled buffer names
//! it by its label. A launch is checked before it is enqueued (through
//! [`LaunchValidation`]), so a launch whose arguments do not fit its kernel
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

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;

use crate::{
    AccessChecks, ComputeWait, CubeCount, CubeKernel, DeviceId, DeviceService, GraphId, Handle,
    KernelArguments, LaunchMode, LaunchValidation, ManagedMemoryHandle, MemoryAllocationMode, Pod,
    ProfileError, ProfilingToken, Reduction, Server, ServerCommunication, ServerError, StreamId,
    StreamMemoryReport, pod,
};

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
    /// [`DeviceService::init`], which may panic when the device cannot be
    /// opened; [`ComputeClient::new`] over a server opened by hand reports
    /// that as an error instead).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let a = ComputeClient::<DefaultServer>::load(DeviceId(0));
    /// let b = ComputeClient::<DefaultServer>::load(DeviceId(0)); // the same server
    /// let x = a.create_from_slice(&[5u32])?;
    /// assert_eq!(b.read_vec::<u32>(&x)?, [5]);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn load(device: DeviceId) -> Self {
        let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
        let key = (TypeId::of::<S>(), device);
        if let Some(existing) = map.get(&key)
            && let Ok(server) = Arc::clone(existing).downcast::<Mutex<S>>()
        {
            return Self {
                device,
                stream: StreamId::DEFAULT,
                server,
            };
        }
        let server = Arc::new(Mutex::new(S::init(device)));
        map.insert(key, server.clone());
        Self {
            device,
            stream: StreamId::DEFAULT,
            server,
        }
    }
}

/// Drops a profile window if the closure measured in it panics.
struct AbandonOnUnwind<'a, S: Server> {
    client: &'a ComputeClient<S>,
    token: Option<ProfilingToken>,
}

impl<S: Server> Drop for AbandonOnUnwind<'_, S> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.client
                .server()
                .abandon_profile(self.client.stream, token);
        }
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

    // ---- buffers ----------------------------------------------------------

    /// Reserves `size` bytes, uninitialized: a kernel's output. Reading it
    /// before anything wrote it returns whatever bytes the memory held.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let out = client.empty(4 * 1024)?.with_label("out");
    /// assert_eq!(out.size, 4096);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn empty(&self, size: u64) -> Result<Handle, ServerError> {
        let memory = ManagedMemoryHandle::new();
        self.server()
            .initialize_memory(memory.clone(), size, self.stream)?;
        Ok(Handle::new(memory, size))
    }

    /// Reserves memory for `data` and writes it. A write that failed when it
    /// was enqueued is reported here: the handle is [`Server::check`]ed,
    /// which waits for nothing (the stream is not drained), so a failure
    /// only the device can report needs [`sync`](Self::sync).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let raw = client.create(vec![1u8, 2, 3, 4])?;
    /// assert_eq!(&client.read_one(&raw)?[..], [1, 2, 3, 4]);
    /// let odd = client.create(Bytes::from_static(&[1, 2, 3]))?; // any length
    /// assert_eq!(odd.size, 3);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn create(&self, data: impl Into<Bytes>) -> Result<Handle, ServerError> {
        let data = data.into();
        let handle = self.empty(data.len() as u64)?;
        self.write(&handle, data)?;
        Ok(handle)
    }

    /// Reserves memory for `values` and writes them (little-endian). `f16`
    /// and `bf16` data go as their `u16` bits.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.create_from_slice(&[0.5f32, 1.5, 2.5])?;
    /// let ids = client.create_from_slice(&[7i64, -7])?;
    /// assert_eq!((x.size, ids.size), (12, 16));
    /// assert_eq!(client.read_vec::<i64>(&ids)?, [7, -7]);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn create_from_slice<T: Pod>(&self, values: &[T]) -> Result<Handle, ServerError> {
        self.create(pod::to_bytes(values))
    }

    /// Writes `data` to the start of `handle` (host to device). Enqueue-time
    /// failures (a size over the handle, a misaligned length, a write inside
    /// a graph capture) are returned here; a whole-handle write makes its
    /// bytes trusted again after a failure poisoned them.
    pub fn write(&self, handle: &Handle, data: impl Into<Bytes>) -> Result<(), ServerError> {
        let data = data.into();
        if data.len() as u64 > handle.size {
            // Refused before it is enqueued: the handle stays as it was.
            return Err(ServerError::OutOfBounds {
                memory: handle.memory.id(),
                offset: handle.offset,
                size: data.len() as u64,
                capacity: handle.size,
            });
        }
        let mut target = handle.clone();
        target.size = data.len() as u64;
        let mut server = self.server();
        server.write(vec![(target.copy_descriptor(), data)], self.stream);
        server.check(vec![target.binding()], self.stream)
    }

    /// Writes `values` to the start of `handle`.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.create_from_slice(&[0u32; 4])?;
    /// client.write_from_slice(&x, &[1u32, 2, 3, 4])?;
    /// assert_eq!(client.read_vec::<u32>(&x)?, [1, 2, 3, 4]);
    /// // Too many values for the handle: an error at the call, naming it.
    /// let err = client.write_from_slice(&x.clone().with_label("x"), &[0u32; 5]).unwrap_err();
    /// assert!(err.to_string().contains("`x`"), "{err}");
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn write_from_slice<T: Pod>(
        &self,
        handle: &Handle,
        values: &[T],
    ) -> Result<(), ServerError> {
        self.write(handle, pod::to_bytes(values))
    }

    /// Reads the handles' bytes back, blocking this thread only: one wait
    /// for all of them.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let a = client.create_from_slice(&[1u32, 2])?;
    /// let b = client.create_from_slice(&[3u32])?;
    /// let bytes = client.read(&[&a, &b])?;
    /// assert_eq!((bytes[0].len(), bytes[1].len()), (8, 4));
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn read(&self, handles: &[&Handle]) -> Result<Vec<Bytes>, ServerError> {
        let descriptors = handles.iter().map(|h| h.copy_descriptor()).collect();
        let future = self.server().read(descriptors, self.stream);
        futures::executor::block_on(future)
    }

    /// Reads one handle back.
    pub fn read_one(&self, handle: &Handle) -> Result<Bytes, ServerError> {
        let mut out = self.read(&[handle])?;
        out.pop().ok_or(ServerError::InvalidArgument {
            reason: "read returned no data".into(),
        })
    }

    /// Reads one handle back as values. A handle whose bytes work that
    /// failed wrote is an error naming it (by label, when it has one).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.create_from_slice(&[1.0f64, 2.0])?;
    /// assert_eq!(client.read_vec::<f64>(&x)?, [1.0, 2.0]);
    /// // The same bytes as u32 words: four of them.
    /// assert_eq!(client.read_vec::<u32>(&x)?.len(), 4);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn read_vec<T: Pod>(&self, handle: &Handle) -> Result<Vec<T>, ServerError> {
        pod::from_bytes(&self.read_one(handle)?)
    }

    /// Whether the handles' bytes can be trusted now, without waiting:
    /// failures known at enqueue time (a launch that was refused, a write
    /// out of bounds). A fault only the device can report needs
    /// [`sync`](Self::sync) first.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.create_from_slice(&[1u32; 4])?.with_label("weights");
    /// client.check(&[&x])?;
    /// // An unchecked launch that cannot compile poisons what it would write...
    /// let bad = WgslKernel::new(
    ///     "bad",
    ///     "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
    ///      @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
    ///     "main",
    ///     [1, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// );
    /// let args = KernelArguments::handles([&x]);
    /// // SAFETY: it never runs: it does not compile.
    /// unsafe { client.server().launch(Box::new(bad), CubeCount::x(1), args, client.stream(), LaunchMode::Execute) };
    /// // ...and `check` names it by its label.
    /// let err = client.check(&[&x]).unwrap_err();
    /// assert!(err.to_string().contains("`weights`"), "{err}");
    /// assert!(matches!(err.root_cause(), ServerError::Compilation { .. }));
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn check(&self, handles: &[&Handle]) -> Result<(), ServerError> {
        let bindings = handles.iter().map(|h| h.binding()).collect();
        self.server().check(bindings, self.stream)
    }

    // ---- streams ----------------------------------------------------------

    /// Submits the stream's pending work and reports an enqueue-time failure
    /// of it not reported yet, without waiting for the GPU.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.create_from_slice(&[0u32; 4])?;
    /// let bad = WgslKernel::new(
    ///     "bad",
    ///     "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
    ///      @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
    ///     "main",
    ///     [1, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// );
    /// // SAFETY: it does not compile, so it never runs.
    /// unsafe { client.server().launch(Box::new(bad), CubeCount::x(1), KernelArguments::handles([&x]), client.stream(), LaunchMode::Execute) };
    /// // The raw launch returned nothing; the stream's next flush reports it, once.
    /// assert!(matches!(client.flush(), Err(ServerError::Deferred { .. })));
    /// client.flush()?;
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn flush(&self) -> Result<(), ServerError> {
        self.server().flush(self.stream)
    }

    /// Waits until the stream's work has run and reports what failed on it
    /// (the first failure not reported yet, or a device fault).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let _x = client.create_from_slice(&[1u8; 256])?;
    /// client.flush()?; // submitted, not waited for
    /// client.sync()?;  // done
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn sync(&self) -> Result<(), ServerError> {
        let future = self.server().sync(Vec::new(), self.stream);
        futures::executor::block_on(future)
    }

    // ---- profiling --------------------------------------------------------

    /// Opens a profile window on the stream: close it with
    /// [`end_profile`](Self::end_profile). Windows nest.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.empty(1 << 16)?;
    /// let outer = client.start_profile()?;
    /// let inner = client.start_profile()?;
    /// client.write(&x, vec![1u8; 1 << 16])?;
    /// let write = client.end_profile(inner)?;
    /// client.write(&x, vec![2u8; 1 << 16])?;
    /// let both = client.end_profile(outer)?;
    /// println!("one write {write:?}, two writes {both:?}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_profile(&self) -> Result<ProfilingToken, ServerError> {
        self.server().start_profile(self.stream)
    }

    /// Closes a window and waits for its duration: the GPU time (or, with
    /// `TimingMethod::System`, the wall time) of the work enqueued on the
    /// stream inside it.
    pub fn end_profile(&self, token: ProfilingToken) -> Result<Duration, ProfileError> {
        let duration = self.server().end_profile(self.stream, token)?;
        futures::executor::block_on(duration.resolve())
    }

    /// Runs `work` inside a profile window and returns its result with the
    /// window's duration. A window whose work failed is
    /// [`ProfileError::Invalidated`].
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.empty(1 << 20)?;
    /// let (bytes, took) = client.profile(|| client.write(&x, vec![0u8; 1 << 20]))?;
    /// bytes?;
    /// println!("1 MiB written in {took:?}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn profile<R>(&self, work: impl FnOnce() -> R) -> Result<(R, Duration), ProfileError> {
        let token = self.start_profile()?;
        let mut guard = AbandonOnUnwind {
            client: self,
            token: Some(token),
        };
        let out = work();
        let token =
            guard
                .token
                .take()
                .ok_or(ProfileError::Server(ServerError::InvalidArgument {
                    reason: "profile window lost".into(),
                }))?;
        let duration = self.end_profile(token)?;
        Ok((out, duration))
    }

    // ---- graphs -----------------------------------------------------------

    /// Prepares the stream for a capture: call it, run the work once (the
    /// warm-up: kernels compile, memory settles), then
    /// [`capture`](Self::capture) it.
    pub fn graph_prepare(&self) -> Result<(), ServerError> {
        self.server().graph_prepare(self.stream)
    }

    /// Starts recording the stream's launches into a graph (they do not
    /// run). Host writes and reads are refused until
    /// [`end_capture`](Self::end_capture).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let copy = WgslKernel::new(
    ///     "copy",
    ///     "@group(0) @binding(0) var<storage, read> a: array<f32>;
    ///      @group(0) @binding(1) var<storage, read_write> b: array<f32>;
    ///      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    ///          if (id.x < arrayLength(&b)) { b[id.x] = a[id.x]; }
    ///      }",
    ///     "main",
    ///     [64, 1, 1],
    ///     vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    /// );
    /// let (a, b) = (client.create_from_slice(&[1.0f32; 64])?, client.empty(256)?);
    /// let step = || client.launch(copy.clone(), CubeCount::x(1), KernelArguments::handles([&a, &b]));
    /// client.graph_prepare()?;
    /// step()?; // warm-up
    /// client.begin_capture()?;
    /// step()?; // recorded, not run
    /// assert!(client.write_from_slice(&a, &[0.0f32; 64]).is_err()); // no host writes in a capture
    /// let graph = client.end_capture()?;
    /// client.write_from_slice(&a, &[9.0f32; 64])?; // a new input...
    /// client.replay(graph)?; // ...and the recorded launch again
    /// assert_eq!(client.read_vec::<f32>(&b)?, [9.0; 64]);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn begin_capture(&self) -> Result<(), ServerError> {
        self.server().begin_capture(self.stream)
    }

    /// Stops recording and returns the graph.
    pub fn end_capture(&self) -> Result<GraphId, ServerError> {
        self.server().end_capture(self.stream)
    }

    /// Records the launches `work` makes into a graph: `begin_capture`,
    /// `work`, `end_capture`. When `work` fails the capture is ended and
    /// dropped, and its error returned.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let mut k = KernelBuilder::new("inc", [64, 1, 1]);
    /// let x = k.output(Scalar::U32);
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let v = k.load(x, i);
    /// let one = k.u32(1);
    /// let v = k.add(v, one);
    /// k.store(x, i, v);
    /// let inc = k.build()?;
    ///
    /// let data = client.create_from_slice(&[0u32; 64])?;
    /// let step = || client.launch(inc.clone(), CubeCount::x(1), KernelArguments::handles([&data]));
    /// client.graph_prepare()?;
    /// step()?; // warm-up: compiles, runs once
    /// let graph = client.capture(step)?;
    /// client.replay(graph)?;
    /// client.replay(graph)?;
    /// assert_eq!(client.read_vec::<u32>(&data)?, [3; 64]);
    /// client.graph_destroy(graph);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capture(
        &self,
        work: impl FnOnce() -> Result<(), ServerError>,
    ) -> Result<GraphId, ServerError> {
        self.begin_capture()?;
        let recorded = work();
        let graph = self.end_capture();
        match (recorded, graph) {
            (Ok(()), graph) => graph,
            (Err(e), Ok(graph)) => {
                self.graph_destroy(graph);
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// Replays a graph on the stream, against the buffers it was captured
    /// with (write new inputs into them first).
    pub fn replay(&self, graph: GraphId) -> Result<(), ServerError> {
        self.server().replay(graph, self.stream)
    }

    /// Releases a graph and the buffers it kept alive.
    pub fn graph_destroy(&self, graph: GraphId) {
        self.server().graph_destroy(graph, self.stream);
    }

    // ---- memory -----------------------------------------------------------

    /// The device's memory, pool by pool: bytes in use, reserved, peaks.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.empty(1 << 20)?;
    /// let report = client.memory_report();
    /// assert!(report.bytes_in_use() >= 1 << 20);
    /// println!("{report}");
    /// drop(x);
    /// client.memory_cleanup()?; // give unused pages back to the device
    /// assert_eq!(client.memory_report().bytes_in_use(), 0);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn memory_report(&self) -> StreamMemoryReport {
        self.server().memory_report(self.stream).unwrap_or_default()
    }

    /// Gives memory the server keeps for reuse back to the device.
    pub fn memory_cleanup(&self) -> Result<(), ServerError> {
        self.server().memory_cleanup(self.stream)
    }

    /// How new reservations are served (`Persistent`: exact-size reuse, for
    /// steady-state loops).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// client.allocation_mode(MemoryAllocationMode::Persistent);
    /// for _ in 0..3 {
    ///     let scratch = client.empty(4096)?; // the same slice every time
    ///     drop(scratch);
    /// }
    /// client.allocation_mode(MemoryAllocationMode::Auto);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn allocation_mode(&self, mode: MemoryAllocationMode) {
        self.server().allocation_mode(mode, self.stream);
    }
}

impl<S: LaunchValidation> ComputeClient<S> {
    /// Checks a launch, wrapping what is wrong in [`ServerError::Launch`].
    fn validate(
        &self,
        server: &mut S,
        kernel: &dyn CubeKernel,
        count: &CubeCount,
        args: &KernelArguments,
    ) -> Result<AccessChecks, ServerError> {
        server
            .validate_launch(kernel, count, args, self.stream)
            .map_err(|cause| ServerError::Launch {
                kernel: kernel.name().to_string(),
                cause: Arc::new(cause),
            })
    }

    /// Launches a kernel whose memory accesses are bounds-checked (the
    /// default for IR and WGSL kernels). The launch is checked first:
    /// arguments that do not fit the kernel (buffer count, scalars, a
    /// binding smaller than the kernel needs, an unknown or out-of-bounds
    /// handle, a count over the device's limits), a kernel that does not
    /// compile, or one compiled without bounds checks, are a
    /// [`ServerError::Launch`] naming the kernel, and nothing is enqueued.
    /// Failures only the device can see are reported as usual: by `check`,
    /// `read` and `sync` of what it wrote.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let mut k = KernelBuilder::new("double", [64, 1, 1]);
    /// let x = k.output(Scalar::F32);
    /// let n = k.scalar_arg(Scalar::U32);
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let inside = k.lt(i, n);
    /// k.if_(inside, |k| {
    ///     let v = k.load(x, i);
    ///     let v = k.add(v, v);
    ///     k.store(x, i, v);
    /// });
    /// let double = k.build()?;
    ///
    /// let data = client.create_from_slice(&[1.0f32, 2.0, 3.0])?;
    /// let args = KernelArguments::handles([&data]).with_scalars(double.pack_scalars(&[Lit::U32(3)])?);
    /// client.launch(double.clone(), CubeCount::x(1), args)?;
    /// assert_eq!(client.read_vec::<f32>(&data)?, [2.0, 4.0, 6.0]);
    ///
    /// // Two buffers for a kernel of one: refused at the call, by name.
    /// let err = client
    ///     .launch(double, CubeCount::x(1), KernelArguments::handles([&data, &data]))
    ///     .unwrap_err();
    /// assert!(err.to_string().starts_with("launch of `double`"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn launch(
        &self,
        kernel: impl CubeKernel,
        count: CubeCount,
        args: KernelArguments,
    ) -> Result<(), ServerError> {
        let mut server = self.server();
        match self.validate(&mut server, &kernel, &count, &args)? {
            AccessChecks::Checked => {}
            AccessChecks::Unchecked => {
                return Err(ServerError::Launch {
                    kernel: kernel.name().to_string(),
                    cause: Arc::new(ServerError::InvalidArgument {
                        reason: "the kernel is compiled without run-time bounds checks \
                                 (BoundsChecks::Unchecked), so launching it is unsafe: use \
                                 `launch_unchecked`"
                            .into(),
                    }),
                });
            }
        }
        // SAFETY: the server vouched (`LaunchValidation` is an unsafe
        // trait) that this launch's accesses are checked at run time.
        unsafe {
            server.launch(
                Box::new(kernel),
                count,
                args,
                self.stream,
                LaunchMode::Execute,
            );
        }
        Ok(())
    }

    /// Launches any kernel, bounds-checked or not, with the same checks of
    /// its arguments as [`launch`](Self::launch).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let fill = WgslKernel::new(
    ///     "fill",
    ///     "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
    ///      @compute @workgroup_size(4) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    ///          x[id.x] = 7u;
    ///      }",
    ///     "main",
    ///     [4, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// )
    /// .with_bounds_checks(BoundsChecks::Unchecked);
    /// let x = client.empty(16)?;
    /// // SAFETY: one workgroup of 4 invocations writes x[0..4], all inside x.
    /// unsafe { client.launch_unchecked(fill.clone(), CubeCount::x(1), KernelArguments::handles([&x]))? };
    /// assert_eq!(client.read_vec::<u32>(&x)?, [7; 4]);
    /// // The safe launch refuses it.
    /// assert!(client.launch(fill, CubeCount::x(1), KernelArguments::handles([&x])).is_err());
    /// # Ok::<(), ServerError>(())
    /// ```
    ///
    /// # Safety
    ///
    /// As [`Server::launch`]: a kernel compiled without bounds checks must
    /// not access memory outside its bindings.
    pub unsafe fn launch_unchecked(
        &self,
        kernel: impl CubeKernel,
        count: CubeCount,
        args: KernelArguments,
    ) -> Result<(), ServerError> {
        let mut server = self.server();
        self.validate(&mut server, &kernel, &count, &args)?;
        // SAFETY: forwarded contract.
        unsafe {
            server.launch(
                Box::new(kernel),
                count,
                args,
                self.stream,
                LaunchMode::Execute,
            );
        }
        Ok(())
    }
}

/// Collectives, for a server that implements them: each device's client
/// makes the same calls, in the same order, naming the same devices
/// (`devices`, in rank order). Buffers are untyped, so reductions say their
/// element type.
///
/// ```
/// use wgpu_server::prelude::*;
///
/// // Two devices of one adapter stand for two GPUs.
/// let devices = [DeviceId(10), DeviceId(11)];
/// let clients = devices
///     .iter()
///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
///     .collect::<Result<Vec<_>, _>>()?;
/// let mut sums = Vec::new();
/// for (rank, c) in clients.iter().enumerate() {
///     c.comm_init(&devices)?;
///     let src = c.create_from_slice(&[rank as f32 + 1.0; 8])?;
///     let dst = c.empty(32)?;
///     c.all_reduce(&src, &dst, Reduction::sum(DType::F32), &devices, ComputeWait::Wait)?;
///     sums.push(dst);
/// }
/// for (c, dst) in clients.iter().zip(&sums) {
///     assert_eq!(c.read_vec::<f32>(dst)?, [3.0; 8]); // 1 + 2 on every rank
/// }
/// # Ok::<(), ServerError>(())
/// ```
impl<S: Server + ServerCommunication> ComputeClient<S> {
    /// Joins the communicator of `devices` (every rank calls it).
    pub fn comm_init(&self, devices: &[DeviceId]) -> Result<(), ServerError> {
        self.server().comm_init(devices.to_vec())
    }

    /// Reduces every rank's `src` element-wise into every rank's `dst`.
    /// `Wait`: later work on the stream sees the result; `Overlap`: call
    /// [`sync_collective`](Self::sync_collective) before using it.
    pub fn all_reduce(
        &self,
        src: &Handle,
        dst: &Handle,
        reduction: Reduction,
        devices: &[DeviceId],
        wait: ComputeWait,
    ) -> Result<(), ServerError> {
        self.server().all_reduce(
            src.binding(),
            dst.binding(),
            reduction,
            self.stream,
            devices.to_vec(),
            wait,
        )
    }

    /// Writes every rank's `src`, concatenated in rank order, to `dst`.
    pub fn all_gather(
        &self,
        src: &Handle,
        dst: &Handle,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server()
            .all_gather(src.binding(), dst.binding(), self.stream, devices.to_vec())
    }

    /// Reduces every rank's `src` and writes this rank's chunk to `dst`.
    pub fn reduce_scatter(
        &self,
        src: &Handle,
        dst: &Handle,
        reduction: Reduction,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server().reduce_scatter(
            src.binding(),
            dst.binding(),
            reduction,
            self.stream,
            devices.to_vec(),
        )
    }

    /// Writes `root`'s `src` to every rank's `dst`; only `root` passes a
    /// `src`.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(20), DeviceId(21), DeviceId(22)];
    /// let clients = devices
    ///     .iter()
    ///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let mut dsts = Vec::new();
    /// for (rank, c) in clients.iter().enumerate() {
    ///     c.comm_init(&devices)?;
    ///     let src = if rank == 1 { Some(c.create_from_slice(&[42u64; 4])?) } else { None };
    ///     let dst = c.empty(32)?;
    ///     c.broadcast(src.as_ref(), &dst, DeviceId(21), &devices)?;
    ///     dsts.push(dst);
    /// }
    /// for (c, dst) in clients.iter().zip(&dsts) {
    ///     assert_eq!(c.read_vec::<u64>(dst)?, [42; 4]);
    /// }
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn broadcast(
        &self,
        src: Option<&Handle>,
        dst: &Handle,
        root: DeviceId,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server().broadcast(
            src.map(Handle::binding),
            dst.binding(),
            self.stream,
            root,
            devices.to_vec(),
        )
    }

    /// Sends chunk r of `src` to rank r; chunk r of `dst` comes from rank r.
    pub fn all_to_all(
        &self,
        src: &Handle,
        dst: &Handle,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server()
            .all_to_all(src.binding(), dst.binding(), self.stream, devices.to_vec())
    }

    /// Sends `src` to device `to`, which [`recv`](Self::recv)s it.
    pub fn send(&self, src: &Handle, to: DeviceId) -> Result<(), ServerError> {
        self.server().send(src.copy_descriptor(), self.stream, to)
    }

    /// Receives into `dst` what device `from` [`send`](Self::send)s.
    pub fn recv(&self, dst: &Handle, from: DeviceId) -> Result<(), ServerError> {
        self.server().recv(dst.clone(), self.stream, from)
    }

    /// Waits until every collective queued on the stream has its result in
    /// place (what `ComputeWait::Overlap` calls need before their result is
    /// used).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(30), DeviceId(31)];
    /// let clients = devices
    ///     .iter()
    ///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let mut maxes = Vec::new();
    /// for (rank, c) in clients.iter().enumerate() {
    ///     c.comm_init(&devices)?;
    ///     let src = c.create_from_slice(&[rank as i32 - 5, 7])?;
    ///     let dst = c.empty(8)?;
    ///     // Overlap: later work on the stream does not wait for the result...
    ///     c.all_reduce(&src, &dst, Reduction::max(DType::I32), &devices, ComputeWait::Overlap)?;
    ///     maxes.push(dst);
    /// }
    /// for (c, dst) in clients.iter().zip(&maxes) {
    ///     c.sync_collective()?; // ...so wait for it before using it.
    ///     assert_eq!(c.read_vec::<i32>(dst)?, [-4, 7]);
    /// }
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn sync_collective(&self) -> Result<(), ServerError> {
        self.server().sync_collective(self.stream)
    }
}
