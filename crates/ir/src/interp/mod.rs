//! The CPU reference interpreter: the oracle the GPU is tested against.
//!
//! [`run`] executes a launch over host buffers (little-endian bytes, as a
//! GPU buffer holds them; the tests convert typed slices with
//! `compute_testkit::bytes`). Workgroups run one after another in x-fastest
//! order. Within a workgroup every invocation runs in lockstep *between
//! barriers*: invocation 0 runs until it reaches a barrier or ends, then
//! invocation 1, and so on; when all have stopped at
//! the same barrier they are all released into the next phase. So a write
//! to shared memory before a barrier is seen by every invocation after it,
//! exactly as on a GPU, and a program without data races gets the result
//! any GPU schedule would give. Invocations that disagree (some end, some
//! wait, or they wait at different barriers) are
//! [`RunError::NonUniformBarrier`], the interpreter's form of WGSL's
//! uniformity rule. The builder refuses such kernels statically
//! (`uniformity.rs`), so this run-time check is a guard that a validated
//! kernel is not expected to reach.
//!
//! Subgroups: invocation `i` (its `local_invocation_index`) is lane
//! `i % size` of subgroup `i / size`, `size` being
//! [`DEFAULT_SUBGROUP_SIZE`] (32) for [`run`] or the argument of
//! [`run_with_subgroup`] (a GPU picks its own between the adapter's
//! `subgroup_min_size` and `subgroup_max_size`, so a test of a
//! size-dependent kernel must run the oracle with the size the device
//! reports, e.g. read back `subgroup_size`). An invocation that reaches a
//! subgroup operation waits there like at a barrier restricted to its
//! subgroup: when every live (not ended) invocation of the subgroup waits at
//! the same operation, it is evaluated over them and they go on. A subgroup
//! whose live invocations wait at different operations, or some at a
//! subgroup operation and others at a barrier, is
//! [`RunError::NonUniformSubgroup`]. Invocations that have returned are
//! inactive and do not take part (a GPU agrees). `subgroupAdd` on floats
//! sums in lane order; a GPU may associate differently.
//!
//! Semantics, where WGSL leaves a choice:
//! - integers wrap; `x / 0 == x`, `x % 0 == 0`, `MIN / -1 == MIN`,
//!   `MIN % -1 == 0` (i32 and i64); shifts use the low 5 bits of the amount
//!   (6 for i64/u64);
//! - integer to integer casts are Rust's `as` (truncate, or sign- or
//!   zero-extend by the *source* type);
//! - float to integer truncates and saturates to the range both types hold
//!   exactly, as naga generates it: `[-2^31, 2147483520]` (f32 to i32),
//!   `[0, 4294967040]` (f32 to u32), `[-2^63, 9223371487098961920]` (f32 to
//!   i64), `[0, 18446742974197923840]` (f32 to u64), `[-2^31, 2^31 - 1]`,
//!   `[0, 2^32 - 1]`, `[-2^63, 9223372036854774784]` and
//!   `[0, 18446744073709549568]` from f64; NaN gives 0;
//! - floats are f32 (f16 rounded after each operation; f64 in f64), with
//!   Rust's correctly rounded `+ - * / sqrt`, fused `fma`, `%` as
//!   `x - y * trunc(x / y)`, and libm's `exp`, `ln`, `pow`, `tanh`, `sin`,
//!   `cos`; a GPU may differ from these by the ULP bounds WGSL allows and may
//!   flush subnormals to zero; conversions round to nearest even;
//! - out-of-bounds accesses are [`RunError::OutOfBounds`] (WGSL leaves them
//!   implementation-defined);
//! - atomics are sequentially consistent (invocations run one at a time).

mod bits;
mod exec;
pub mod f16;
mod launch;
mod matrix;
mod memory;
mod subgroup;
mod unary;
pub mod value;

use exec::{Invocation, Stop};
use launch::Ctx;
use memory::Memory;

use crate::{Kernel, RunError};

/// Statements one [`run`] may execute before it gives up (an endless loop).
pub const DEFAULT_STEP_BUDGET: u64 = 1 << 32;

/// The subgroup size [`run`] and [`run_with_budget`] assume: 32.
pub const DEFAULT_SUBGROUP_SIZE: u32 = 32;

