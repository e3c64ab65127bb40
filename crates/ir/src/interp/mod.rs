//! The CPU reference interpreter: the oracle the GPU is tested against.
//!
//! [`run`] executes a launch over host buffers (little-endian bytes, as a
//! GPU buffer holds them; see [`host`] for conversions). Workgroups run one
//! after another in x-fastest order. Within a workgroup every invocation
//! runs in lockstep *between barriers*: invocation 0 runs until it reaches a
//! barrier or ends, then invocation 1, and so on; when all have stopped at
//! the same barrier they are all released into the next phase. So a write
//! to shared memory before a barrier is seen by every invocation after it,
//! exactly as on a GPU, and a program without data races gets the result
//! any GPU schedule would give. Invocations that disagree (some end, some
//! wait, or they wait at different barriers) are
//! [`RunError::NonUniformBarrier`], the interpreter's form of WGSL's
//! uniformity rule.
//!
//! Semantics, where WGSL leaves a choice:
//! - integers wrap; `x / 0 == x`, `x % 0 == 0`, `i32::MIN / -1 == i32::MIN`,
//!   `i32::MIN % -1 == 0`; shifts use the low 5 bits of the amount;
//! - float to integer truncates, saturates to `[-2^31, 2147483520]` (i32) or
//!   `[0, 4294967040]` (u32), NaN gives 0;
//! - floats are f32 (f16 rounded after each operation), with Rust's
//!   correctly rounded `+ - * / sqrt`, fused `fma`, `%` as
//!   `x - y * trunc(x / y)`, and libm's `exp`, `ln`, `pow`, `tanh`, `sin`,
//!   `cos`; a GPU may differ from these by the ULP bounds WGSL allows and may
//!   flush subnormals to zero;
//! - out-of-bounds accesses are [`RunError::OutOfBounds`] (WGSL leaves them
//!   implementation-defined);
//! - atomics are sequentially consistent (invocations run one at a time).

mod exec;
pub mod f16;
pub mod host;
pub mod value;

use exec::{Ctx, Invocation, Memory, Stop};

use crate::{Kernel, RunError};

/// Statements one [`run`] may execute before it gives up (an endless loop).
pub const DEFAULT_STEP_BUDGET: u64 = 1 << 32;

/// Runs `kernel` over `workgroups` workgroups. `buffers[i]` is bound at
/// `@binding(i)`; `scalars` is the packed uniform block
/// ([`crate::pack_scalars`]).
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
    mut budget: u64,
) -> Result<(), RunError> {
    let def = kernel.def();
    if buffers.len() != def.buffers.len() {
        return Err(RunError::Interface(format!(
            "the kernel binds {} buffers, got {}",
            def.buffers.len(),
            buffers.len()
        )));
    }
    for (i, (b, d)) in buffers.iter().zip(&def.buffers).enumerate() {
        if b.len() % d.elem.size() != 0 {
            return Err(RunError::Interface(format!(
                "buffer {i} holds {} bytes, not a whole number of {}",
                b.len(),
                d.elem
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
    };
    let [sx, sy, sz] = def.workgroup_size;
    for wz in 0..workgroups[2] {
        for wy in 0..workgroups[1] {
            for wx in 0..workgroups[0] {
                ctx.workgroup_id = [wx, wy, wz];
                let mut mem = Memory {
                    globals: buffers,
                    shared: def.shared.iter().map(|s| vec![0; s.len as usize]).collect(),
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
fn workgroup<'k>(
    ctx: &Ctx<'k>,
    mem: &mut Memory<'_>,
    invocations: &mut [Invocation<'k>],
    budget: &mut u64,
) -> Result<(), RunError> {
    loop {
        let mut first: Option<Stop> = None;
        for inv in invocations.iter_mut() {
            let stop = inv.run(ctx, mem, budget)?;
            match first {
                None => first = Some(stop),
                Some(f) if f != stop => {
                    return Err(RunError::NonUniformBarrier {
                        workgroup: ctx.workgroup_id,
                    });
                }
                Some(_) => {}
            }
        }
        match first {
            None | Some(Stop::Done) => return Ok(()),
            Some(Stop::Barrier(_)) => {}
        }
    }
}
