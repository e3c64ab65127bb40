use std::cell::Cell;
use std::time::{Duration, Instant};

use super::*;

thread_local! {
    /// Runs inside `LateFaults::verdict` on this thread, its lock held,
    /// before the verdict is applied: the moment another thread's lock-free
    /// look at the counters must not take the verdict for done.
    pub(super) static WHILE_APPLYING: Cell<Option<Box<dyn FnOnce()>>> = const { Cell::new(None) };
}

/// Gives a failed verdict on `audit` while `other` runs on another thread,
/// started once the verdict is under way; `other` gets 200 ms to finish
/// inside it (it can only if it takes no lock), and both are done on
/// return.
fn during_a_verdict(
    late: &Arc<LateFaults>,
    audit: LateAudit,
    other: impl FnOnce(&LateFaults) + Send + 'static,
) {
    let slot = Arc::new(Mutex::new(None));
    let (started, shared) = (Arc::clone(&slot), Arc::clone(late));
    WHILE_APPLYING.set(Some(Box::new(move || {
        let t = std::thread::spawn(move || other(&shared));
        let until = Instant::now() + Duration::from_millis(200);
        while !t.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        *started.lock().expect("slot") = Some(t);
    })));
    late.verdict(audit, S, Err(err("judged")));
    let t = slot.lock().expect("slot").take();
    t.expect("the verdict ran the other thread")
        .join()
        .expect("the other thread");
}

fn err(what: &'static str) -> ServerError {
    ServerError::unsupported(what, "late")
}

const S: StreamId = StreamId(3);

#[test]
fn verdicts_poison_until_cleared_and_report_once() {
    let late = LateFaults::default();
    assert!(late.is_empty());
    assert!(late.check(MemoryId(1)).is_ok());
    late.poison(S, &[MemoryId(1), MemoryId(2)], err("x"));
    assert!(late.check(MemoryId(1)).is_err());
    assert!(late.check(MemoryId(2)).is_err());
    assert!(late.check(MemoryId(9)).is_ok());
    assert_eq!(late.take_reports().0.len(), 1);
    assert!(late.take_reports().0.is_empty());
    late.clear(MemoryId(1));
    assert!(late.check(MemoryId(1)).is_ok());
    assert!(late.check(MemoryId(2)).is_err());
}

#[test]
fn a_verdict_does_not_poison_what_was_overwritten_after_the_work() {
    let late = LateFaults::default();
    let id = late.expect(&[MemoryId(1), MemoryId(2)]);
    late.clear(MemoryId(1));
    late.verdict(id, S, Err(err("x")));
    assert!(late.check(MemoryId(1)).is_ok());
    assert!(late.check(MemoryId(2)).is_err());
    assert_eq!(late.pending(), 0);
}

#[test]
fn a_good_verdict_poisons_nothing_and_forgets_its_dependents() {
    let late = LateFaults::default();
    let id = late.expect(&[MemoryId(1)]);
    late.depend(S, &[MemoryId(1)], &[MemoryId(2)]);
    assert_eq!(late.dependents(), 1);
    late.verdict(id, S, Ok(()));
    assert!(late.is_empty());
    assert!(late.check(MemoryId(2)).is_ok());
    assert_eq!(late.dependents(), 0);
}

#[test]
fn a_failed_verdict_follows_the_data_transitively_and_reports_each_reader() {
    let late = LateFaults::default();
    let (x, y, z, other) = (MemoryId(1), MemoryId(2), MemoryId(3), MemoryId(4));
    let id = late.expect(&[x]);
    // y = f(x) on stream 5, z = g(other, y) on stream 6; other is clean.
    late.depend(StreamId(5), &[x], &[y]);
    late.depend(StreamId(6), &[other, y], &[z]);
    late.depend(StreamId(7), &[other], &[MemoryId(9)]);
    late.verdict(id, S, Err(err("judged")));
    let cause = |m| match late.check(m) {
        Err(ServerError::Untrusted { cause, .. }) => cause,
        other => panic!("{m} should be poisoned: {other:?}"),
    };
    assert_eq!(*cause(x), err("judged"));
    assert!(matches!(&*cause(y), ServerError::UntrustedInput { input, .. } if *input == x));
    assert!(matches!(&*cause(z), ServerError::UntrustedInput { input, .. } if *input == y));
    assert!(
        late.check(MemoryId(9)).is_ok(),
        "a reader of clean bytes only"
    );
    let (reports, _) = late.take_reports();
    let streams: Vec<u64> = reports.iter().map(|(s, _)| s.0).collect();
    assert_eq!(streams.len(), 3, "{reports:?}");
    assert!(streams.contains(&5) && streams.contains(&6) && streams.contains(&3));
}

#[test]
fn an_overwrite_between_the_work_and_a_reader_takes_the_reader_out_of_reach() {
    let late = LateFaults::default();
    let (x, y) = (MemoryId(1), MemoryId(2));
    let id = late.expect(&[x]);
    late.clear(x);
    // x is no longer at risk: reading it registers nothing.
    late.depend(S, &[x], &[y]);
    assert_eq!(late.dependents(), 0);
    late.verdict(id, S, Err(err("judged")));
    assert!(late.check(x).is_ok());
    assert!(late.check(y).is_ok());
}

