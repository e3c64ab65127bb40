//! Value ranges of an IR kernel's integers, so a reported module skips the
//! check of an access that cannot leave its array.
//!
//! Under `BoundsChecks::Reported` every access is preceded by a compare and
//! a branch to the report. For a register tile (`local_array`) or a
//! workgroup tile indexed by loop counters and thread ids, that compare is
//! most of the inner loop: the register-tiled matmul ran at a third of its
//! checked speed on lavapipe. Arrays of a length known when the kernel is
//! built (per-invocation and workgroup arrays, a vector's lanes) are skipped
//! where the index's range, worked out here, lies inside the array. Buffers
//! are always checked (their length is the binding's).
//!
//! The ranges: exact integer intervals (`i64`) over `u32` and `i32` values
//! only, from literals, `local_invocation_id` (below the workgroup size),
//! `local_invocation_index` and `subgroup_id` (below its product),
//! `subgroup_invocation_id` (below 128), the index of a `for` loop (from its
//! start up to its end minus one, for a step of at least 1 that cannot wrap
//! it), and
//! `+ - * / % & >> min max`, casts and selects of such values. A result
//! outside its type's range may have wrapped, and has no range. Everything
//! else (variables, loads, thread ids across workgroups) has none, and its
//! accesses stay checked.

use compute_ir::{BinOp, Builtin, KernelDef, Op, Scalar, Stmt, Type, ValueId};

/// An interval of an integer value, inclusive.
pub(super) type Range = (i64, i64);

/// Every value's range where one is known.
pub(super) struct Ranges {
    of: Vec<Option<Range>>,
}

impl Ranges {
    pub(super) fn of(def: &KernelDef) -> Self {
        let mut r = Ranges {
            of: vec![None; def.values.len()],
        };
        let mut ops: Vec<Option<&Op>> = vec![None; def.values.len()];
        r.block(def, &def.body, &mut ops);
        r
    }

    /// Whether every value `index` may take is below `len` (and not
    /// negative).
    pub(super) fn within(&self, index: ValueId, len: u64) -> bool {
        matches!(self.get(index), Some((lo, hi)) if lo >= 0 && (hi as u64) < len)
    }

    /// The one value `v` always has, where its range is a single point.
    pub(super) fn constant(&self, v: ValueId) -> Option<i64> {
        self.get(v).and_then(|(lo, hi)| (lo == hi).then_some(lo))
    }

    fn get(&self, v: ValueId) -> Option<Range> {
        self.of.get(v.0 as usize).copied().flatten()
    }

    fn set(&mut self, v: ValueId, range: Option<Range>) {
        if let Some(slot) = self.of.get_mut(v.0 as usize) {
            *slot = range;
        }
    }

