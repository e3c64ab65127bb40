//! The write scope: how every buffer-writing operation reports its outcome.
//!
//! An operation names what it writes (its write set) before it runs; the
//! scope runs the body and settles the set on the way out:
//!
//! - body failed: every slice in the set is poisoned with the error, the
//!   error is deferred to the stream's next `flush`/`sync`, and
//!   [`WriteScoped::on_failure`] is told (so a profile window in flight is
//!   invalidated);
//! - body succeeded: with the scheduler's [`TrustKey`]
//!   ([`write_scope_restoring`]), slices the body overwrote *whole* (as
//!   `is_full` says; a launch never knows it did) are trusted again;
//!   without it ([`write_scope`]), nothing is.
//!
//! Either way, batches that failed to submit inside the body (the scheduler
//! poisoned what they wrote and deferred their error) are told to
//! [`WriteScoped::on_failure`] too, with their own stream.
//!
//! Putting this in one function, not at each call site, is the point: an
//! operation cannot forget to poison on one of its error paths.

use std::sync::Arc;

use compute_runtime::{BufferBinding, MemoryId, ServerError, StreamId};

use crate::{SchedulerMultiStream, SchedulerStreamBackend, TrustKey};

/// A server whose buffer-writing operations run in write scopes.
pub trait WriteScoped {
    /// The multi-stream driver the server keeps.
    type Streams;

    /// What the server records a capture window into (for the wgpu server,
    /// `compute_graph::StreamCapture` of its resolved launches). A server
    /// that does not capture can use `()`.
    type Capture;

    /// The driver, which [`write_scope`] settles into after the body has
    /// run: trust for the write set, the deferred error on failure.
    fn write_streams(&mut self) -> &mut Self::Streams;

    /// Told about every failure a scope settles, so a measurement in flight
    /// on `stream` is invalidated wherever the failure happened.
    fn on_failure(&mut self, stream: StreamId, error: &ServerError);

    /// The recording of the capture window open on `stream`, if any: work
    /// issued on a capturing stream is recorded there instead of run. The
    /// server's operations ask for it; [`write_scope`] does not. Defaults to
    /// `None`, for a server that does not capture.
    fn capturing(&mut self, stream: StreamId) -> Option<&mut Self::Capture> {
        let _ = stream;
        None
    }

    /// An empty write set for the caller to fill with what the work it is
    /// about to run writes.
    fn write_set(&mut self) -> Vec<BufferBinding> {
        Vec::new()
    }
}

/// Runs `body` as an operation on `stream` that writes `writes`: a failure
/// poisons them; success trusts nothing again (nothing says the body wrote
/// every byte, and only the server may say so: [`write_scope_restoring`]).
/// The body's result is returned unchanged.
pub fn write_scope<S, B, R>(
    server: &mut S,
    stream: StreamId,
    writes: &[BufferBinding],
    body: impl FnOnce(&mut S) -> Result<R, ServerError>,
) -> Result<R, ServerError>
where
    S: WriteScoped<Streams = SchedulerMultiStream<B>>,
    B: SchedulerStreamBackend,
{
    let result = body(server);
    if let Err(error) = &result {
        poison(
            server,
            stream,
            writes.iter().map(BufferBinding::memory_id),
            error,
        );
    }
    settle_batch_failures(server);
    result
}

/// [`write_scope`] for a server's own writes of whole slices (a host write,
/// a collective's result): on success, the bindings `is_full` says cover
/// their whole slice are trusted again. Only with the key of the server's
/// scheduler; with another, nothing runs and the answer is
/// [`ServerError::ForeignTrustKey`].
pub fn write_scope_restoring<S, B, R>(
    server: &mut S,
    key: &TrustKey,
    stream: StreamId,
    writes: &[BufferBinding],
    is_full: impl Fn(&S, &BufferBinding) -> bool,
    body: impl FnOnce(&mut S) -> Result<R, ServerError>,
) -> Result<R, ServerError>
where
    S: WriteScoped<Streams = SchedulerMultiStream<B>>,
    B: SchedulerStreamBackend,
{
    server.write_streams().check_key(key)?;
    let result = body(server);
    match &result {
        Ok(_) => {
            // Collected first: `is_full` reads the server.
            let restored: Vec<_> = writes
                .iter()
                .filter(|w| is_full(server, w))
                .map(BufferBinding::memory_id)
                .collect();
            let trust = server.write_streams().trust_mut();
            for m in restored {
                trust.restore(key, m)?;
            }
        }
        Err(error) => poison(
            server,
            stream,
            writes.iter().map(BufferBinding::memory_id),
            error,
        ),
    }
    settle_batch_failures(server);
    result
}

/// Poisons `writes` with `error`, defers it to `stream` and tells
/// [`WriteScoped::on_failure`].
fn poison<S, B>(
    server: &mut S,
    stream: StreamId,
    writes: impl Iterator<Item = MemoryId>,
    error: &ServerError,
) where
    S: WriteScoped<Streams = SchedulerMultiStream<B>>,
    B: SchedulerStreamBackend,
{
    let cause = Arc::new(error.clone());
    let streams = server.write_streams();
    for m in writes {
        streams.trust_mut().poison(m, &cause);
    }
    streams.defer_error(stream, &cause);
    server.on_failure(stream, error);
}

