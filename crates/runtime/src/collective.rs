//! Vocabulary of the collective operations.

/// How a reducing collective combines the ranks' values, element-wise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// Sum over ranks.
    Sum,
    /// Product over ranks.
    Prod,
    /// Largest value.
    Max,
    /// Smallest value.
    Min,
    /// Sum divided by the number of ranks.
    Mean,
}

/// What later work on the stream waits for after a collective is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ComputeWait {
    /// Later launches on the stream see the collective's result.
    #[default]
    Wait,
    /// The caller calls `sync_collective` before using the result.
    Overlap,
}
