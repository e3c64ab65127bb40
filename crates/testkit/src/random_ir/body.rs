//! The kernel body of a random program: statements, control flow,
//! shared-memory phases and atomics ([`expr`] draws the expressions), from
//! the program's [`Rng`] under the rules of the [module doc](super).

mod expr;

use compute_ir::{
    AtomicBuf, AtomicLike, AtomicOp, AtomicShared, Buf, Kernel, KernelBuilder, Local, Scalar,
    Shared, Stmt, Type, Val, Var,
};

use super::{ATOMIC_LEN, Config, FloatOps, LOCAL_LEN, SLOTS};
use crate::Rng;

struct Gen<'c> {
    b: KernelBuilder,
    rng: &'c mut Rng,
    cfg: &'c Config,
    /// In-scope values, one frame per open block.
    scopes: Vec<Vec<Val>>,
    /// In-scope variables.
    vars: Vec<Vec<Var>>,
    inputs: [Buf; 3],
    outputs: [Buf; 3],
    atomic: AtomicBuf,
    /// The one atomic operation of this program: each is commutative with
    /// itself, but not with the others (an `add` then an `xor` is not an
    /// `xor` then an `add`), so mixing them would make the result depend on
    /// the schedule.
    atomic_op: AtomicOp,
    /// A workgroup histogram updated with `atomic_op` (old values unused),
    /// folded into `atomic` at the end (after a barrier).
    shared_atomic: AtomicShared,
    /// Atomic `u32` cells of which invocation `g` owns `g * SLOTS ..`, and a
    /// workgroup array of which it owns element `local_index`: its
    /// compare-exchanges there are on its own elements, so their old values
    /// and outcomes are the same in any schedule.
    cells: AtomicBuf,
    own_shared: AtomicShared,
    shared: Shared,
    /// The invocation's own arrays: `u32` and `vec3<i32>` elements, stored
    /// and loaded at drawn indices.
    locals: [Local; 2],
    slot_base: Val,
    workgroup: u32,
}

const SCALARS: [Scalar; 4] = [Scalar::U32, Scalar::I32, Scalar::F32, Scalar::Bool];

/// The kernel `name` of `workgroup` invocations per workgroup, drawn from
/// `rng` under `cfg`.
pub(super) fn kernel(name: String, workgroup: u32, cfg: &Config, rng: &mut Rng) -> Kernel {
    let b = KernelBuilder::new(name, [workgroup, 1, 1]);
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
    let cells = b.atomic_buffer(Scalar::U32);
    let shared = b.shared(Scalar::U32, workgroup);
    let shared_atomic = b.atomic_shared(Scalar::U32, ATOMIC_LEN);
    let own_shared = b.atomic_shared(Scalar::U32, workgroup);
    let locals = [
        b.local_array(Type::U32, LOCAL_LEN),
        b.local_array(Type::vec(Scalar::I32, 3), LOCAL_LEN),
    ];
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
        shared_atomic,
        cells,
        own_shared,
        shared,
        locals,
        slot_base,
        workgroup,
    };
    g.top_level();
    g.b.build()
        .unwrap_or_else(|e| panic!("the generator made an ill-typed kernel: {e}"))
}

impl Gen<'_> {
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

    /// A value stored at a drawn index of one of the invocation's arrays.
    fn store_local(&mut self) {
        let local = self.rng.pick(&self.locals);
        if local.ty.lanes > 1 && !self.cfg.vectors {
            return;
        }
        let i = self.index(local.len, 1);
        let v = self.value(local.ty, 1);
        self.b.store(local, i, v);
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
        match self.rng.below(11) {
            0 | 1 => self.store_output(),
            9 => self.store_local(),
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
            7 if self.cfg.atomics => self.atomic_statement(),
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

    /// An atomic: the program's one operation on the global or (with
    /// barriers, which fold it at the end) the workgroup histogram, its old
    /// value unused (it depends on the schedule); or a compare-exchange on
    /// one of the invocation's own cells, whose old value and outcome are
    /// stored.
    fn atomic_statement(&mut self) {
        match self.rng.below(4) {
            0 | 1 => {
                let i = self.index(ATOMIC_LEN, 1);
                let x = self.value(Type::U32, 1);
                if self.cfg.barriers && self.rng.chance(50) {
                    self.b.atomic(self.atomic_op, self.shared_atomic, i, x);
                } else {
                    self.b.atomic(self.atomic_op, self.atomic, i, x);
                }
            }
            2 => {
                let slot = self.b.u32(self.rng.below(SLOTS));
                let own = self.b.add(self.slot_base, slot);
                self.compare_exchange(self.cells, own);
            }
            _ => {
                let lidx = self.scopes[0][1];
                self.compare_exchange(self.own_shared, lidx);
            }
        }
    }

    /// A compare-exchange on `array[own]` against the value there or
    /// another, its old value and outcome stored in the invocation's own
    /// `u32` output slots.
    fn compare_exchange(&mut self, array: impl AtomicLike, own: Val) {
        let current = self.b.atomic_load(array, own);
        let other = self.value(Type::U32, 1);
        let cmp = if self.rng.chance(50) { current } else { other };
        let x = self.value(Type::U32, 1);
        let r = self.b.compare_exchange(array, own, cmp, x);
        self.remember(r);
        for lane in [self.b.x(r), self.b.y(r)] {
            let slot = self.b.u32(self.rng.below(SLOTS));
            let at = self.b.add(self.slot_base, slot);
            self.b.store(self.outputs[0], at, lane);
        }
    }

    /// The workgroup histogram folded into the global one, once every
    /// invocation is done with it.
    fn fold_shared_histogram(&mut self) {
        self.b.barrier();
        let lidx = self.scopes[0][1];
        let bins = self.b.u32(ATOMIC_LEN);
        let owns = self.b.lt(lidx, bins);
        let (shared, global, op) = (self.shared_atomic, self.atomic, self.atomic_op);
        self.b.if_(owns, |b| {
            let v = b.atomic_load(shared, lidx);
            b.atomic(op, global, lidx, v);
        });
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
        self.b.push_stmt(Stmt::If {
            cond: c.id,
            then: then_body,
            otherwise: else_body,
        });
    }

    fn sub_block(&mut self, depth: u32, in_loop: bool) -> Vec<Stmt> {
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
        self.b.push_stmt(Stmt::For {
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
        self.b.push_stmt(Stmt::Loop(body));
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
                self.b.push_stmt(Stmt::For {
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
        if self.cfg.atomics && self.cfg.barriers {
            self.fold_shared_histogram();
        }
    }
}
