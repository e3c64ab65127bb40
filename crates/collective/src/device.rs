//! Calls whose data moves on the devices: ranks whose memory the others
//! can read (devices of one GPU sharing memory) put their input where the
//! others read it and combine on their own device; the host only agrees,
//! meets and judges.
//!
//! The engine runs such a call as: this rank's input status (its
//! [`Contribution`](crate::Contribution) says whether the input is ready
//! and trusted, no bytes needed), the opening exchange (the same verdict
//! as a host call: mismatch, poison, run), then per piece: [`DeviceData::fill`]
//! on every rank, a [`Round::Filled`](crate::Round::Filled) exchange (a
//! fill that failed poisons the call on every rank, as a failed input
//! does), [`DeviceData::combine`] on every rank, and, before the next
//! piece reuses the memory, a [`Round::Read`](crate::Round::Read)
//! exchange. The next call's opening is the last piece's read barrier: a
//! rank reaches it only after its own combine returned.
//!
//! **Buys:** the host moves no bytes: a 64 MiB all-reduce is two device
//! copies and a fold kernel per rank. **Doesn't buy:** overlap of pieces
//! (fill, combine and their barriers run one after the other), or ranks
//! whose devices cannot read each other's memory (the server decides which
//! calls go here, the same way on every rank).

use std::fmt;

use compute_runtime::ServerError;

/// The device half of one call on one rank (see the module doc). Called on
/// the rank's engine thread, one method at a time, in piece order; each
/// blocks until its device work has run.
pub trait DeviceData: Send + Sync + fmt::Debug {
    /// Pieces the call moves in (the same on every rank: a function of the
    /// call and the communicator).
    fn pieces(&self) -> usize;

    /// Puts this rank's input of piece `piece` where every rank reads it,
    /// and waits until it is there.
    fn fill(&self, piece: usize) -> Result<(), ServerError>;

    /// Combines every rank's piece `piece` into this rank's output, and
    /// waits until it has run.
    fn combine(&self, piece: usize) -> Result<(), ServerError>;

    /// The engine is done with the call, whatever its outcome (called once,
    /// last): its memory will not be read for it again.
    fn done(&self) {}
}
