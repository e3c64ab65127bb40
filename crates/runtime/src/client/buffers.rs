//! Buffers through a client: create, write, read, check, and the memory
//! they live in (reports, cleanup, allocation mode).

use bytes::Bytes;

use super::ComputeClient;
use crate::{
    Handle, ManagedMemoryHandle, MemoryAllocationMode, Pod, Server, ServerError,
    StreamMemoryReport, pod,
};

impl<S: Server> ComputeClient<S> {
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
        // An untyped slice of the client: what it is written as is
        // followed, so a kernel reading it as another type is refused.
        memory.follow_writes();
        self.server()
            .initialize_memory(memory.clone(), size, self.stream)?;
        Ok(Handle::new(memory, size))
    }

    /// Reserves `len` elements of `T`, uninitialized, typed: launches and
    /// typed reads check the type (see [`create_from_slice`](Self::create_from_slice)).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let out = client.empty_of::<f32>(1024)?;
    /// assert_eq!((out.size, out.len(), out.elem()), (4096, Some(1024), Some(DType::F32)));
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn empty_of<T: Pod>(&self, len: u64) -> Result<Handle, ServerError> {
        let size = len
            .checked_mul(T::SIZE as u64)
            .ok_or(ServerError::InvalidArgument {
                reason: "the element count overflows the byte size".into(),
            })?;
        let handle = self.empty(size)?;
        typed::<T>(&handle)?;
        Ok(handle)
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
    ///
    /// The handle is typed ([`Handle::elem`]) when `T` names an element type
    /// (every `Pod` type but `u8`, `i16` and `u16`, whose bytes may hold
    /// several): a launch binding it where the kernel's module declares
    /// another element type is refused ([`ServerError::BindingType`]), and
    /// so are [`read_vec`](Self::read_vec) and
    /// [`write_from_slice`](Self::write_from_slice) as another type
    /// ([`ServerError::ElementType`]).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let ids = client.create_from_slice(&[1u32, 2, 3, 4])?;
    /// let k = KernelBuilder::new("scale", [4, 1, 1]);
    /// let x = k.output(Scalar::F32);
    /// let i = k.x(k.global_id());
    /// k.store(x, i, k.mul(k.load(x, i), 2.0f32));
    /// let err = client.launch(k.build()?, CubeCount::x(1), KernelArguments::handles([&ids])).unwrap_err();
    /// assert!(matches!(err.root_cause(), ServerError::BindingType { declared: DType::F32, holds: DType::U32, .. }), "{err}");
    /// assert!(client.read_vec::<f32>(&ids).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_from_slice<T: Pod>(&self, values: &[T]) -> Result<Handle, ServerError> {
        let handle = self.create(pod::to_bytes(values))?;
        typed::<T>(&handle)?;
        Ok(handle)
    }

    /// Writes `data` to the start of `handle` (host to device). Enqueue-time
    /// refusals (a size over the handle, a misaligned length, a write inside
    /// a graph capture) are returned here, and leave the handle as it was,
    /// trust included; a whole-handle write makes its bytes trusted again
    /// after a failure poisoned them.
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
        // A write refused at the call touches nothing, so it poisons
        // nothing the check below would see: asked for first.
        server.validate_write(&target.copy_descriptor(), target.size, self.stream)?;
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
        same_type::<T>(handle)?;
        self.write(handle, pod::to_bytes(values))?;
        if let Some(elem) = T::DTYPE {
            handle.memory.record_write(elem);
        }
        Ok(())
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
    /// // Not as another element type: x holds f64s...
    /// let err = client.read_vec::<u32>(&x).unwrap_err();
    /// assert!(matches!(err, ServerError::ElementType { holds: DType::F64, asked: DType::U32, .. }));
    /// // ...but its bytes, as bytes, always.
    /// assert_eq!(client.read_vec::<u8>(&x)?.len(), 16);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn read_vec<T: Pod>(&self, handle: &Handle) -> Result<Vec<T>, ServerError> {
        read_as::<T>(handle)?;
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

    /// How new reservations are served (`Persistent`: pages reused by size
    /// class, for steady-state loops).
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

/// Types `handle`'s slice as `T`, when `T` names an element type.
fn typed<T: Pod>(handle: &Handle) -> Result<(), ServerError> {
    match T::DTYPE {
        Some(elem) => handle.memory.set_elem(elem),
        None => Ok(()),
    }
}

/// Refuses to read an untyped slice as another element type than the one
/// it was last written as (see `ManagedMemoryHandle::follow_writes`), and a
/// typed one as another than its own.
fn read_as<T: Pod>(handle: &Handle) -> Result<(), ServerError> {
    match (handle.memory.written_as(), T::DTYPE) {
        (Some(holds), Some(asked)) if holds != asked => Err(ServerError::ElementType {
            memory: handle.memory.id(),
            holds,
            asked,
        }),
        _ => same_type::<T>(handle),
    }
}

/// Refuses to use a typed slice as another element type.
fn same_type<T: Pod>(handle: &Handle) -> Result<(), ServerError> {
    match (handle.elem(), T::DTYPE) {
        (Some(holds), Some(asked)) if holds != asked => Err(ServerError::ElementType {
            memory: handle.memory.id(),
            holds,
            asked,
        }),
        _ => Ok(()),
    }
}
