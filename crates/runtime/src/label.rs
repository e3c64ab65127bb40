//! Buffer labels: a process-wide map from [`MemoryId`] to the name a client
//! gave the buffer, so every error that names a slice names it by its label
//! too, also after the handle is gone.
//!
//! Errors carry ids, not handles (they are cloned, stored in the trust
//! registry and reported long after the call that made them), and the
//! server never sees a label. So the label lives here, keyed by the id
//! (never reused within a process), and [`MemoryId`]'s `Display` looks it up:
//! `` `weights` (MemoryId(11)) `` instead of `MemoryId(11)`. A label is set
//! through [`crate::ManagedMemoryHandle::set_label`] (or
//! [`crate::Handle::with_label`]). When the handle's last clone drops, the
//! label is kept among the last [`RETIRED`] labels of dropped handles: an
//! error returned to `main` after its buffers were dropped still names them
//! (ids are never reused, so a kept label is never another buffer's). Only
//! an error displayed after that many more labelled buffers were dropped
//! shows the bare id.
//!
//! Cost: nothing for unlabelled buffers (one atomic load when an id is
//! displayed); a lock when a label is set, when a labelled handle drops,
//! and when an id is displayed while any label exists.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use crate::MemoryId;

static LABELS: LazyLock<RwLock<Labels>> = LazyLock::new(Default::default);

/// Labels of dropped handles kept for the errors that name them.
pub(crate) const RETIRED: usize = 4096;

#[derive(Default)]
struct Labels {
    map: HashMap<MemoryId, Arc<str>>,
    /// Dropped handles' ids, oldest first; their labels stay in `map`.
    retired: VecDeque<MemoryId>,
}
/// Labels in the map: lets `Display` skip the lock when there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn set(id: MemoryId, label: Arc<str>) {
    let mut labels = LABELS.write().unwrap_or_else(|e| e.into_inner());
    if labels.map.insert(id, label).is_none() {
        COUNT.fetch_add(1, Ordering::Release);
    }
}

/// The handle of `id` dropped: its label is kept among the last
/// [`RETIRED`], the oldest beyond them forgotten.
pub(crate) fn retire(id: MemoryId) {
    let mut labels = LABELS.write().unwrap_or_else(|e| e.into_inner());
    if !labels.map.contains_key(&id) {
        return;
    }
    labels.retired.push_back(id);
    while labels.retired.len() > RETIRED {
        if let Some(old) = labels.retired.pop_front()
            && labels.map.remove(&old).is_some()
        {
            COUNT.fetch_sub(1, Ordering::Release);
        }
    }
}

pub(crate) fn get(id: MemoryId) -> Option<Arc<str>> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let labels = LABELS.read().unwrap_or_else(|e| e.into_inner());
    labels.map.get(&id).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_handles_label_is_kept_for_the_last_retired_ones() {
        let first = MemoryId::next();
        set(first, "first".into());
        retire(first);
        assert_eq!(get(first).as_deref(), Some("first"), "kept after the drop");
        // Other tests label buffers too: retire more than the bound.
        for _ in 0..RETIRED {
            let id = MemoryId::next();
            set(id, "later".into());
            retire(id);
        }
        assert_eq!(get(first), None, "forgotten past the bound");
        let unlabelled = MemoryId::next();
        retire(unlabelled);
        assert_eq!(get(unlabelled), None);
    }
}
