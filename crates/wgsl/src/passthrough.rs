//! The pass-through backend: the caller writes WGSL and declares its
//! interface; the backend validates and forwards it.
//!
//! What it buys: any WGSL a user already has runs on the server with the
//! same caching, write-set and trust semantics as generated kernels. The
//! declared layout is not believed: before a pipeline exists the server
//! reads the module's interface with naga and refuses a declaration that
//! disagrees ([`ServerError::LayoutMismatch`]), since the write set, and so
//! ordering and trust, follow the declaration. What it does not: check that
//! the source is what the caller meant; a kernel that writes out of its
//! bounds is clamped by wgpu's checks (or is the caller's contract with
//! `Unchecked`).

use std::any::Any;
use std::sync::{Arc, OnceLock};

use compute_runtime::{CubeKernel, KernelId, ServerError};

use crate::{
    BindingAccess, BoundsChecks, CompiledKernel, DeviceCaps, KernelLayout, WgpuCompilationOptions,
    WgpuCompiler,
};

/// A kernel given as WGSL source, with its interface declared (and
/// checked against the source before any pipeline exists).
///
/// ```
/// use compute_wgsl::{BindingAccess, WgslKernel};
///
/// let saxpy = WgslKernel::new(
///     "saxpy",
///     "struct P { alpha: f32, n: u32 }
///      @group(0) @binding(0) var<storage, read> x: array<f32>;
///      @group(0) @binding(1) var<storage, read_write> y: array<f32>;
///      @group(0) @binding(2) var<uniform> p: P;
///      @compute @workgroup_size(256)
///      fn main(@builtin(global_invocation_id) id: vec3<u32>) {
///          if (id.x < p.n) { y[id.x] = p.alpha * x[id.x] + y[id.x]; }
///      }",
///     "main",
///     [256, 1, 1],
///     vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
/// )
/// .with_scalars(); // the uniform block after the buffers
/// assert!(saxpy.layout().scalars);
/// ```
///
/// Cheap to clone: one reference count (a launch boxes a clone of it).
#[derive(Clone, Debug)]
pub struct WgslKernel {
    inner: Arc<Inner>,
}

/// What a [`WgslKernel`] shares between its clones; changed only while it
/// is built (`with_*`, copy on write).
#[derive(Clone, Debug)]
struct Inner {
    name: Arc<str>,
    source: Arc<str>,
    entry_point: Arc<str>,
    layout: KernelLayout,
    bounds_checks: Option<BoundsChecks>,
    id: KernelId,
    /// The uniform block's members, read from the source at the first
    /// `args` (the source never changes).
    members: OnceLock<Option<Vec<crate::scalars::Member>>>,
    /// Declared buffer lengths, checked by `args`.
    lengths: Vec<compute_ir::DeclaredLen>,
}

impl WgslKernel {
    /// A kernel from source; `bindings` are the storage buffers at
    /// `@group(0) @binding(0..)`, in order.
    pub fn new(
        name: impl Into<Arc<str>>,
        source: impl Into<Arc<str>>,
        entry_point: impl Into<Arc<str>>,
        workgroup_size: [u32; 3],
        bindings: Vec<BindingAccess>,
    ) -> Self {
        let name = name.into();
        let source = source.into();
        let entry_point = entry_point.into();
        let layout = KernelLayout {
            bindings,
            scalars: false,
            workgroup_size,
            reports: false,
        };
        let id = KernelId::of(&(&*source, &*entry_point, &layout, None::<BoundsChecks>));
        Self {
            inner: Arc::new(Inner {
                name,
                source,
                entry_point,
                layout,
                bounds_checks: None,
                id,
                members: OnceLock::new(),
                lengths: Vec::new(),
            }),
        }
    }

