//! The backend seam: what a compiler is given and what it returns.

use std::fmt::Debug;

use compute_runtime::{CubeKernel, ServerError};

pub use compute_runtime::BoundsChecks;

/// Where a [`BoundsChecks::Reported`] module records its first
/// out-of-bounds access: `@group(1) @binding(0)`, four `atomic<u32>`
/// (count, array, index, length), a slot of its own per launch, bound by
/// the server with a dynamic offset.
pub const REPORT_GROUP: u32 = 1;

/// Bytes of one launch's report slot.
pub const REPORT_BYTES: u64 = 16;

/// How a report slot names a shared array (the high bit of its array word;
/// a storage binding is its index).
pub const REPORT_SHARED_BIT: u32 = 1 << 31;

/// How a report slot names an IR kernel's per-invocation (local) array.
pub const REPORT_LOCAL_BIT: u32 = 1 << 29;

/// How a report slot names a vector indexed by a run-time lane past its
/// lanes (the length is its lane count).
pub const REPORT_VECTOR_BIT: u32 = 1 << 28;

/// Set in a report slot's array word when the slot holds a record, so a
/// record is seen even when the count wraps.
pub const REPORT_PRESENT_BIT: u32 = 1 << 30;

/// Which checked modules keep wgpu's hidden loop counter and its index
/// clamps. The counter makes a loop that never ends stop (a driver may
/// otherwise assume it ends) and also hides every trip count from the
/// driver: no loop unrolls, and a per-thread array indexed by a loop
/// variable lives in memory instead of registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LoopBounding {
    /// Every checked module (wgpu's default).
    Every,
    /// Only a module where the server cannot prove that every loop ends
    /// (wgpu-server's `launch/termination.rs`: counted loops such as
    /// `for (var i = a; i < b; i++)`) and that every index outside a
    /// buffer is in range (`launch/indices.rs`, on a device whose driver
    /// bounds buffer accesses itself): a module with both proofs drops
    /// the counter and the clamps, one without either keeps both (NVIDIA's
    /// compiler took 22 s instead of 0.8 s on an unrolled matmul with the
    /// clamps kept, docs/burn.md). On an H100 this made cubek's tiled
    /// matmuls 25-33x faster.
    #[default]
    Unproven,
}

/// Options a server compiles with; part of the pipeline cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgpuCompilationOptions {
    /// Runtime bounds checks.
    pub bounds_checks: BoundsChecks,
    /// Which checked modules keep wgpu's loop counter and index clamps.
    pub loop_bounding: LoopBounding,
    /// Have the backend run an extra naga validation of what it generates
    /// (the server parses and checks every kernel with naga anyway, and
    /// wgpu validates the module again; this catches a backend bug with the
    /// backend's own name on it).
    pub validate: bool,
}

impl Default for WgpuCompilationOptions {
    /// Reported accesses in a debug build (an access outside its array is
    /// an error naming it, where a release build clamps it silently: the
    /// build a program is written and tested in finds the mistake),
    /// checked in a release build; no extra naga pass (wgpu validates every
    /// module with naga anyway, and its error carries the same diagnostic).
    fn default() -> Self {
        Self {
            bounds_checks: if cfg!(debug_assertions) {
                BoundsChecks::Reported
            } else {
                BoundsChecks::Checked
            },
            loop_bounding: LoopBounding::Unproven,
            validate: false,
        }
    }
}

/// What the device offers a compiler. The fields are `wgpu-types`', which
/// `wgpu` re-exports: `device.limits()` and `device.features()` fit as is.
#[derive(Clone, Debug)]
pub struct DeviceCaps {
    /// The device's limits.
    pub limits: wgpu_types::Limits,
    /// The device's features.
    pub features: wgpu_types::Features,
    /// The cooperative-matrix configurations of its adapter
    /// (`Adapter::cooperative_matrix_properties`), when the device has
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX`; empty otherwise.
    pub cooperative_matrices: Vec<wgpu_types::CooperativeMatrixProperties>,
    /// The driver bounds every buffer access itself (Vulkan's
    /// `robustBufferAccess2`): wgpu then adds no clamps to them, and a
    /// module whose other indices are proven in range needs none of
    /// wgpu's bounds checks.
    pub driver_bounds_buffers: bool,
}

impl DeviceCaps {
    /// The caps of `device`, with no cooperative-matrix configurations (a
    /// device does not know its adapter's: see
    /// [`DeviceCaps::with_cooperative_matrices`]).
    pub fn of(limits: wgpu_types::Limits, features: wgpu_types::Features) -> Self {
        DeviceCaps {
            limits,
            features,
            cooperative_matrices: Vec::new(),
            driver_bounds_buffers: false,
        }
    }

    /// With whether the driver bounds buffer accesses.
    pub fn with_driver_bounded_buffers(mut self, bounded: bool) -> Self {
        self.driver_bounds_buffers = bounded;
        self
    }

    /// With the adapter's cooperative-matrix configurations.
    pub fn with_cooperative_matrices(
        mut self,
        configurations: Vec<wgpu_types::CooperativeMatrixProperties>,
    ) -> Self {
        self.cooperative_matrices = configurations;
        self
    }
}

/// How a kernel uses one storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindingAccess {
    /// `var<storage, read>`.
    ReadOnly,
    /// `var<storage, read_write>`: part of the launch's write set.
    ReadWrite,
}

/// A kernel's interface: known without compiling it, so a launch can name its
/// write set before compilation can fail.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelLayout {
    /// Storage bindings `@group(0) @binding(i)`, in order.
    pub bindings: Vec<BindingAccess>,
    /// Whether a uniform block of scalars follows at the next binding.
    pub scalars: bool,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Whether the module reports out-of-bounds accesses into a slot at
    /// `@group(1) @binding(0)` ([`BoundsChecks::Reported`]).
    pub reports: bool,
}

impl KernelLayout {
    /// Invocations per workgroup.
    pub fn invocations(&self) -> u64 {
        self.workgroup_size.iter().map(|d| u64::from(*d)).product()
    }
}

/// A kernel ready for `create_shader_module`.
///
/// Contract: `layout` says what the source declares (checked by the server
/// with [`crate::check_layout`] before a pipeline exists); the server then
/// binds every storage buffer `read_write` ([`crate::make_storage_writable`]
/// says why), and the write set follows `layout`.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    /// Name for labels and errors.
    pub name: String,
    /// WGSL source.
    pub source: String,
    /// Entry point.
    pub entry_point: String,
    /// Interface.
    pub layout: KernelLayout,
    /// This kernel's bounds-check policy, overriding the options' when set.
    pub bounds_checks: Option<BoundsChecks>,
}

/// A compiler backend: the `C` of `WgpuServer<C>`.
pub trait WgpuCompiler: Debug + Send + 'static {
    /// The backend's name, for errors.
    const NAME: &'static str;

    /// The kernel's interface, without compiling it. A kernel this backend
    /// does not know is [`ServerError::ForeignKernel`].
    fn layout(&self, kernel: &dyn CubeKernel) -> Result<KernelLayout, ServerError>;

    /// Compiles the kernel. A kernel that does not compile is
    /// [`ServerError::Compilation`] with the compiler's diagnostic.
    fn compile(
        &mut self,
        kernel: &dyn CubeKernel,
        options: &WgpuCompilationOptions,
        caps: &DeviceCaps,
    ) -> Result<CompiledKernel, ServerError>;
}
