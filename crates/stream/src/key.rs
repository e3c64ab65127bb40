//! The right to make bytes trusted again.
//!
//! Marking bytes untrusted is open to anyone who can reach a server's
//! scheduler (a failure only ever narrows what is trusted). Restoring
//! trust is not: only the server that wrote every byte of a slice (a full
//! host write, a collective's result) may say so. That right is a
//! [`TrustKey`]: made only here, handed out once with the scheduler it
//! opens ([`SchedulerMultiStream::new`](crate::SchedulerMultiStream::new)),
//! and checked by every call that clears poison
//! ([`write_scope_restoring`](crate::write_scope_restoring),
//! [`TrustRegistry::restore`](crate::TrustRegistry::restore)). A server
//! keeps its key in a private field, so a crate holding `&mut` to the
//! server through the public [`WriteScoped`](crate::WriteScoped) trait
//! still cannot trust a poisoned slice again.

use std::sync::atomic::{AtomicU64, Ordering};

use compute_runtime::ServerError;

/// Scheduler ids are unique in the process, so one server's key never
/// opens another's registry.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The capability to restore trust on one scheduler. Not constructible
/// outside this crate; `Clone` only lets its holder share it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustKey {
    owner: u64,
}

impl TrustKey {
    /// A key for a new scheduler, with its id.
    pub(crate) fn mint() -> Self {
        Self {
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The id of the scheduler it opens.
    pub(crate) fn owner(&self) -> u64 {
        self.owner
    }

    /// `Ok` when this key opens scheduler `owner`, else
    /// [`ServerError::ForeignTrustKey`].
    pub(crate) fn check(&self, owner: u64) -> Result<(), ServerError> {
        if self.owner == owner {
            Ok(())
        } else {
            Err(ServerError::ForeignTrustKey {
                key: self.owner,
                owner,
            })
        }
    }
}
