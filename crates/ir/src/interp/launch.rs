//! What a launch tells each invocation: the launch-wide inputs and the
//! values of the builtins.

use crate::ir::{Builtin, KernelDef};
use crate::types::{Scalar, Type};

use super::value::Value;

/// The launch-wide inputs.
#[derive(Debug)]
pub(crate) struct Ctx<'k> {
    pub def: &'k KernelDef,
    pub scalars: Vec<u32>,
    pub workgroup_id: [u32; 3],
    pub num_workgroups: [u32; 3],
    pub subgroup_size: u32,
    /// Whether the run stands for a device with subgroups: which branch
    /// of a `Stmt::IfFeature` on them runs.
    pub subgroups: bool,
}

impl Ctx<'_> {
    /// Builtin `b`'s value in the invocation at `l` (its local id).
    pub fn builtin(&self, l: [u32; 3], b: Builtin) -> Value {
        let wg = self.def.workgroup_size;
        match b {
            Builtin::LocalId => vec3(l),
            Builtin::WorkgroupId => vec3(self.workgroup_id),
            Builtin::NumWorkgroups => vec3(self.num_workgroups),
            Builtin::GlobalId => {
                let w = self.workgroup_id;
                vec3([
                    w[0].wrapping_mul(wg[0]).wrapping_add(l[0]),
                    w[1].wrapping_mul(wg[1]).wrapping_add(l[1]),
                    w[2].wrapping_mul(wg[2]).wrapping_add(l[2]),
                ])
            }
            Builtin::LocalIndex => Value::scalar(Scalar::U32, u64::from(local_index(self.def, l))),
            Builtin::SubgroupInvocationId => Value::scalar(
                Scalar::U32,
                u64::from(local_index(self.def, l) % self.subgroup_size),
            ),
            Builtin::SubgroupSize => Value::scalar(Scalar::U32, u64::from(self.subgroup_size)),
            Builtin::SubgroupId => Value::scalar(
                Scalar::U32,
                u64::from(local_index(self.def, l) / self.subgroup_size),
            ),
            Builtin::NumSubgroups => {
                let invocations = wg[0] * wg[1] * wg[2];
                Value::scalar(
                    Scalar::U32,
                    u64::from(invocations.div_ceil(self.subgroup_size)),
                )
            }
        }
    }
}

/// `local_invocation_index` of the invocation at `l`.
pub(crate) fn local_index(def: &KernelDef, l: [u32; 3]) -> u32 {
    let wg = def.workgroup_size;
    l[0] + l[1] * wg[0] + l[2] * wg[0] * wg[1]
}

fn vec3(v: [u32; 3]) -> Value {
    Value {
        ty: Type::UVEC3,
        lanes: [u64::from(v[0]), u64::from(v[1]), u64::from(v[2]), 0],
    }
}
