//! A module's interface read with naga: what the server checks a declared
//! layout against, so a layout is never believed.
//!
//! The server binds one bind group (group 0): storage buffers at bindings
//! `0..n`, then at most one uniform block of scalars at binding `n`; and,
//! for a kernel with reported bounds checks, the report slot alone in group
//! [`REPORT_GROUP`](crate::REPORT_GROUP). This
//! module reads, for a validated module and one compute entry point, every
//! resource the module declares, in that shape or not, and says precisely
//! where it departs from it: a binding in another group, a gap, a texture,
//! a second uniform. For each storage binding it gives the access the module
//! declares (`read` or `read_write`) and the minimum binding size WebGPU
//! checks at dispatch (the store type's size, one element for a
//! runtime-sized array); for the uniform block, its size; and the entry
//! point's workgroup size.
//!
//! What it buys: a declaration that disagrees with the source is refused at
//! the launch that names it, with the binding and both sides of the
//! disagreement, instead of a write set that misses a written buffer or a
//! dispatch wgpu rejects inside a shared encoder. What it does not: it
//! reads declarations, not behaviour; a `read_write` binding the shader
//! never writes still counts as written (an over-approximation, safe for
//! ordering and trust).

use compute_runtime::DType;

use crate::{BindingAccess, KernelLayout, REPORT_GROUP};

/// One storage binding as the module declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageInterface {
    /// `read` or `read_write`.
    pub access: BindingAccess,
    /// The smallest binding WebGPU accepts for it, in bytes.
    pub min_size: u64,
    /// The element type of its array (of scalars, vectors or atomics of
    /// one scalar type), where [`DType`] names it; `None` for structs and
    /// anything else.
    pub elem: Option<DType>,
}

/// The scalar element type of an array binding of type `ty`.
fn elem_of(module: &naga::Module, ty: naga::Handle<naga::Type>) -> Option<DType> {
    let base = match &module.types[ty].inner {
        naga::TypeInner::Array { base, .. } => *base,
        _ => return None,
    };
    let scalar = match module.types[base].inner {
        naga::TypeInner::Scalar(s)
        | naga::TypeInner::Atomic(s)
        | naga::TypeInner::Vector { scalar: s, .. } => s,
        _ => return None,
    };
    use naga::ScalarKind::{Float, Sint, Uint};
    Some(match (scalar.kind, scalar.width) {
        (Float, 2) => DType::F16,
        (Float, 4) => DType::F32,
        (Float, 8) => DType::F64,
        (Sint, 4) => DType::I32,
        (Sint, 8) => DType::I64,
        (Uint, 4) => DType::U32,
        (Uint, 8) => DType::U64,
        _ => return None,
    })
}

/// What a module's entry point needs bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInterface {
    /// Storage bindings `0..n` of group 0, in order.
    pub storage: Vec<StorageInterface>,
    /// Size of the uniform block at binding `n`, if there is one.
    pub uniform_size: Option<u64>,
    /// The entry point's `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Whether the module declares the bounds report slot
    /// (`@group(1) @binding(0)`, `array<atomic<u32>, 4>`, `read_write`).
    pub report: bool,
}

/// Whether `var` is the bounds report slot, the one binding of group
/// [`REPORT_GROUP`].
fn report_slot(module: &naga::Module, var: &naga::GlobalVariable) -> Result<(), String> {
    let binding = var.binding.as_ref().map_or(u32::MAX, |b| b.binding);
    let writable = matches!(var.space, naga::AddressSpace::Storage { access }
        if access.contains(naga::StorageAccess::STORE));
    let four_atomic_words = match &module.types[var.ty].inner {
        naga::TypeInner::Array {
            base,
            size: naga::ArraySize::Constant(n),
            ..
        } => {
            n.get() == 4
                && matches!(module.types[*base].inner, naga::TypeInner::Atomic(s)
                    if s == naga::Scalar::U32)
        }
        _ => false,
    };
    if binding == 0 && writable && four_atomic_words {
        Ok(())
    } else {
        Err(format!(
            "@group({REPORT_GROUP}) holds only the bounds report slot: \
             `@binding(0) var<storage, read_write> r: array<atomic<u32>, 4>`"
        ))
    }
}

