//! The IR backend: [`compute_ir::Kernel`] to WGSL, validated by naga.
//!
//! `layout` reads the kernel's interface without generating code; `compile`
//! checks the kernel against the device (workgroup size, shared memory,
//! binding count, features), emits WGSL ([`emit_wgsl`]) and, when the
//! options ask for it, validates it with naga. Storage buffers are emitted
//! with the access the IR declares, so the server's check of the layout
//! against the module holds by construction.
//!
//! Feature-gated IR, refused with [`ServerError::Unsupported`] (`what` in
//! quotes) on a device without the wgpu feature:
//! - `"f16"`: `SHADER_F16`; emitted with `enable f16;`;
//! - `"i64"`, `"u64"`: `SHADER_INT64`; `"f64"`: `SHADER_F64`. naga 30 takes
//!   them without an `enable` directive (its validator wants the
//!   `SHADER_INT64` / `FLOAT64` capabilities, which wgpu derives from the
//!   device features); literals are `1li`, `1lu`, `1.0lf`. Integer casts
//!   that change both width and signedness are emitted in two steps (width
//!   first, by the source's signedness), because naga's SPIR-V output of the
//!   one-step form extends by the *target*'s signedness;
//! - `"subgroups"`: `SUBGROUP`, for the subgroup functions (reductions,
//!   scans, votes, broadcasts, ballots, shuffles) and the
//!   `subgroup_invocation_id` and `subgroup_size` builtins (declared as
//!   entry-point parameters only when used). No `enable subgroups;`: naga 30 parses it as a not-yet-
//!   implemented extension and fails.
//!
//! Not emitted because the IR lacks them: 64-bit atomics and scalar
//! arguments, `subgroupElect`/`subgroupBarrier`, f16/64-bit subgroup operands, 64-bit
//! `exp`/`log`/`pow`/`tanh`/`sin`/`cos` (Vulkan's GLSL.std.450 has none).

mod emit;
mod head;
mod literal;
mod loops;
mod matrix;
mod ranges;
mod report;

use compute_ir::{Access, Kernel, KernelInfo, Scalar};
use compute_runtime::{CubeKernel, ServerError};

use crate::{
    BindingAccess, BoundsChecks, CompiledKernel, DeviceCaps, KernelLayout, WgpuCompilationOptions,
    WgpuCompiler, validate_wgsl,
};

pub use emit::{ENTRY_POINT, emit_wgsl, emit_wgsl_for};

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
        reports: false,
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
        .map(compute_ir::ir::SharedDecl::bytes)
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
    if def.uses_f16() && !caps.features.contains(wgpu_types::Features::SHADER_F16) {
        return Err(ServerError::unsupported(
            "f16",
            "the kernel uses f16 and the device lacks SHADER_F16",
        ));
    }
    let int64 = caps.features.contains(wgpu_types::Features::SHADER_INT64);
    if def.uses(Scalar::I64) && !int64 {
        return Err(ServerError::unsupported(
            "i64",
            "the kernel uses i64 and the device lacks SHADER_INT64",
        ));
    }
    if def.uses(Scalar::U64) && !int64 {
        return Err(ServerError::unsupported(
            "u64",
            "the kernel uses u64 and the device lacks SHADER_INT64",
        ));
    }
    if def.uses_subgroups() && !caps.features.contains(wgpu_types::Features::SUBGROUP) {
        return Err(ServerError::unsupported(
            "subgroups",
            "the kernel uses subgroup operations and the device lacks SUBGROUP",
        ));
    }
    if def.uses(Scalar::F64) && !caps.features.contains(wgpu_types::Features::SHADER_F64) {
        return Err(ServerError::unsupported(
            "f64",
            "the kernel uses f64 and the device lacks SHADER_F64",
        ));
    }
    matrix::check_device(kernel, caps)
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
        let own = k.bounds_checks();
        let reports = own.unwrap_or(options.bounds_checks) == BoundsChecks::Reported;
        let subgroups = caps.features.contains(wgpu_types::Features::SUBGROUP);
        let source = emit::emit_wgsl_for(k, reports, subgroups);
        if options.validate {
            validate_wgsl(k.name(), &source)?;
        }
        Ok(CompiledKernel {
            name: k.name().to_string(),
            source,
            entry_point: ENTRY_POINT.to_string(),
            layout: KernelLayout {
                reports,
                ..ir_layout(&k.info())
            },
            bounds_checks: own,
        })
    }
}