/// [`write_scope`] for work that never makes its writes trusted again (a
/// launch, a replay), over the ids it writes: the launch path's form, with
/// nothing to clone.
pub fn write_scope_ids<S, B, R>(
    server: &mut S,
    stream: StreamId,
    writes: &[MemoryId],
    body: impl FnOnce(&mut S) -> Result<R, ServerError>,
) -> Result<R, ServerError>
where
    S: WriteScoped<Streams = SchedulerMultiStream<B>>,
    B: SchedulerStreamBackend,
{
    let result = body(server);
    if let Err(error) = &result {
        poison(server, stream, writes.iter().copied(), error);
    }
    settle_batch_failures(server);
    result
}

/// Tells [`WriteScoped::on_failure`] about every batch that failed to
/// submit since the last call (the scheduler already poisoned what each
/// wrote and deferred its error to its stream).
pub fn settle_batch_failures<S, B>(server: &mut S)
where
    S: WriteScoped<Streams = SchedulerMultiStream<B>>,
    B: SchedulerStreamBackend,
{
    for (stream, error) in server.write_streams().take_failures() {
        server.on_failure(stream, &error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compute_runtime::ManagedMemoryHandle;

    struct NoBackend;
    impl SchedulerStreamBackend for NoBackend {
        type Stream = ();
        fn create_stream(&mut self, _: StreamId) {}
        fn submit(
            &mut self,
            _: StreamId,
            _: &mut (),
            _: crate::Urgency,
        ) -> Result<crate::Submitted, crate::BatchFailure> {
            Ok(crate::Submitted::Yes)
        }
    }

    struct Fake {
        streams: SchedulerMultiStream<NoBackend>,
        failures: Vec<(StreamId, ServerError)>,
    }

    fn fake() -> (Fake, TrustKey) {
        let (streams, key) = SchedulerMultiStream::new(NoBackend, 8);
        let f = Fake {
            streams,
            failures: vec![],
        };
        (f, key)
    }

    impl WriteScoped for Fake {
        type Streams = SchedulerMultiStream<NoBackend>;
        type Capture = ();
        fn write_streams(&mut self) -> &mut Self::Streams {
            &mut self.streams
        }
        fn on_failure(&mut self, stream: StreamId, error: &ServerError) {
            self.failures.push((stream, error.clone()));
        }
    }

    #[test]
    fn failure_poisons_exactly_the_write_set_and_full_overwrite_restores() {
        let (mut f, key) = fake();
        let a = ManagedMemoryHandle::new().binding(16);
        let b = ManagedMemoryHandle::new().binding(16);
        let bystander = ManagedMemoryHandle::new().binding(16);
        let s = StreamId(3);
        let err = ServerError::unsupported("k", "test");
        let out: Result<(), _> =
            write_scope(&mut f, s, &[a.clone(), b.clone()], |_| Err(err.clone()));
        assert_eq!(out, Err(err.clone()));
        assert!(f.streams.check(a.memory_id()).is_err());
        assert!(f.streams.check(b.memory_id()).is_err());
        assert!(f.streams.check(bystander.memory_id()).is_ok());
        assert_eq!(f.failures.len(), 1, "on_failure once per failure");
        assert!(f.streams.take_deferred(s).is_err());

        // A partial overwrite does not restore; a full one does.
        let a = std::slice::from_ref(&a);
        write_scope_restoring(&mut f, &key, s, a, |_, _| false, |_| Ok(())).expect("ok");
        assert!(f.streams.check(a[0].memory_id()).is_err());
        write_scope_restoring(&mut f, &key, s, a, |_, _| true, |_| Ok(())).expect("ok");
        assert!(f.streams.check(a[0].memory_id()).is_ok());
        assert!(f.streams.check(b.memory_id()).is_err());
    }

    #[test]
    fn only_the_schedulers_own_key_restores() {
        let (mut f, _) = fake();
        let (_, foreign) = fake();
        let a = ManagedMemoryHandle::new().binding(16);
        let a = std::slice::from_ref(&a);
        let err = ServerError::unsupported("k", "test");
        let _ = write_scope(&mut f, StreamId(1), a, |_| Err::<(), _>(err));
        write_scope(&mut f, StreamId(1), a, |_| Ok(())).expect("ok");
        assert!(f.streams.check(a[0].memory_id()).is_err(), "no key");
        let mut ran = false;
        let refused = write_scope_restoring(
            &mut f,
            &foreign,
            StreamId(1),
            a,
            |_, _| true,
            |_| {
                ran = true;
                Ok(())
            },
        );
        assert!(matches!(refused, Err(ServerError::ForeignTrustKey { .. })));
        assert!(!ran, "nothing runs with a foreign key");
        assert!(f.streams.check(a[0].memory_id()).is_err(), "a foreign key");
    }
}
