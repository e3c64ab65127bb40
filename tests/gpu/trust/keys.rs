//! Only the server restores trust.

use super::*;
use compute_runtime::{ManagedMemoryHandle, Server, ServerError, StreamId};

/// A backend that submits nothing, to make a scheduler (and so a key) of
/// one's own.
struct NoQueue;

impl compute_stream::SchedulerStreamBackend for NoQueue {
    type Stream = ();
    fn create_stream(&mut self, _: StreamId) {}
    fn submit(
        &mut self,
        _: StreamId,
        _: &mut (),
        _: compute_stream::Urgency,
    ) -> Result<compute_stream::Submitted, compute_stream::BatchFailure> {
        Ok(compute_stream::Submitted::Yes)
    }
}

/// Only the server restores trust: every public path another crate has to
/// the server's scheduler (the `WriteScoped` impl, the scopes, the trust
/// registry, late verdicts, released-handle queues) leaves a poisoned
/// binding untrusted. Poisoning from outside stays open.
#[test]
fn no_public_call_restores_trust() {
    use compute_stream::{WriteScoped, write_scope, write_scope_ids, write_scope_restoring};
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[1; N]), S0);
    let binding = &[h.binding()];
    let id = h.memory.id();
    let planted = ServerError::unsupported("outside", "poisoned by another crate");
    let _ = write_scope(&mut s, S0, binding, |_| Err::<(), _>(planted.clone()));
    let untrusted = |s: &mut TestServer, how: &str| {
        let err = s.check(vec![h.binding()], S0).expect_err(how);
        assert_eq!(err.root_cause(), &planted, "{how}: {err}");
    };
    untrusted(&mut s, "poisoned from outside");

    // The scopes another crate may call: a full write claimed, no key.
    write_scope(&mut s, S0, binding, |_| Ok(())).expect("ran");
    untrusted(&mut s, "write_scope");
    write_scope_ids(&mut s, S0, &[id], |_| Ok(())).expect("ran");
    untrusted(&mut s, "write_scope_ids");
    // A key of its own scheduler opens nothing here.
    let (_, foreign) = compute_stream::SchedulerMultiStream::new(NoQueue, 1);
    let refused = write_scope_restoring(&mut s, &foreign, S0, binding, |_, _| true, |_| Ok(()));
    assert!(
        matches!(refused, Err(ServerError::ForeignTrustKey { .. })),
        "{refused:?}"
    );
    untrusted(&mut s, "write_scope_restoring with a foreign key");

    // Released-handle queues: the handle cannot be attached to another
    // queue, and draining one forgets only what was on it.
    let queue = compute_runtime::ReleaseQueue::new();
    assert!(h.memory.attach_release(&queue).is_err(), "bound once");
    let stray = ManagedMemoryHandle::new();
    stray.attach_release(&queue).expect("a handle of its own");
    drop(stray);
    let mut freed = Vec::new();
    s.write_streams().drain_released(&queue, &mut freed);
    assert!(!freed.contains(&id));
    untrusted(&mut s, "drain_released");

    // Late verdicts: registering work of one's own and giving a good
    // verdict on it clears nothing.
    let late = std::sync::Arc::clone(s.write_streams().trust().late());
    let audit = late.expect(&[id]);
    late.verdict(audit, S0, Ok(()));
    let _ = late.take_reports();
    untrusted(&mut s, "late verdicts");
    // Nor does ending a pending mark without the key.
    let e = s
        .write_streams()
        .end_pending(&foreign, id)
        .expect_err("foreign key");
    assert!(matches!(e, ServerError::ForeignTrustKey { .. }), "{e}");
    untrusted(&mut s, "end_pending with a foreign key");

    // The server's own full write still restores.
    s.write(vec![(h.copy_descriptor(), u32_bytes(&[2; N]).into())], S0);
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("trusted")),
        vec![2; N]
    );
}
