//! naga parse + validate, with the diagnostic rendered against the source,
//! and the one rewrite the server needs: storage bindings made writable.

use compute_runtime::ServerError;

/// Parses and validates `source`, returning naga's diagnostic on failure as a
/// [`ServerError::Compilation`] for `kernel`. A panic inside naga is that
/// error too ([`without_panics`]): the source is the caller's.
pub fn validate_wgsl(kernel: &str, source: &str) -> Result<naga::Module, ServerError> {
    validate_wgsl_with_info(kernel, source).map(|(module, _)| module)
}

/// [`validate_wgsl`], with what naga's validator learnt of the module (each
/// expression's type, for analyses of the module that follow).
pub fn validate_wgsl_with_info(
    kernel: &str,
    source: &str,
) -> Result<(naga::Module, naga::valid::ModuleInfo), ServerError> {
    without_panics(kernel, "naga's WGSL parser or validator", || {
        parse_and_validate(kernel, source)
    })?
}

/// `f()`, or, if it panics, [`ServerError::Compilation`] for `kernel`
/// naming `stage` and the panic's message. For the compiler stages a
/// caller's kernel reaches (naga's front end and validator here, wgpu's
/// shader translation in the server's pipeline cache): naga 30's SPIR-V
/// writer panics ("Expression is not cached") on some modules its
/// validator accepts, and a kernel must not take the caller's process down
/// with it. The default panic hook still prints the panic on stderr.
pub fn without_panics<T>(
    kernel: &str,
    stage: &'static str,
    f: impl FnOnce() -> T,
) -> Result<T, ServerError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a panic without a message");
        ServerError::Compilation {
            kernel: kernel.to_string(),
            diagnostic: format!("{stage} panicked: {message}"),
        }
    })
}

fn parse_and_validate(
    kernel: &str,
    source: &str,
) -> Result<(naga::Module, naga::valid::ModuleInfo), ServerError> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| ServerError::Compilation {
        kernel: kernel.to_string(),
        diagnostic: e.emit_to_string(source),
    })?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| ServerError::Compilation {
        kernel: kernel.to_string(),
        diagnostic: e.emit_to_string(source),
    })?;
    Ok((module, info))
}

/// Makes every `var<storage, read>` of `module` `read_write`; whether
/// anything changed.
///
/// Why: wgpu tracks buffer usage per buffer, not per range, and a dispatch
/// may not use one buffer as both read-only and read-write storage. Slices of
/// one page are one buffer, so a kernel reading slice A and writing slice B
/// of the same page would be invalid. Binding every storage buffer
/// read-write removes the conflict; which bindings the kernel *writes* (its
/// write set) still comes from its declared layout, checked against the
/// module before this rewrite (see [`crate::check_layout`]).
pub fn make_storage_writable(module: &mut naga::Module) -> bool {
    let mut changed = false;
    for (_, var) in module.global_variables.iter_mut() {
        if let naga::AddressSpace::Storage { access } = &mut var.space
            && !access.contains(naga::StorageAccess::STORE)
        {
            access.insert(naga::StorageAccess::STORE);
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_storage_becomes_read_write_and_still_validates() {
        let src = "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
                   @group(0) @binding(1) var<storage, read_write> b: array<f32>;\n\
                   @compute @workgroup_size(1) fn main() { b[0] = a[0]; }";
        let mut m = validate_wgsl("k", src).expect("valid");
        assert!(make_storage_writable(&mut m));
        assert!(!make_storage_writable(&mut m), "nothing left to change");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&m)
        .expect("still valid");
        let writable = m
            .global_variables
            .iter()
            .filter(|(_, v)| {
                matches!(v.space, naga::AddressSpace::Storage { access }
                    if access.contains(naga::StorageAccess::STORE))
            })
            .count();
        assert_eq!(writable, 2);
    }

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

    #[test]
    fn a_panic_is_a_compilation_error_naming_the_stage_and_the_message() {
        let caught = without_panics("k", "the stage", || -> u32 {
            panic!("inner {}", 7);
        });
        match caught {
            Err(ServerError::Compilation { kernel, diagnostic }) => {
                assert_eq!(kernel, "k");
                assert_eq!(diagnostic, "the stage panicked: inner 7");
            }
            other => panic!("expected Compilation, got {other:?}"),
        }
        assert_eq!(without_panics("k", "s", || 3).ok(), Some(3));
    }
}