#[test]
fn a_reader_registered_before_its_input_was_overwritten_is_still_poisoned() {
    let late = LateFaults::default();
    let (x, y) = (MemoryId(1), MemoryId(2));
    let id = late.expect(&[x]);
    late.depend(S, &[x], &[y]);
    late.clear(x);
    late.verdict(id, S, Err(err("judged")));
    assert!(late.check(x).is_ok(), "overwritten after");
    assert!(late.check(y).is_err(), "computed from the bad bytes before");
}

#[test]
fn a_verdict_known_since_the_check_poisons_the_writes_at_once() {
    let late = LateFaults::default();
    late.poison(S, &[MemoryId(1)], err("x"));
    let _ = late.take_reports();
    late.depend(StreamId(8), &[MemoryId(1)], &[MemoryId(2)]);
    assert!(late.check(MemoryId(2)).is_err());
    assert_eq!(late.take_reports().0.len(), 1);
}

#[test]
fn a_token_says_pending_until_every_verdict_came() {
    let late = LateFaults::default();
    let (a, b) = (late.expect(&[MemoryId(1)]), late.expect(&[MemoryId(2)]));
    let t = late
        .depend_token(S, &[MemoryId(1), MemoryId(2)])
        .expect("at risk");
    assert_eq!(late.outcome(t), DependOutcome::Pending);
    late.verdict(a, S, Ok(()));
    assert_eq!(late.outcome(t), DependOutcome::Pending);
    late.verdict(b, S, Err(err("b")));
    assert!(matches!(late.outcome(t), DependOutcome::Poisoned(_)));
    assert_eq!(late.outcome(t), DependOutcome::Clean, "forgotten once told");
    assert!(
        late.take_reports().0.iter().all(|(s, _)| *s == S),
        "a token's failure is its owner's to report"
    );
    assert!(
        late.depend_token(S, &[MemoryId(7)]).is_none(),
        "nothing at risk"
    );
}

#[test]
fn a_claimed_report_is_settled_but_not_reported_again() {
    let late = LateFaults::default();
    late.poison(StreamId(1), &[MemoryId(1)], err("x"));
    late.poison(StreamId(2), &[MemoryId(2)], err("x"));
    assert_eq!(late.claim(StreamId(1)).len(), 1);
    assert!(late.claim(StreamId(1)).is_empty(), "claimed once");
    let (unreported, claimed) = late.take_reports();
    assert_eq!(unreported.len(), 1);
    assert_eq!(unreported[0].0, StreamId(2));
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].0, StreamId(1));
}

/// Found by the model test on an H200: the judged work's `dst` read by a
/// launch enqueued while its failed verdict was applied on the collective
/// applier: the reader was neither refused (the poison was not on record
/// yet) nor registered (nothing looked pending), so its writes stayed
/// trusted and its failure was never reported.
#[test]
fn work_enqueued_while_a_verdict_is_applied_is_poisoned_and_reported() {
    let late = Arc::new(LateFaults::default());
    let (dst, out) = (MemoryId(1), MemoryId(2));
    let audit = late.expect(&[dst]);
    during_a_verdict(&late, audit, move |late| {
        late.depend(StreamId(5), &[dst], &[out]);
    });
    assert!(late.check(dst).is_err());
    assert!(late.check(out).is_err(), "the reader's writes");
    let (reports, _) = late.take_reports();
    let reader = reports.iter().find(|(s, _)| *s == StreamId(5));
    assert!(
        matches!(reader, Some((_, e)) if matches!(**e, ServerError::UntrustedInput { input, .. } if input == dst)),
        "the reader's failure, naming its input: {reports:?}"
    );
    assert_eq!(late.pending(), 0);
}

/// The same moment for a full overwrite: it comes after the verdict, so
/// the bytes are trusted again.
#[test]
fn an_overwrite_while_a_verdict_is_applied_is_not_lost() {
    let late = Arc::new(LateFaults::default());
    let dst = MemoryId(1);
    let audit = late.expect(&[dst]);
    during_a_verdict(&late, audit, move |late| late.clear(dst));
    assert!(late.check(dst).is_ok(), "overwritten after the verdict");
}

/// And for a collective's staged input: its token says it read poison.
#[test]
fn a_staged_input_while_a_verdict_is_applied_gets_the_poison() {
    let late = Arc::new(LateFaults::default());
    let dst = MemoryId(1);
    let audit = late.expect(&[dst]);
    let token = Arc::new(Mutex::new(None));
    let got = Arc::clone(&token);
    during_a_verdict(&late, audit, move |late| {
        *got.lock().expect("token") = late.depend_token(S, &[dst]);
    });
    let token = token.lock().expect("token").take();
    let token = token.expect("a token: the input is poisoned");
    assert!(matches!(late.outcome(token), DependOutcome::Poisoned(_)));
}
