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
//! (nothing). One module and variant per process, so a caller can bound
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
        | wgpu::Features::SHADER_FLOAT32_ATOMIC;
    block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: adapter.features() & wanted,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| format!("no device: {e}"))
}
