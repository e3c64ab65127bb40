//! Unit tests of `scheduler.rs`.

use super::*;
use compute_runtime::StorageHandle;

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

fn op<B: SchedulerStreamBackend>(
    s: &mut SchedulerMultiStream<B>,
    stream: StreamId,
    pages: &[(StorageHandle, Access)],
) {
    s.prepare(stream, pages);
    s.task_done(stream);
}

#[test]
fn neighbouring_slices_of_one_page_do_not_order_each_other() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    op(&mut s, B, &[(P_NEXT, Access::Write)]);
    assert!(s.backend().0.is_empty());
    op(&mut s, B, &[(P_MID, Access::Read)]);
    assert_eq!(s.backend().0, vec![A], "an overlapping range does");
}

#[test]
fn read_after_pending_write_on_another_stream_submits_the_writer() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    op(&mut s, B, &[(P, Access::Read)]);
    assert_eq!(s.backend().0, vec![A]);
}

#[test]
fn reads_do_not_order_reads() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Read)]);
    op(&mut s, B, &[(P, Access::Read)]);
    assert!(s.backend().0.is_empty());
    op(&mut s, B, &[(P, Access::Write)]);
    assert_eq!(s.backend().0, vec![A], "write after a pending read");
}

#[test]
fn unrelated_pages_do_not_submit() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    op(&mut s, B, &[(Q, Access::Write)]);
    assert!(s.backend().0.is_empty());
}

#[test]
fn submitted_work_is_no_longer_a_hazard() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Write)]);
    s.submit(A);
    op(&mut s, B, &[(P, Access::Read)]);
    assert_eq!(s.backend().0, vec![A]);
}

#[test]
fn host_writes_submit_every_pending_user_including_their_own_stream() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 100);
    op(&mut s, A, &[(P, Access::Read)]);
    op(&mut s, B, &[(P, Access::Write)]);
    s.prepare_host_write(&[P]);
    let mut got = s.backend().0.clone();
    got.sort();
    assert_eq!(got, vec![A, B]);
}

#[test]
fn tasks_max_bounds_pending_work() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 3);
    for _ in 0..7 {
        op(&mut s, A, &[]);
    }
    assert_eq!(s.backend().0, vec![A, A]);
    assert_eq!(s.pending_tasks(A), 1);
}

#[test]
fn draining_released_handles_forgets_only_their_trust_state() {
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 3);
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
    let (mut s, _) = SchedulerMultiStream::new(Log::default(), 3);
    let e = Arc::new(ServerError::unsupported("x", "y"));
    s.defer_error(A, &e);
    assert!(matches!(
        s.take_deferred(A),
        Err(ServerError::Deferred { .. })
    ));
    assert!(s.take_deferred(A).is_ok());
}

/// Submits every batch except those of `held` streams, which it holds
/// while it may (`Urgency::WhenReady`).
#[derive(Default, Debug)]
struct Holding {
    held: Vec<StreamId>,
    submitted: Vec<StreamId>,
}

impl SchedulerStreamBackend for Holding {
    type Stream = ();
    fn create_stream(&mut self, _id: StreamId) {}
    fn submit(
        &mut self,
        id: StreamId,
        _stream: &mut (),
        urgency: Urgency,
    ) -> Result<Submitted, BatchFailure> {
        if urgency == Urgency::WhenReady && self.held.contains(&id) {
            return Ok(Submitted::Held);
        }
        self.submitted.push(id);
        Ok(Submitted::Yes)
    }
}

/// Each fresh stream leaves one launch pending, on a range of its own.
fn one_launch_each(s: &mut SchedulerMultiStream<Holding>, streams: std::ops::Range<u64>) {
    for i in streams {
        let own = StorageHandle {
            id: StorageId(i),
            offset: 0,
            size: 256,
        };
        op(s, StreamId(i), &[(own, Access::Write)]);
    }
}

#[test]
fn fresh_streams_left_with_pending_work_stay_bounded_and_get_submitted() {
    let (mut s, _) = SchedulerMultiStream::new(Holding::default(), 100);
    let n = 20_000;
    for chunk in 0..(n / 1000) {
        one_launch_each(&mut s, chunk * 1000..(chunk + 1) * 1000);
        assert!(
            s.stream_ids().len() <= 2 * MAX_IDLE_STREAMS,
            "{} streams kept",
            s.stream_ids().len()
        );
    }
    let submitted = &s.backend().submitted;
    let mut once = submitted.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), submitted.len(), "a batch submitted twice");
    let pending: usize = s.stream_ids().iter().map(|id| s.pending_tasks(*id)).sum();
    assert_eq!(
        submitted.len() + pending,
        n as usize,
        "every launch submitted or still pending on a kept stream"
    );
    // Amortized O(1) per new stream: sweeps look at a bounded number of
    // streams per stream created.
    assert!(s.swept <= 4 * n, "{} streams visited by sweeps", s.swept);
}

#[test]
fn streams_in_use_keep_their_pending_batches_through_sweeps() {
    let (mut s, _) = SchedulerMultiStream::new(Holding::default(), 100);
    let busy: Vec<StreamId> = (0..100).map(|i| StreamId(1_000_000 + i)).collect();
    for round in 0..20u64 {
        for id in &busy {
            op(&mut s, *id, &[]);
        }
        one_launch_each(&mut s, round * 10..(round + 1) * 10);
    }
    assert!(
        busy.iter().all(|id| s.pending_tasks(*id) == 20),
        "a stream used since the last sweep is not submitted early"
    );
}

#[test]
fn a_held_batch_stays_pending_through_sweeps() {
    let held = StreamId(7);
    let (mut s, _) = SchedulerMultiStream::new(
        Holding {
            held: vec![held],
            submitted: vec![],
        },
        100,
    );
    op(&mut s, held, &[]);
    one_launch_each(&mut s, 100..5_000);
    assert_eq!(s.pending_tasks(held), 1, "held work was dropped");
    assert!(s.stream_ids().contains(&held));
    assert!(!s.backend().submitted.contains(&held));
}

#[test]
fn an_unreported_failure_outlives_its_retired_stream() {
    let (mut s, _) = SchedulerMultiStream::new(Holding::default(), 100);
    let failed = StreamId(7);
    op(&mut s, failed, &[]);
    s.defer_error(failed, &Arc::new(ServerError::unsupported("x", "first")));
    s.defer_error(failed, &Arc::new(ServerError::unsupported("x", "second")));
    one_launch_each(&mut s, 100..5_000);
    s.defer_error_everywhere(&Arc::new(ServerError::unsupported("x", "device")));
    assert!(s.stream_ids().len() <= 2 * MAX_IDLE_STREAMS);
    match s.take_deferred(failed) {
        Err(ServerError::Deferred { cause, later, .. }) => {
            assert_eq!(*cause, ServerError::unsupported("x", "first"));
            assert_eq!(later, 2, "the second failure and the device fault");
        }
        other => panic!("the failure was lost: {other:?}"),
    }
    assert!(s.take_deferred(failed).is_ok(), "reported once");
}