/// Runs `kernel` over `workgroups` workgroups. `buffers[i]` is bound at
/// `@binding(i)`; `scalars` is the packed uniform block
/// ([`crate::pack_scalars`]). Subgroups are [`DEFAULT_SUBGROUP_SIZE`]
/// invocations.
///
/// ```
/// use compute_ir::{KernelBuilder, RunError, Scalar, interp};
/// use compute_runtime::pod;
///
/// // x[i] = i * 2 for every invocation: no bounds check.
/// let k = KernelBuilder::new("iota2", [4, 1, 1]);
/// let x = k.output(Scalar::U32);
/// let gid = k.global_id();
/// let i = k.x(gid);
/// let two = k.u32(2);
/// let v = k.mul(i, two);
/// k.store(x, i, v);
/// let kernel = k.build()?;
/// let mut buffers = vec![vec![0u8; 4 * 8]];
/// interp::run(&kernel, [2, 1, 1], &mut buffers, &[])?;
/// assert_eq!(pod::from_bytes::<u32>(&buffers[0])?, [0, 2, 4, 6, 8, 10, 12, 14]);
/// // One workgroup too many: the oracle refuses what a GPU would clamp.
/// let err = interp::run(&kernel, [3, 1, 1], &mut buffers, &[]).unwrap_err();
/// assert!(matches!(err, RunError::OutOfBounds { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(
    kernel: &Kernel,
    workgroups: [u32; 3],
    buffers: &mut [Vec<u8>],
    scalars: &[u8],
) -> Result<(), RunError> {
    run_with_budget(kernel, workgroups, buffers, scalars, DEFAULT_STEP_BUDGET)
}

/// [`run`] with an explicit statement budget.
pub fn run_with_budget(
    kernel: &Kernel,
    workgroups: [u32; 3],
    buffers: &mut [Vec<u8>],
    scalars: &[u8],
    budget: u64,
) -> Result<(), RunError> {
    run_full(
        kernel,
        workgroups,
        buffers,
        scalars,
        Some(DEFAULT_SUBGROUP_SIZE),
        budget,
    )
}

/// [`run`] with subgroups of `subgroup_size` invocations (a power of two,
/// 1 to 128; on a GPU, the adapter's `subgroup_min_size` ..=
/// `subgroup_max_size` says which sizes can occur). Subgroup `s` of a
/// workgroup is the invocations with `local_invocation_index` in
/// `s * size .. (s + 1) * size`; the last one may be partial.
pub fn run_with_subgroup(
    kernel: &Kernel,
    workgroups: [u32; 3],
    buffers: &mut [Vec<u8>],
    scalars: &[u8],
    subgroup_size: u32,
) -> Result<(), RunError> {
    run_full(
        kernel,
        workgroups,
        buffers,
        scalars,
        Some(subgroup_size),
        DEFAULT_STEP_BUDGET,
    )
}

/// [`run`] as on a device without subgroups: a
/// [`Stmt::IfFeature`](crate::Stmt::IfFeature) on them takes its
/// `otherwise`, and a kernel that needs them
/// ([`KernelDef::uses_subgroups`](crate::KernelDef::uses_subgroups)) is
/// refused.
pub fn run_without_subgroups(
    kernel: &Kernel,
    workgroups: [u32; 3],
    buffers: &mut [Vec<u8>],
    scalars: &[u8],
) -> Result<(), RunError> {
    if kernel.def().uses_subgroups() {
        return Err(RunError::Interface(
            "the kernel needs subgroups, and this run stands for a device without them".into(),
        ));
    }
    run_full(
        kernel,
        workgroups,
        buffers,
        scalars,
        None,
        DEFAULT_STEP_BUDGET,
    )
}

