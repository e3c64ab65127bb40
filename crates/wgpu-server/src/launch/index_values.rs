//! The index proof's values (`indices.rs`): every value an integer
//! expression may take where the proof's facts hold, by interval
//! arithmetic over literals, constants, thread-id builtins (also through
//! the private globals that hold them) and the operations on them, with
//! no wrapping anywhere.

use hashbrown::HashMap;
use naga::{BinaryOperator, Expression, Handle, ScalarKind, TypeInner};

use super::{DEPTH, Fact, Proof, Subject};
use crate::launch::intervals::{Range, binary, intersect, literal, math, union};
use crate::launch::termination::local_of;
use crate::launch::thread_ids::builtin;

/// Ranges already worked out in one [`Proof::range`] call.
type Memo = HashMap<Handle<Expression>, Option<Range>>;

impl Proof<'_> {
    /// Every value `e` may take, where `facts` hold; `None` where the
    /// proof cannot tell (or the value may have wrapped).
    pub(super) fn range(&self, e: Handle<Expression>, facts: &[Fact]) -> Option<Range> {
        self.range_in(e, facts, 0, &mut HashMap::new())
    }

    /// [`Self::range`], each expression's range worked out once per call
    /// (`memo`): an expression tree is a DAG, and `x1 = x0 + x0; x2 = x1 +
    /// x1; ...` would otherwise cost 2^depth. A range is sound wherever it
    /// was reached, so reusing one is too.
    fn range_in(
        &self,
        e: Handle<Expression>,
        facts: &[Fact],
        depth: u32,
        memo: &mut Memo,
    ) -> Option<Range> {
        if let Some(known) = memo.get(&e) {
            return *known;
        }
        let r = self.derive(e, facts, depth, memo);
        memo.insert(e, r);
        r
    }

    fn derive(
        &self,
        e: Handle<Expression>,
        facts: &[Fact],
        depth: u32,
        memo: &mut Memo,
    ) -> Option<Range> {
        // Integer scalars only: float arithmetic rounds (a sum of two
        // floats may land above the sum of their bounds).
        let own = self.of_type(e);
        if depth > DEPTH || own.is_none() {
            return None;
        }
        let var = match self.f.expressions[e] {
            Expression::Load { pointer } => local_of(self.f, pointer).map(Subject::Var),
            _ => None,
        };
        let known = facts
            .iter()
            .filter(|f| f.what == Subject::Expr(e) || Some(f.what) == var)
            .fold(own, |r, f| intersect(r, Some(f.range)));
        let mut sub = |x: Handle<Expression>| self.range_in(x, facts, depth + 1, memo);
        let derived = match self.f.expressions[e] {
            Expression::Literal(l) => literal(l),
            Expression::Constant(c) => {
                match self.module.global_expressions[self.module.constants[c].init] {
                    Expression::Literal(l) => literal(l),
                    _ => None,
                }
            }
            Expression::Load { pointer } => match crate::launch::termination::constant(self.f, e) {
                c if c != e => sub(c),
                _ => self.private(pointer, None),
            },
            Expression::FunctionArgument(a) => self.entry.and_then(|en| builtin(en, a, None)),
            Expression::AccessIndex { base, index } => match self.f.expressions[base] {
                Expression::FunctionArgument(a) => {
                    self.entry.and_then(|en| builtin(en, a, Some(index)))
                }
                Expression::Load { pointer } => self.private(pointer, Some(index)),
                _ => None,
            },
            Expression::Binary { op, left, right } => match (sub(left), sub(right)) {
                (Some(l), Some(r)) => binary(op, l, r),
                _ => None,
            },
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                ..
            } => match sub(arg) {
                Some(a) => {
                    let (b, c) = (arg1.and_then(&mut sub), arg2.and_then(&mut sub));
                    math(fun, a, b, c)
                }
                None => None,
            },
            // A condition the ranges decide picks its branch (the IR's
            // guarded divisions, `select(x / d, x, d == 0)` with `d` a
            // literal, would otherwise lose the division).
            Expression::Select {
                condition,
                accept,
                reject,
            } => match self.decided(condition, &mut sub) {
                Some(true) => sub(accept),
                Some(false) => sub(reject),
                None => match (sub(accept), sub(reject)) {
                    (Some(a), Some(r)) => Some(union(a, r)),
                    _ => None,
                },
            },
            // A conversion or bitcast keeps the value where the source's
            // range fits the target's (checked against `own` below).
            Expression::As { expr, .. } => sub(expr),
            _ => None,
        };
        // A derived range outside the type's own means the value wrapped.
        match (derived, own) {
            (Some(d), Some(t)) if d.0 < t.0 || d.1 > t.1 => known,
            (Some(d), _) => intersect(known, Some(d)),
            (None, _) => known,
        }
    }

    /// The value of a comparison of two integers that holds or fails for
    /// every value their ranges allow (`sub` ranges an operand); `None`
    /// where it may go either way, or is not such a comparison.
    fn decided(
        &self,
        condition: Handle<Expression>,
        sub: &mut impl FnMut(Handle<Expression>) -> Option<Range>,
    ) -> Option<bool> {
        let Expression::Binary { op, left, right } = self.f.expressions[condition] else {
            return None;
        };
        let ((l0, l1), (r0, r1)) = (sub(left)?, sub(right)?);
        let (always, never) = match op {
            BinaryOperator::Equal => (l0 == l1 && r0 == r1 && l0 == r0, l1 < r0 || r1 < l0),
            BinaryOperator::NotEqual => (l1 < r0 || r1 < l0, l0 == l1 && r0 == r1 && l0 == r0),
            BinaryOperator::Less => (l1 < r0, l0 >= r1),
            BinaryOperator::LessEqual => (l1 <= r0, l0 > r1),
            BinaryOperator::Greater => (l0 > r1, l1 <= r0),
            BinaryOperator::GreaterEqual => (l0 >= r1, l1 < r0),
            _ => return None,
        };
        match (always, never) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// What a load through `pointer` (of `component`) reads, where it
    /// points at a private global that holds a builtin.
    fn private(&self, pointer: Handle<Expression>, component: Option<u32>) -> Option<Range> {
        let (g, component) = match (&self.f.expressions[pointer], component) {
            (&Expression::GlobalVariable(g), c) => (g, c.unwrap_or(0)),
            (&Expression::AccessIndex { base, index }, None) => match self.f.expressions[base] {
                Expression::GlobalVariable(g) => (g, index),
                _ => return None,
            },
            _ => return None,
        };
        let (_, r) = self.privates.iter().find(|(h, _)| *h == g)?;
        r.get(component as usize).copied()
    }

    /// The range of `e`'s integer scalar type, if it has one.
    fn of_type(&self, e: Handle<Expression>) -> Option<Range> {
        let TypeInner::Scalar(s) = *self.info[e].ty.inner_with(&self.module.types) else {
            return None;
        };
        let bits = u32::from(s.width) * 8;
        match s.kind {
            ScalarKind::Uint => Some((0, (1i128 << bits) - 1)),
            ScalarKind::Sint => Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)),
            _ => None,
        }
    }
}
