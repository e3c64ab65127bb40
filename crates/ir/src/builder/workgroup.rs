//! Reductions and scans across a workgroup for [`KernelBuilder`]: the
//! shared-memory tree with its barriers, written once here instead of in
//! every layernorm, softmax and attention kernel.
//!
//! Both are built from the kernel's own operations (a workgroup array of
//! one element per invocation, steps unrolled for the workgroup size the
//! builder knows, a barrier after each), so they run on every device and
//! in the interpreter alike. They hold barriers: call them where every
//! invocation of the workgroup does (the builder refuses the rest,
//! `uniformity.rs`).
//!
//! Where the device has subgroups, reductions of i32, u32 and f32 use
//! them instead (one subgroup operation per subgroup, the partials through
//! workgroup memory, one more across them: three barriers whatever the
//! workgroup size, where the tree takes one per halving). The builder does
//! not know the device, so by default a reduction holds both forms in a
//! [`Stmt::IfFeature`](crate::Stmt::IfFeature) and the compiler keeps the
//! one the device can run (the interpreter: `interp::run` stands for a
//! device with subgroups, `interp::run_without_subgroups` for one
//! without). [`with_subgroups`](KernelBuilder::with_subgroups) keeps only
//! the subgroup form (the kernel then needs `SUBGROUP`),
//! [`without_subgroups`](KernelBuilder::without_subgroups) only the tree.
//! A float sum's rounding follows the form the device runs. Scans keep the
//! tree.

use compute_runtime::ReduceOp;

use crate::{Feature, SubgroupOp};

/// Which form a builder's workgroup reductions take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SubgroupUse {
    /// Both, the compiler keeping the one the device runs.
    PerDevice,
    /// Subgroup operations only (`with_subgroups`).
    Always,
    /// The shared-memory tree only (`without_subgroups`).
    Never,
}

use super::{KernelBuilder, Val};
use crate::{IrError, Type};

impl KernelBuilder {
    /// `op` over `value` of every invocation of the workgroup, the same
    /// result in each (a uniform value: control flow may depend on it).
    /// `value` is a scalar of a numeric type; `Mean` divides the sum by the
    /// workgroup's invocations (truncating for integers).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::{ReduceOp, pod};
    ///
    /// // out[i] = max over the workgroup of x[i].
    /// let k = KernelBuilder::new("wg_max", [8, 1, 1]);
    /// let (x, out) = (k.input(Scalar::F32), k.output(Scalar::F32));
    /// let i = k.x(k.global_id());
    /// let m = k.workgroup_reduce(ReduceOp::Max, k.load(x, i));
    /// k.store(out, i, m);
    /// let k = k.build()?;
    /// let xs = [3.0f32, -1.0, 7.5, 0.0, 2.0, 7.0, -8.0, 1.0];
    /// let mut bufs = vec![pod::to_bytes(&xs), vec![0; 32]];
    /// interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    /// assert_eq!(pod::from_bytes::<f32>(&bufs[1]).unwrap(), [7.5; 8]);
    /// # Ok::<(), compute_ir::IrError>(())
    /// ```
    #[track_caller]
    pub fn workgroup_reduce(&self, op: ReduceOp, value: Val) -> Val {
        let Some(n) = self.cooperate("workgroup_reduce", value) else {
            return value;
        };
        let subgroup_types = [crate::Scalar::I32, crate::Scalar::U32, crate::Scalar::F32];
        let form = if subgroup_types.contains(&value.ty.scalar) {
            self.with(|s| s.subgroups)
        } else {
            SubgroupUse::Never
        };
        let all = match form {
            SubgroupUse::Always => self.subgroup_reduce(op, value, n),
            SubgroupUse::Never => self.tree_reduce(op, value, n),
            SubgroupUse::PerDevice => {
                // Started from a literal: a uniform start keeps the result
                // uniform (`uniformity.rs` never un-varies a variable).
                let all = self.var(self.cast(self.u32(0), value.ty.scalar));
                self.if_feature(
                    Feature::Subgroups,
                    |k| k.set(all, k.subgroup_reduce(op, value, n)),
                    |k| k.set(all, k.tree_reduce(op, value, n)),
                );
                self.get(all)
            }
        };
        self.mean_or(op, all, n, value)
    }

