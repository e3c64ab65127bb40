//! Why a kernel was refused, and why a run of the interpreter stopped.

/// A kernel the validator (or the builder, which runs the same checks as it
/// goes) refuses. The message names the operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IrError {
    /// Operand types that do not fit the operation.
    #[error("type error in `{op}`: {reason}")]
    Type {
        /// The operation, as the builder method is named.
        op: &'static str,
        /// What did not fit.
        reason: String,
    },
    /// A value, variable or array used where it is not defined or allowed
    /// (out of scope, `break` outside a loop, store to a read-only buffer...).
    #[error("invalid `{op}`: {reason}")]
    Structure {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// An error of the operation built at `at` (`file:line:column` of the
    /// caller of the [`KernelBuilder`](crate::KernelBuilder) method).
    #[error("{error} (built at {at})")]
    Built {
        /// Where in the caller's source.
        at: String,
        /// The error.
        error: Box<IrError>,
    },
}

impl IrError {
    pub(crate) fn ty(op: &'static str, reason: impl Into<String>) -> Self {
        IrError::Type {
            op,
            reason: reason.into(),
        }
    }
    pub(crate) fn structure(op: &'static str, reason: impl Into<String>) -> Self {
        IrError::Structure {
            op,
            reason: reason.into(),
        }
    }

    /// The operation the error names.
    pub fn op(&self) -> &'static str {
        match self {
            IrError::Type { op, .. } | IrError::Structure { op, .. } => op,
            IrError::Built { error, .. } => error.op(),
        }
    }

    /// The error itself, without where it was built.
    pub fn inner(&self) -> &IrError {
        match self {
            IrError::Built { error, .. } => error.inner(),
            other => other,
        }
    }
}

/// A kernel or its arguments refused by the IR, as the server's error (an
/// invalid argument), so code returning `ServerError` can use `?` on
/// [`KernelBuilder::build`](crate::KernelBuilder::build) and
/// [`Kernel::pack_scalars`](crate::Kernel::pack_scalars).
impl From<IrError> for compute_runtime::ServerError {
    fn from(e: IrError) -> Self {
        compute_runtime::ServerError::InvalidArgument {
            reason: format!("kernel IR: {e}"),
        }
    }
}

/// Why the interpreter stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The host buffers or arguments do not match the kernel's interface.
    #[error("interface mismatch: {0}")]
    Interface(String),
    /// An access outside its array (the GPU's result would be
    /// implementation-defined, so the oracle refuses).
    #[error("`{op}` out of bounds: index {index} of an array of {len}")]
    OutOfBounds {
        /// The operation.
        op: &'static str,
        /// The index.
        index: i64,
        /// The array's length.
        len: u64,
    },
    /// Some invocations of a workgroup reached a barrier while others ended
    /// or reached another one: the barrier is not in uniform control flow.
    #[error("barrier in non-uniform control flow (workgroup {workgroup:?})")]
    NonUniformBarrier {
        /// The workgroup.
        workgroup: [u32; 3],
    },
    /// Some live invocations of a subgroup reached a subgroup operation
    /// while others reached another one or a barrier: the operation is not
    /// in subgroup-uniform control flow. (Invocations that have ended are
    /// inactive and do not take part.)
    #[error(
        "subgroup operation in non-uniform control flow (workgroup {workgroup:?}, subgroup {subgroup})"
    )]
    NonUniformSubgroup {
        /// The workgroup.
        workgroup: [u32; 3],
        /// The subgroup's index in the workgroup.
        subgroup: u32,
    },
    /// A shuffle or broadcast read an invocation that is not an active one
    /// of the subgroup (WGSL leaves the result indeterminate), or a shuffle
    /// whose mask or delta must be the same on every invocation was not.
    #[error("`{op}` in workgroup {workgroup:?}, subgroup {subgroup}: {problem}")]
    SubgroupLane {
        /// The operation.
        op: &'static str,
        /// The workgroup.
        workgroup: [u32; 3],
        /// The subgroup's index in the workgroup.
        subgroup: u32,
        /// What was wrong.
        problem: String,
    },
    /// A loop ran past the interpreter's step budget.
    #[error("step budget exhausted (an endless loop?)")]
    StepBudget,
}
