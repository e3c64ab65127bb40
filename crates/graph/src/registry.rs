//! The device's registry of recorded graphs.
//!
//! Shared by every server of one device (cloning shares it), so a graph
//! captured through one handle can be replayed through another. Recordings
//! are stored type-erased; the server downcasts to its own recording type.

use std::any::Any;
use std::sync::{Arc, Mutex};

use compute_runtime::GraphId;
use hashbrown::HashMap;

type Recording = Box<dyn Any + Send>;

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    graphs: HashMap<GraphId, Recording>,
}

/// Recorded graphs of one device.
#[derive(Clone, Debug, Default)]
pub struct DeviceCaptures {
    inner: Arc<Mutex<Inner>>,
}

impl DeviceCaptures {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores a recording and returns its new id.
    pub fn insert(&self, recording: Recording) -> GraphId {
        let mut inner = self.lock();
        inner.next += 1;
        let id = GraphId(inner.next);
        inner.graphs.insert(id, recording);
        id
    }

    /// Removes a recording; `None` for an unknown id.
    pub fn remove(&self, id: GraphId) -> Option<Recording> {
        self.lock().graphs.remove(&id)
    }

    /// Runs `f` on a recording, if it exists.
    pub fn with<R>(&self, id: GraphId, f: impl FnOnce(&mut Recording) -> R) -> Option<R> {
        self.lock().graphs.get_mut(&id).map(f)
    }

    /// Number of graphs stored.
    pub fn len(&self) -> usize {
        self.lock().graphs.len()
    }

    /// Whether no graph is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_fresh_and_removal_is_idempotent() {
        let c = DeviceCaptures::default();
        let a = c.insert(Box::new(1u32));
        let b = c.clone().insert(Box::new(2u32));
        assert_ne!(a, b);
        assert_eq!(c.len(), 2);
        assert!(c.remove(a).is_some());
        assert!(c.remove(a).is_none());
        assert_eq!(
            c.with(b, |r| r.downcast_ref::<u32>().copied()),
            Some(Some(2))
        );
    }
}
