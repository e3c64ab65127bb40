//! How long the driver takes to compile one of the bridge's WGSL modules
//! (`CUBECL_BRIDGE_SPIRV_DUMP` writes them) under one set of wgpu's
//! run-time checks: the probe for what makes NVIDIA's compile of cubek's
//! matmuls slow without the loop counter (docs/burn.md).
//!
//! ```text
//! cargo run --release --example compile_probe -- FILE.wgsl VARIANT
//! ```
//!
//! VARIANT: `checked` (wgpu's default), `noloop` (no loop counter),
//! `noloop-noclamp` (neither the counter nor index clamping),
//! `noloop-nodiv` (neither the counter nor integer-division guards),
//! `noloop-nozero` (no counter, workgroup memory not zeroed), `none`
//! (nothing), `spirv` (cubecl's SPIR-V as the bridge rewrote it, the
//! `.spv` beside FILE, handed to the driver as is: what naga would read),
//! `spirv-orig` (cubecl's SPIR-V before the rewrite, `.orig.spv`: what
//! upstream's driver gets). One module and variant per process, so a caller can bound
//! each with `timeout`; set `__GL_SHADER_DISK_CACHE=0` to keep NVIDIA's
//! disk cache out of it. Prints `VARIANT FILE compile_ms`.

use std::time::Instant;

use cubecl_environment::future::block_on;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(variant)) = (args.next(), args.next()) else {
        return Err("usage: compile_probe FILE.wgsl VARIANT".into());
    };
    let source = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    if variant.starts_with("spirv") {
        return passthrough(&path, &variant);
    }
    let (checks, zero) = checks(&variant)?;
    let (device, _queue) = device()?;
    let entry = naga::front::wgsl::parse_str(&source)
        .map_err(|e| format!("{path}: {e}"))?
        .entry_points
        .first()
        .map(|e| e.name.clone())
        .ok_or("no entry point")?;
    let started = Instant::now();
    // SAFETY: a measuring tool; the modules are the bridge's, validated
    // by naga on the way in.
    let module = unsafe {
        device.create_shader_module_trusted(
            wgpu::ShaderModuleDescriptor {
                label: Some(&path),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            },
            checks,
        )
    };
    let _pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&path),
        layout: None,
        module: &module,
        entry_point: Some(&entry),
        compilation_options: wgpu::PipelineCompilationOptions {
            zero_initialize_workgroup_memory: zero,
            ..Default::default()
        },
        cache: None,
    });
    println!(
        "{variant} {path} {:.1}",
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

/// The `.spv` beside the WGSL file through wgpu's passthrough: no naga, no
/// checks. The layout comes from the module's own descriptor decorations.
fn passthrough(path: &str, variant: &str) -> Result<(), String> {
    let ext = if variant == "spirv-orig" {
        "orig.spv"
    } else {
        "spv"
    };
    let spv = path
        .strip_suffix("wgsl")
        .map(|stem| format!("{stem}{ext}"))
        .ok_or("FILE must end in .wgsl")?;
    let bytes = std::fs::read(&spv).map_err(|e| format!("{spv}: {e}"))?;
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let module = rspirv::dr::load_words(&words).map_err(|e| format!("{spv}: {e}"))?;
    let entry = module
        .entry_points
        .first()
        .and_then(|e| match e.operands.get(2) {
            Some(rspirv::dr::Operand::LiteralString(s)) => Some(s.clone()),
            _ => None,
        })
        .ok_or("no entry point")?;
    let (device, _queue) = device()?;
    let started = Instant::now();
    let entries = layout_entries(&module);
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &entries,
    });
    let immediate_size = if has_push_constants(&module) {
        device.limits().max_immediate_size
    } else {
        0
    };
    let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&group)],
        immediate_size,
    });
    // SAFETY: a measuring tool; the module is cubecl-spirv's, and it is
    // compiled only, never dispatched.
    let module = unsafe {
        device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
            label: Some(&spv),
            entry_points: std::borrow::Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint {
                name: entry.clone().into(),
                workgroup_size: (1, 1, 1),
            }]),
            spirv: Some(std::borrow::Cow::Owned(words)),
            ..Default::default()
        })
    };
    let _pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&spv),
        layout: Some(&layout),
        module: &module,
        entry_point: Some(&entry),
        compilation_options: Default::default(),
        cache: None,
    });
    println!(
        "{variant} {path} {:.1}",
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

/// One storage (or uniform) binding per decorated variable of set 0.
fn layout_entries(module: &rspirv::dr::Module) -> Vec<wgpu::BindGroupLayoutEntry> {
    use rspirv::dr::Operand;
    use rspirv::spirv::{Decoration, Op, StorageClass};
    let binding = |id: u32| {
        module
            .annotations
            .iter()
            .find_map(|a| match (a.class.opcode, a.operands.as_slice()) {
                (
                    Op::Decorate,
                    [
                        Operand::IdRef(t),
                        Operand::Decoration(Decoration::Binding),
                        Operand::LiteralBit32(b),
                    ],
                ) if *t == id => Some(*b),
                _ => None,
            })
    };
    module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Variable)
        .filter_map(|v| {
            let class = match v.operands.first() {
                Some(Operand::StorageClass(c)) => *c,
                _ => return None,
            };
            let ty = match class {
                StorageClass::StorageBuffer => {
                    wgpu::BufferBindingType::Storage { read_only: false }
                }
                StorageClass::Uniform => wgpu::BufferBindingType::Uniform,
                _ => return None,
            };
            Some(wgpu::BindGroupLayoutEntry {
                binding: binding(v.result_id?)?,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
        })
        .collect()
}

fn has_push_constants(module: &rspirv::dr::Module) -> bool {
    module.types_global_values.iter().any(|i| {
        i.class.opcode == rspirv::spirv::Op::Variable
            && matches!(
                i.operands.first(),
                Some(rspirv::dr::Operand::StorageClass(
                    rspirv::spirv::StorageClass::PushConstant
                ))
            )
    })
}

fn checks(variant: &str) -> Result<(wgpu::ShaderRuntimeChecks, bool), String> {
    let mut c = wgpu::ShaderRuntimeChecks::checked();
    let mut zero = true;
    match variant {
        "checked" => {}
        "noloop" => c.force_loop_bounding = false,
        "noloop-noclamp" => {
            c.force_loop_bounding = false;
            c.bounds_checks = false;
        }
        "noloop-nodiv" => {
            c.force_loop_bounding = false;
            c.int_div_checks = false;
        }
        "noloop-nozero" => {
            c.force_loop_bounding = false;
            zero = false;
        }
        "none" => {
            c = wgpu::ShaderRuntimeChecks::unchecked();
            zero = false;
        }
        other => return Err(format!("unknown variant {other}")),
    }
    Ok((c, zero))
}

fn device() -> Result<(wgpu::Device, wgpu::Queue), String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter = block_on(instance.request_adapter(&Default::default()))
        .map_err(|e| format!("no adapter: {e}"))?;
    let wanted = wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP
        | wgpu::Features::SHADER_INT64
        | wgpu::Features::SHADER_FLOAT32_ATOMIC
        | wgpu::Features::PASSTHROUGH_SHADERS
        | wgpu::Features::IMMEDIATES;
    block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: adapter.features() & wanted,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| format!("no device: {e}"))
}
