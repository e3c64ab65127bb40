//! [`Kernel`]: a validated [`KernelDef`] with an identity, as the server sees it.

use std::any::Any;
use std::sync::Arc;

use compute_runtime::client::ComputeClient;
use compute_runtime::{
    BoundsChecks, CubeCount, CubeKernel, Grid, Handle, KernelArguments, KernelId, LaunchValidation,
    ServerError,
};

use crate::ir::{Access, KernelDef};
use crate::{DeclaredLen, IrError, Lit, Scalar, check_lengths, validate};

/// A kernel's interface, known without compiling it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelInfo {
    /// Storage buffers `@binding(0..)`, in order, with how each is used.
    pub buffers: Vec<Access>,
    /// Whether a uniform block of scalars follows at `@binding(buffers.len())`.
    pub scalars: bool,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
}

/// A validated kernel. Cheap to clone.
///
/// Its id hashes the whole IR and the workgroup size, not the name: two
/// kernels that differ only in name share a pipeline.
#[derive(Clone, Debug)]
pub struct Kernel {
    def: Arc<KernelDef>,
    id: KernelId,
    /// Declared buffer lengths, checked by [`Kernel::args`]; not part of
    /// the identity (the module is the same).
    lengths: Arc<[DeclaredLen]>,
    /// This kernel's bounds-check policy, over the server's; part of the
    /// identity (the module differs).
    bounds_checks: Option<BoundsChecks>,
}

impl Kernel {
    /// Validates `def` and wraps it.
    pub fn new(def: KernelDef) -> Result<Self, IrError> {
        validate(&def)?;
        Ok(Kernel {
            id: identity(&def, None),
            def: Arc::new(def),
            lengths: Arc::new([]),
            bounds_checks: None,
        })
    }

    /// This kernel's bounds-check policy, whatever the server's options
    /// say: `Unchecked` for a hot kernel the caller vouches for (its launch
    /// is then `unsafe`, `launch_unchecked`), `Reported` to have its
    /// out-of-bounds accesses reported on a server that only clamps.
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar};
    /// use compute_runtime::{BoundsChecks, CubeKernel};
    ///
    /// let k = KernelBuilder::new("fill", [64, 1, 1]);
    /// let x = k.output(Scalar::U32);
    /// k.store(x, k.x(k.global_id()), 7u32);
    /// let fill = k.build()?;
    /// let reported = fill.clone().with_bounds_checks(BoundsChecks::Reported);
    /// assert_eq!(reported.bounds_checks(), Some(BoundsChecks::Reported));
    /// assert_ne!(fill.id(), reported.id(), "another module, another pipeline");
    /// # Ok::<(), compute_ir::IrError>(())
    /// ```
    pub fn with_bounds_checks(mut self, checks: BoundsChecks) -> Self {
        self.bounds_checks = Some(checks);
        self.id = identity(&self.def, self.bounds_checks);
        self
    }

    /// This kernel's own bounds-check policy, if it has one.
    pub fn bounds_checks(&self) -> Option<BoundsChecks> {
        self.bounds_checks
    }

    /// The kernel with buffer lengths declared (the builder's
    /// [`input_len`](crate::KernelBuilder::input_len) and
    /// [`require_len`](crate::KernelBuilder::require_len)).
    pub fn with_lengths(mut self, lengths: Vec<DeclaredLen>) -> Self {
        self.lengths = lengths.into();
        self
    }

    /// The declared buffer lengths.
    pub fn lengths(&self) -> &[DeclaredLen] {
        &self.lengths
    }

    /// The IR.
    pub fn def(&self) -> &KernelDef {
        &self.def
    }

    /// The interface.
    pub fn info(&self) -> KernelInfo {
        KernelInfo {
            buffers: self.def.buffers.iter().map(|b| b.access).collect(),
            scalars: !self.def.scalars.is_empty(),
            workgroup_size: self.def.workgroup_size,
        }
    }

    /// Packs scalar arguments into the uniform block the kernel reads; see
    /// [`pack_scalars`].
    pub fn pack_scalars(&self, args: &[Lit]) -> Result<Vec<u8>, IrError> {
        if args.len() != self.def.scalars.len() {
            return Err(IrError::structure(
                "pack_scalars",
                format!(
                    "the kernel takes {} scalars, got {}",
                    self.def.scalars.len(),
                    args.len()
                ),
            ));
        }
        for (i, (a, s)) in args.iter().zip(&self.def.scalars).enumerate() {
            if a.scalar() != *s {
                return Err(IrError::ty(
                    "pack_scalars",
                    format!("argument {i} is {s}, got {}", a.scalar()),
                ));
            }
        }
        Ok(pack_scalars(args))
    }

    /// The arguments of one launch: `buffers` in binding order, `scalars`
    /// packed and checked: as many as the kernel declares
    /// ([`ServerError::ScalarCount`]), each of its declared type
    /// ([`ServerError::ScalarType`]), and every buffer at least the length
    /// the kernel declares for it under these scalars
    /// ([`ServerError::BindingLength`]).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Lit, Scalar};
    /// use compute_runtime::{Handle, ManagedMemoryHandle, ServerError};
    ///
    /// let k = KernelBuilder::new("fill", [64, 1, 1]);
    /// let n = k.scalar_arg(Scalar::U32);
    /// let x = k.output_len(Scalar::U32, n); // x holds at least n u32s
    /// let i = k.x(k.global_id());
    /// k.if_(k.lt(i, n), |k| k.store(x, i, 7u32));
    /// let fill = k.build()?;
    /// let x = Handle::new(ManagedMemoryHandle::new(), 400);
    /// let args = fill.args([&x], &[Lit::U32(100)])?;
    /// assert_eq!((args.buffers.len(), args.scalars.len()), (1, 16));
    /// assert!(matches!(
    ///     fill.args([&x], &[Lit::f32(1.0)]),
    ///     Err(ServerError::ScalarType { .. }) // u32 expected
    /// ));
    /// assert!(matches!(
    ///     fill.args([&x], &[Lit::U32(101)]),
    ///     Err(ServerError::BindingLength { expected: 101, actual: 100, .. })
    /// ));
    /// assert!(matches!(fill.groups_for(100), compute_runtime::CubeCount::Static(2, 1, 1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn args<'a>(
        &self,
        buffers: impl IntoIterator<Item = &'a Handle>,
        scalars: &[Lit],
    ) -> Result<KernelArguments, ServerError> {
        let declared = &self.def.scalars;
        if scalars.len() != declared.len() {
            return Err(ServerError::ScalarCount {
                kernel: self.name().to_string(),
                declared: declared.len() as u32,
                passed: scalars.len() as u32,
            });
        }
        for (i, (lit, want)) in scalars.iter().zip(declared).enumerate() {
            if lit.scalar() != *want {
                return Err(ServerError::ScalarType {
                    kernel: self.name().to_string(),
                    index: i as u32,
                    member: format!("s{i}"),
                    declared: want
                        .dtype()
                        .ok_or_else(|| IrError::ty("args", "not a scalar"))?,
                    passed: lit
                        .scalar()
                        .dtype()
                        .ok_or_else(|| ServerError::InvalidArgument {
                            reason: format!(
                                "kernel `{}`: scalar argument {i} is a bool (pass a u32)",
                                self.name()
                            ),
                        })?,
                });
            }
        }
        let args = KernelArguments::handles(buffers).with_scalars(pack_scalars(scalars));
        check_lengths(self.name(), &self.lengths, &args, scalars)?;
        Ok(args)
    }

    /// The workgroups covering `grid` invocations: `n` along x, or `[w, h]`,
    /// or `[w, h, d]` ([`CubeCount::covering`] with this kernel's workgroup
    /// size).
    pub fn groups_for(&self, grid: impl Into<Grid>) -> CubeCount {
        CubeCount::covering(grid, self.def.workgroup_size)
    }

    /// [`ComputeClient::launch`] in one line: this kernel over `grid`
    /// invocations (`n`, `[w, h]` or `[w, h, d]`:
    /// [`groups_for`](Self::groups_for)), with
    /// `buffers` and `scalars` ([`args`](Self::args), whose refusals it
    /// returns as they are).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let k = KernelBuilder::new("fill", [64, 1, 1]);
    /// let (x, n) = (k.output(Scalar::U32), k.scalar_arg(Scalar::U32));
    /// let i = k.x(k.global_id());
    /// k.if_(k.lt(i, n), |k| k.store(x, i, 7u32));
    /// let fill = k.build()?;
    /// let x = client.empty_of::<u32>(100)?;
    /// fill.launch(&client, 100, [&x], &[Lit::U32(100)])?;
    /// assert_eq!(client.read_vec::<u32>(&x)?, [7; 100]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn launch<'a, S: LaunchValidation>(
        &self,
        client: &ComputeClient<S>,
        grid: impl Into<Grid>,
        buffers: impl IntoIterator<Item = &'a Handle>,
        scalars: &[Lit],
    ) -> Result<(), ServerError> {
        let args = self.args(buffers, scalars)?;
        client.launch(self.clone(), self.groups_for(grid), args)
    }
}

