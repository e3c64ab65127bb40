//! [`DefaultCompiler`]: IR kernels and WGSL kernels on one server.
//!
//! A runtime rarely has one kind of kernel: generated ones (the IR) next to
//! a few written by hand (WGSL). The default compiler takes both, by the
//! kernel's type: a [`compute_ir::Kernel`] goes to [`IrCompiler`], a
//! [`WgslKernel`] to [`WgslPassthrough`]; anything else is
//! [`ServerError::ForeignKernel`]. Both kinds share the server's pipeline
//! cache (their ids hash different things: the IR, or the source).

use compute_ir::Kernel;
use compute_runtime::{CubeKernel, ServerError};

use crate::{
    CompiledKernel, DeviceCaps, IrCompiler, KernelLayout, WgpuCompilationOptions, WgpuCompiler,
    WgslKernel, WgslPassthrough,
};

/// The compiler of `wgpu_server::DefaultServer`: IR and WGSL kernels.
///
/// ```
/// use compute_ir::KernelBuilder;
/// use compute_runtime::CubeKernel;
/// use compute_wgsl::{BindingAccess, DefaultCompiler, WgpuCompiler, WgslKernel};
///
/// let compiler = DefaultCompiler::default();
/// let k = KernelBuilder::new("zero", [64, 1, 1]);
/// let out = k.output(compute_ir::Scalar::U32);
/// let gid = k.global_id();
/// let i = k.x(gid);
/// let zero = k.u32(0);
/// k.store(out, i, zero);
/// let ir = k.build()?;
/// let wgsl = WgslKernel::new(
///     "one",
///     "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
///      @compute @workgroup_size(64) fn main() { x[0] = 1u; }",
///     "main",
///     [64, 1, 1],
///     vec![BindingAccess::ReadWrite],
/// );
/// // Both kinds have a layout (and compile) through the one compiler.
/// assert_eq!(compiler.layout(&ir)?.bindings, [BindingAccess::ReadWrite]);
/// assert_eq!(compiler.layout(&wgsl)?.bindings, [BindingAccess::ReadWrite]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultCompiler {
    ir: IrCompiler,
    wgsl: WgslPassthrough,
}

enum Which {
    Ir,
    Wgsl,
}

impl DefaultCompiler {
    fn which(kernel: &dyn CubeKernel) -> Result<Which, ServerError> {
        let any = kernel.as_any();
        if any.is::<Kernel>() {
            Ok(Which::Ir)
        } else if any.is::<WgslKernel>() {
            Ok(Which::Wgsl)
        } else {
            Err(ServerError::ForeignKernel {
                kernel: kernel.name().to_string(),
                compiler: Self::NAME,
            })
        }
    }
}

impl WgpuCompiler for DefaultCompiler {
    const NAME: &'static str = "default (IR and WGSL)";

    fn layout(&self, kernel: &dyn CubeKernel) -> Result<KernelLayout, ServerError> {
        match Self::which(kernel)? {
            Which::Ir => self.ir.layout(kernel),
            Which::Wgsl => self.wgsl.layout(kernel),
        }
    }

    fn compile(
        &mut self,
        kernel: &dyn CubeKernel,
        options: &WgpuCompilationOptions,
        caps: &DeviceCaps,
    ) -> Result<CompiledKernel, ServerError> {
        match Self::which(kernel)? {
            Which::Ir => self.ir.compile(kernel, options, caps),
            Which::Wgsl => self.wgsl.compile(kernel, options, caps),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::any::Any;

    use compute_runtime::KernelId;

    use super::*;

    #[derive(Debug)]
    struct Alien;

    impl CubeKernel for Alien {
        fn id(&self) -> KernelId {
            KernelId(1)
        }
        fn name(&self) -> &str {
            "alien"
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn other_kernels_are_foreign_and_boxed_ones_are_seen_through() {
        let c = DefaultCompiler::default();
        let err = c.layout(&Alien).expect_err("foreign");
        assert!(matches!(
            err,
            ServerError::ForeignKernel { ref kernel, compiler } if kernel == "alien" && compiler == DefaultCompiler::NAME
        ));
        let boxed: Box<dyn CubeKernel> =
            Box::new(WgslKernel::new("w", "", "main", [1, 1, 1], vec![]));
        assert!(c.layout(&boxed).is_ok());
    }
}
