//! A loop with a barrier inside that ends on a value one invocation
//! decides: what `KernelBuilder::uniform_load` is for (a look-back scan's
//! "is my predecessor done", a work queue's "anything left").

use compute_ir::{IrError, Kernel, KernelBuilder, Scalar};

/// Invocations per workgroup of [`uniform_rounds`].
pub const UNIFORM_ROUNDS_WORKGROUP: u32 = 64;

/// `out[global id] = rounds`, counted the long way: invocation 0 holds the
/// rounds left in workgroup memory and counts them down; every round, the
/// whole workgroup reads that count with a uniform load, leaves the loop
/// on 0, meets at a barrier and counts one round.
///
/// Bindings: 0 `out: u32` (read-write, one per invocation). Scalars:
/// `rounds: u32`. Dispatch any number of workgroups along x.
pub fn uniform_rounds() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("uniform_rounds", [UNIFORM_ROUNDS_WORKGROUP, 1, 1]);
    let out = k.output(Scalar::U32);
    let rounds = k.scalar_arg(Scalar::U32);
    let left = k.shared(Scalar::U32, 1);
    let first = k.eq(k.local_index(), 0u32);
    k.if_(first, |k| k.store(left, 0u32, rounds));
    let counted = k.var(k.u32(0));
    k.loop_(|k| {
        let n = k.uniform_load(left, 0u32);
        k.if_(k.eq(n, 0u32), |k| k.break_());
        k.barrier();
        k.set(counted, k.add(k.get(counted), 1u32));
        k.if_(first, |k| k.store(left, 0u32, k.sub(n, 1u32)));
    });
    k.store(out, k.x(k.global_id()), k.get(counted));
    k.build()
}
