//! Which modules need wgpu's index clamps: a proof that every run-time
//! index into an array, vector or matrix outside a buffer is in range.
//!
//! wgpu's checked modules clamp such an index (`min(i, n - 1)`, naga's
//! `Restrict` policy for `index`); buffer accesses follow the `buffer`
//! policy, which wgpu leaves to the driver where the device has
//! `robustBufferAccess2`. On an H100 the clamps are harmless while the
//! loop counter stops unrolling, but with the counter gone
//! (`termination.rs`) NVIDIA's compiler takes 22 s instead of 0.8 s on
//! cubek's unrolled register-tile matmuls (docs/burn.md). An index the
//! proof below bounds needs no clamp; a module where every such index is
//! bounded, on a device whose buffer accesses the driver bounds, is
//! compiled without wgpu's bounds checks and loses nothing by it.
//!
//! The proof is interval arithmetic over the index expression, with no
//! wrapping anywhere in it: literals, constants, the type's own range,
//! and what a counted loop knows past its exit test (`v < b`). An access
//! it cannot bound (or any image or cooperative-matrix operation, or a
//! buffer access where the driver does not bound it) keeps every clamp
//! of the module.

use std::cell::Cell;

use naga::valid::{FunctionInfo, ModuleInfo};
use naga::{
    AddressSpace, BinaryOperator, Block, EntryPoint, Expression, Function, GlobalVariable, Handle,
    LocalVariable, Module, Statement, TypeInner, UnaryOperator,
};

use super::intervals::Range;
use super::termination::{Step, counted};
use super::thread_ids::builtins_in_privates;

/// Whether every run-time index of `module` into an array, vector or
/// matrix is in range, so wgpu's index clamps change nothing.
/// `robust_buffers`: the device bounds buffer accesses itself (wgpu then
/// leaves them unclamped either way).
#[cfg(test)]
pub(crate) fn every_index_in_range(
    module: &Module,
    info: &ModuleInfo,
    robust_buffers: bool,
) -> bool {
    first_unbounded(module, info, robust_buffers).is_none()
}

/// Where the proof first failed in a module: the function, and the access
/// expression it could not bound (`None`: a statement it does not look
/// into, an image store say, or a counted loop whose start or bound it
/// cannot range). For the log line that says why a module keeps wgpu's
/// checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unbounded {
    pub function: Option<String>,
    pub access: Option<Handle<Expression>>,
}

impl std::fmt::Display for Unbounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let function = self.function.as_deref().unwrap_or("?");
        match self.access {
            Some(e) => write!(
                f,
                "an index the proof cannot bound, expression {e:?} of `{function}`"
            ),
            None => write!(
                f,
                "a statement or loop the index proof cannot follow, in `{function}`"
            ),
        }
    }
}

/// The first place where a run-time index of `module` may be out of range
/// ([`Unbounded`]); `None` where every one is proven in range.
pub(crate) fn first_unbounded(
    module: &Module,
    info: &ModuleInfo,
    robust_buffers: bool,
) -> Option<Unbounded> {
    let privates = builtins_in_privates(module);
    let functions = (module.functions.iter()).map(|(h, f)| (f, &info[h], None));
    let entries = (module.entry_points.iter().enumerate())
        .map(|(i, e)| (&e.function, info.get_entry_point(i), Some(e)));
    functions.chain(entries).find_map(|(f, fi, entry)| {
        let proof = Proof {
            module,
            f,
            info: fi,
            entry,
            privates: &privates,
            robust_buffers,
            failed: Cell::new(None),
        };
        (!proof.block(&f.body, &mut Vec::new())).then(|| Unbounded {
            function: f.name.clone(),
            access: proof.failed.get(),
        })
    })
}

/// Where this fact holds, `what` takes values in `range`.
#[derive(Clone, Copy)]
struct Fact {
    what: Subject,
    range: Range,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    /// One expression (its value is fixed once evaluated).
    Expr(Handle<Expression>),
    /// Every load of a local variable (where nothing writes it).
    Var(Handle<LocalVariable>),
}

struct Proof<'a> {
    module: &'a Module,
    f: &'a Function,
    info: &'a FunctionInfo,
    /// The entry point `f` is, if it is one (its builtins' ranges).
    entry: Option<&'a EntryPoint>,
    privates: &'a [(Handle<GlobalVariable>, [Range; 3])],
    robust_buffers: bool,
    /// The access that failed the proof, once one did.
    failed: Cell<Option<Handle<Expression>>>,
}

/// How deep an index expression is followed before the proof gives up (a
/// pathological kernel must not exhaust the stack), and how many
/// conditions one guard is split into.
const DEPTH: u32 = 64;

