//! The ranges never call an index in range that is not: random index
//! expressions over a loop counter, thread ids, literals and a scalar
//! argument, each used to store into a per-invocation array; wherever the
//! ranges say the index stays inside, the interpreter (which refuses any
//! access outside, and shares no code with `ranges.rs`) must run the kernel
//! over every thread and pass without an out-of-bounds error.

use std::cell::Cell;

use compute_ir::{KernelBuilder, Lit, RunError, Scalar, Type, Val, interp};
use compute_testkit::Rng;

use super::Ranges;

const LEN: u32 = 24;

/// A random `u32` expression of depth at most `depth`.
fn expr(k: &KernelBuilder, r: &mut Rng, i: Val, arg: Val, depth: u32) -> Val {
    if depth == 0 || r.below(4) == 0 {
        return match r.below(6) {
            0 | 1 => i,
            2 => k.x(k.local_id()),
            3 => k.local_index(),
            4 => k.u32(r.below(40)),
            _ => arg,
        };
    }
    let (a, b) = (expr(k, r, i, arg, depth - 1), expr(k, r, i, arg, depth - 1));
    match r.below(10) {
        0 => k.add(a, b),
        1 => k.sub(a, b),
        2 => k.mul(a, b),
        3 => k.div(a, b),
        4 => k.rem(a, b),
        5 => k.and(a, b),
        6 => k.shr(a, k.u32(r.below(4))),
        7 => k.min(a, b),
        8 => k.max(a, b),
        _ => k.select(k.lt(k.local_index(), 3u32), a, b),
    }
}

#[test]
fn the_ranges_never_skip_a_check_the_interpreter_finds_out_of_bounds() {
    let mut r = Rng::spread(41);
    let (mut proven, mut refused) = (0, 0);
    for case in 0..3000 {
        let k = KernelBuilder::new("ranges", [4, 2, 1]);
        let arg = k.scalar_arg(Scalar::U32);
        let tile = k.local_array(Type::U32, LEN);
        let (start, end, step) = (r.below(6), r.below(30), 1 + r.below(3));
        let index = Cell::new(None);
        k.for_range_step(start, end, step, |k, i| {
            let at = expr(k, &mut r, i, arg, 3);
            index.set(Some(at));
            k.store(tile, at, 1u32);
        });
        let Ok(kernel) = k.build() else {
            continue; // e.g. a division the builder refuses by type
        };
        let Some(at) = index.get() else {
            continue; // an empty range: no body built
        };
        if !Ranges::of(kernel.def()).within(at.id, u64::from(LEN)) {
            refused += 1;
            continue;
        }
        proven += 1;
        for value in [0, 1, 7, 1000, u32::MAX] {
            let scalars = kernel.pack_scalars(&[Lit::U32(value)]).expect("u32");
            match interp::run(&kernel, [1, 1, 1], &mut [], &scalars) {
                Ok(()) => {}
                Err(RunError::OutOfBounds { index, len, .. }) => panic!(
                    "case {case}: the ranges said in range, the interpreter found index \
                     {index} of {len} (argument {value})"
                ),
                Err(e) => panic!("case {case}: {e}"),
            }
        }
    }
    // Both answers are exercised.
    assert!(
        proven > 300 && refused > 300,
        "proven {proven}, refused {refused}"
    );
}