fn run_full(
    kernel: &Kernel,
    workgroups: [u32; 3],
    buffers: &mut [Vec<u8>],
    scalars: &[u8],
    subgroup: Option<u32>,
    mut budget: u64,
) -> Result<(), RunError> {
    let def = kernel.def();
    // Without subgroups nothing reads the size (the kernel was refused if
    // it needs them); 1 keeps the partition well formed.
    let subgroup_size = subgroup.unwrap_or(1);
    if !subgroup_size.is_power_of_two() || subgroup_size > 128 {
        return Err(RunError::Interface(format!(
            "subgroup size {subgroup_size} is not a power of two in 1..=128"
        )));
    }
    if buffers.len() != def.buffers.len() {
        return Err(RunError::Interface(format!(
            "the kernel binds {} buffers, got {}",
            def.buffers.len(),
            buffers.len()
        )));
    }
    for (i, (b, d)) in buffers.iter().zip(&def.buffers).enumerate() {
        if b.len() % d.elem_size() != 0 {
            return Err(RunError::Interface(format!(
                "buffer {i} holds {} bytes, not a whole number of {}",
                b.len(),
                d.ty()
            )));
        }
    }
    if scalars.len() < 4 * def.scalars.len() {
        return Err(RunError::Interface(format!(
            "the kernel reads {} scalar bytes, got {}",
            4 * def.scalars.len(),
            scalars.len()
        )));
    }
    let scalar_bits = scalars
        .chunks_exact(4)
        .take(def.scalars.len())
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut ctx = Ctx {
        def,
        scalars: scalar_bits,
        workgroup_id: [0; 3],
        num_workgroups: workgroups,
        subgroup_size,
        subgroups: subgroup.is_some(),
    };
    let [sx, sy, sz] = def.workgroup_size;
    for wz in 0..workgroups[2] {
        for wy in 0..workgroups[1] {
            for wx in 0..workgroups[0] {
                ctx.workgroup_id = [wx, wy, wz];
                let mut mem = Memory {
                    globals: buffers,
                    shared: def
                        .shared
                        .iter()
                        .map(|s| vec![0; s.len as usize * usize::from(s.lanes)])
                        .collect(),
                };
                let mut invocations = Vec::with_capacity((sx * sy * sz) as usize);
                for z in 0..sz {
                    for y in 0..sy {
                        for x in 0..sx {
                            invocations.push(Invocation::new(def, [x, y, z]));
                        }
                    }
                }
                workgroup(&ctx, &mut mem, &mut invocations, &mut budget)?;
            }
        }
    }
    Ok(())
}

/// Runs one workgroup phase by phase until every invocation has ended.
///
/// Each round runs every invocation that is not waiting until it ends or
/// waits. Then every subgroup whose live invocations all wait at one
/// subgroup operation has it evaluated and goes on; a subgroup whose live
/// invocations wait at different places is [`RunError::NonUniformSubgroup`].
/// When no subgroup operation is pending, all invocations must wait at the
/// same barrier (released together) or have ended.
fn workgroup<'k>(
    ctx: &Ctx<'k>,
    mem: &mut Memory<'_>,
    invocations: &mut [Invocation<'k>],
    budget: &mut u64,
) -> Result<(), RunError> {
    let mut stops: Vec<Option<Stop>> = vec![None; invocations.len()];
    loop {
        for (inv, stop) in invocations.iter_mut().zip(stops.iter_mut()) {
            if stop.is_none() {
                *stop = Some(inv.run(ctx, mem, budget)?);
            }
        }
        let size = ctx.subgroup_size as usize;
        let mut progressed = false;
        // Invocations are in local_invocation_index order.
        for (g, group) in stops.chunks_mut(size).enumerate() {
            let live: Vec<usize> = (0..group.len())
                .filter(|i| group[*i] != Some(Stop::Done))
                .collect();
            let at_subgroup = live
                .iter()
                .any(|i| matches!(group[*i], Some(Stop::Subgroup(_) | Stop::Cooperative(_))));
            if !at_subgroup {
                continue;
            }
            let first = group[live[0]];
            if live.iter().any(|i| group[*i] != first) {
                return Err(RunError::NonUniformSubgroup {
                    workgroup: ctx.workgroup_id,
                    subgroup: g as u32,
                });
            }
            let members = &mut invocations[g * size..g * size + group.len()];
            if let Some(m) = members[live[0]].pending_matrix() {
                let at = matrix::At {
                    workgroup: ctx.workgroup_id,
                    subgroup: g as u32,
                };
                // Invocations that ended (or a workgroup's last, partial
                // subgroup) leave the subgroup short.
                if live.len() != size {
                    return Err(at.not_whole(m, live.len(), size));
                }
                matrix::execute(ctx.def, mem, members, m, &at)?;
                for i in &live {
                    group[*i] = None;
                }
                progressed = true;
                continue;
            }
            let ops: Vec<subgroup::Waiting> = live
                .iter()
                .filter_map(|i| members[*i].pending().map(|(op, v, l)| (*i, op, v, l)))
                .collect();
            let results = subgroup::evaluate(&ops, size, ctx.workgroup_id, g as u32)?;
            for (i, result) in live.iter().zip(results) {
                members[*i].resolve(result);
                group[*i] = None;
            }
            progressed = true;
        }
        if progressed {
            continue;
        }
        let first = stops[0];
        if stops.iter().any(|s| *s != first) {
            return Err(RunError::NonUniformBarrier {
                workgroup: ctx.workgroup_id,
            });
        }
        match first {
            None | Some(Stop::Done) => return Ok(()),
            Some(_) => stops.fill(None),
        }
    }
}
