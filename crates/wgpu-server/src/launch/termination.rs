//! Which modules need wgpu's loop bounding: a proof that every loop ends.
//!
//! wgpu's checked modules bound every loop with a hidden 64-bit counter
//! (`force_loop_bounding`), so a driver never meets a loop it may assume
//! ends and exploit as undefined behaviour. The counter also hides every
//! trip count from the driver: no loop unrolls, and a per-thread array
//! indexed by the loop variable moves from registers to memory. On an
//! H100 that made cubek's tiled matmuls 25-33x slower (docs/burn.md).
//!
//! A module whose every loop is a *counted loop* gets no counter: the
//! proof below is the bound. Anything else keeps wgpu's counter, for the
//! whole module. Bounds checks (index clamping) stay on either way.
//!
//! A counted loop, as naga's IR spells `for (var i = a; i < b; i++)` (and
//! cubecl's SPIR-V loops after naga's front end):
//! - the first statement of its body past `Emit`s and `Store`s is an
//!   `if` whose one exit arm is exactly `break`, on `v < b` (or `b > v`) with `v` a load,
//!   emitted there, of an integer scalar local `i`;
//! - its `continuing` block stores `i = x + 1` at its top level once, `x`
//!   a load of `i`, and nothing else in the loop writes `i`;
//! - no call in the function is given a pointer to `i`.
//!
//! Then every iteration that reaches `continuing` had `v < b <= MAX`, so
//! `i` grows by one without wrapping: at most `MAX - MIN` iterations. The
//! mirror (`v > b`, `i = x - 1`) is counted too, and so is an unsigned
//! `i` halved or shifted right while `v > b` (tree reductions: `v >= 1`
//! there, so it strictly shrinks). Extra exits (`break`,
//! `return`, `break_if`) only end a loop sooner.

use std::ops::RangeInclusive;

use naga::{
    BinaryOperator, Block, Expression, Function, Handle, Literal, LocalVariable, Module, Scalar,
    ScalarKind, Statement, TypeInner, UnaryOperator,
};

/// Whether every loop of every function in `module` is counted, so the
/// module may be compiled without wgpu's loop bounding.
pub(crate) fn every_loop_counted(module: &Module) -> bool {
    let functions = module.functions.iter().map(|(_, f)| f);
    let entries = module.entry_points.iter().map(|e| &e.function);
    functions.chain(entries).all(|f| {
        let mut all = true;
        walk(&f.body, &mut |s| {
            if let Statement::Loop {
                body, continuing, ..
            } = s
            {
                all &= counted(module, f, body, continuing).is_some();
            }
        });
        all
    })
}

/// Calls `visit` on every statement of `block`, nested ones included
/// (the blocks of `if`, `switch`, loops and plain blocks).
pub(crate) fn walk<'a>(block: &'a Block, visit: &mut impl FnMut(&'a Statement)) {
    for s in block.iter() {
        visit(s);
        match s {
            Statement::Block(b) => walk(b, visit),
            Statement::If { accept, reject, .. } => {
                walk(accept, visit);
                walk(reject, visit);
            }
            Statement::Switch { cases, .. } => cases.iter().for_each(|c| walk(&c.body, visit)),
            Statement::Loop {
                body, continuing, ..
            } => {
                walk(body, visit);
                walk(continuing, visit);
            }
            _ => {}
        }
    }
}

/// Which way a counted loop's variable moves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
    Up,
    Down,
}

/// What the proof knows of a counted loop, for the index proof
/// (`indices.rs`): past its exit test (the body's `test`-th statement) and
/// in its `continuing` block, the load `v` of its variable satisfies
/// `v < bound` (up) or `v > bound` (down); `continuing`'s `stepped_at`-th
/// statement is the one store to the variable.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted {
    pub(crate) var: Handle<LocalVariable>,
    pub(crate) v: Handle<Expression>,
    pub(crate) bound: Handle<Expression>,
    pub(crate) step: Step,
    pub(crate) test: usize,
    pub(crate) stepped_at: usize,
}

/// A loop's exit test: its variable, the load the test reads, the bound,
/// the direction that keeps the loop going, and where the test is.
#[derive(Clone, Copy)]
struct Header {
    var: Handle<LocalVariable>,
    v: Handle<Expression>,
    bound: Handle<Expression>,
    step: Step,
    test: usize,
}

