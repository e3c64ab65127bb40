//! # compute-stream
//!
//! Many logical streams over the device's one queue, and the bookkeeping that
//! keeps them correct: who last touched which page, which bytes can be
//! trusted, and which failures are still unreported.
//!
//! **Owns:** the order in which streams' pending work reaches the queue
//! ([`SchedulerMultiStream`]), the trust state of every managed slice
//! ([`TrustRegistry`]; poisoned by the write scopes, trusted again only
//! with the scheduler's [`TrustKey`], forgotten when released handles are
//! drained; read by everyone else), and the write-scope protocol
//! ([`WriteScoped`], [`write_scope`], [`write_scope_restoring`]) every
//! buffer-writing server operation runs in.
//!
//! **Leaves to the backend** ([`SchedulerStreamBackend`]): what a stream's
//! pending work *is* (a wgpu command encoder, for the wgpu server) and how it
//! is submitted. **Leaves to the server:** what a capture window records
//! ([`WriteScoped::Capture`]); graph capture is `compute-graph`'s, which this
//! crate does not depend on. Depends on `compute-runtime` only and never
//! names a GPU type, so its ordering rules are tested here against a model,
//! without a device.

mod key;
mod late;
mod late_verdict;
mod scheduler;
mod scope;
mod trust;

pub use key::TrustKey;
pub use late::{DependOutcome, LateAudit, LateFaults, Reports};
pub use scheduler::{
    Access, BatchFailure, MAX_IDLE_STREAMS, SchedulerMultiStream, SchedulerStreamBackend,
    Submitted, Urgency,
};
pub use scope::{
    WriteScoped, settle_batch_failures, write_scope, write_scope_ids, write_scope_restoring,
};
pub use trust::TrustRegistry;
