//! What `launch` takes: a kernel, how many workgroups, and the arguments.

use std::any::Any;
use std::fmt;

use bytes::Bytes;

use crate::{BufferBinding, Handle, KernelId};

/// A kernel a compiler backend can turn into a pipeline.
///
/// The runtime knows only its identity and name; the backend downcasts
/// through [`CubeKernel::as_any`] to the kernel type it compiles (WGSL source
/// for the pass-through backend, IR for the IR backend) and refuses anything
/// else with `ServerError::ForeignKernel`.
pub trait CubeKernel: Send + Sync + 'static {
    /// Identity for the pipeline cache.
    fn id(&self) -> KernelId;
    /// A human name, for errors and the log.
    fn name(&self) -> &str;
    /// The concrete kernel, for the backend to downcast.
    fn as_any(&self) -> &dyn Any;
}

/// A boxed kernel is a kernel: the backend sees through the box
/// (`as_any` is the boxed kernel's), so runtimes that keep kernels as
/// `Box<dyn CubeKernel>` pass them to anything that takes `impl CubeKernel`.
impl CubeKernel for Box<dyn CubeKernel> {
    fn id(&self) -> KernelId {
        (**self).id()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn as_any(&self) -> &dyn Any {
        (**self).as_any()
    }
}

impl fmt::Debug for dyn CubeKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CubeKernel")
            .field("name", &self.name())
            .field("id", &self.id())
            .finish()
    }
}

/// Whether generated shaders check their memory accesses at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BoundsChecks {
    /// wgpu's default: every access is clamped or checked, and loops keep
    /// wgpu's hidden loop counter (the compiler's `LoopBounding` says where
    /// they need not).
    #[default]
    Checked,
    /// No runtime checks (`create_shader_module_trusted`): faster, and the
    /// kernel's accesses are the caller's responsibility.
    Unchecked,
    /// Checked as [`Checked`](Self::Checked), and every access outside its
    /// array is also *reported*: the launch fails with
    /// `ServerError::OutOfBoundsAccess` (kernel, array, index, length) and
    /// its writes are poisoned, once its batch has run, instead of the
    /// clamp passing silently. For backends that can instrument their code
    /// (the IR backend); the WGSL pass-through compiles a kernel that does
    /// not declare a report slot `Checked` under it, and says so in the
    /// compile log. Costs a compare per access and a 16-byte report
    /// slot per launch, read back with the batch.
    Reported,
}

/// How many workgroups a launch dispatches.
#[derive(Clone, Debug)]
pub enum CubeCount {
    /// A count known on the host.
    Static(u32, u32, u32),
    /// Three `u32`s (x, y, z) read from device memory when the dispatch runs.
    Dynamic(BufferBinding),
}

impl CubeCount {
    /// A one-dimensional count.
    pub const fn x(x: u32) -> Self {
        CubeCount::Static(x, 1, 1)
    }

    /// The workgroups of `workgroup_size` that cover `grid` invocations:
    /// `ceil(grid / workgroup_size)` along each dimension.
    ///
    /// ```
    /// use compute_runtime::CubeCount;
    ///
    /// let c = CubeCount::covering([100, 30], [16, 16, 1]);
    /// assert!(matches!(c, CubeCount::Static(7, 2, 1)));
    /// assert!(matches!(CubeCount::covering(100, [64, 1, 1]), CubeCount::Static(2, 1, 1)));
    /// ```
    pub fn covering(grid: impl Into<Grid>, workgroup_size: [u32; 3]) -> Self {
        let Grid(g) = grid.into();
        let [x, y, z] = [0, 1, 2].map(|d| g[d].div_ceil(workgroup_size[d].max(1)));
        CubeCount::Static(x, y, z)
    }
}

/// How many invocations a launch covers along x, y and z: `n` (one
/// dimension), `[w, h]` or `[w, h, d]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grid(pub [u32; 3]);

impl From<u32> for Grid {
    fn from(x: u32) -> Self {
        Grid([x, 1, 1])
    }
}

impl From<[u32; 2]> for Grid {
    fn from([x, y]: [u32; 2]) -> Self {
        Grid([x, y, 1])
    }
}

impl From<[u32; 3]> for Grid {
    fn from(g: [u32; 3]) -> Self {
        Grid(g)
    }
}

/// The arguments of one launch.
#[derive(Clone, Debug, Default)]
pub struct KernelArguments {
    /// Storage buffers, in binding order (`@binding(0)`, `@binding(1)`...).
    pub buffers: Vec<BufferBinding>,
    /// Scalar arguments packed as the kernel's uniform block expects, bound
    /// after the buffers; empty for a kernel without scalars.
    pub scalars: Bytes,
}

impl KernelArguments {
    /// Arguments with the given buffers and no scalars.
    pub fn buffers(buffers: Vec<BufferBinding>) -> Self {
        Self {
            buffers,
            scalars: Bytes::new(),
        }
    }

    /// Arguments binding the whole of each handle, in order, and no
    /// scalars.
    ///
    /// ```
    /// use compute_runtime::{Handle, KernelArguments, ManagedMemoryHandle};
    ///
    /// let a = Handle::new(ManagedMemoryHandle::new(), 16);
    /// let b = Handle::new(ManagedMemoryHandle::new(), 16);
    /// let args = KernelArguments::handles([&a, &b]).with_scalars(vec![0u8; 16]);
    /// assert_eq!(args.buffers.len(), 2);
    /// assert_eq!(args.buffers[1].memory_id(), b.memory.id());
    /// ```
    pub fn handles<'a>(handles: impl IntoIterator<Item = &'a Handle>) -> Self {
        Self::buffers(handles.into_iter().map(Handle::binding).collect())
    }

    /// Adds packed scalar arguments.
    pub fn with_scalars(mut self, scalars: impl Into<Bytes>) -> Self {
        self.scalars = scalars.into();
        self
    }
}

/// Whether a launch's memory accesses are checked at run time: what
/// [`crate::LaunchValidation::validate_launch`] answers about a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessChecks {
    /// Every access is bounds-checked (clamped or discarded): the launch
    /// cannot touch memory outside its bindings, so launching it is safe.
    Checked,
    /// Compiled without run-time checks: the kernel's accesses are the
    /// caller's responsibility.
    Unchecked,
}

/// When a launch's kernel is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LaunchMode {
    /// Compile on a cache miss, then dispatch.
    #[default]
    Execute,
    /// Queue the kernel for `compile_queued` and dispatch once it is compiled.
    Queue,
}

/// An array a kernel indexes, as [`ServerError::OutOfBoundsAccess`](crate::ServerError::OutOfBoundsAccess)
/// names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelArray {
    /// The storage buffer at `@binding(i)`: the launch's `i`th buffer.
    Binding(u32),
    /// The kernel's `i`th workgroup-shared array.
    Shared(u32),
    /// The kernel's `i`th per-invocation (local) array.
    Local(u32),
    /// A vector indexed by a run-time lane past its lanes (the report's
    /// length is its lane count).
    Vector,
}

impl std::fmt::Display for KernelArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelArray::Binding(i) => write!(f, "binding {i}"),
            KernelArray::Shared(i) => write!(f, "shared array {i}"),
            KernelArray::Local(i) => write!(f, "local array {i}"),
            KernelArray::Vector => write!(f, "a vector's lanes"),
        }
    }
}
