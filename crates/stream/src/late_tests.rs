use super::*;

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
