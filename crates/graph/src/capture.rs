//! `StreamCapture`: what a stream records while capturing.
//!
//! Generic over the command type `C`, so this crate stays free of wgpu: the
//! server records its own resolved command type and gets the same type back
//! on replay, with no type erasure in between. The capture also pins every
//! binding the recorded work touches (clones of the handles), which is what
//! keeps those slices out of the pool until the graph is destroyed, and
//! remembers the first failure inside the window, which `end_capture`
//! reports instead of storing a graph with a hole in it.

use compute_runtime::{BufferBinding, ServerError};

/// The recording of one stream's capture window, with commands of type `C`.
#[derive(Debug)]
pub struct StreamCapture<C> {
    commands: Vec<C>,
    pins: Vec<BufferBinding>,
    writes: Vec<BufferBinding>,
    failure: Option<ServerError>,
}

// Not derived: the derive would require `C: Default`.
impl<C> Default for StreamCapture<C> {
    fn default() -> Self {
        Self {
            commands: Vec::new(),
            pins: Vec::new(),
            writes: Vec::new(),
            failure: None,
        }
    }
}

impl<C> StreamCapture<C> {
    /// Records one command, with the bindings it reads and writes.
    pub fn record(&mut self, command: C, reads: &[BufferBinding], writes: &[BufferBinding]) {
        self.commands.push(command);
        self.pins.extend(reads.iter().cloned());
        self.pins.extend(writes.iter().cloned());
        self.writes.extend(writes.iter().cloned());
    }

    /// Remembers a failure inside the window (the first one wins).
    pub fn fail(&mut self, error: ServerError) {
        self.failure.get_or_insert(error);
    }

    /// The first failure inside the window.
    pub fn failure(&self) -> Option<&ServerError> {
        self.failure.as_ref()
    }

    /// Commands recorded so far.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The recorded commands.
    pub fn commands(&self) -> &[C] {
        &self.commands
    }

    /// Takes the recording apart: commands, pinned bindings, written
    /// bindings.
    pub fn into_parts(self) -> (Vec<C>, Vec<BufferBinding>, Vec<BufferBinding>) {
        (self.commands, self.pins, self.writes)
    }

    /// Every binding the recorded work writes (a replay's write set).
    pub fn writes(&self) -> &[BufferBinding] {
        &self.writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compute_runtime::ManagedMemoryHandle;

    #[test]
    fn records_pin_their_bindings_and_keep_the_first_failure() {
        let mut c = StreamCapture::default();
        let a = ManagedMemoryHandle::new().binding(16);
        let b = ManagedMemoryHandle::new().binding(16);
        c.record(7u32, std::slice::from_ref(&a), std::slice::from_ref(&b));
        assert_eq!(c.len(), 1);
        assert_eq!(c.writes().len(), 1);
        assert_eq!(c.commands().first(), Some(&7));
        c.fail(ServerError::unsupported("a", "first"));
        c.fail(ServerError::unsupported("b", "second"));
        assert!(matches!(
            c.failure(),
            Some(ServerError::Unsupported { what: "a", .. })
        ));
    }
}
