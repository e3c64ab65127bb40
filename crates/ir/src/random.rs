//! Random well-typed kernels, for property tests: the corpus naga must
//! accept and the GPU must agree with the interpreter on.
//!
//! [`program`] turns a seed into a [`RandomProgram`]: a kernel plus the
//! buffers, scalars and dispatch to run it with. Programs are race-free by
//! construction (each invocation writes its own output slots; atomics are
//! one commutative operation per program, their old values unused; shared memory is written and
//! read in phases separated by barriers at the top level, the only
//! barriers, so they are always in uniform control flow), in bounds (every
//! index is reduced modulo its array's length), and terminate (loops run at
//! most a few iterations).
//!
//! Buffers: 0..3 inputs `u32`, `i32`, `f32` of [`INPUT_LEN`] elements;
//! 3..6 outputs `u32`, `i32`, `f32` of `invocations * SLOTS` elements
//! (invocation `g` owns `g * SLOTS ..`); 6 an atomic `u32` histogram of
//! [`ATOMIC_LEN`] elements. Scalars: `u32`, `i32`, `f32`.

use crate::interp::host;
use crate::{AtomicOp, BinOp, Kernel, KernelBuilder, Lit, Scalar, Shared, Type, UnOp, Val, Var};

/// Elements of each input buffer.
pub const INPUT_LEN: u32 = 61;
/// Output slots per invocation and output buffer.
pub const SLOTS: u32 = 4;
/// Elements of the atomic buffer.
pub const ATOMIC_LEN: u32 = 8;

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

/// xorshift64*.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator; any seed (0 is remapped).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.next_u64() >> 32) % u64::from(n.max(1))) as u32
    }
    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u32) -> bool {
        self.below(100) < p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u32) as usize]
    }
}

struct Gen<'c> {
    b: KernelBuilder,
    rng: Rng,
    cfg: &'c Config,
    /// In-scope values, one frame per open block.
    scopes: Vec<Vec<Val>>,
    /// In-scope variables.
    vars: Vec<Vec<Var>>,
    inputs: [crate::Buf; 3],
    outputs: [crate::Buf; 3],
    atomic: crate::AtomicBuf,
    /// The one atomic operation of this program: each is commutative with
    /// itself, but not with the others (an `add` then an `xor` is not an
    /// `xor` then an `add`), so mixing them would make the result depend on
    /// the schedule.
    atomic_op: AtomicOp,
    shared: Shared,
    slot_base: Val,
    workgroup: u32,
}

const SCALARS: [Scalar; 4] = [Scalar::U32, Scalar::I32, Scalar::F32, Scalar::Bool];

