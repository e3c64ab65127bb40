//! The report checks a `BoundsChecks::Reported` module runs before its
//! accesses: each records the first access outside its array (or a lane
//! past its vector's) in the report slot, and is left out where the index
//! provably stays inside (`ranges.rs`).

use compute_ir::Type;
use compute_ir::ir::{ArrayRef, ValueId};

use super::emit::{Emitter, v};
use crate::{REPORT_LOCAL_BIT, REPORT_SHARED_BIT, REPORT_VECTOR_BIT};

impl Emitter<'_> {
    /// With reports on, the check before an access of `a[i]`.
    pub(super) fn bounds(&mut self, a: ArrayRef, i: ValueId) {
        if !self.reports {
            return;
        }
        let index = if self.ty_of(i) == Type::U32 {
            v(i)
        } else {
            format!("u32({})", v(i))
        };
        let known = match a {
            ArrayRef::Global(_) => None,
            ArrayRef::Shared(s) => Some(u64::from(self.def.shared[s as usize].len)),
            ArrayRef::Local(l) => Some(u64::from(self.def.locals[l as usize].len)),
        };
        if let (Some(len), Some(r)) = (known, &self.ranges)
            && r.within(i, len)
        {
            return;
        }
        let (array, len) = match a {
            ArrayRef::Global(b) => (b, format!("arrayLength(&b{b})")),
            ArrayRef::Shared(s) => (
                s | REPORT_SHARED_BIT,
                format!("{}u", self.def.shared[s as usize].len),
            ),
            ArrayRef::Local(l) => (
                l | REPORT_LOCAL_BIT,
                format!("{}u", self.def.locals[l as usize].len),
            ),
        };
        self.line(&format!(
            "if {index} >= {len} {{ report_out_of_bounds({array}u, {index}, {len}); }}"
        ));
    }

    /// Under reports, a run-time lane index past its vector's lanes is
    /// recorded as an out-of-bounds access (its "array" the vector).
    pub(super) fn lane_bounds(&mut self, x: ValueId, i: ValueId) {
        if !self.reports {
            return;
        }
        let index = if self.ty_of(i) == Type::U32 {
            v(i)
        } else {
            format!("u32({})", v(i))
        };
        let lanes = self.ty_of(x).lanes;
        if let Some(r) = &self.ranges
            && r.within(i, u64::from(lanes))
        {
            return;
        }
        self.line(&format!(
            "if {index} >= {lanes}u {{ report_out_of_bounds({REPORT_VECTOR_BIT}u, {index}, {lanes}u); }}"
        ));
    }
}