/// The loop whose blocks these are, if it is counted by the rules in the
/// module doc.
pub(crate) fn counted(
    module: &Module,
    f: &Function,
    body: &Block,
    continuing: &Block,
) -> Option<Counted> {
    let c = header(module, f, body)?;
    let stores: Vec<(usize, Handle<Expression>)> = (continuing.iter().enumerate())
        .filter_map(|(i, s)| match *s {
            Statement::Store { pointer, value } if local_of(f, pointer) == Some(c.var) => {
                Some((i, value))
            }
            _ => None,
        })
        .collect();
    let [(stepped_at, value)] = stores[..] else {
        return None;
    };
    let mut inside = Vec::new();
    emitted(body, &mut inside);
    emitted(continuing, &mut inside);
    let unsigned = unsigned(module, f, c.var);
    (steps(f, value, &c, &inside, unsigned)
        && writes(f, body, c.var) == 0
        && writes(f, continuing, c.var) == 1
        && !passed_to_a_call(f, &f.body, c.var))
    .then_some(Counted {
        var: c.var,
        v: c.v,
        bound: c.bound,
        step: c.step,
        test: c.test,
        stepped_at,
    })
}

/// The loop's exit test: its variable, the load the test reads, the bound
/// and the direction that keeps the loop going.
fn header(module: &Module, f: &Function, body: &Block) -> Option<Header> {
    let mut emitted = Vec::new();
    // Stores may come first (naga's SPIR-V front end writes a phi's
    // variable there); nothing that jumps, which could skip the test.
    let (test, statement) = body.iter().enumerate().find_map(|(i, s)| match s {
        Statement::Emit(range) => {
            emitted.extend(range.clone());
            None
        }
        Statement::Store { .. } => None,
        other => Some((i, other)),
    })?;
    let Statement::If {
        condition,
        accept,
        reject,
    } = statement
    else {
        return None;
    };
    let (v, bound, step) = if only_break(reject) {
        stays_in(f, *condition)?
    } else if only_break(accept) {
        leaves(f, *condition)?
    } else {
        return None;
    };
    let var = match f.expressions[v] {
        Expression::Load { pointer } => local_of(f, pointer)?,
        _ => return None,
    };
    (emitted.contains(&v) && integer(module, f, var)).then_some(Header {
        var,
        v,
        bound,
        step,
        test,
    })
}

/// `v < b`, `b > v` (up) or `v > b`, `b < v` (down): the condition under
/// which the loop goes on; `v` the operand that is a load, and `b`.
fn stays_in(
    f: &Function,
    condition: Handle<Expression>,
) -> Option<(Handle<Expression>, Handle<Expression>, Step)> {
    let Expression::Binary { op, left, right } = f.expressions[condition] else {
        return None;
    };
    match op {
        BinaryOperator::Less if is_load(f, left) => Some((left, right, Step::Up)),
        BinaryOperator::Greater if is_load(f, right) => Some((right, left, Step::Up)),
        BinaryOperator::Greater if is_load(f, left) => Some((left, right, Step::Down)),
        BinaryOperator::Less if is_load(f, right) => Some((right, left, Step::Down)),
        _ => None,
    }
}

/// The condition under which the loop breaks: `!(stays)`, `v >= b`
/// (`!(v < b)`), `b <= v`, or the mirrors.
fn leaves(
    f: &Function,
    condition: Handle<Expression>,
) -> Option<(Handle<Expression>, Handle<Expression>, Step)> {
    match f.expressions[condition] {
        Expression::Unary {
            op: UnaryOperator::LogicalNot,
            expr,
        } => stays_in(f, expr),
        Expression::Binary { op, left, right } => match op {
            BinaryOperator::GreaterEqual if is_load(f, left) => Some((left, right, Step::Up)),
            BinaryOperator::LessEqual if is_load(f, right) => Some((right, left, Step::Up)),
            BinaryOperator::LessEqual if is_load(f, left) => Some((left, right, Step::Down)),
            BinaryOperator::GreaterEqual if is_load(f, right) => Some((right, left, Step::Down)),
            _ => None,
        },
        _ => None,
    }
}

/// `value` is `x + 1` (up) or `x - 1`, `x / c`, `x >> c` (down; the last
/// two unsigned only, `c` a literal that shrinks `x`), `x` the header's load `v`
/// or another load of the variable evaluated in the loop (`inside`): it
/// changes only here, so such a load reads what `v` read.
fn steps(
    f: &Function,
    value: Handle<Expression>,
    c: &Header,
    inside: &[Handle<Expression>],
    unsigned: bool,
) -> bool {
    let Expression::Binary { op, left, right } = f.expressions[value] else {
        return false;
    };
    let (var, v, step) = (c.var, c.v, c.step);
    let reads_var = |e: Handle<Expression>| {
        e == v
            || (inside.contains(&e)
                && matches!(f.expressions[e], Expression::Load { pointer } if local_of(f, pointer) == Some(var)))
    };
    match (op, step) {
        (BinaryOperator::Add, Step::Up) => {
            (reads_var(left) && one(f, right)) || (one(f, left) && reads_var(right))
        }
        (BinaryOperator::Subtract, Step::Down) => reads_var(left) && one(f, right),
        // Unsigned `v > b` means `v >= 1`, where halving (or any shift)
        // strictly shrinks `v`; a signed `v` may be negative, where it
        // does not.
        (BinaryOperator::Divide, Step::Down) => {
            unsigned && reads_var(left) && literal_in(f, right, 2..=u64::MAX)
        }
        // WGSL masks a run-time shift amount to the bit width (`>> 32u`
        // on a `u32` read from a local is `>> 0u`): 1 to 31 only.
        (BinaryOperator::ShiftRight, Step::Down) => {
            unsigned && reads_var(left) && literal_in(f, right, 1..=31)
        }
        _ => false,
    }
}

