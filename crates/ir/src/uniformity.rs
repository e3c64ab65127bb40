//! WGSL's uniformity rule for barriers, checked when a kernel is built.
//!
//! A `workgroupBarrier` (and a `workgroupUniformLoad`, which holds one) must
//! be reached by every invocation of the workgroup or by none. naga does not
//! check this for barriers and the GPU does not either: a barrier some
//! invocations skip hangs the workgroup on one driver and returns partial
//! results on another. The interpreter refuses it at run time
//! ([`RunError::NonUniformBarrier`](crate::RunError::NonUniformBarrier)),
//! but only on the inputs a test happens to give; this pass refuses it for
//! every input.
//!
//! The rule, as WGSL's uniformity analysis states it and simplified the same
//! safe way: a value is uniform when every invocation of the workgroup has
//! the same one. Literals, scalar arguments, `workgroup_id`,
//! `num_workgroups`, the subgroup size and count, `arrayLength`, loads from
//! a read-only buffer at a uniform index, and a lane of `local_invocation_id`
//! or `global_invocation_id` along a dimension the workgroup has size 1 in
//! are uniform; operations on uniform values are. A variable (or
//! per-invocation array) is uniform when every assignment to it stores a
//! uniform value in uniform control flow (found by iterating to a fixed
//! point). Everything else (thread ids, loads from writable buffers and
//! workgroup memory, atomics, subgroup operations) is not. Control flow is
//! uniform inside an `if` on a uniform condition and a `for` with uniform
//! bounds, unless a `break`, `continue` or `return` in non-uniform control
//! flow lets some invocations leave the loop early (the whole loop is then
//! non-uniform), or a `return` in non-uniform control flow came before (the
//! rest of the kernel is).

use crate::ir::{Access, ArrayRef, Builtin, KernelDef, Op, Stmt, ValueId};
use crate::{IrError, operands};

/// Lanes of a value every invocation agrees on, one bit per lane.
type Lanes = u8;
const UNIFORM: Lanes = 0b1111;
const VARYING: Lanes = 0;

/// Why control flow at a point is not uniform.
#[derive(Clone, Copy, Debug)]
enum Varying {
    Condition(ValueId),
    LoopBounds,
    EarlyExit,
    EarlyReturn,
}

impl Varying {
    fn describe(self) -> String {
        match self {
            Varying::Condition(v) => format!(
                "inside an `if` whose condition (%{}) differs between the workgroup's \
                 invocations",
                v.0
            ),
            Varying::LoopBounds => {
                "inside a loop whose bounds differ between the workgroup's invocations".into()
            }
            Varying::EarlyExit => "inside a loop that some invocations leave early (a `break`, \
                                   `continue` or `return` under a condition that differs \
                                   between them)"
                .into(),
            Varying::EarlyReturn => {
                "after a `return` that only some of the workgroup's invocations take".into()
            }
        }
    }
}

/// Refuses a barrier or uniform load that some invocations of a workgroup
/// may skip.
pub(crate) fn check(def: &KernelDef) -> Result<(), IrError> {
    let mut a = Analysis {
        def,
        values: vec![VARYING; def.values.len()],
        vars: vec![true; def.vars.len()],
        locals: vec![true; def.locals.len()],
        changed: false,
        returned: None,
        exits: Vec::new(),
        barriers: 0,
        error: None,
    };
    // Each pass only turns variables from uniform to varying: at most one
    // pass per variable and array, then one that changes nothing.
    loop {
        a.changed = false;
        a.returned = None;
        a.barriers = 0;
        a.error = None;
        a.block(&def.body, None);
        if !a.changed {
            break;
        }
    }
    a.error.map_or(Ok(()), Err)
}

struct Analysis<'a> {
    def: &'a KernelDef,
    values: Vec<Lanes>,
    vars: Vec<bool>,
    locals: Vec<bool>,
    changed: bool,
    /// A `return` in non-uniform control flow was passed.
    returned: Option<Varying>,
    /// Per enclosing loop: whether some invocations may leave it early.
    exits: Vec<bool>,
    /// Barriers seen so far in this pass, to name the one refused.
    barriers: u32,
    error: Option<IrError>,
}

