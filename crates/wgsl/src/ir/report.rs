//! The report checks a `BoundsChecks::Reported` module runs before its
//! accesses: each counts an access outside its array (or a lane past its
//! vector's) in the invocation's private record, keeping the first, and
//! is left out where the index provably stays inside (`ranges.rs`). A
//! check is two selects, never a branch, so reporting leaves the kernel's
//! control flow as it is: when each check was an `if` calling a function
//! with atomics (8bd284b), NVIDIA's H100 gave the single-pass scan, whose
//! look-back loop runs subgroup operations that need the subgroup
//! converged, wrong sums under `Reported` only (`scan_policies`); that the
//! branches were the cause is the suspicion this form acts on, not yet
//! confirmed on a GPU. The record reaches the report slot where the
//! invocation ends: before each `return` and at the end of the entry point
//! (`Emitter::report_end`).

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
        if let Some(len) = known
            && self.ranges.within(i, len)
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
        self.note(array, &index, &len);
    }

    /// The branch-free check that `index < len`, noting a miss in the
    /// invocation's record.
    fn note(&mut self, array: u32, index: &str, len: &str) {
        self.line(&format!(
            "oob_first = select(oob_first, vec3<u32>({array}u, {index}, {len}), \
             {index} >= {len} && oob_count == 0u);"
        ));
        self.line(&format!(
            "oob_count = oob_count + select(0u, 1u, {index} >= {len});"
        ));
    }

    /// With reports on, where the invocation ends: its record into the
    /// report slot.
    pub(super) fn report_end(&mut self) {
        if self.reports {
            self.line("report_out_of_bounds();");
        }
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
        if self.ranges.within(i, u64::from(lanes)) {
            return;
        }
        self.note(REPORT_VECTOR_BIT, &index, &format!("{lanes}u"));
    }
}
