//! `Stmt::For` as WGSL. A `u32` loop whose step is a constant of at least
//! one (a matmul's k tiles, `i += 8`) is emitted as a count of its trips,
//! a loop of step one over the trip number:
//!
//! ```wgsl
//! let trips = select(0u, (end - start - 1u) / step + 1u, start < end);
//! for (var t = 0u; t < trips; t = t + 1u) { let i = start + t * step; ... }
//! ```
//!
//! which is the loop `for (i = start; i < end; i += step)` wherever that
//! one's index does not wrap past `u32::MAX` (the interpreter's loop ends
//! there too). Written with its own step, such a loop is one the server's
//! termination proof cannot count (`i + 8` wraps when `end` is near the
//! maximum), so its module kept wgpu's hidden loop counter, which stops
//! the driver unrolling anything in it: the register-tiled matmul ran at
//! 0.745x its unchecked handwritten twin on an H100 (docs/benchmarks.md).
//! Every other loop is emitted as written.

use compute_ir::Type;
use compute_ir::ir::{Stmt, ValueId};

use super::emit::{Emitter, v};
use super::literal;

impl Emitter<'_> {
    pub(super) fn for_loop(
        &mut self,
        index: ValueId,
        (start, end, step): (ValueId, ValueId, ValueId),
        body: &[Stmt],
    ) {
        let t = literal::ty(self.ty_of(index));
        let i = format!("loop{}", index.0);
        let counted_step =
            self.ty_of(index) == Type::U32 && self.ranges.constant(step).is_some_and(|s| s >= 1);
        if counted_step {
            let (start, end, step) = (v(start), v(end), v(step));
            self.line(&format!(
                "let trips{}: u32 = select(0u, ({end} - {start} - 1u) / {step} + 1u, {start} < {end});",
                index.0
            ));
            self.line(&format!(
                "for (var {i}: u32 = 0u; {i} < trips{}; {i} = {i} + 1u) {{",
                index.0
            ));
            self.indent += 1;
            self.line(&format!("let {}: u32 = {start} + {i} * {step};", v(index)));
        } else {
            self.line(&format!(
                "for (var {i}: {t} = {}; {i} < {}; {i} = {i} + {}) {{",
                v(start),
                v(end),
                v(step)
            ));
            self.indent += 1;
            self.line(&format!("let {}: {t} = {i};", v(index)));
        }
        self.block(body);
        self.indent -= 1;
        self.line("}");
    }
}