/// Reads the interface of `entry_point` in a validated `module`. The error
/// says, in words, where the module departs from the server's binding
/// model.
pub fn module_interface(
    module: &naga::Module,
    entry_point: &str,
) -> Result<ModuleInterface, String> {
    let ep = module
        .entry_points
        .iter()
        .find(|e| e.name == entry_point && e.stage == naga::ShaderStage::Compute)
        .ok_or_else(|| format!("no compute entry point named `{entry_point}`"))?;
    if ep.workgroup_size_overrides.is_some() {
        return Err(
            "the workgroup size depends on pipeline overrides, which the server does not set"
                .into(),
        );
    }
    let gctx = module.to_ctx();
    let size_of = |ty: naga::Handle<naga::Type>| -> Result<u64, String> {
        module.types[ty]
            .inner
            .try_size(gctx)
            .map(u64::from)
            .ok_or_else(|| "a binding's type is too large".to_string())
    };
    let mut storage: Vec<(u32, StorageInterface)> = Vec::new();
    let mut uniforms: Vec<(u32, u64)> = Vec::new();
    let mut report = false;
    for (_, var) in module.global_variables.iter() {
        let name = var.name.as_deref().unwrap_or("<unnamed>");
        let Some(binding) = &var.binding else {
            continue;
        };
        if binding.group == REPORT_GROUP {
            report_slot(module, var).map_err(|e| format!("`{name}`: {e}"))?;
            report = true;
            continue;
        }
        if binding.group != 0 {
            return Err(format!(
                "`{name}` is in @group({}); the server binds group 0 (and the bounds report \
                 slot in group {REPORT_GROUP})",
                binding.group
            ));
        }
        match var.space {
            naga::AddressSpace::Storage { access } => {
                let access = if access.contains(naga::StorageAccess::STORE) {
                    BindingAccess::ReadWrite
                } else {
                    BindingAccess::ReadOnly
                };
                storage.push((
                    binding.binding,
                    StorageInterface {
                        access,
                        min_size: size_of(var.ty)?,
                        elem: elem_of(module, var.ty),
                    },
                ));
            }
            naga::AddressSpace::Uniform => uniforms.push((binding.binding, size_of(var.ty)?)),
            _ => {
                return Err(format!(
                    "`{name}` at @binding({}) is not a storage or uniform buffer; the server binds \
                     buffers only",
                    binding.binding
                ));
            }
        }
    }
    storage.sort_by_key(|(b, _)| *b);
    for (i, (b, _)) in storage.iter().enumerate() {
        if *b as usize != i {
            return Err(format!(
                "storage bindings must be @binding(0..{}) without gaps; found @binding({b}) where \
                 @binding({i}) was expected",
                storage.len()
            ));
        }
    }
    let n = storage.len() as u32;
    let uniform_size = match uniforms.as_slice() {
        [] => None,
        [(b, size)] if *b == n => Some(*size),
        [(b, _)] => {
            return Err(format!(
                "the uniform block is at @binding({b}); it must follow the {n} storage binding(s), \
                 at @binding({n})"
            ));
        }
        _ => return Err("more than one uniform block; the server binds at most one".into()),
    };
    Ok(ModuleInterface {
        storage: storage.into_iter().map(|(_, s)| s).collect(),
        uniform_size,
        workgroup_size: ep.workgroup_size,
        report,
    })
}

