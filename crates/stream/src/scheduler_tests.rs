//! Unit tests of `scheduler.rs`.

use super::*;

/// Records which stream submitted, in order.
#[derive(Default, Debug)]
struct Log(Vec<StreamId>);

impl SchedulerStreamBackend for Log {
    type Stream = ();
    fn create_stream(&mut self, _id: StreamId) {}
    fn submit(
        &mut self,
        id: StreamId,
        _stream: &mut (),
        _urgency: Urgency,
    ) -> Result<Submitted, BatchFailure> {
        self.0.push(id);
        Ok(Submitted::Yes)
    }
}

const A: StreamId = StreamId(1);
const B: StreamId = StreamId(2);
const P: StorageHandle = StorageHandle {
    id: StorageId(10),
    offset: 0,
    size: 256,
};
const Q: StorageHandle = StorageHandle {
    id: StorageId(11),
    offset: 0,
    size: 256,
};
/// Bytes 256..512 of P's page: a neighbour, not an overlap.
const P_NEXT: StorageHandle = StorageHandle {
    id: StorageId(10),
    offset: 256,
    size: 256,
};
/// Bytes 128..384 of P's page: overlaps both.
const P_MID: StorageHandle = StorageHandle {
    id: StorageId(10),
    offset: 128,
    size: 256,
};

fn op(s: &mut SchedulerMultiStream<Log>, stream: StreamId, pages: &[(StorageHandle, Access)]) {
    s.prepare(stream, pages);
    s.task_done(stream);
}

#[test]
fn neighbouring_slices_of_one_page_do_not_order_each_other() {
    let mut s = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    op(&mut s, B, &[(P_NEXT, Access::Write)]);
    assert!(s.backend().0.is_empty());
    op(&mut s, B, &[(P_MID, Access::Read)]);
    assert_eq!(s.backend().0, vec![A], "an overlapping range does");
}

#[test]
fn read_after_pending_write_on_another_stream_submits_the_writer() {
    let mut s = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    op(&mut s, B, &[(P, Access::Read)]);
    assert_eq!(s.backend().0, vec![A]);
}

#[test]
fn reads_do_not_order_reads() {
    let mut s = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Read)]);
    op(&mut s, B, &[(P, Access::Read)]);
    assert!(s.backend().0.is_empty());
    op(&mut s, B, &[(P, Access::Write)]);
    assert_eq!(s.backend().0, vec![A], "write after a pending read");
}

#[test]
fn unrelated_pages_do_not_submit() {
    let mut s = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    op(&mut s, B, &[(Q, Access::Write)]);
    assert!(s.backend().0.is_empty());
}

#[test]
fn submitted_work_is_no_longer_a_hazard() {
    let mut s = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    s.submit(A);
    op(&mut s, B, &[(P, Access::Read)]);
    assert_eq!(s.backend().0, vec![A]);
}

#[test]
fn host_writes_submit_every_pending_user_including_their_own_stream() {
    let mut s = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Read)]);
    op(&mut s, B, &[(P, Access::Write)]);
    s.prepare_host_write(&[P]);
    let mut got = s.backend().0.clone();
    got.sort();
    assert_eq!(got, vec![A, B]);
}

#[test]
fn tasks_max_bounds_pending_work() {
    let mut s = SchedulerMultiStream::new(Log::default(), 3);
    for _ in 0..7 {
        op(&mut s, A, &[]);
    }
    assert_eq!(s.backend().0, vec![A, A]);
    assert_eq!(s.pending_tasks(A), 1);
}

#[test]
fn draining_released_handles_forgets_only_their_trust_state() {
    let mut s = SchedulerMultiStream::new(Log::default(), 3);
    let queue = ReleaseQueue::new();
    let dropped = compute_runtime::ManagedMemoryHandle::new();
    let live = compute_runtime::ManagedMemoryHandle::new();
    dropped.attach_release(&queue).expect("attach");
    live.attach_release(&queue).expect("attach");
    let (d, l) = (dropped.id(), live.id());
    let cause = Arc::new(ServerError::unsupported("x", "y"));
    s.trust_mut().poison(d, &cause);
    s.trust_mut().poison(l, &cause);
    drop(dropped);
    let mut out = vec![MemoryId(0)];
    s.drain_released(&queue, &mut out);
    assert_eq!(out, vec![MemoryId(0), d], "appended, not replaced");
    assert!(s.check(d).is_ok(), "a freed slice's state is gone");
    assert!(s.check(l).is_err(), "a live slice stays poisoned");
}

#[test]
fn deferred_errors_are_reported_once() {
    let mut s = SchedulerMultiStream::new(Log::default(), 3);
    let e = Arc::new(ServerError::unsupported("x", "y"));
    s.defer_error(A, &e);
    assert!(matches!(
        s.take_deferred(A),
        Err(ServerError::Deferred { .. })
    ));
    assert!(s.take_deferred(A).is_ok());
}
