//! Plain identifiers. Each is a newtype so a stream id can never be passed
//! where a device id is expected; none carries meaning beyond equality and
//! hashing except where its doc says so.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        id_type!(@decl $(#[$meta])* $name);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
    (@decl $(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u64);
    };
}

id_type!(
    /// A logical stream of work. Any value is a valid stream: the server
    /// creates the stream's state the first time it sees the id.
    StreamId
);
id_type!(
    /// A device the process can reach (index into the adapter list a
    /// [`crate::DeviceService`] chose from).
    DeviceId
);
id_type!(
    /// A recorded graph in a device's capture registry.
    GraphId
);
id_type!(
    /// One allocation of device storage (one buffer, for wgpu).
    StorageId
);
id_type!(@decl
    /// A managed memory slice: the identity behind a
    /// [`crate::ManagedMemoryHandle`]. Never reused within a process.
    ///
    /// Displayed as `MemoryId(7)`, or with its label when the buffer has
    /// one (see [`crate::ManagedMemoryHandle::set_label`]), also after the
    /// handle is dropped (the last 4,096 dropped handles' labels are kept,
    /// for the errors that name them):
    ///
    /// ```
    /// use compute_runtime::ManagedMemoryHandle;
    ///
    /// let weights = ManagedMemoryHandle::new();
    /// let id = weights.id();
    /// assert_eq!(id.to_string(), format!("MemoryId({})", id.0));
    /// weights.set_label("weights");
    /// assert_eq!(id.to_string(), format!("`weights` (MemoryId({}))", id.0));
    /// drop(weights); // an error returned later still names it
    /// assert_eq!(id.to_string(), format!("`weights` (MemoryId({}))", id.0));
    /// ```
    MemoryId
);

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match crate::label::get(*self) {
            Some(label) => write!(f, "`{label}` (MemoryId({}))", self.0),
            None => write!(f, "MemoryId({})", self.0),
        }
    }
}
id_type!(
    /// A kernel's identity for the pipeline cache: two kernels with the same
    /// id must compile to the same pipeline.
    KernelId
);

impl StreamId {
    /// The stream a caller gets when it does not care.
    pub const DEFAULT: StreamId = StreamId(0);
}

impl MemoryId {
    /// A fresh, process-unique memory id.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        MemoryId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The label of the buffer with this id (kept a while after its handle
    /// drops: see `Handle::with_label`).
    pub fn label(self) -> Option<std::sync::Arc<str>> {
        crate::label::get(self)
    }
}

impl KernelId {
    /// A kernel id derived from any hashable description of the kernel
    /// (its source, entry point and layout, say).
    pub fn of<T: std::hash::Hash + ?Sized>(value: &T) -> Self {
        use std::hash::Hasher;
        // A fixed-key hasher: the same kernel gets the same id in every run,
        // so ids can be logged and compared across processes.
        let mut h = FnvHasher::default();
        value.hash(&mut h);
        KernelId(h.finish())
    }
}

/// FNV-1a: tiny, deterministic, good enough to key a cache of kernels whose
/// sources differ in more than a few bits.
#[derive(Default)]
struct FnvHasher(u64);

impl std::hash::Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_ids_are_unique() {
        let a = MemoryId::next();
        let b = MemoryId::next();
        assert_ne!(a, b);
    }

    #[test]
    fn kernel_ids_are_deterministic_and_distinguish_sources() {
        assert_eq!(KernelId::of("fn main() {}"), KernelId::of("fn main() {}"));
        assert_ne!(KernelId::of("fn main() {}"), KernelId::of("fn main() { }"));
    }
}
