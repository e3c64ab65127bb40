//! Which managed slices hold bytes that can be trusted.
//!
//! Only the exceptions are stored: a slice is trusted unless it is in the
//! map, so the common case (nothing failed) costs one hash lookup per
//! `check`d binding and nothing on the success path of a write. A failed
//! write poisons its whole write set; a later successful *full* overwrite of a
//! slice clears it, because only then is every byte known again. A
//! successful partial overwrite does not. Only the holder of the
//! scheduler's [`TrustKey`] may restore a slice.

use std::sync::Arc;

use compute_runtime::{MemoryId, ServerError};

use crate::{LateFaults, TrustKey};
use hashbrown::HashMap;

/// Poisoned slices and the error that poisoned each: those poisoned on the
/// server's thread, and the late verdicts of the GPU ([`LateFaults`]).
#[derive(Debug)]
pub struct TrustRegistry {
    poisoned: HashMap<MemoryId, Arc<ServerError>>,
    /// Slices whose bytes are about to be replaced by work still to come
    /// (an `Overlap` collective's result, written by `sync_collective`):
    /// untrusted until it has, whatever else is on record.
    pending: HashMap<MemoryId, Arc<ServerError>>,
    late: Arc<LateFaults>,
    /// The scheduler whose key may restore trust here.
    owner: u64,
}

impl TrustRegistry {
    /// The registry of the scheduler `owner` (see [`TrustKey`]).
    pub(crate) fn new(owner: u64, late: Arc<LateFaults>) -> Self {
        Self {
            poisoned: HashMap::new(),
            pending: HashMap::new(),
            late,
            owner,
        }
    }

    /// Marks `memory` untrusted because of `cause`. The first cause wins: it
    /// is the one that made the bytes wrong, a late verdict included.
    pub fn poison(&mut self, memory: MemoryId, cause: &Arc<ServerError>) {
        if self.late.cause(memory).is_some() {
            return;
        }
        self.poisoned
            .entry(memory)
            .or_insert_with(|| Arc::clone(cause));
    }

    /// Trusts `memory` again (after a successful full overwrite), for the
    /// holder of this registry's key only: with another key nothing
    /// changes and the answer is [`ServerError::ForeignTrustKey`].
    pub fn restore(&mut self, key: &TrustKey, memory: MemoryId) -> Result<(), ServerError> {
        key.check(self.owner)?;
        self.poisoned.remove(&memory);
        self.late.clear(memory);
        Ok(())
    }

    /// Marks `memory` as about to be replaced by work still to come: every
    /// `check` answers `cause` until [`TrustRegistry::end_pending`].
    pub fn begin_pending(&mut self, memory: MemoryId, cause: Arc<ServerError>) {
        self.pending.insert(memory, cause);
    }

    /// The work `memory` was pending on is done (or failed): its trust is
    /// what the rest of the record says. Clearing a mark needs the key, like
    /// restoring trust.
    pub fn end_pending(&mut self, key: &TrustKey, memory: MemoryId) -> Result<(), ServerError> {
        key.check(self.owner)?;
        self.pending.remove(&memory);
        Ok(())
    }

    /// Forgets a freed slice: its id is never reused, so its state is dead.
    pub(crate) fn forget(&mut self, memory: MemoryId) {
        self.poisoned.remove(&memory);
        self.pending.remove(&memory);
        self.late.clear(memory);
    }

    /// Where late verdicts are recorded (for callbacks and waiting reads).
    pub fn late(&self) -> &Arc<LateFaults> {
        &self.late
    }

    /// `Ok` when `memory` is trusted, else [`ServerError::Untrusted`] with
    /// the poisoning error.
    pub fn check(&self, memory: MemoryId) -> Result<(), ServerError> {
        if let Some(cause) = self.pending.get(&memory) {
            return Err(ServerError::Untrusted {
                memory,
                cause: Arc::clone(cause),
            });
        }
        match self.poisoned.get(&memory) {
            None => self.late.check(memory),
            Some(cause) => Err(ServerError::Untrusted {
                memory,
                cause: Arc::clone(cause),
            }),
        }
    }

    /// Number of poisoned slices.
    pub fn len(&self) -> usize {
        self.poisoned.len()
    }

    /// Whether every slice is trusted.
    pub fn is_empty(&self) -> bool {
        self.poisoned.is_empty() && self.pending.is_empty() && self.late.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> (TrustRegistry, TrustKey) {
        let key = TrustKey::mint();
        (TrustRegistry::new(key.owner(), Arc::default()), key)
    }

    #[test]
    fn first_cause_wins_and_restore_clears() {
        let (mut t, key) = registry();
        let a = Arc::new(ServerError::unsupported("a", "first"));
        let b = Arc::new(ServerError::unsupported("b", "second"));
        let m = MemoryId(7);
        t.poison(m, &a);
        t.poison(m, &b);
        let err = t.check(m).expect_err("poisoned");
        assert_eq!(err.root_cause(), a.as_ref());
        assert!(t.check(MemoryId(8)).is_ok());
        t.restore(&key, m).expect("its own key");
        assert!(t.check(m).is_ok());
        assert!(t.is_empty());
    }

    #[test]
    fn another_schedulers_key_restores_nothing() {
        let (mut t, _) = registry();
        let (_, foreign) = registry();
        let m = MemoryId(7);
        t.poison(m, &Arc::new(ServerError::unsupported("a", "first")));
        t.late().poison(
            compute_runtime::StreamId(0),
            &[m],
            ServerError::unsupported("b", "late"),
        );
        assert!(matches!(
            t.restore(&foreign, m),
            Err(ServerError::ForeignTrustKey { .. })
        ));
        assert!(t.check(m).is_err(), "still untrusted");
    }

    #[test]
    fn a_late_verdict_is_a_first_cause_too() {
        let (mut t, key) = registry();
        let m = MemoryId(7);
        let late = ServerError::unsupported("late", "verdict");
        t.late()
            .poison(compute_runtime::StreamId(0), &[m], late.clone());
        t.poison(m, &Arc::new(ServerError::unsupported("b", "second")));
        let err = t.check(m).expect_err("poisoned");
        assert_eq!(err.root_cause(), &late);
        assert!(matches!(err, ServerError::Untrusted { cause, .. } if *cause == late));
        t.restore(&key, m).expect("its own key");
        assert!(t.check(m).is_ok());
    }
}
