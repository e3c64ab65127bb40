//! What a kernel needs of a device: the scalar types, subgroups and
//! cooperative matrices it uses (`compute-wgsl` refuses a kernel whose
//! needs the device does not meet).

use crate::ir::{Builtin, Feature, KernelDef, Op, Stmt};
use crate::types::Scalar;

impl KernelDef {
    /// Whether any declaration or value is `f16`.
    pub fn uses_f16(&self) -> bool {
        self.uses(Scalar::F16)
    }

    /// Whether the kernel needs the device's subgroups: it uses a
    /// subgroup builtin or operation outside the `then` of a
    /// [`Stmt::IfFeature`] on [`Feature::Subgroups`].
    pub fn uses_subgroups(&self) -> bool {
        self.uses_subgroups_on(false)
    }

    /// Whether the kernel as compiled for a device with (`subgroups`) or
    /// without subgroups uses a subgroup builtin or operation: a
    /// [`Stmt::IfFeature`] counts with the branch that device takes.
    pub fn uses_subgroups_on(&self, subgroups: bool) -> bool {
        uses_subgroups_in(&self.body, subgroups)
    }

    /// Whether the kernel declares a cooperative matrix (WGSL's
    /// `wgpu_cooperative_matrix` extension).
    pub fn uses_matrices(&self) -> bool {
        !self.matrices.is_empty()
    }

    /// Whether any declaration or value has scalar type `s`.
    pub fn uses(&self, s: Scalar) -> bool {
        self.values
            .iter()
            .chain(self.vars.iter())
            .any(|t| t.scalar == s)
            || self.buffers.iter().any(|b| b.elem == s)
            || self.shared.iter().any(|x| x.elem == s)
            || self.locals.iter().any(|x| x.ty.scalar == s)
            || self.matrices.iter().any(|m| m.elem == s)
            || self.scalars.contains(&s)
    }
}

/// Whether `stmts` use a subgroup builtin or operation on a device with
/// (`subgroups`) or without subgroups.
fn uses_subgroups_in(stmts: &[Stmt], subgroups: bool) -> bool {
    let any = |stmts: &[Stmt]| uses_subgroups_in(stmts, subgroups);
    stmts.iter().any(|s| match s {
        Stmt::Let(_, op) => matches!(
            op,
            Op::Subgroup(..)
                | Op::SubgroupShuffle(..)
                | Op::Builtin(
                    Builtin::SubgroupInvocationId
                        | Builtin::SubgroupSize
                        | Builtin::SubgroupId
                        | Builtin::NumSubgroups
                )
        ),
        Stmt::If {
            then, otherwise, ..
        } => any(then) || any(otherwise),
        Stmt::IfFeature {
            feature: Feature::Subgroups,
            then,
            otherwise,
        } => any(if subgroups { then } else { otherwise }),
        Stmt::For { body, .. } | Stmt::Loop(body) => any(body),
        Stmt::Var(..)
        | Stmt::Set(..)
        | Stmt::Store(..)
        | Stmt::AtomicStore(..)
        | Stmt::Break
        | Stmt::Continue
        | Stmt::Return
        | Stmt::Barrier(_)
        | Stmt::UniformLoad(..)
        | Stmt::Matrix(_) => false,
    })
}
