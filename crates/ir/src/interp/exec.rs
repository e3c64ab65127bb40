//! One invocation as a resumable machine: an explicit stack of frames, so
//! it can stop at a barrier and be resumed when the whole workgroup is there.

use super::launch::Ctx;
use super::memory::{Memory, index, read_global, write_global};
use super::value::{self, Value};
use crate::ir::{
    ArrayRef, AtomicOp, BinOp, KernelDef, MatrixId, MatrixStmt, Op, ShuffleOp, Stmt, SubgroupOp,
    ValueId, VarId,
};
use crate::{RunError, Scalar, Type};

/// What the invocation is doing.
#[derive(Debug)]
enum Frame<'k> {
    /// Executing `stmts[pc..]`.
    Block(&'k [Stmt], usize),
    /// A range loop whose body block has just ended (or continued).
    For {
        index: ValueId,
        counter: u32,
        end: u32,
        step: u32,
        signed: bool,
        /// Not entered yet: `counter` is `start - step`, wrapped.
        fresh: bool,
        body: &'k [Stmt],
    },
    /// A `loop` whose body has just ended (or continued).
    Loop(&'k [Stmt]),
}

/// Why [`Invocation::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The invocation ended.
    Done,
    /// It reached the barrier at this address and waits.
    Barrier(*const Stmt),
    /// It reached the subgroup operation at this address and waits for its
    /// subgroup; [`Invocation::pending`] says what it contributes.
    Subgroup(*const Stmt),
    /// It reached the cooperative-matrix statement at this address and
    /// waits for its subgroup ([`Invocation::pending_matrix`]).
    Cooperative(*const Stmt),
}

/// A subgroup operation an invocation waits at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collective {
    /// One operand.
    One(SubgroupOp),
    /// A shuffle: the operand and the `u32` lane, delta or mask.
    Shuffle(ShuffleOp),
}

/// One invocation's state.
#[derive(Debug)]
pub(crate) struct Invocation<'k> {
    values: Vec<Value>,
    vars: Vec<Value>,
    /// Its local arrays.
    locals: Vec<Vec<Value>>,
    stack: Vec<Frame<'k>>,
    local_id: [u32; 3],
    /// The subgroup operation it waits at: result, operation, operand.
    pending: Option<(ValueId, Collective, Value, Value)>,
    /// Its copy of the subgroup's cooperative matrices (row-major tiles).
    matrices: Vec<Vec<f32>>,
    /// The cooperative-matrix statement it waits at.
    pending_matrix: Option<&'k MatrixStmt>,
    /// The uniform load it waits at, done when its barrier lets it go on.
    pending_load: Option<(VarId, u32, ValueId)>,
}

impl<'k> Invocation<'k> {
    pub fn new(def: &'k KernelDef, local_id: [u32; 3]) -> Self {
        Invocation {
            values: def.values.iter().map(|t| Value::zero(*t)).collect(),
            vars: def.vars.iter().map(|t| Value::zero(*t)).collect(),
            locals: def
                .locals
                .iter()
                .map(|l| vec![Value::zero(l.ty); l.len as usize])
                .collect(),
            stack: vec![Frame::Block(&def.body, 0)],
            local_id,
            pending: None,
            matrices: def
                .matrices
                .iter()
                .map(|m| vec![0.0; usize::from(m.size) * usize::from(m.size)])
                .collect(),
            pending_matrix: None,
            pending_load: None,
        }
    }

