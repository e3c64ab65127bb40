//! naga parse + validate, with the diagnostic rendered against the source.

use compute_runtime::ServerError;

/// Parses and validates `source`, returning naga's diagnostic on failure as a
/// [`ServerError::Compilation`] for `kernel`.
pub fn validate_wgsl(kernel: &str, source: &str) -> Result<naga::Module, ServerError> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| ServerError::Compilation {
        kernel: kernel.to_string(),
        diagnostic: e.emit_to_string(source),
    })?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| ServerError::Compilation {
        kernel: kernel.to_string(),
        diagnostic: e.emit_to_string(source),
    })?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_name_the_problem() {
        let err = validate_wgsl("bad", "fn main( {}").expect_err("syntax error");
        let ServerError::Compilation { kernel, diagnostic } = err else {
            panic!("wrong variant");
        };
        assert_eq!(kernel, "bad");
        assert!(diagnostic.contains("error"), "{diagnostic}");

        let err = validate_wgsl("types", "fn f() -> u32 { return 1.5; }").expect_err("type error");
        assert!(err.to_string().contains("types"));
    }
}