    fn block<'d>(&mut self, def: &'d KernelDef, stmts: &'d [Stmt], ops: &mut Vec<Option<&'d Op>>) {
        for s in stmts {
            match s {
                Stmt::Let(id, op) => {
                    if let Some(slot) = ops.get_mut(id.0 as usize) {
                        *slot = Some(op);
                    }
                    let range = self
                        .op(def, op, ops)
                        .filter(|r| fits(r, def.values[id.0 as usize]));
                    self.set(*id, range);
                }
                Stmt::If {
                    then, otherwise, ..
                }
                | Stmt::IfFeature {
                    then, otherwise, ..
                } => {
                    self.block(def, then, ops);
                    self.block(def, otherwise, ops);
                }
                Stmt::For {
                    index,
                    start,
                    end,
                    step,
                    body,
                } => {
                    // In the body `start <= i < end`, as long as no step
                    // can wrap `i` past the type's end and back below it.
                    let ty = def.values[index.0 as usize];
                    let range = match (self.get(*start), self.get(*end), self.get(*step)) {
                        (Some((lo, _)), Some((_, hi)), Some((s, s_hi)))
                            if s >= 1 && lo < hi && fits(&(lo, hi - 1 + s_hi), ty) =>
                        {
                            Some((lo, hi - 1))
                        }
                        _ => None,
                    };
                    self.set(*index, range);
                    self.block(def, body, ops);
                }
                Stmt::Loop(body) => self.block(def, body, ops),
                Stmt::Var(..)
                | Stmt::Set(..)
                | Stmt::Store(..)
                | Stmt::AtomicStore(..)
                | Stmt::Break
                | Stmt::Continue
                | Stmt::Return
                | Stmt::Barrier(_)
                | Stmt::UniformLoad(..)
                | Stmt::Matrix(_) => {}
            }
        }
    }

    fn op(&self, def: &KernelDef, op: &Op, ops: &[Option<&Op>]) -> Option<Range> {
        let size = def.workgroup_size;
        let invocations = i64::from(size.iter().product::<u32>());
        match op {
            Op::Lit(lit) => match lit {
                compute_ir::Lit::U32(c) => Some((i64::from(*c), i64::from(*c))),
                compute_ir::Lit::I32(c) => Some((i64::from(*c), i64::from(*c))),
                _ => None,
            },
            Op::Builtin(Builtin::LocalIndex | Builtin::SubgroupId) => Some((0, invocations - 1)),
            Op::Builtin(Builtin::SubgroupInvocationId) => Some((0, 127)),
            Op::Extract(v, lane) => match ops.get(v.0 as usize).copied().flatten() {
                Some(Op::Builtin(Builtin::LocalId)) => {
                    size.get(usize::from(*lane)).map(|s| (0, i64::from(*s) - 1))
                }
                _ => None,
            },
            Op::Binary(b, x, y) => binary(*b, self.get(*x)?, self.get(*y)?),
            Op::Select {
                on_true, on_false, ..
            } => {
                let (a, b) = (self.get(*on_true)?, self.get(*on_false)?);
                Some((a.0.min(b.0), a.1.max(b.1)))
            }
            // The cast keeps the value where both types hold it (`fits`
            // refuses the rest).
            Op::Cast(x, Scalar::U32 | Scalar::I32) | Op::Bitcast(x, Scalar::U32 | Scalar::I32) => {
                self.get(*x)
                    .filter(|r| r.0 >= 0 && r.1 <= i64::from(i32::MAX))
            }
            _ => None,
        }
    }
}

/// Whether `r` lies in the range of `ty` (else the value may have wrapped).
fn fits(r: &Range, ty: Type) -> bool {
    let (lo, hi) = if ty == Type::U32 {
        (0, i64::from(u32::MAX))
    } else if ty == Type::I32 {
        (i64::from(i32::MIN), i64::from(i32::MAX))
    } else {
        return false;
    };
    r.0 >= lo && r.1 <= hi
}

fn binary(op: BinOp, (a, b): Range, (c, d): Range) -> Option<Range> {
    let corners = |f: fn(i64, i64) -> Option<i64>| -> Option<Range> {
        let v = [f(a, c)?, f(a, d)?, f(b, c)?, f(b, d)?];
        Some((*v.iter().min()?, *v.iter().max()?))
    };
    match op {
        BinOp::Add => Some((a.checked_add(c)?, b.checked_add(d)?)),
        BinOp::Sub => Some((a.checked_sub(d)?, b.checked_sub(c)?)),
        BinOp::Mul => corners(i64::checked_mul),
        // Non-negative operands only: WGSL's truncating division and
        // remainder then agree with the interval's bounds.
        BinOp::Div if a >= 0 && c >= 1 => Some((a / d, b / c)),
        BinOp::Rem if a >= 0 && c >= 1 => Some((0, b.min(d - 1))),
        BinOp::And if a >= 0 && c >= 0 => Some((0, b.min(d))),
        BinOp::Shr if a >= 0 && c >= 0 && d < 32 => Some((a >> d, b >> c)),
        BinOp::Min => Some((a.min(c), b.min(d))),
        BinOp::Max => Some((a.max(c), b.max(d))),
        _ => None,
    }
}

#[cfg(test)]
#[path = "ranges_tests.rs"]
mod tests;
