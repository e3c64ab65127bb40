//! Buffer labels: a process-wide map from [`MemoryId`] to the name a client
//! gave the buffer, so every error that names a slice names it by its label
//! too.
//!
//! Errors carry ids, not handles (they are cloned, stored in the trust
//! registry and reported long after the call that made them), and the
//! server never sees a label. So the label lives here, keyed by the id
//! (never reused within a process), and [`MemoryId`]'s `Display` looks it up:
//! `` `weights` (MemoryId(11)) `` instead of `MemoryId(11)`. A label is set
//! through [`crate::ManagedMemoryHandle::set_label`] (or
//! [`crate::Handle::with_label`]) and removed when the handle's last clone
//! drops; an error displayed after that shows the bare id.
//!
//! Cost: nothing for unlabelled buffers (one atomic load when an id is
//! displayed); a lock when a label is set, when a labelled handle drops,
//! and when an id is displayed while any label exists.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use crate::MemoryId;

static LABELS: LazyLock<RwLock<HashMap<MemoryId, Arc<str>>>> = LazyLock::new(Default::default);
/// Labels in the map: lets `Display` skip the lock when there are none.
static COUNT: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn set(id: MemoryId, label: Arc<str>) {
    let mut map = LABELS.write().unwrap_or_else(|e| e.into_inner());
    if map.insert(id, label).is_none() {
        COUNT.fetch_add(1, Ordering::Release);
    }
}

pub(crate) fn remove(id: MemoryId) {
    let mut map = LABELS.write().unwrap_or_else(|e| e.into_inner());
    if map.remove(&id).is_some() {
        COUNT.fetch_sub(1, Ordering::Release);
    }
}

pub(crate) fn get(id: MemoryId) -> Option<Arc<str>> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let map = LABELS.read().unwrap_or_else(|e| e.into_inner());
    map.get(&id).cloned()
}
