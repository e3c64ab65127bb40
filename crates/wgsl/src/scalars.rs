//! A WGSL kernel's scalar arguments checked against the uniform block its
//! source declares.
//!
//! [`WgslKernel::args`](crate::WgslKernel::args) packs scalars by the IR's
//! rule (4-byte members in order). The server checks only the block's size
//! at the launch: it sees bytes. So a `u32` packed where the struct has an
//! `f32`, or one scalar too few (the missing member reads zero), would run
//! silently with wrong values. This module reads the struct from the source
//! once per kernel (naga's parser, no validation: a module that does not
//! parse is refused by the server at compile time, with naga's message) and
//! says which argument does not fit.

use compute_runtime::{DType, ServerError};

/// One member of the uniform block: its name, byte offset and, when it is
/// a scalar, its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    name: String,
    offset: u32,
    scalar: Option<DType>,
}

/// The members of the module's uniform block, in order (a block that is a
/// bare scalar is one member named after the variable). `None` when the
/// source does not parse or declares no uniform block: nothing to check
/// against here, and the server's compile says why.
pub(crate) fn uniform_members(source: &str) -> Option<Vec<Member>> {
    let module = naga::front::wgsl::parse_str(source).ok()?;
    let var = module
        .global_variables
        .iter()
        .map(|(_, v)| v)
        .find(|v| v.space == naga::AddressSpace::Uniform)?;
    let scalar_of = |ty: naga::Handle<naga::Type>| match module.types[ty].inner {
        naga::TypeInner::Scalar(s) => dtype(s),
        _ => None,
    };
    Some(match &module.types[var.ty].inner {
        naga::TypeInner::Struct { members, .. } => members
            .iter()
            .map(|m| Member {
                name: m.name.clone().unwrap_or_default(),
                offset: m.offset,
                scalar: scalar_of(m.ty),
            })
            .collect(),
        _ => vec![Member {
            name: var.name.clone().unwrap_or_default(),
            offset: 0,
            scalar: scalar_of(var.ty),
        }],
    })
}

fn dtype(s: naga::Scalar) -> Option<DType> {
    use naga::ScalarKind::{Float, Sint, Uint};
    Some(match (s.kind, s.width) {
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

/// The element type of a scalar argument, or why it cannot be one.
fn passed(kernel: &str, index: usize, lit: &compute_ir::Lit) -> Result<DType, ServerError> {
    lit.scalar()
        .dtype()
        .ok_or_else(|| ServerError::InvalidArgument {
            reason: format!(
                "kernel `{kernel}`: scalar argument {index} is a bool, which a uniform block \
                 cannot hold (pass a u32)"
            ),
        })
}

/// Checks `scalars` against the block's `members`: one per member, each of
/// the member's type, each member a 4-byte scalar at byte `4 * i` (the rule
/// [`compute_ir::pack_scalars`] packs by).
pub(crate) fn check(
    kernel: &str,
    members: &[Member],
    scalars: &[compute_ir::Lit],
) -> Result<(), ServerError> {
    if members.len() != scalars.len() {
        return Err(ServerError::ScalarCount {
            kernel: kernel.to_string(),
            declared: members.len() as u32,
            passed: scalars.len() as u32,
        });
    }
    for (i, (m, lit)) in members.iter().zip(scalars).enumerate() {
        let four_bytes = matches!(m.scalar, Some(DType::I32 | DType::U32 | DType::F32));
        let (Some(declared), true, true) = (m.scalar, four_bytes, m.offset == 4 * i as u32) else {
            return Err(ServerError::LayoutMismatch {
                kernel: kernel.to_string(),
                reason: format!(
                    "uniform member {i} (`{}`) is not a 4-byte i32, u32 or f32 at byte {}: \
                     `args` packs scalars as consecutive 4-byte members (pack other layouts \
                     by hand with `KernelArguments::with_scalars`)",
                    m.name,
                    4 * i
                ),
            });
        };
        let passed = passed(kernel, i, lit)?;
        if passed != declared {
            return Err(ServerError::ScalarType {
                kernel: kernel.to_string(),
                index: i as u32,
                member: m.name.clone(),
                declared,
                passed,
            });
        }
    }
    Ok(())
}