    /// `workgroup_reduce` over the shared-memory tree (`op` not divided
    /// for `Mean`).
    fn tree_reduce(&self, op: ReduceOp, value: Val, n: u32) -> Val {
        let shared = self.shared(value.ty.scalar, n);
        let lid = self.local_index();
        self.store(shared, lid, value);
        self.barrier();
        // Halve the live range each step: invocation `i < half` folds in
        // element `i + half` when it exists.
        let mut live = n;
        while live > 1 {
            let half = live.div_ceil(2);
            let partner = self.add(lid, half);
            self.if_(self.lt(lid, live - half), |k| {
                let v = self.combine(op, k.load(shared, lid), k.load(shared, partner));
                k.store(shared, lid, v);
            });
            self.barrier();
            live = half;
        }
        let all = self.uniform_load(shared, 0u32);
        // Before a later call (a loop) writes the array again.
        self.barrier();
        all
    }

    /// `all` divided by the `n` invocations for `Mean`, else `all`.
    fn mean_or(&self, op: ReduceOp, all: Val, n: u32, value: Val) -> Val {
        if op == ReduceOp::Mean {
            self.div(all, self.cast(self.u32(n), value.ty.scalar))
        } else {
            all
        }
    }

    /// The inclusive scan of `value` across the workgroup in
    /// `local_invocation_index` order: invocation `i` gets `op` over the
    /// values of invocations `0..=i` (`Sum`, `Prod`, `Min` or `Max`).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::{ReduceOp, pod};
    ///
    /// let k = KernelBuilder::new("wg_scan", [6, 1, 1]);
    /// let (x, out) = (k.input(Scalar::U32), k.output(Scalar::U32));
    /// let i = k.x(k.global_id());
    /// k.store(out, i, k.workgroup_scan(ReduceOp::Sum, k.load(x, i)));
    /// let k = k.build()?;
    /// let mut bufs = vec![pod::to_bytes(&[1u32, 2, 3, 4, 5, 6]), vec![0; 24]];
    /// interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    /// assert_eq!(pod::from_bytes::<u32>(&bufs[1]).unwrap(), [1, 3, 6, 10, 15, 21]);
    /// # Ok::<(), compute_ir::IrError>(())
    /// ```
    #[track_caller]
    pub fn workgroup_scan(&self, op: ReduceOp, value: Val) -> Val {
        if op == ReduceOp::Mean {
            self.fail(IrError::structure(
                "workgroup_scan",
                "a scan of means is not an operation (Sum, Prod, Min or Max)",
            ));
            return value;
        }
        let Some(n) = self.cooperate("workgroup_scan", value) else {
            return value;
        };
        let shared = self.shared(value.ty.scalar, n);
        let lid = self.local_index();
        self.store(shared, lid, value);
        self.barrier();
        // Hillis-Steele: after the step of `offset`, element `i` holds `op`
        // over `i - 2 * offset + 1 ..= i`.
        let acc = self.var(value);
        let mut offset = 1;
        while offset < n {
            let reaches = self.ge(lid, offset);
            self.if_(reaches, |k| {
                let v = self.combine(op, k.load(shared, k.sub(lid, offset)), k.get(acc));
                k.set(acc, v);
            });
            self.barrier();
            self.store(shared, lid, self.get(acc));
            self.barrier();
            offset *= 2;
        }
        self.get(acc)
    }

    /// The workgroup's invocation count, or `None` (with the error kept)
    /// when `value` is not a numeric scalar.
    #[track_caller]
    fn cooperate(&self, op: &'static str, value: Val) -> Option<u32> {
        if value.ty.lanes != 1 || value.ty == Type::BOOL {
            self.fail(IrError::ty(
                op,
                format!("a numeric scalar is reduced, not {}", value.ty),
            ));
            return None;
        }
        Some(self.with(|s| s.def.workgroup_size.iter().product()))
    }

