//! [`Kernel`]: a validated [`KernelDef`] with an identity, as the server sees it.

use std::any::Any;
use std::sync::Arc;

use compute_runtime::client::ComputeClient;
use compute_runtime::{
    CubeCount, CubeKernel, Handle, KernelArguments, KernelId, LaunchValidation, ServerError,
};

use crate::ir::{Access, KernelDef};
use crate::{IrError, Lit, Scalar, validate};

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
}

impl Kernel {
    /// Validates `def` and wraps it.
    pub fn new(def: KernelDef) -> Result<Self, IrError> {
        validate(&def)?;
        let id = KernelId::of(&(
            &def.workgroup_size,
            &def.buffers,
            &def.scalars,
            &def.shared,
            &def.values,
            &def.vars,
            &def.body,
        ));
        Ok(Kernel {
            def: Arc::new(def),
            id,
        })
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
    /// packed and checked ([`Kernel::pack_scalars`]).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Lit, Scalar};
    /// use compute_runtime::{Handle, ManagedMemoryHandle};
    ///
    /// let k = KernelBuilder::new("fill", [64, 1, 1]);
    /// let (x, n) = (k.output(Scalar::U32), k.scalar_arg(Scalar::U32));
    /// let i = k.x(k.global_id());
    /// k.if_(k.lt(i, n), |k| k.store(x, i, 7u32));
    /// let fill = k.build()?;
    /// let x = Handle::new(ManagedMemoryHandle::new(), 400);
    /// let args = fill.args([&x], &[Lit::U32(100)])?;
    /// assert_eq!((args.buffers.len(), args.scalars.len()), (1, 16));
    /// assert!(fill.args([&x], &[Lit::f32(1.0)]).is_err()); // u32 expected
    /// assert!(matches!(fill.groups_for(100), compute_runtime::CubeCount::Static(2, 1, 1)));
    /// # Ok::<(), compute_ir::IrError>(())
    /// ```
    pub fn args<'a>(
        &self,
        buffers: impl IntoIterator<Item = &'a Handle>,
        scalars: &[Lit],
    ) -> Result<KernelArguments, IrError> {
        Ok(KernelArguments::handles(buffers).with_scalars(self.pack_scalars(scalars)?))
    }

    /// A one-dimensional count of workgroups covering `n` invocations along
    /// x: `ceil(n / workgroup_size.x)`.
    pub fn groups_for(&self, n: u32) -> CubeCount {
        CubeCount::x(n.div_ceil(self.def.workgroup_size[0].max(1)))
    }

    /// [`ComputeClient::launch`] in one line: this kernel over `n`
    /// invocations along x ([`groups_for`](Self::groups_for)), with
    /// `buffers` and `scalars` ([`args`](Self::args)). Scalars that do not
    /// fit the kernel are a [`ServerError::Launch`] naming it, like every
    /// other refusal at the call.
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
        n: u32,
        buffers: impl IntoIterator<Item = &'a Handle>,
        scalars: &[Lit],
    ) -> Result<(), ServerError> {
        let args = self
            .args(buffers, scalars)
            .map_err(|e| ServerError::Launch {
                kernel: self.name().to_string(),
                cause: Arc::new(e.into()),
            })?;
        client.launch(self.clone(), self.groups_for(n), args)
    }
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