/// Checks a declared `layout` against the module's `interface`: binding
/// count, each binding's access, the scalar block, the workgroup size. The
/// error names the first disagreement with both sides.
pub fn check_layout(layout: &KernelLayout, interface: &ModuleInterface) -> Result<(), String> {
    if layout.bindings.len() != interface.storage.len() {
        return Err(format!(
            "{} storage binding(s) declared, the module has {}",
            layout.bindings.len(),
            interface.storage.len()
        ));
    }
    for (i, (declared, module)) in layout.bindings.iter().zip(&interface.storage).enumerate() {
        if *declared != module.access {
            let spell = |a: &BindingAccess| match a {
                BindingAccess::ReadOnly => "read-only",
                BindingAccess::ReadWrite => "read_write",
            };
            return Err(format!(
                "binding {i} is declared {} but the module declares it {}",
                spell(declared),
                spell(&module.access)
            ));
        }
    }
    match (layout.scalars, interface.uniform_size) {
        (true, None) => {
            return Err("a scalar block is declared but the module has no uniform".into());
        }
        (false, Some(_)) => {
            return Err("the module has a uniform block but no scalars are declared".into());
        }
        _ => {}
    }
    match (layout.reports, interface.report) {
        (true, false) => {
            return Err(
                "reported bounds checks are declared but the module has no report slot \
                        at @group(1) @binding(0)"
                    .into(),
            );
        }
        (false, true) => {
            return Err(
                "the module has a bounds report slot but the kernel does not declare \
                        reported bounds checks"
                    .into(),
            );
        }
        _ => {}
    }
    if layout.workgroup_size != interface.workgroup_size {
        return Err(format!(
            "workgroup size {:?} declared, the module's is {:?}",
            layout.workgroup_size, interface.workgroup_size
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> naga::Module {
        crate::validate_wgsl("t", src).expect("valid")
    }

    #[test]
    fn reads_access_sizes_uniform_and_workgroup_size() {
        let m = parse(
            "struct P { n: u32, scale: f32, pad: vec2<u32> }\n\
             @group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;\n\
             @group(0) @binding(1) var<storage, read_write> b: array<f32, 8>;\n\
             @group(0) @binding(2) var<uniform> p: P;\n\
             @compute @workgroup_size(8, 4, 1) fn main() { b[0] = a[0].x * p.scale; }",
        );
        let i = module_interface(&m, "main").expect("interface");
        assert_eq!(
            i.storage,
            vec![
                StorageInterface {
                    access: BindingAccess::ReadOnly,
                    min_size: 16,
                    elem: Some(DType::F32),
                },
                StorageInterface {
                    access: BindingAccess::ReadWrite,
                    min_size: 32,
                    elem: Some(DType::F32),
                },
            ]
        );
        assert_eq!(i.uniform_size, Some(16));
        assert_eq!(i.workgroup_size, [8, 4, 1]);
    }

    #[test]
    fn a_declaration_that_disagrees_is_named() {
        let m = parse(
            "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n\
             @compute @workgroup_size(64) fn main() { a[0] = 1.0; }",
        );
        let i = module_interface(&m, "main").expect("interface");
        let mut layout = KernelLayout {
            bindings: vec![BindingAccess::ReadWrite],
            scalars: false,
            workgroup_size: [64, 1, 1],
            reports: false,
        };
        assert_eq!(check_layout(&layout, &i), Ok(()));
        layout.bindings[0] = BindingAccess::ReadOnly;
        let e = check_layout(&layout, &i).expect_err("access");
        assert!(e.contains("binding 0 is declared read-only"), "{e}");
        layout.bindings[0] = BindingAccess::ReadWrite;
        layout.workgroup_size = [32, 1, 1];
        assert!(
            check_layout(&layout, &i)
                .expect_err("size")
                .contains("[32, 1, 1]")
        );
        layout.workgroup_size = [64, 1, 1];
        layout.scalars = true;
        assert!(check_layout(&layout, &i).is_err());
        layout.scalars = false;
        layout.bindings.push(BindingAccess::ReadOnly);
        assert!(
            check_layout(&layout, &i)
                .expect_err("count")
                .contains("2 storage")
        );
    }

    #[test]
    fn departures_from_the_binding_model_are_named() {
        let gap = parse(
            "@group(0) @binding(1) var<storage, read_write> b: array<f32>;\n\
             @compute @workgroup_size(1) fn main() { b[0] = 1.0; }",
        );
        let e = module_interface(&gap, "main").expect_err("gap");
        assert!(e.contains("@binding(0)"), "{e}");
        let group = parse(
            "@group(1) @binding(0) var<storage, read_write> b: array<f32>;\n\
             @compute @workgroup_size(1) fn main() { b[0] = 1.0; }",
        );
        assert!(
            module_interface(&group, "main")
                .expect_err("group")
                .contains("group")
        );
        let ok = parse("@compute @workgroup_size(1) fn main() {}");
        assert!(
            module_interface(&ok, "other")
                .expect_err("ep")
                .contains("`other`")
        );
    }
}
