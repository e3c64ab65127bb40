//! [`InternalFault`]: what the server found wrong with its own state.

use crate::StorageId;

/// A fault inside the server: a bug, or a state no caller input can
/// produce, never the caller's mistake (those are the other
/// [`ServerError`](crate::ServerError) variants). Reported rather than
/// panicking, so the caller's process survives it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InternalFault {
    /// A page a live slice lies on has no buffer.
    #[error("page {page} has no buffer")]
    PageGone {
        /// The page.
        page: StorageId,
    },
    /// A batch parked to be submitted later (a profile window's end) has
    /// no record of its submission.
    #[error("parked batch {number} has no submission")]
    ParkedBatchLost {
        /// The batch's number on its stream.
        number: u64,
    },
}
