//! One round of a hub and where each rank is in each sequence of calls.

use std::sync::Arc;

use compute_runtime::ServerError;
use hashbrown::HashMap;

use crate::call::CallId;

/// One phase of one call: what each participant deposited, the outputs
/// once the last arrival computed them, and who has taken theirs.
pub(crate) struct Round<T> {
    pub(super) deposits: Vec<Option<T>>,
    pub(super) arrived: usize,
    pub(super) result: Option<Result<Arc<Vec<T>>, ServerError>>,
    pub(super) aborted: Option<ServerError>,
    pub(super) returned: Vec<bool>,
}

impl<T> Round<T> {
    pub(super) fn new(slots: usize) -> Self {
        Round {
            deposits: (0..slots).map(|_| None).collect(),
            arrived: 0,
            result: None,
            aborted: None,
            returned: vec![false; slots],
        }
    }

    pub(super) fn complete(&self) -> bool {
        self.arrived == self.deposits.len()
    }

    pub(super) fn abort(&mut self, error: ServerError) {
        if !self.complete() && self.aborted.is_none() {
            self.aborted = Some(error);
            self.deposits.iter_mut().for_each(|d| *d = None);
        }
    }

    pub(super) fn missing(&self, participants: &[usize]) -> Vec<usize> {
        participants
            .iter()
            .zip(&self.deposits)
            .filter(|(_, d)| d.is_none())
            .map(|(r, _)| *r)
            .collect()
    }
}

/// Where each rank is in each sequence of calls: the group sequence, and the
/// sequence of messages of each ordered pair, per role.
#[derive(Debug, Default)]
pub(super) struct Progress {
    group: HashMap<usize, u64>,
    pairs: HashMap<(usize, usize, usize), u64>,
}

impl Progress {
    pub(super) fn enter(&mut self, call: CallId, rank: usize) {
        let (entry, seq) = match call {
            CallId::Group { seq } => (self.group.entry(rank).or_insert(0), seq),
            CallId::P2p(l) => {
                let role = usize::from(rank == l.to);
                (self.pairs.entry((l.from, l.to, role)).or_insert(0), l.seq)
            }
        };
        *entry = (*entry).max(seq);
    }

    /// Whether participant `slot` (rank `rank`) of `call` has entered a
    /// later call of the same sequence.
    pub(super) fn past(&self, call: CallId, slot: usize, rank: usize) -> bool {
        match call {
            CallId::Group { seq } => self.group.get(&rank).is_some_and(|p| *p > seq),
            CallId::P2p(l) => self
                .pairs
                .get(&(l.from, l.to, slot))
                .is_some_and(|p| *p > l.seq),
        }
    }
}
