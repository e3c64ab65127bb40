//! Control flow and barriers for [`KernelBuilder`]: each closure body
//! becomes a block of its own, checked as it is built (see the parent
//! module).

use super::{KernelBuilder, Operand, Val};
use crate::ir::{Barrier, Stmt};

impl KernelBuilder {
    /// `if cond { then }`.
    #[track_caller]
    pub fn if_(&self, cond: impl Operand, then: impl FnOnce(&Self)) {
        let cond = self.operand(cond, Some(crate::Type::BOOL));
        let then = self.block(then);
        self.push(Stmt::If {
            cond: cond.id,
            then,
            otherwise: Vec::new(),
        });
    }

    /// `if cond { then } else { otherwise }`.
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // out[i] = a[i] >= 0 ? a[i] : -a[i]
    /// let k = KernelBuilder::new("abs", [4, 1, 1]);
    /// let (a, out) = (k.input(Scalar::I32), k.output(Scalar::I32));
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let v = k.load(a, i);
    /// let zero = k.i32(0);
    /// let positive = k.ge(v, zero);
    /// k.if_else(
    ///     positive,
    ///     |k| k.store(out, i, v),
    ///     |k| {
    ///         let n = k.neg(v);
    ///         k.store(out, i, n);
    ///     },
    /// );
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[-2i32, 3, -4, 0]), vec![0; 16]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<i32>(&buffers[1])?, [2, 3, 4, 0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn if_else(
        &self,
        cond: impl Operand,
        then: impl FnOnce(&Self),
        otherwise: impl FnOnce(&Self),
    ) {
        let cond = self.operand(cond, Some(crate::Type::BOOL));
        let then = self.block(then);
        let otherwise = self.block(otherwise);
        self.push(Stmt::If {
            cond: cond.id,
            then,
            otherwise,
        });
    }

    /// `then` where the device the kernel is compiled for has `feature`,
    /// `otherwise` where it lacks it ([`Stmt::IfFeature`]: chosen at
    /// compile time, so a barrier in either is where the call is). Values
    /// made in a branch stay in it; pass results out through a
    /// [`var`](Self::var) both branches [`set`](Self::set).
    #[track_caller]
    pub fn if_feature(
        &self,
        feature: crate::Feature,
        then: impl FnOnce(&Self),
        otherwise: impl FnOnce(&Self),
    ) {
        let then = self.block(then);
        let otherwise = self.block(otherwise);
        self.push(Stmt::IfFeature {
            feature,
            then,
            otherwise,
        });
    }

    /// `for (i = start; i < end; i += 1) { body(i) }`, typed as
    /// [`for_range_step`](Self::for_range_step) types it: literals alone
    /// give a `u32` index.
    #[track_caller]
    pub fn for_range(&self, start: impl Operand, end: impl Operand, body: impl FnOnce(&Self, Val)) {
        self.for_range_step(start, end, 1, body);
    }

    /// `for (i = start; i < end; i += step) { body(i) }`.
    #[track_caller]
    pub fn for_range_step(
        &self,
        start: impl Operand,
        end: impl Operand,
        step: impl Operand,
        body: impl FnOnce(&Self, Val),
    ) {
        // Integer literals alone are `u32`s here, the usual index type.
        let like = start
            .as_val()
            .or(end.as_val())
            .map_or(crate::Type::U32, |v| v.ty);
        let (start, end) = (
            self.operand(start, Some(like)),
            self.operand(end, Some(like)),
        );
        let step = self.operand(step, Some(start.ty));
        let index = Val {
            id: self.fresh(start.ty),
            ty: start.ty,
        };
        let body = self.block(|k| body(k, index));
        self.push(Stmt::For {
            index: index.id,
            start: start.id,
            end: end.id,
            step: step.id,
            body,
        });
    }

    /// `loop { body }`; leave it with [`break_`](Self::break_).
    pub fn loop_(&self, body: impl FnOnce(&Self)) {
        let body = self.block(body);
        self.push(Stmt::Loop(body));
    }
    /// `break`.
    pub fn break_(&self) {
        self.push(Stmt::Break);
    }
    /// `continue`.
    pub fn continue_(&self) {
        self.push(Stmt::Continue);
    }
    /// `return`: ends this invocation.
    pub fn ret(&self) {
        self.push(Stmt::Return);
    }
    /// `workgroupBarrier()`.
    pub fn barrier(&self) {
        self.push(Stmt::Barrier(Barrier::Workgroup));
    }
    /// `storageBarrier()`.
    pub fn storage_barrier(&self) {
        self.push(Stmt::Barrier(Barrier::Storage));
    }
}