    /// The kernel's own state, to change while it is built.
    fn edit(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    /// Declares that buffer `binding` holds at least `len` elements of
    /// `elem` (`len` an expression of the scalar arguments:
    /// `Len::arg(0) * Len::arg(1)`): `args` refuses a shorter buffer with
    /// `ServerError::BindingLength`, before anything is enqueued.
    ///
    /// ```
    /// use compute_ir::{Len, Lit};
    /// use compute_runtime::{DType, Handle, ManagedMemoryHandle, ServerError};
    /// use compute_wgsl::{BindingAccess, WgslKernel};
    ///
    /// let zero = WgslKernel::new(
    ///     "zero",
    ///     "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
    ///      @group(0) @binding(1) var<uniform> n: u32;
    ///      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    ///          if id.x < n { x[id.x] = 0.0; }
    ///      }",
    ///     "main",
    ///     [64, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// )
    /// .with_scalars()
    /// .with_len(0, DType::F32, Len::arg(0));
    /// let x = Handle::new(ManagedMemoryHandle::new(), 400); // 100 f32
    /// assert!(zero.args([&x], &[Lit::U32(100)]).is_ok());
    /// let e = zero.args([&x], &[Lit::U32(128)]).unwrap_err();
    /// assert!(matches!(e, ServerError::BindingLength { expected: 128, actual: 100, .. }));
    /// ```
    pub fn with_len(
        mut self,
        binding: u32,
        elem: compute_runtime::DType,
        len: impl Into<compute_ir::Len>,
    ) -> Self {
        self.edit().lengths.push(compute_ir::DeclaredLen {
            binding,
            elem_bytes: elem.size() as u64,
            len: len.into(),
        });
        self
    }

    /// Declares a uniform block of scalars at the binding after the buffers.
    pub fn with_scalars(mut self) -> Self {
        self.edit().layout.scalars = true;
        self.rehash();
        self
    }

    /// The arguments of one launch: `buffers` in binding order and
    /// `scalars` packed by the IR's rule ([`compute_ir::pack_scalars`]:
    /// 4-byte members in order, the block padded to 16 bytes), which is
    /// the layout of a WGSL `struct` of `u32`/`i32`/`f32` members in the
    /// uniform address space. No scalars, no block.
    ///
    /// The scalars are checked against the struct the source declares
    /// (read once per kernel): one per member
    /// ([`ServerError::ScalarCount`]), each of its member's type
    /// ([`ServerError::ScalarType`]), each member a 4-byte scalar at byte
    /// `4 * i` ([`ServerError::LayoutMismatch`]; a block of another layout
    /// is packed by hand with `KernelArguments::with_scalars`).
    ///
    /// ```
    /// use compute_ir::Lit;
    /// use compute_runtime::{Handle, ManagedMemoryHandle, ServerError};
    /// use compute_wgsl::{BindingAccess, WgslKernel};
    ///
    /// let fill = WgslKernel::new(
    ///     "fill",
    ///     "struct S { n: u32, v: f32 }
    ///      @group(0) @binding(0) var<storage, read_write> x: array<f32>;
    ///      @group(0) @binding(1) var<uniform> s: S;
    ///      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    ///          if id.x < s.n { x[id.x] = s.v; }
    ///      }",
    ///     "main",
    ///     [64, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// )
    /// .with_scalars();
    /// let x = Handle::new(ManagedMemoryHandle::new(), 400);
    /// let args = fill.args([&x], &[Lit::U32(100), Lit::f32(0.5)])?;
    /// assert_eq!(&args.scalars[..8], [100, 0, 0, 0, 0, 0, 0, 63]);
    /// // `v` is an f32: a u32 there is refused, as is a missing `v`.
    /// let wrong = fill.args([&x], &[Lit::U32(100), Lit::U32(1)]);
    /// assert!(matches!(wrong, Err(ServerError::ScalarType { index: 1, .. })));
    /// let short = fill.args([&x], &[Lit::U32(100)]);
    /// assert!(matches!(short, Err(ServerError::ScalarCount { declared: 2, passed: 1, .. })));
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn args<'a>(
        &self,
        buffers: impl IntoIterator<Item = &'a compute_runtime::Handle>,
        scalars: &[compute_ir::Lit],
    ) -> Result<compute_runtime::KernelArguments, ServerError> {
        let k = &self.inner;
        if !scalars.is_empty() || k.layout.scalars {
            let members = k
                .members
                .get_or_init(|| crate::scalars::uniform_members(&k.source));
            if let Some(members) = members {
                crate::scalars::check(&k.name, members, scalars)?;
            }
        }
        let args = compute_runtime::KernelArguments::handles(buffers)
            .with_scalars(compute_ir::pack_scalars(scalars));
        compute_ir::check_lengths(&k.name, &k.lengths, &args, scalars)?;
        Ok(args)
    }