/// A kernel's identity: its IR, workgroup size and own bounds-check policy
/// (not its name).
fn identity(def: &KernelDef, checks: Option<BoundsChecks>) -> KernelId {
    KernelId::of(&(
        &def.workgroup_size,
        &def.buffers,
        &def.scalars,
        &def.shared,
        &def.values,
        &def.vars,
        &def.body,
        checks,
    ))
}

/// Bytes of the uniform block for `n` scalar arguments.
///
/// Layout rule: the block is a WGSL `struct` of 4-byte members (`i32`, `u32`
/// or `f32`, in declaration order), so argument `i` is at byte offset `4 * i`
/// (WGSL uniform alignment of a 4-byte scalar is 4: no padding between
/// members). The block is padded at the end to a multiple of 16 bytes, the
/// alignment WGSL gives structs in the uniform address space, so the buffer
/// can be bound whole. Zero arguments: no block.
pub const fn scalar_block_size(n: usize) -> usize {
    (4 * n).div_ceil(16) * 16
}

/// Packs arguments little-endian per [`scalar_block_size`]'s rule. Types are
/// not checked here; [`Kernel::pack_scalars`] does.
pub fn pack_scalars(args: &[Lit]) -> Vec<u8> {
    let mut out = vec![0u8; scalar_block_size(args.len())];
    for (i, a) in args.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&(a.bits() as u32).to_le_bytes());
    }
    out
}

/// Whether `s` can be a scalar argument.
pub const fn is_scalar_arg(s: Scalar) -> bool {
    matches!(s, Scalar::I32 | Scalar::U32 | Scalar::F32)
}

impl CubeKernel for Kernel {
    fn id(&self) -> KernelId {
        self.id
    }
    fn name(&self) -> &str {
        &self.def.name
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