impl Proof<'_> {
    /// Every access emitted in `block` is in range under `facts`.
    fn block(&self, block: &Block, facts: &mut Vec<Fact>) -> bool {
        block.iter().all(|s| self.statement(s, facts))
    }

    /// Every access `s` evaluates is in range under `facts`. Listed in full
    /// so that a statement naga adds is refused until it is looked at.
    fn statement(&self, s: &Statement, facts: &mut Vec<Fact>) -> bool {
        match s {
            Statement::Emit(range) => range.clone().all(|e| {
                let bounded = self.access(e, facts);
                if !bounded {
                    self.failed.set(Some(e));
                }
                bounded
            }),
            Statement::Block(b) => self.scoped(facts, |p, facts| p.block(b, facts)),
            Statement::If {
                condition,
                accept,
                reject,
            } => [(accept, true), (reject, false)]
                .into_iter()
                .all(|(b, holds)| {
                    self.scoped(facts, |p, facts| {
                        let mut budget = DEPTH;
                        p.guard(*condition, holds, facts, &mut budget);
                        p.block(b, facts)
                    })
                }),
            Statement::Switch { cases, .. } => cases
                .iter()
                .all(|c| self.scoped(facts, |p, facts| p.block(&c.body, facts))),
            Statement::Loop {
                body, continuing, ..
            } => self.scoped(facts, |p, facts| p.in_loop(body, continuing, facts)),
            // Images have their own policy; the rest are left alone.
            Statement::ImageStore { .. }
            | Statement::ImageAtomic { .. }
            | Statement::RayQuery { .. }
            | Statement::RayPipelineFunction(_)
            | Statement::CooperativeStore { .. } => false,
            // Their pointers and values are expressions, emitted (and so
            // checked) before them.
            Statement::Break
            | Statement::Continue
            | Statement::Return { .. }
            | Statement::Kill
            | Statement::ControlBarrier(_)
            | Statement::MemoryBarrier(_)
            | Statement::Store { .. }
            | Statement::Atomic { .. }
            | Statement::WorkGroupUniformLoad { .. }
            | Statement::Call { .. }
            | Statement::SubgroupBallot { .. }
            | Statement::SubgroupGather { .. }
            | Statement::SubgroupCollectiveOperation { .. } => true,
        }
    }

    /// A loop's blocks: past a counted loop's exit test, its variable is
    /// within its bound, in the rest of the body and in `continuing` up to
    /// the one store that steps it (the proof in `termination.rs` says
    /// nothing else in the loop writes it, so every load there reads what
    /// the test read). The test's own load keeps the bound after the step.
    fn in_loop(&self, body: &Block, continuing: &Block, facts: &mut Vec<Fact>) -> bool {
        let Some(c) = counted(self.module, self.f, body, continuing) else {
            return self.block(body, facts) && self.block(continuing, facts);
        };
        let (before, after) = body.split_at(c.test + 1);
        if !before.iter().all(|s| self.statement(s, facts)) {
            return false;
        }
        let (Some(v), Some(b)) = (self.range(c.v, facts), self.range(c.bound, facts)) else {
            return false;
        };
        let range = match c.step {
            Step::Up => (v.0, v.1.min(b.1 - 1)),
            Step::Down => (v.0.max(b.0 + 1), v.1),
        };
        let (stepping, stepped) = continuing.split_at(c.stepped_at);
        facts.push(Fact {
            what: Subject::Expr(c.v),
            range,
        });
        facts.push(Fact {
            what: Subject::Var(c.var),
            range,
        });
        if !(after
            .iter()
            .chain(stepping)
            .all(|s| self.statement(s, facts)))
        {
            return false;
        }
        facts.pop();
        stepped.iter().all(|s| self.statement(s, facts))
    }

    /// Adds to `facts` what `condition` evaluating to `holds` says of its
    /// operands: `a < b` bounds `a` by `b`'s largest value and `b` by
    /// `a`'s smallest (and so on for the other comparisons, negations, and
    /// both sides of `a & b` when it holds). At most `budget` conditions
    /// are looked at: `c1 = c0 & c0; c2 = c1 & c1; ...` shares operands.
    fn guard(
        &self,
        condition: Handle<Expression>,
        holds: bool,
        facts: &mut Vec<Fact>,
        budget: &mut u32,
    ) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let (op, left, right) = match self.f.expressions[condition] {
            Expression::Unary {
                op: UnaryOperator::LogicalNot,
                expr,
            } => return self.guard(expr, !holds, facts, budget),
            // `&` here is on booleans (a condition is one).
            Expression::Binary {
                op: BinaryOperator::LogicalAnd | BinaryOperator::And,
                left,
                right,
            } if holds => {
                self.guard(left, true, facts, budget);
                return self.guard(right, true, facts, budget);
            }
            Expression::Binary { op, left, right } => (op, left, right),
            _ => return,
        };
        // As `small < big` (strict) or `small <= big`.
        let (small, big, strict) = match (op, holds) {
            (BinaryOperator::Less, true) | (BinaryOperator::GreaterEqual, false) => {
                (left, right, true)
            }
            (BinaryOperator::LessEqual, true) | (BinaryOperator::Greater, false) => {
                (left, right, false)
            }
            (BinaryOperator::Greater, true) | (BinaryOperator::LessEqual, false) => {
                (right, left, true)
            }
            (BinaryOperator::GreaterEqual, true) | (BinaryOperator::Less, false) => {
                (right, left, false)
            }
            _ => return,
        };
        let gap = i128::from(strict);
        let (Some(s), Some(b)) = (self.range(small, facts), self.range(big, facts)) else {
            return;
        };
        facts.push(Fact {
            what: Subject::Expr(small),
            range: (s.0, s.1.min(b.1 - gap)),
        });
        facts.push(Fact {
            what: Subject::Expr(big),
            range: (b.0.max(s.0 + gap), b.1),
        });
    }

    /// `f` on `facts`, which are as they were afterwards.
    fn scoped(&self, facts: &mut Vec<Fact>, f: impl FnOnce(&Self, &mut Vec<Fact>) -> bool) -> bool {
        let n = facts.len();
        let ok = f(self, facts);
        facts.truncate(n);
        ok
    }

    /// Expression `e` is no access wgpu would clamp, or its index is in
    /// range. Listed in full, as statements are.
    fn access(&self, e: Handle<Expression>, facts: &[Fact]) -> bool {
        match self.f.expressions[e] {
            Expression::Access { base, index } => match self.length(base) {
                Length::Fixed(n) => self
                    .range(index, facts)
                    .is_some_and(|(lo, hi)| lo >= 0 && hi < i128::from(n)),
                Length::Buffer => self.robust_buffers,
                Length::Unknown => false,
            },
            Expression::AccessIndex { base, .. } => match self.length(base) {
                // naga's validator checks a constant index against a
                // fixed length.
                Length::Fixed(_) => true,
                Length::Buffer => self.robust_buffers,
                Length::Unknown => false,
            },
            Expression::ImageSample { .. }
            | Expression::ImageLoad { .. }
            | Expression::ImageQuery { .. }
            | Expression::CooperativeLoad { .. }
            | Expression::RayQueryGetIntersection { .. }
            | Expression::RayQueryVertexPositions { .. }
            | Expression::RayQueryProceedResult => false,
            Expression::Literal(_)
            | Expression::Constant(_)
            | Expression::Override(_)
            | Expression::ZeroValue(_)
            | Expression::Compose { .. }
            | Expression::Splat { .. }
            | Expression::Swizzle { .. }
            | Expression::FunctionArgument(_)
            | Expression::GlobalVariable(_)
            | Expression::LocalVariable(_)
            | Expression::Load { .. }
            | Expression::Unary { .. }
            | Expression::Binary { .. }
            | Expression::Select { .. }
            | Expression::Derivative { .. }
            | Expression::Relational { .. }
            | Expression::Math { .. }
            | Expression::As { .. }
            | Expression::CallResult(_)
            | Expression::AtomicResult { .. }
            | Expression::WorkGroupUniformLoadResult { .. }
            | Expression::ArrayLength(_)
            | Expression::SubgroupBallotResult
            | Expression::SubgroupOperationResult { .. }
            | Expression::CooperativeMultiplyAdd { .. } => true,
        }
    }

    /// How many elements the thing `base` is or points at has, as naga's
    /// bounds-check policies see it.
    fn length(&self, base: Handle<Expression>) -> Length {
        let types = &self.module.types;
        let (inner, space) = match self.info[base].ty.inner_with(types) {
            TypeInner::Pointer { base, space } => (&types[*base].inner, Some(*space)),
            TypeInner::ValuePointer { size, space, .. } => {
                return match space {
                    AddressSpace::Storage { .. } | AddressSpace::Uniform => Length::Buffer,
                    _ => size.map_or(Length::Unknown, |s| Length::Fixed(s as u32)),
                };
            }
            other => (other, None),
        };
        if matches!(
            space,
            Some(AddressSpace::Storage { .. } | AddressSpace::Uniform)
        ) {
            return Length::Buffer;
        }
        match *inner {
            TypeInner::Vector { size, .. } => Length::Fixed(size as u32),
            TypeInner::Matrix { columns, .. } => Length::Fixed(columns as u32),
            TypeInner::Array {
                size: naga::ArraySize::Constant(n),
                ..
            } => Length::Fixed(n.get()),
            // Only ever indexed by a constant, which naga's validator checks.
            TypeInner::Struct { ref members, .. } => {
                Length::Fixed(u32::try_from(members.len()).unwrap_or(u32::MAX))
            }
            _ => Length::Unknown,
        }
    }
}

enum Length {
    Fixed(u32),
    /// In a storage or uniform buffer: naga's `buffer` policy.
    Buffer,
    Unknown,
}

#[path = "index_values.rs"]
mod values;

#[cfg(test)]
#[path = "indices_tests.rs"]
mod tests;