    /// The workgroups covering `grid` invocations: `n` along x, or `[w, h]`,
    /// or `[w, h, d]` ([`CubeCount::covering`](compute_runtime::CubeCount::covering)
    /// with this kernel's workgroup size).
    pub fn groups_for(&self, grid: impl Into<compute_runtime::Grid>) -> compute_runtime::CubeCount {
        compute_runtime::CubeCount::covering(grid, self.inner.layout.workgroup_size)
    }

    /// This kernel's bounds-check policy, whatever the server's options say:
    /// `Unchecked` compiles it through `create_shader_module_trusted`;
    /// `Reported` says the source declares the report slot itself
    /// (`@group(1) @binding(0) var<storage, read_write> r: array<atomic<u32>, 4>`:
    /// count, array, index, length, see [`crate::REPORT_GROUP`]) and writes
    /// it on every access outside an array, which the server checks against
    /// the module and binds per launch.
    pub fn with_bounds_checks(mut self, checks: BoundsChecks) -> Self {
        let k = self.edit();
        k.bounds_checks = Some(checks);
        k.layout.reports = checks == BoundsChecks::Reported;
        self.rehash();
        self
    }

    fn rehash(&mut self) {
        let k = self.edit();
        k.id = KernelId::of(&(&*k.source, &*k.entry_point, &k.layout, k.bounds_checks));
    }

    /// The WGSL source.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The declared interface.
    pub fn layout(&self) -> &KernelLayout {
        &self.inner.layout
    }
}

impl CubeKernel for WgslKernel {
    fn id(&self) -> KernelId {
        self.inner.id
    }
    fn name(&self) -> &str {
        &self.inner.name
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The pass-through backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct WgslPassthrough;

impl WgslPassthrough {
    fn downcast(kernel: &dyn CubeKernel) -> Result<&WgslKernel, ServerError> {
        kernel
            .as_any()
            .downcast_ref::<WgslKernel>()
            .ok_or_else(|| ServerError::ForeignKernel {
                kernel: kernel.name().to_string(),
                compiler: Self::NAME,
            })
    }
}

impl WgpuCompiler for WgslPassthrough {
    const NAME: &'static str = "wgsl-passthrough";

    fn layout(&self, kernel: &dyn CubeKernel) -> Result<KernelLayout, ServerError> {
        Ok(Self::downcast(kernel)?.inner.layout.clone())
    }

    fn compile(
        &mut self,
        kernel: &dyn CubeKernel,
        options: &WgpuCompilationOptions,
        _caps: &DeviceCaps,
    ) -> Result<CompiledKernel, ServerError> {
        // The server parses the source with naga and checks the declared
        // layout against it before any pipeline exists.
        let k = Self::downcast(kernel)?;
        // Handwritten WGSL cannot be instrumented here: under a server that
        // reports, a kernel without its own report slot is checked (its
        // accesses clamped, not reported), and the compile log says so.
        let k = &k.inner;
        let bounds_checks = match (k.bounds_checks, options.bounds_checks) {
            (None, BoundsChecks::Reported) => Some(BoundsChecks::Checked),
            (own, _) => own,
        };
        Ok(CompiledKernel {
            name: k.name.to_string(),
            source: k.source.to_string(),
            entry_point: k.entry_point.to_string(),
            layout: k.layout.clone(),
            bounds_checks,
        })
    }
}