    /// The cooperative-matrix statement it waits at, if any.
    pub fn pending_matrix(&self) -> Option<&'k MatrixStmt> {
        self.pending_matrix
    }

    /// Its value `id`.
    pub fn value(&self, id: ValueId) -> Value {
        self.v(id)
    }

    /// Its copy of matrix `m`.
    pub fn matrix(&self, m: MatrixId) -> &[f32] {
        &self.matrices[m.0 as usize]
    }

    /// Sets its copy of matrix `m`.
    pub fn set_matrix(&mut self, m: MatrixId, tile: Vec<f32>) {
        self.matrices[m.0 as usize] = tile;
    }

    /// Done waiting at its cooperative-matrix statement.
    pub fn resume(&mut self) {
        self.pending_matrix = None;
    }

    /// The subgroup operation it waits at, if any.
    pub fn pending(&self) -> Option<(Collective, Value, Value)> {
        self.pending.map(|(_, op, v, lane)| (op, v, lane))
    }

    /// Completes the pending subgroup operation with its result.
    pub fn resolve(&mut self, result: Value) {
        if let Some((id, ..)) = self.pending.take() {
            self.values[id.0 as usize] = result;
        }
    }

    fn v(&self, id: ValueId) -> Value {
        self.values[id.0 as usize]
    }

    fn eval(
        &self,
        ctx: &Ctx<'_>,
        mem: &mut Memory<'_>,
        ty: Type,
        op: &Op,
    ) -> Result<Value, RunError> {
        let def = ctx.def;
        if let Some(v) = value::eval_pure(op, ty, |id| self.v(id)) {
            return Ok(v);
        }
        Ok(match op {
            Op::Arg(i) => Value::scalar(
                def.scalars[*i as usize],
                u64::from(ctx.scalars[*i as usize]),
            ),
            Op::Builtin(b) => ctx.builtin(self.local_id, *b),
            Op::Get(var) => self.vars[var.0 as usize],
            Op::Load(ArrayRef::Global(b), i) => {
                let decl = def.buffers[*b as usize];
                let buf = &mem.globals[*b as usize];
                let i = index("load", self.v(*i), (buf.len() / decl.elem_size()) as u64)?;
                let mut out = Value::zero(decl.ty());
                let lanes = usize::from(decl.lanes);
                for (lane, bits) in out.lanes[..lanes].iter_mut().enumerate() {
                    *bits = read_global(buf, decl.elem, i * lanes + lane);
                }
                out
            }
            Op::Load(ArrayRef::Shared(s), i) => mem.shared_value(def, *s, self.v(*i), "load")?,
            Op::Load(ArrayRef::Local(l), i) => {
                let arr = &self.locals[*l as usize];
                arr[index("load", self.v(*i), arr.len() as u64)?]
            }
            Op::ArrayLength(b) => {
                let decl = def.buffers[*b as usize];
                Value::scalar(
                    Scalar::U32,
                    (mem.globals[*b as usize].len() / decl.elem_size()) as u64,
                )
            }
            Op::Index(v, i) => {
                let v = self.v(*v);
                let lane = index("index", self.v(*i), u64::from(v.ty.lanes))?;
                Value::scalar(v.ty.scalar, v.lanes[lane])
            }
            Op::WithLane(v, i, x) => {
                let mut v = self.v(*v);
                let lane = index("with_lane", self.v(*i), u64::from(v.ty.lanes))?;
                v.lanes[lane] = self.v(*x).bits();
                v
            }
            Op::AtomicLoad(a, i) => {
                let (elem, at) = mem.atomic_at(def, *a, self.v(*i), "atomic_load")?;
                Value::scalar(elem, mem.atomic_get(at, elem))
            }
            Op::Atomic(op, a, i, v) => {
                let (elem, at) = mem.atomic_at(def, *a, self.v(*i), op.wgsl())?;
                let old = mem.atomic_get(at, elem);
                let x = self.v(*v).bits();
                // Atomics are on 32-bit integers only.
                let new = match op {
                    AtomicOp::Add => u64::from((old as u32).wrapping_add(x as u32)),
                    AtomicOp::Sub => u64::from((old as u32).wrapping_sub(x as u32)),
                    AtomicOp::Max => value::binary_lane(BinOp::Max, elem, old, x),
                    AtomicOp::Min => value::binary_lane(BinOp::Min, elem, old, x),
                    AtomicOp::And => old & x,
                    AtomicOp::Or => old | x,
                    AtomicOp::Xor => old ^ x,
                    AtomicOp::Exchange => x,
                };
                mem.atomic_set(at, elem, new);
                Value::scalar(elem, old)
            }
            Op::CompareExchange(a, i, cmp, v) => {
                let what = "atomicCompareExchangeWeak";
                let (elem, at) = mem.atomic_at(def, *a, self.v(*i), what)?;
                let old = mem.atomic_get(at, elem);
                // Compared as 32-bit words: the element's bits, whatever
                // the sign (the interpreter never fails one spuriously).
                let exchanged = old as u32 == self.v(*cmp).bits() as u32;
                if exchanged {
                    mem.atomic_set(at, elem, self.v(*v).bits());
                }
                let mut out = Value::zero(Type::vec(elem, 2));
                out.lanes[0] = old;
                out.lanes[1] = u64::from(exchanged);
                out
            }
            // Pure operations were evaluated above (`eval_pure` answers for
            // every one of them), and a subgroup operation stops the
            // invocation before it is evaluated (`Stop::Subgroup`): none
            // reaches here. Listed, not matched with `_`, so an op added
            // later does not compile until the oracle gives it a meaning.
            Op::Lit(_)
            | Op::Splat(..)
            | Op::Compose(_)
            | Op::Extract(..)
            | Op::Unary(..)
            | Op::Binary(..)
            | Op::Select { .. }
            | Op::Clamp(..)
            | Op::Fma(..)
            | Op::ExtractBits(..)
            | Op::InsertBits(..)
            | Op::Dot(..)
            | Op::Cast(..)
            | Op::Bitcast(..)
            | Op::Subgroup(..)
            | Op::SubgroupShuffle(..) => Value::zero(ty),
        })
    }

    /// Ends the innermost loop's current iteration: starts the next one or
    /// leaves the loop. The loop frame is on top.
    fn next_iteration(&mut self) {
        match self.stack.pop() {
            Some(Frame::For {
                index,
                counter,
                end,
                step,
                signed,
                fresh,
                body,
            }) => {
                let c = counter.wrapping_add(step);
                // An unsigned index never wraps: the loop ends where it
                // would pass `u32::MAX` (the WGSL backend counts such a
                // loop's trips).
                let wraps = !signed && !fresh && counter.checked_add(step).is_none();
                let go = if signed {
                    (c as i32) < (end as i32)
                } else {
                    c < end && !wraps
                };
                if go {
                    let ty = self.values[index.0 as usize].ty;
                    self.values[index.0 as usize] = Value::scalar(ty.scalar, u64::from(c));
                    self.stack.push(Frame::For {
                        index,
                        counter: c,
                        end,
                        step,
                        signed,
                        fresh: false,
                        body,
                    });
                    self.stack.push(Frame::Block(body, 0));
                }
            }
            Some(Frame::Loop(body)) => {
                self.stack.push(Frame::Loop(body));
                self.stack.push(Frame::Block(body, 0));
            }
            Some(f @ Frame::Block(..)) => self.stack.push(f),
            None => {}
        }
    }

    /// Runs until the invocation ends or reaches a barrier; `budget` counts
    /// statements down.
    pub fn run(
        &mut self,
        ctx: &Ctx<'k>,
        mem: &mut Memory<'_>,
        budget: &mut u64,
    ) -> Result<Stop, RunError> {
        if let Some((var, array, i)) = self.pending_load.take() {
            self.vars[var.0 as usize] =
                mem.shared_value(ctx.def, array, self.v(i), "uniform_load")?;
        }
        loop {
            let (stmts, pc) = match self.stack.last_mut() {
                None => return Ok(Stop::Done),
                Some(Frame::Block(stmts, pc)) => {
                    let p = *pc;
                    *pc += 1;
                    (*stmts, p)
                }
                Some(_) => {
                    // An iteration costs a step too, so an empty endless loop ends.
                    if *budget == 0 {
                        return Err(RunError::StepBudget);
                    }
                    *budget -= 1;
                    self.next_iteration();
                    continue;
                }
            };
            let Some(s) = stmts.get(pc) else {
                self.stack.pop();
                continue;
            };
            if *budget == 0 {
                return Err(RunError::StepBudget);
            }
            *budget -= 1;
            match s {
                Stmt::Let(id, Op::Subgroup(op, x)) => {
                    let none = Value::zero(crate::Type::U32);
                    self.pending = Some((*id, Collective::One(*op), self.v(*x), none));
                    return Ok(Stop::Subgroup(s as *const Stmt));
                }
                Stmt::Let(id, Op::SubgroupShuffle(op, x, lane)) => {
                    let (x, lane) = (self.v(*x), self.v(*lane));
                    self.pending = Some((*id, Collective::Shuffle(*op), x, lane));
                    return Ok(Stop::Subgroup(s as *const Stmt));
                }
                Stmt::Let(id, op) => {
                    let ty = ctx.def.values[id.0 as usize];
                    self.values[id.0 as usize] = self.eval(ctx, mem, ty, op)?;
                }
                Stmt::Var(var, init) | Stmt::Set(var, init) => {
                    self.vars[var.0 as usize] = self.v(*init);
                }
                Stmt::Store(ArrayRef::Global(b), i, v) => {
                    let decl = ctx.def.buffers[*b as usize];
                    let buf = &mut mem.globals[*b as usize];
                    let i = index("store", self.v(*i), (buf.len() / decl.elem_size()) as u64)?;
                    let value = self.v(*v);
                    let lanes = usize::from(decl.lanes);
                    for (lane, bits) in value.lanes[..lanes].iter().enumerate() {
                        write_global(buf, decl.elem, i * lanes + lane, *bits);
                    }
                }
                Stmt::Store(ArrayRef::Shared(a), i, v) => {
                    mem.set_shared(ctx.def, *a, self.v(*i), self.v(*v))?;
                }
                Stmt::Store(ArrayRef::Local(l), i, v) => {
                    let (x, i) = (self.v(*v), self.v(*i));
                    let arr = &mut self.locals[*l as usize];
                    let i = index("store", i, arr.len() as u64)?;
                    arr[i] = x;
                }
                Stmt::AtomicStore(a, i, v) => {
                    let (elem, at) = mem.atomic_at(ctx.def, *a, self.v(*i), "atomic_store")?;
                    mem.atomic_set(at, elem, self.v(*v).bits());
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let body = if self.v(*cond).bits() != 0 {
                        then
                    } else {
                        otherwise
                    };
                    self.stack.push(Frame::Block(body, 0));
                }
                Stmt::IfFeature {
                    feature: crate::Feature::Subgroups,
                    then,
                    otherwise,
                } => {
                    let body = if ctx.subgroups { then } else { otherwise };
                    self.stack.push(Frame::Block(body, 0));
                }
                Stmt::For {
                    index,
                    start,
                    end,
                    step,
                    body,
                } => {
                    let signed = self.v(*start).ty.scalar == Scalar::I32;
                    let step = self.v(*step).bits() as u32;
                    // Enter "just before" the first iteration; `next_iteration`
                    // steps to `start` and tests it.
                    self.stack.push(Frame::For {
                        index: *index,
                        counter: (self.v(*start).bits() as u32).wrapping_sub(step),
                        end: self.v(*end).bits() as u32,
                        step,
                        signed,
                        fresh: true,
                        body,
                    });
                    self.next_iteration();
                }
                Stmt::Loop(body) => {
                    self.stack.push(Frame::Loop(body));
                    self.stack.push(Frame::Block(body, 0));
                }
                Stmt::Break => {
                    while let Some(f) = self.stack.pop() {
                        if !matches!(f, Frame::Block(..)) {
                            break;
                        }
                    }
                }
                Stmt::Continue => {
                    while matches!(self.stack.last(), Some(Frame::Block(..))) {
                        self.stack.pop();
                    }
                }
                Stmt::Return => self.stack.clear(),
                Stmt::Barrier(_) => return Ok(Stop::Barrier(s as *const Stmt)),
                Stmt::UniformLoad(var, array, i) => {
                    self.pending_load = Some((*var, *array, *i));
                    return Ok(Stop::Barrier(s as *const Stmt));
                }
                Stmt::Matrix(m) => {
                    self.pending_matrix = Some(m);
                    return Ok(Stop::Cooperative(s as *const Stmt));
                }
            }
        }
    }
}