/// An unsigned constant in `range`: a literal, or a load of a local that
/// a literal initializes and nothing writes (how the IR backend spells a
/// constant: `var v_lit: u32 = 1u; let v = v_lit;`).
fn literal_in(f: &Function, e: Handle<Expression>, range: RangeInclusive<u64>) -> bool {
    match f.expressions[constant(f, e)] {
        Expression::Literal(Literal::U32(x)) => range.contains(&u64::from(x)),
        Expression::Literal(Literal::U64(x)) => range.contains(&x),
        _ => false,
    }
}

/// What `e` always evaluates to when it reads a local that only its
/// initializer sets; `e` itself otherwise.
pub(crate) fn constant(f: &Function, e: Handle<Expression>) -> Handle<Expression> {
    let Expression::Load { pointer } = f.expressions[e] else {
        return e;
    };
    let Some(var) = local_of(f, pointer) else {
        return e;
    };
    match f.local_variables[var].init {
        Some(init) if writes(f, &f.body, var) == 0 && !passed_to_a_call(f, &f.body, var) => init,
        _ => e,
    }
}

/// Every expression `block` evaluates (nested blocks included).
fn emitted(block: &Block, out: &mut Vec<Handle<Expression>>) {
    walk(block, &mut |s| {
        if let Statement::Emit(range) = s {
            out.extend(range.clone());
        }
    });
}

fn one(f: &Function, e: Handle<Expression>) -> bool {
    matches!(
        f.expressions[constant(f, e)],
        Expression::Literal(Literal::U32(1) | Literal::I32(1) | Literal::U64(1) | Literal::I64(1))
    )
}

fn is_load(f: &Function, e: Handle<Expression>) -> bool {
    matches!(f.expressions[e], Expression::Load { .. })
}

fn only_break(block: &Block) -> bool {
    let mut rest = block.iter().filter(|s| !matches!(s, Statement::Emit(_)));
    matches!(rest.next(), Some(Statement::Break)) && rest.next().is_none()
}

pub(crate) fn local_of(f: &Function, pointer: Handle<Expression>) -> Option<Handle<LocalVariable>> {
    match f.expressions[pointer] {
        Expression::LocalVariable(var) => Some(var),
        _ => None,
    }
}

/// A scalar integer: the only pointers to it are the variable itself
/// (no element or member of it to point at), and it wraps at a bound.
fn integer(module: &Module, f: &Function, var: Handle<LocalVariable>) -> bool {
    matches!(
        module.types[f.local_variables[var].ty].inner,
        TypeInner::Scalar(Scalar {
            kind: ScalarKind::Uint | ScalarKind::Sint,
            ..
        })
    )
}

fn unsigned(module: &Module, f: &Function, var: Handle<LocalVariable>) -> bool {
    matches!(
        module.types[f.local_variables[var].ty].inner,
        TypeInner::Scalar(Scalar {
            kind: ScalarKind::Uint,
            ..
        })
    )
}

/// How many statements in `block` (nested ones included) store to `var`.
fn writes(f: &Function, block: &Block, var: Handle<LocalVariable>) -> usize {
    let mut n = 0;
    walk(block, &mut |s| {
        if let Statement::Store { pointer, .. } = s {
            n += usize::from(local_of(f, *pointer) == Some(var));
        }
    });
    n
}

/// Whether a call anywhere in `block` is given a pointer to `var` (the
/// callee could write it). Other statements that write through a pointer
/// (atomics, ray queries, cooperative stores, workgroup loads) take types
/// or address spaces a function's integer scalar does not have.
fn passed_to_a_call(f: &Function, block: &Block, var: Handle<LocalVariable>) -> bool {
    let mut passed = false;
    walk(block, &mut |s| {
        if let Statement::Call { arguments, .. } = s {
            passed |= arguments.iter().any(|a| local_of(f, *a) == Some(var));
        }
    });
    passed
}

#[cfg(test)]
#[path = "termination_tests.rs"]
mod tests;