/// Generates the program for `seed`.
pub fn program(seed: u64, cfg: &Config) -> RandomProgram {
    let mut rng = Rng::new(seed);
    let workgroup = rng.pick(&[1u32, 4, 16, 64]);
    let groups = 1 + rng.below(3);
    let mut b = KernelBuilder::new(format!("random_{seed:x}"), [workgroup, 1, 1]);
    let inputs = [
        b.input(Scalar::U32),
        b.input(Scalar::I32),
        b.input(Scalar::F32),
    ];
    let outputs = [
        b.output(Scalar::U32),
        b.output(Scalar::I32),
        b.output(Scalar::F32),
    ];
    let atomic = b.atomic_buffer(Scalar::U32);
    let shared = b.shared(Scalar::U32, workgroup);
    let args = [
        b.scalar_arg(Scalar::U32),
        b.scalar_arg(Scalar::I32),
        b.scalar_arg(Scalar::F32),
    ];
    let gid = b.global_id();
    let gx = b.x(gid);
    let slots = b.u32(SLOTS);
    let slot_base = b.mul(gx, slots);
    let lidx = b.local_index();
    let wid = b.workgroup_id();
    let mut first = vec![gx, lidx, wid, gid, args[0], args[1]];
    if cfg.floats != FloatOps::None {
        first.push(args[2]);
    }
    let atomic_op = rng.pick(&[
        AtomicOp::Add,
        AtomicOp::Max,
        AtomicOp::Min,
        AtomicOp::Or,
        AtomicOp::And,
        AtomicOp::Xor,
    ]);
    let mut g = Gen {
        b,
        rng,
        atomic_op,
        cfg,
        scopes: vec![first],
        vars: vec![Vec::new()],
        inputs,
        outputs,
        atomic,
        shared,
        slot_base,
        workgroup,
    };
    g.top_level();
    let kernel =
        g.b.build()
            .unwrap_or_else(|e| panic!("the generator made an ill-typed kernel: {e}"));
    let mut rng = g.rng;
    let invocations = (workgroup * groups) as usize;
    let out_len = invocations * SLOTS as usize;
    let tame = cfg.floats != FloatOps::All;
    let buffers = vec![
        host::u32_bytes(
            &(0..INPUT_LEN)
                .map(|_| rand_u32(&mut rng))
                .collect::<Vec<_>>(),
        ),
        host::i32_bytes(
            &(0..INPUT_LEN)
                .map(|_| rand_u32(&mut rng) as i32)
                .collect::<Vec<_>>(),
        ),
        host::f32_bytes(
            &(0..INPUT_LEN)
                .map(|_| rand_f32(&mut rng, tame))
                .collect::<Vec<_>>(),
        ),
        vec![0; out_len * 4],
        vec![0; out_len * 4],
        vec![0; out_len * 4],
        vec![0; ATOMIC_LEN as usize * 4],
    ];
    let scalars = crate::pack_scalars(&[
        Lit::U32(rand_u32(&mut rng)),
        Lit::I32(rand_u32(&mut rng) as i32),
        Lit::f32(rand_f32(&mut rng, true)),
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

impl Gen<'_> {
    fn floats(&self) -> bool {
        self.cfg.floats != FloatOps::None
    }

    fn scalars(&self) -> Vec<Scalar> {
        SCALARS
            .iter()
            .copied()
            .filter(|s| *s != Scalar::F32 || self.floats())
            .collect()
    }

    fn random_type(&mut self) -> Type {
        let scalars = self.scalars();
        let s = self.rng.pick(&scalars);
        let lanes = if self.cfg.vectors && self.rng.chance(30) {
            2 + self.rng.below(3) as u8
        } else {
            1
        };
        Type::vec(s, lanes)
    }

    fn in_scope(&self, ty: Type) -> Vec<Val> {
        self.scopes
            .iter()
            .flatten()
            .copied()
            .filter(|v| v.ty == ty)
            .collect()
    }

    fn remember(&mut self, v: Val) -> Val {
        if let Some(s) = self.scopes.last_mut() {
            s.push(v);
        }
        v
    }

    fn literal(&mut self, s: Scalar) -> Val {
        let tame = self.cfg.floats != FloatOps::All;
        match s {
            Scalar::U32 => {
                let x = rand_u32(&mut self.rng);
                self.b.u32(x)
            }
            Scalar::I32 => {
                let x = rand_u32(&mut self.rng) as i32;
                self.b.i32(x)
            }
            Scalar::F32 => {
                let x = rand_f32(&mut self.rng, tame);
                self.b.f32(x)
            }
            _ => {
                let x = self.rng.chance(50);
                self.b.bool(x)
            }
        }
    }

    /// A value of type `ty`: an existing one, or a fresh operation.
    fn value(&mut self, ty: Type, depth: u32) -> Val {
        let existing = self.in_scope(ty);
        if !existing.is_empty() && (depth >= 3 || self.rng.chance(40)) {
            return self.rng.pick(&existing);
        }
        if depth >= 3 {
            return if ty.lanes == 1 {
                self.literal(ty.scalar)
            } else {
                let x = self.literal(ty.scalar);
                self.b.splat(x, ty.lanes)
            };
        }
        let v = self.operation(ty, depth + 1);
        self.remember(v)
    }

    fn index(&mut self, len: u32, depth: u32) -> Val {
        let i = if self.rng.chance(50) {
            self.value(Type::U32, depth)
        } else {
            let x = self.value(Type::I32, depth);
            self.b.cast(x, Scalar::U32)
        };
        let n = self.b.u32(len);
        self.b.rem(i, n)
    }

    fn operation(&mut self, ty: Type, depth: u32) -> Val {
        let s = ty.scalar;
        let all = self.cfg.floats == FloatOps::All;
        for _ in 0..8 {
            match self.rng.below(12) {
                0 if ty.lanes == 1 => {
                    return self.literal(s);
                }
                1 | 2 if s.is_numeric() => {
                    let mut ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Min, BinOp::Max];
                    if s.is_int() || all {
                        ops.extend([BinOp::Div, BinOp::Rem]);
                    }
                    if all && s.is_float() {
                        ops.push(BinOp::Pow);
                    }
                    let op = self.rng.pick(&ops);
                    let x = self.value(ty, depth);
                    let y = self.value(ty, depth);
                    return self.b.emit(crate::Op::Binary(op, x.id, y.id));
                }
                3 if s.is_int() || s == Scalar::Bool => {
                    let op = if s == Scalar::Bool {
                        self.rng
                            .pick(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Eq, BinOp::Ne])
                    } else {
                        self.rng
                            .pick(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Shl, BinOp::Shr])
                    };
                    let x = self.value(ty, depth);
                    let yt = if matches!(op, BinOp::Shl | BinOp::Shr) {
                        ty.with_scalar(Scalar::U32)
                    } else {
                        ty
                    };
                    let y = self.value(yt, depth);
                    return self.b.emit(crate::Op::Binary(op, x.id, y.id));
                }
                4 => {
                    let mut ops = Vec::new();
                    match s {
                        Scalar::Bool => ops.push(UnOp::Not),
                        Scalar::I32 => ops.extend([UnOp::Neg, UnOp::Abs, UnOp::BitNot]),
                        Scalar::U32 => ops.extend([UnOp::BitNot, UnOp::Abs]),
                        _ => {
                            ops.extend([UnOp::Neg, UnOp::Abs, UnOp::Floor, UnOp::Ceil]);
                            if all {
                                ops.extend([
                                    UnOp::Exp,
                                    UnOp::Log,
                                    UnOp::Sqrt,
                                    UnOp::InverseSqrt,
                                    UnOp::Tanh,
                                    UnOp::Sin,
                                    UnOp::Cos,
                                ]);
                            }
                        }
                    }
                    let op = self.rng.pick(&ops);
                    let x = self.value(ty, depth);
                    return self.b.emit(crate::Op::Unary(op, x.id));
                }
                5 if s == Scalar::Bool => {
                    let scalars: Vec<Scalar> = self
                        .scalars()
                        .into_iter()
                        .filter(|s| s.is_numeric())
                        .collect();
                    let os = self.rng.pick(&scalars);
                    let op = self.rng.pick(&[
                        BinOp::Eq,
                        BinOp::Ne,
                        BinOp::Lt,
                        BinOp::Le,
                        BinOp::Gt,
                        BinOp::Ge,
                    ]);
                    let x = self.value(ty.with_scalar(os), depth);
                    let y = self.value(ty.with_scalar(os), depth);
                    return self.b.emit(crate::Op::Binary(op, x.id, y.id));
                }
                6 => {
                    let lanes = if self.rng.chance(50) { 1 } else { ty.lanes };
                    let c = self.value(Type::vec(Scalar::Bool, lanes), depth);
                    let x = self.value(ty, depth);
                    let y = self.value(ty, depth);
                    return self.b.select(c, x, y);
                }
                7 if s.is_numeric() => {
                    let x = self.value(ty, depth);
                    let lo = self.value(ty, depth);
                    let hi = self.value(ty, depth);
                    if s.is_float() && all && self.rng.chance(50) {
                        return self.b.fma(x, lo, hi);
                    }
                    return self.b.clamp(x, lo, hi);
                }
                8 => {
                    let scalars = self.scalars();
                    let from = self.rng.pick(&scalars);
                    let x = self.value(ty.with_scalar(from), depth);
                    return self.b.cast(x, s);
                }
                9 if s != Scalar::Bool && (all || s != Scalar::F32) => {
                    let from = self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                    if from == Scalar::F32 && !self.floats() {
                        continue;
                    }
                    let x = self.value(ty.with_scalar(from), depth);
                    return self.b.bitcast(x, s);
                }
                10 if ty.lanes == 1 && s != Scalar::Bool => {
                    let which = match s {
                        Scalar::U32 => 0,
                        Scalar::I32 => 1,
                        _ => 2,
                    };
                    let i = self.index(INPUT_LEN, depth);
                    return self.b.load(self.inputs[which], i);
                }
                11 if ty.lanes == 1 && self.cfg.vectors => {
                    let lanes = 2 + self.rng.below(3) as u8;
                    let v = self.value(Type::vec(s, lanes), depth);
                    let lane = self.rng.below(u32::from(lanes)) as u8;
                    return self.b.extract(v, lane);
                }
                11 if ty.lanes > 1 => {
                    let parts: Vec<Val> = (0..ty.lanes)
                        .map(|_| self.value(Type::scalar(s), depth))
                        .collect();
                    return self.b.vec(&parts);
                }
                _ => {}
            }
        }
        let x = self.literal(s);
        if ty.lanes == 1 {
            x
        } else {
            self.b.splat(x, ty.lanes)
        }
    }

    fn store_output(&mut self) {
        let scalars = self.scalars();
        let s = self.rng.pick(&scalars);
        let s = if s == Scalar::Bool { Scalar::U32 } else { s };
        let v = self.value(Type::scalar(s), 0);
        let which = match s {
            Scalar::U32 => 0,
            Scalar::I32 => 1,
            _ => 2,
        };
        let slot = self.rng.below(SLOTS);
        let slot = self.b.u32(slot);
        let at = self.b.add(self.slot_base, slot);
        self.b.store(self.outputs[which], at, v);
    }

    fn enter(&mut self) {
        self.scopes.push(Vec::new());
        self.vars.push(Vec::new());
    }
    fn leave(&mut self) {
        self.scopes.pop();
        self.vars.pop();
    }

    fn nested_block(&mut self, depth: u32, in_loop: bool) {
        self.enter();
        let n = 1 + self.rng.below(self.cfg.statements / (2 * (depth + 1)) + 1);
        for _ in 0..n {
            self.statement(depth, in_loop);
        }
        self.leave();
    }

    fn statement(&mut self, depth: u32, in_loop: bool) {
        let nest = depth < self.cfg.depth;
        match self.rng.below(10) {
            0 | 1 => self.store_output(),
            2 if nest => {
                let c = self.value(Type::BOOL, 1);
                self.if_statement(c, depth, in_loop);
            }
            3 if nest => {
                let signed = self.rng.chance(50);
                let (start, end) = if signed {
                    let a = self.rng.below(5) as i32 - 2;
                    (self.b.i32(a), self.b.i32(a + self.rng.below(4) as i32))
                } else {
                    let a = self.rng.below(3);
                    (self.b.u32(a), self.b.u32(a + self.rng.below(4)))
                };
                self.for_statement(start, end, depth);
            }
            4 if nest => self.loop_statement(depth),
            5 => {
                let ty = self.random_type();
                let init = self.value(ty, 1);
                let var = self.b.var(init);
                if let Some(v) = self.vars.last_mut() {
                    v.push(var);
                }
            }
            6 => {
                let vars: Vec<Var> = self.vars.iter().flatten().copied().collect();
                if !vars.is_empty() {
                    let var = self.rng.pick(&vars);
                    let x = self.value(var.ty, 1);
                    self.b.set(var, x);
                    let y = self.b.get(var);
                    self.remember(y);
                }
            }
            7 if self.cfg.atomics => {
                let i = self.index(ATOMIC_LEN, 1);
                let x = self.value(Type::U32, 1);
                // The old value depends on the schedule: deliberately unused.
                self.b.atomic(self.atomic_op, self.atomic, i, x);
            }
            8 if in_loop && self.rng.chance(40) => {
                let c = self.value(Type::BOOL, 1);
                let brk = self.rng.chance(50);
                self.b
                    .if_(c, |b| if brk { b.break_() } else { b.continue_() });
            }
            _ => {
                let ty = self.random_type();
                self.value(ty, 0);
            }
        }
    }

    fn if_statement(&mut self, c: Val, depth: u32, in_loop: bool) {
        // The builder's closures borrow only the builder and the generator
        // needs itself too, so blocks are opened and closed explicitly.
        let otherwise = self.rng.chance(50);
        let then_body = self.sub_block(depth + 1, in_loop);
        let else_body = if otherwise {
            self.sub_block(depth + 1, in_loop)
        } else {
            Vec::new()
        };
        self.b.push_stmt(crate::Stmt::If {
            cond: c.id,
            then: then_body,
            otherwise: else_body,
        });
    }

    fn sub_block(&mut self, depth: u32, in_loop: bool) -> Vec<crate::Stmt> {
        self.b.open_block();
        self.nested_block(depth, in_loop);
        self.b.close_block()
    }

    fn for_statement(&mut self, start: Val, end: Val, depth: u32) {
        let one = if start.ty.scalar == Scalar::I32 {
            self.b.i32(1)
        } else {
            self.b.u32(1)
        };
        let index = self.b.fresh_value(start.ty);
        self.b.open_block();
        self.enter();
        self.remember(index);
        self.nested_block(depth + 1, true);
        self.leave();
        let body = self.b.close_block();
        self.b.push_stmt(crate::Stmt::For {
            index: index.id,
            start: start.id,
            end: end.id,
            step: one.id,
            body,
        });
    }

    fn loop_statement(&mut self, depth: u32) {
        let zero = self.b.u32(0);
        let n = self.b.var(zero);
        let bound = self.rng.below(4);
        self.b.open_block();
        let x = self.b.get(n);
        let limit = self.b.u32(bound);
        let done = self.b.ge(x, limit);
        self.b.if_(done, |b| b.break_());
        let one = self.b.u32(1);
        let y = self.b.add(x, one);
        self.b.set(n, y);
        self.nested_block(depth + 1, true);
        let body = self.b.close_block();
        self.b.push_stmt(crate::Stmt::Loop(body));
    }

    fn shared_phase(&mut self) {
        let lidx = self.scopes[0][1];
        let w = self.b.u32(self.workgroup);
        self.b.barrier();
        let v = self.value(Type::U32, 1);
        self.b.store(self.shared, lidx, v);
        self.b.barrier();
        let off = self.rng.below(self.workgroup.max(1));
        let off = self.b.u32(off);
        let j = self.b.add(lidx, off);
        let j = self.b.rem(j, w);
        let x = self.b.load(self.shared, j);
        self.remember(x);
    }

    fn top_level(&mut self) {
        for _ in 0..self.cfg.statements {
            if self.cfg.barriers && self.rng.chance(12) {
                self.shared_phase();
            } else if self.cfg.barriers && self.rng.chance(5) {
                // Barriers inside a loop with constant bounds: still uniform.
                let start = self.b.u32(0);
                let end = self.b.u32(1 + self.rng.below(3));
                let one = self.b.u32(1);
                let index = self.b.fresh_value(Type::U32);
                self.b.open_block();
                self.enter();
                self.remember(index);
                self.shared_phase();
                self.leave();
                let body = self.b.close_block();
                self.b.push_stmt(crate::Stmt::For {
                    index: index.id,
                    start: start.id,
                    end: end.id,
                    step: one.id,
                    body,
                });
            } else {
                self.statement(0, false);
            }
        }
        for _ in 0..3 {
            self.store_output();
        }
    }
}