impl Analysis<'_> {
    fn uniform(&self, v: ValueId) -> bool {
        self.values.get(v.0 as usize) == Some(&UNIFORM)
    }

    fn block(&mut self, stmts: &[Stmt], control: Option<Varying>) {
        for s in stmts {
            self.stmt(s, control);
        }
    }

    fn stmt(&mut self, s: &Stmt, control: Option<Varying>) {
        let control = control.or(self.returned);
        match s {
            Stmt::Let(id, op) => {
                let lanes = self.op(op);
                if let Some(v) = self.values.get_mut(id.0 as usize) {
                    *v = lanes;
                }
            }
            Stmt::Var(var, v) | Stmt::Set(var, v) => {
                if control.is_some() || !self.uniform(*v) {
                    self.vary_var(var.0 as usize);
                }
            }
            Stmt::Store(ArrayRef::Local(l), i, v) => {
                if control.is_some() || !self.uniform(*i) || !self.uniform(*v) {
                    self.vary_local(*l as usize);
                }
            }
            Stmt::Store(..) | Stmt::AtomicStore(..) | Stmt::Matrix(_) => {}
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let inner = control.or((!self.uniform(*cond)).then_some(Varying::Condition(*cond)));
                self.block(then, inner);
                self.block(otherwise, inner);
            }
            // Chosen when compiled: the control flow around it.
            Stmt::IfFeature {
                then, otherwise, ..
            } => {
                self.block(then, control);
                self.block(otherwise, control);
            }
            Stmt::For {
                index,
                start,
                end,
                step,
                body,
            } => {
                let bounds = [start, end, step].iter().all(|v| self.uniform(**v));
                let first = if self.uniform(*start) && self.uniform(*step) {
                    UNIFORM
                } else {
                    VARYING
                };
                if let Some(v) = self.values.get_mut(index.0 as usize) {
                    *v = first;
                }
                let inner = control.or((!bounds).then_some(Varying::LoopBounds));
                self.looped(body, inner);
            }
            Stmt::Loop(body) => self.looped(body, control),
            Stmt::Break | Stmt::Continue => {
                if control.is_some()
                    && let Some(e) = self.exits.last_mut()
                {
                    *e = true;
                }
            }
            Stmt::Return => {
                if control.is_some() {
                    self.returned.get_or_insert(Varying::EarlyReturn);
                    for e in &mut self.exits {
                        *e = true;
                    }
                }
            }
            Stmt::Barrier(_) => self.barrier("barrier", control),
            Stmt::UniformLoad(var, _, index) => {
                self.barrier("uniform_load", control);
                if control.is_some() || !self.uniform(*index) {
                    self.vary_var(var.0 as usize);
                }
            }
        }
    }

    /// A loop body: walked once, and again as non-uniform when some
    /// invocations may leave it early (later iterations run with fewer).
    fn looped(&mut self, body: &[Stmt], control: Option<Varying>) {
        let barriers = self.barriers;
        self.exits.push(false);
        self.block(body, control);
        let early = self.exits.pop().unwrap_or(false);
        if early && control.is_none() {
            self.barriers = barriers;
            self.exits.push(false);
            self.block(body, Some(Varying::EarlyExit));
            self.exits.pop();
        }
    }

    fn barrier(&mut self, op: &'static str, control: Option<Varying>) {
        self.barriers += 1;
        if let (Some(c), None) = (control, &self.error) {
            self.error = Some(IrError::structure(
                op,
                format!(
                    "barrier {} of the kernel (in the order built) is {}: every invocation of \
                     a workgroup must reach it, or none",
                    self.barriers,
                    c.describe()
                ),
            ));
        }
    }

    fn vary_var(&mut self, i: usize) {
        if let Some(u) = self.vars.get_mut(i)
            && *u
        {
            *u = false;
            self.changed = true;
        }
    }

    fn vary_local(&mut self, i: usize) {
        if let Some(u) = self.locals.get_mut(i)
            && *u
        {
            *u = false;
            self.changed = true;
        }
    }

    fn op(&self, op: &Op) -> Lanes {
        let of = |b: bool| if b { UNIFORM } else { VARYING };
        match op {
            Op::Lit(_) | Op::Arg(_) | Op::ArrayLength(_) => UNIFORM,
            Op::Builtin(b) => self.builtin(*b),
            Op::Extract(v, lane) => {
                let lanes = self.values.get(v.0 as usize).copied().unwrap_or(VARYING);
                of(lanes & (1 << lane) != 0)
            }
            Op::Get(var) => of(self.vars.get(var.0 as usize) == Some(&true)),
            Op::Load(ArrayRef::Global(b), i) => of(self
                .def
                .buffers
                .get(*b as usize)
                .is_some_and(|d| d.access == Access::Read)
                && self.uniform(*i)),
            Op::Load(ArrayRef::Local(l), i) => {
                of(self.locals.get(*l as usize) == Some(&true) && self.uniform(*i))
            }
            Op::Load(ArrayRef::Shared(_), _)
            | Op::AtomicLoad(..)
            | Op::Atomic(..)
            | Op::CompareExchange(..)
            | Op::Subgroup(..)
            | Op::SubgroupShuffle(..) => VARYING,
            Op::Splat(..)
            | Op::Compose(_)
            | Op::Index(..)
            | Op::WithLane(..)
            | Op::Unary(..)
            | Op::Binary(..)
            | Op::Select { .. }
            | Op::Clamp(..)
            | Op::Fma(..)
            | Op::ExtractBits(..)
            | Op::InsertBits(..)
            | Op::Dot(..)
            | Op::Cast(..)
            | Op::Bitcast(..) => of(operands(op).iter().all(|v| self.uniform(*v))),
        }
    }

    fn builtin(&self, b: Builtin) -> Lanes {
        let size = self.def.workgroup_size;
        // Along a dimension of size 1 the local id is 0 and the global id
        // is the workgroup's.
        let flat = size
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == 1)
            .fold(VARYING, |m, (d, _)| m | 1 << d);
        let one = size.iter().product::<u32>() == 1;
        match b {
            Builtin::WorkgroupId
            | Builtin::NumWorkgroups
            | Builtin::SubgroupSize
            | Builtin::NumSubgroups => UNIFORM,
            Builtin::GlobalId | Builtin::LocalId => flat,
            Builtin::LocalIndex | Builtin::SubgroupInvocationId | Builtin::SubgroupId => {
                if one {
                    UNIFORM
                } else {
                    VARYING
                }
            }
        }
    }
}
