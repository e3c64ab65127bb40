//! The device's registry of recorded graphs.
//!
//! Shared by every server of one device (cloning shares it), so a graph
//! captured through one handle can be replayed through another. Generic over
//! the graph type `G`: the server stores its own graph type and gets it back
//! as such, with no type erasure or downcast.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use compute_runtime::GraphId;
use hashbrown::HashMap;

/// Graph ids are unique in the process, so an id from another registry is
/// unknown here instead of naming one of this registry's graphs.
static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
struct Inner<G> {
    graphs: HashMap<GraphId, G>,
}

/// Recorded graphs of one device, of type `G`.
#[derive(Debug)]
pub struct DeviceCaptures<G> {
    inner: Arc<Mutex<Inner<G>>>,
}

// Not derived: the derives would require `G: Clone` / `G: Default`, and a
// clone shares the registry rather than copying graphs.
impl<G> Clone for DeviceCaptures<G> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<G> Default for DeviceCaptures<G> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                graphs: HashMap::new(),
            })),
        }
    }
}

impl<G> DeviceCaptures<G> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<G>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores a graph and returns its new id.
    pub fn insert(&self, graph: G) -> GraphId {
        let id = GraphId(NEXT_GRAPH.fetch_add(1, Ordering::Relaxed));
        self.lock().graphs.insert(id, graph);
        id
    }

    /// Removes a graph; `None` for an unknown id.
    pub fn remove(&self, id: GraphId) -> Option<G> {
        self.lock().graphs.remove(&id)
    }

    /// Runs `f` on a graph, if it exists.
    pub fn with<R>(&self, id: GraphId, f: impl FnOnce(&mut G) -> R) -> Option<R> {
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
        let a = c.insert(1u32);
        let b = c.clone().insert(2u32);
        assert_ne!(a, b);
        assert_eq!(c.len(), 2);
        assert!(c.remove(a).is_some());
        assert!(c.remove(a).is_none());
        assert_eq!(c.with(b, |r| *r), Some(2));
    }
}
