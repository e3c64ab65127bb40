//! What the WGSL tests share.

/// naga validates `source` and its SPIR-V writer (what wgpu runs on
/// Vulkan) takes the module without an error or a panic: naga 30 panics
/// there on some modules its validator accepts (a `coopStoreT` whose
/// stride is an inline expression), and lavapipe, lacking cooperative
/// matrices, never gets that far.
pub fn naga_spirv(source: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(source))?;
    let options = naga::back::spv::Options::default();
    std::panic::catch_unwind(|| naga::back::spv::write_vec(&module, &info, &options, None))
        .map_err(|_| "naga's SPIR-V writer panicked".to_string())?
        .map(|_| ())
        .map_err(|e| e.to_string())
}
