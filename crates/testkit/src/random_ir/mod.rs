//! Random well-typed kernels, for property tests: the corpus naga must
//! accept and the GPU must agree with the interpreter on.
//!
//! [`program`] turns a seed into a [`RandomProgram`]: a kernel plus the
//! buffers, scalars and dispatch to run it with. Programs are race-free by
//! construction (each invocation writes its own output slots; atomics on
//! shared histograms are one commutative operation per program, their old
//! values unused, and compare-exchanges are on an invocation's own cells;
//! shared memory is written and read in phases separated by barriers at the
//! top level, the only barriers, so they are always in uniform control
//! flow), in
//! bounds (every index is reduced modulo its array's length), and terminate
//! (loops run at most a few iterations).
//!
//! The draws come from [`Rng::spread`]`(seed)`, so a seed names the same
//! program wherever it is run.
//!
//! Buffers: 0..3 inputs `u32`, `i32`, `f32` of [`INPUT_LEN`] elements;
//! 3..6 outputs `u32`, `i32`, `f32` of `invocations * SLOTS` elements
//! (invocation `g` owns `g * SLOTS ..`); 6 an atomic `u32` histogram of
//! [`ATOMIC_LEN`] elements; 7 atomic `u32` cells, `SLOTS` per invocation
//! (compare-exchanged by their owner). Workgroup arrays: a `u32` array of
//! one element per invocation (phases), an atomic histogram of
//! [`ATOMIC_LEN`] (folded into buffer 6 at the end), and atomic `u32`
//! cells, one per invocation. Local arrays (an invocation's own): [`LOCAL_LEN`]
//! `u32` and as many `vec3<i32>`, stored and loaded at drawn indices.
//! Vectors are also indexed and updated at run-time lanes. Scalars: `u32`,
//! `i32`, `f32`.
//!
//! This file says what a program is and fills its buffers; the private
//! `body` module draws the kernel's statements and its `expr` the
//! expressions.

mod body;

use compute_ir::{Kernel, Lit};

use crate::Rng;
use crate::bytes;

/// Elements of each input buffer.
pub const INPUT_LEN: u32 = 61;
/// Output slots per invocation and output buffer.
pub const SLOTS: u32 = 4;
/// Elements of the atomic buffer.
pub const ATOMIC_LEN: u32 = 8;
/// Elements of each of an invocation's local arrays.
pub const LOCAL_LEN: u32 = 5;

/// Which float operations a program may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatOps {
    /// None: integer and bool programs only (exact on every device).
    None,
    /// Operations a conforming device rounds correctly (`+ - *`, min, max,
    /// abs, neg, floor, ceil, select, comparisons, casts), over tame values.
    Exact,
    /// Everything, division, `%`, `fma` and transcendentals included, and
    /// extreme constants: for the naga corpus, not for bitwise comparison.
    All,
}

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Top-level statements (nested blocks get fewer).
    pub statements: u32,
    /// Nesting depth of control flow.
    pub depth: u32,
    /// Float operations allowed.
    pub floats: FloatOps,
    /// Vector types and operations.
    pub vectors: bool,
    /// Shared memory phases with barriers.
    pub barriers: bool,
    /// Atomic operations.
    pub atomics: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            statements: 24,
            depth: 3,
            floats: FloatOps::All,
            vectors: true,
            barriers: true,
            atomics: true,
        }
    }
}

/// A kernel and what to run it with.
#[derive(Clone, Debug)]
pub struct RandomProgram {
    /// The kernel.
    pub kernel: Kernel,
    /// Initial contents of every buffer, in binding order.
    pub buffers: Vec<Vec<u8>>,
    /// The packed uniform block.
    pub scalars: Vec<u8>,
    /// Workgroups to dispatch.
    pub workgroups: [u32; 3],
}

/// Generates the program for `seed`.
pub fn program(seed: u64, cfg: &Config) -> RandomProgram {
    let mut rng = Rng::spread(seed);
    let workgroup = rng.pick(&[1u32, 4, 16, 64]);
    let groups = 1 + rng.below(3);
    let kernel = body::kernel(format!("random_{seed:x}"), workgroup, cfg, &mut rng);
    let invocations = (workgroup * groups) as usize;
    let out_len = invocations * SLOTS as usize;
    let tame = cfg.floats != FloatOps::All;
    let buffers = vec![
        bytes::u32_bytes(
            &(0..INPUT_LEN)
                .map(|_| rand_u32(&mut rng))
                .collect::<Vec<_>>(),
        ),
        bytes::i32_bytes(
            &(0..INPUT_LEN)
                .map(|_| rand_u32(&mut rng) as i32)
                .collect::<Vec<_>>(),
        ),
        bytes::f32_bytes(
            &(0..INPUT_LEN)
                .map(|_| rand_f32(&mut rng, tame))
                .collect::<Vec<_>>(),
        ),
        vec![0; out_len * 4],
        vec![0; out_len * 4],
        vec![0; out_len * 4],
        vec![0; ATOMIC_LEN as usize * 4],
        bytes::u32_bytes(&(0..out_len).map(|_| rand_u32(&mut rng)).collect::<Vec<_>>()),
    ];
    let scalars = compute_ir::pack_scalars(&[
        Lit::U32(rand_u32(&mut rng)),
        Lit::I32(rand_u32(&mut rng) as i32),
        Lit::F32(rand_f32(&mut rng, true)),
    ]);
    RandomProgram {
        kernel,
        buffers,
        scalars,
        workgroups: [groups, 1, 1],
    }
}

fn rand_u32(rng: &mut Rng) -> u32 {
    match rng.below(4) {
        0 => rng.pick(&[0, 1, 2, 3, 31, 32, u32::MAX, 0x8000_0000, 0x7fff_ffff]),
        1 => rng.below(16),
        _ => (rng.next_u64() >> 32) as u32,
    }
}

fn rand_f32(rng: &mut Rng, tame: bool) -> f32 {
    if !tame && rng.chance(15) {
        return rng.pick(&[1e30, -1e30, 1e-30, 3.4e38, -0.0, 88.0, 1e-40]);
    }
    match rng.below(3) {
        0 => rng.pick(&[0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 0.1, 3.0, 10.0]),
        // Multiples of 1/16 in [-64, 64): exact in f32 through + - * of small depth.
        1 => (rng.below(2048) as f32 - 1024.0) / 16.0,
        _ => (rng.below(1 << 20) as f32 / (1 << 20) as f32) * 20.0 - 10.0,
    }
}