    /// Workgroup reductions of this kernel always use subgroup operations
    /// where the element type has them (i32, u32, f32; others keep the
    /// shared-memory tree), instead of only on devices that have them. The
    /// kernel then needs `SUBGROUP`: a device without it refuses it as
    /// `Unsupported { what: "subgroups" }`.
    pub fn with_subgroups(self) -> Self {
        self.with(|s| s.subgroups = SubgroupUse::Always);
        self
    }

    /// Workgroup reductions of this kernel always take the shared-memory
    /// tree, on every device (the same rounding of a float sum everywhere).
    pub fn without_subgroups(self) -> Self {
        self.with(|s| s.subgroups = SubgroupUse::Never);
        self
    }

    /// `workgroup_reduce` through subgroup operations: each subgroup's
    /// partial into workgroup memory, every subgroup folding the partials
    /// (lane `j` takes partials `j`, `j + size`, ... in a loop whose trip
    /// count is uniform), one more subgroup operation, and the total made
    /// uniform across the workgroup through a uniform load. `n` is the
    /// workgroup's invocation count, which bounds the subgroups.
    fn subgroup_reduce(&self, op: ReduceOp, value: Val, n: u32) -> Val {
        let sub = match op {
            ReduceOp::Sum | ReduceOp::Mean => SubgroupOp::Add,
            ReduceOp::Prod => SubgroupOp::Mul,
            ReduceOp::Min => SubgroupOp::Min,
            ReduceOp::Max => SubgroupOp::Max,
        };
        // Partials at 0..num_subgroups (at most `n`), the total at `n`.
        let shared = self.shared(value.ty.scalar, n + 1);
        let lane = self.subgroup_invocation_id();
        let part = self.subgroup(sub, value);
        let first = self.eq(lane, 0u32);
        self.if_(first, |k| k.store(shared, k.subgroup_id(), part));
        self.barrier();
        let count = self.num_subgroups();
        let size = self.subgroup_size();
        let acc = self.var(self.identity(op, value.ty.scalar, shared));
        self.for_range_step(0u32, count, size, |k, base| {
            let j = k.add(base, lane);
            // Read only partials (index below `n`, never the total's slot
            // lane 0 writes below); lanes past the last partial keep `acc`.
            let x = k.load(shared, k.min(j, n - 1));
            let folded = self.combine(op, k.get(acc), x);
            k.set(acc, k.select(k.lt(j, count), folded, k.get(acc)));
        });
        let total = self.subgroup(sub, self.get(acc));
        self.if_(self.eq(self.local_index(), 0u32), |k| {
            k.store(shared, n, total)
        });
        let all = self.uniform_load(shared, n);
        // Before a later call (a loop) writes the array again.
        self.barrier();
        all
    }

    /// What `op` starts from in a subgroup's fold: the sum's and product's
    /// identities (`-0.0` for floats, so a sum of negative zeros stays one),
    /// and for min and max a partial itself (folding one twice changes
    /// neither).
    fn identity(&self, op: ReduceOp, scalar: crate::Scalar, shared: super::Shared) -> Val {
        match op {
            ReduceOp::Sum | ReduceOp::Mean => {
                let zero = self.cast(self.u32(0), scalar);
                if scalar == crate::Scalar::F32 {
                    self.neg(zero)
                } else {
                    zero
                }
            }
            ReduceOp::Prod => self.cast(self.u32(1), scalar),
            ReduceOp::Min | ReduceOp::Max => self.load(shared, 0u32),
        }
    }

    fn combine(&self, op: ReduceOp, a: Val, b: Val) -> Val {
        match op {
            ReduceOp::Sum | ReduceOp::Mean => self.add(a, b),
            ReduceOp::Prod => self.mul(a, b),
            ReduceOp::Min => self.min(a, b),
            ReduceOp::Max => self.max(a, b),
        }
    }
}
