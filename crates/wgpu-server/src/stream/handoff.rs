//! Handing a held batch to whoever submits it once what holds it is done.
//!
//! A stream's batch held behind a collective cannot reach the queue until
//! the other ranks have answered; nothing on the calling thread may wait
//! for them. When the batch must go on anyway (another stream's work
//! depends on it, a `flush`, a collective's input copy), it is finished and
//! handed over as a [`HandOff`]; the collective applier (the one
//! [`HandOffs`] there is) submits it after the gate it was held behind, in
//! order with everything else it was given, and settles the gate the
//! stream's later work (and the work that follows it) is now held behind.

use std::sync::Arc;

use compute_runtime::{ServerError, StreamId};

use crate::stream::batch::FinishedBatch;
use crate::stream::gate::Gate;

/// What to do once a handed-off batch went to the queue: its submission,
/// or why the queue refused it.
pub(crate) type AfterSubmit =
    Box<dyn FnOnce(Result<wgpu::SubmissionIndex, Arc<ServerError>>) + Send>;

/// A batch handed over to be submitted once `after` is settled.
pub(crate) struct HandOff {
    /// What the batch comes after (settled before the hand-off is dealt
    /// with: the receiver deals with things in order).
    pub after: Arc<Gate>,
    pub batch: FinishedBatch,
    pub stream: StreamId,
    /// Settled once the batch is on the queue (or refused): what the
    /// stream's later work is held behind.
    pub submitted: Arc<Gate>,
    /// Told the submission (a collective's staged input is provided then).
    pub then: Option<AfterSubmit>,
}

impl std::fmt::Debug for HandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandOff")
            .field("stream", &self.stream)
            .field("then", &self.then.is_some())
            .finish_non_exhaustive()
    }
}

/// Who takes handed-off batches and deals with them in order.
pub(crate) trait HandOffs: Send + Sync + std::fmt::Debug {
    /// Takes `h`; it is submitted after everything taken before it.
    fn hand_off(&self, h: HandOff) -> Result<(), ServerError>;

    /// A gate settled once everything taken so far has been dealt with.
    fn mark(&self) -> Result<Arc<Gate>, ServerError>;
}
