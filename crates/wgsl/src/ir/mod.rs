//! The IR backend: [`compute_ir::Kernel`] to WGSL, validated by naga.
//!
//! `layout` reads the kernel's interface without generating code; `compile`
//! checks the kernel against the device (workgroup size, shared memory,
//! binding count, `f16`), emits WGSL ([`emit_wgsl`]) and, when the options
//! ask for it, validates it with naga. Every storage buffer is emitted
//! `read_write`, so the output already meets the server's contract.

mod emit;
mod literal;

use compute_ir::{Access, Kernel, KernelInfo};
use compute_runtime::{CubeKernel, ServerError};

use crate::{
    BindingAccess, CompiledKernel, DeviceCaps, KernelLayout, WgpuCompilationOptions, WgpuCompiler,
    validate_wgsl,
};

pub use emit::{ENTRY_POINT, emit_wgsl};

/// The IR backend: compiles [`compute_ir::Kernel`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct IrCompiler;

/// The server's view of an IR kernel's interface.
pub fn ir_layout(info: &KernelInfo) -> KernelLayout {
    KernelLayout {
        bindings: info
            .buffers
            .iter()
            .map(|a| match a {
                Access::Read => BindingAccess::ReadOnly,
                Access::ReadWrite => BindingAccess::ReadWrite,
            })
            .collect(),
        scalars: info.scalars,
        workgroup_size: info.workgroup_size,
    }
}

fn limit(limit: &'static str, requested: u64, max: u32) -> Result<(), ServerError> {
    if requested > u64::from(max) {
        return Err(ServerError::LimitExceeded {
            limit,
            requested,
            max: u64::from(max),
        });
    }
    Ok(())
}

/// Refuses a kernel the device cannot run, before any code is generated.
fn check_device(kernel: &Kernel, caps: &DeviceCaps) -> Result<(), ServerError> {
    let def = kernel.def();
    let l = &caps.limits;
    let [x, y, z] = def.workgroup_size;
    limit(
        "max_compute_workgroup_size_x",
        x.into(),
        l.max_compute_workgroup_size_x,
    )?;
    limit(
        "max_compute_workgroup_size_y",
        y.into(),
        l.max_compute_workgroup_size_y,
    )?;
    limit(
        "max_compute_workgroup_size_z",
        z.into(),
        l.max_compute_workgroup_size_z,
    )?;
    limit(
        "max_compute_invocations_per_workgroup",
        u64::from(x) * u64::from(y) * u64::from(z),
        l.max_compute_invocations_per_workgroup,
    )?;
    let shared: u64 = def
        .shared
        .iter()
        .map(|s| u64::from(s.len) * s.elem.size() as u64)
        .sum();
    limit(
        "max_compute_workgroup_storage_size",
        shared,
        l.max_compute_workgroup_storage_size,
    )?;
    limit(
        "max_storage_buffers_per_shader_stage",
        def.buffers.len() as u64,
        l.max_storage_buffers_per_shader_stage,
    )?;
    if def.uses_f16() && !caps.features.contains(wgpu::Features::SHADER_F16) {
        return Err(ServerError::unsupported(
            "f16",
            "the kernel uses f16 and the device lacks SHADER_F16",
        ));
    }
    Ok(())
}

impl IrCompiler {
    fn downcast(kernel: &dyn CubeKernel) -> Result<&Kernel, ServerError> {
        kernel
            .as_any()
            .downcast_ref::<Kernel>()
            .ok_or_else(|| ServerError::ForeignKernel {
                kernel: kernel.name().to_string(),
                compiler: Self::NAME,
            })
    }
}

impl WgpuCompiler for IrCompiler {
    const NAME: &'static str = "ir";

    fn layout(&self, kernel: &dyn CubeKernel) -> Result<KernelLayout, ServerError> {
        Ok(ir_layout(&Self::downcast(kernel)?.info()))
    }

    fn compile(
        &mut self,
        kernel: &dyn CubeKernel,
        options: &WgpuCompilationOptions,
        caps: &DeviceCaps,
    ) -> Result<CompiledKernel, ServerError> {
        let k = Self::downcast(kernel)?;
        // A `Kernel` is validated when it is made (`Kernel::new`), so type
        // errors never reach this point; what is left is the device.
        check_device(k, caps)?;
        let source = emit_wgsl(k);
        if options.validate {
            validate_wgsl(k.name(), &source)?;
        }
        Ok(CompiledKernel {
            name: k.name().to_string(),
            source,
            entry_point: ENTRY_POINT.to_string(),
            layout: ir_layout(&k.info()),
        })
    }
}
