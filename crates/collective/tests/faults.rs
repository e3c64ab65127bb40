//! Timeouts, aborts, late arrivals, departures, and poison in and out.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use compute_collective::{CollectiveCall, CommConfig, Communicator, Outcome, ServerError};
use compute_runtime::{DType, Reduction};

#[test]
fn a_missing_rank_times_out_and_a_late_arrival_is_aborted_at_once() {
    let (mut comms, transports) = group_inspectable(3, WAIT);
    let p0 = post_u32(&mut comms[0], 1);
    let p1 = post_u32(&mut comms[1], 2);
    let start = Instant::now();
    match p0.wait(Duration::from_millis(400)) {
        Err(ServerError::CollectiveTimeout {
            rank,
            call,
            waited_ms,
            missing,
        }) => {
            assert_eq!(
                (rank, call.as_str(), missing),
                (0, "all_reduce #0", vec![2])
            );
            assert!(waited_ms >= 400, "{waited_ms}");
        }
        other => panic!("{other:?}"),
    }
    // Rank 1 was waiting in the same call: aborted, not left to its 30 s.
    match p1.wait(WAIT) {
        Err(ServerError::CollectiveAborted { call, reason }) => {
            assert_eq!(call, "all_reduce #0");
            assert!(
                reason.contains("rank 0 timed out") && reason.contains("[2]"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Rank 2 arrives late: the call is already aborted, it hears at once.
    let p2 = post_u32(&mut comms[2], 3);
    assert!(matches!(
        p2.wait(WAIT),
        Err(ServerError::CollectiveAborted { .. })
    ));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    still_works(&mut comms);
    assert_eq!(transports[0].rounds_held(), 0, "tombstones collected");
}

#[test]
fn the_engine_times_out_when_nobody_waits() {
    let (mut comms, _t) = group_inspectable(2, Duration::from_millis(200));
    let p0 = post_u32(&mut comms[0], 1);
    // Awaiting never hangs: the engine's own deadline completes the call.
    match futures::executor::block_on(p0) {
        Err(ServerError::CollectiveTimeout {
            rank: 0, missing, ..
        }) => assert_eq!(missing, vec![1]),
        other => panic!("{other:?}"),
    }
    // The late arrival hits the aborted call (it does not time out itself).
    let p1 = post_u32(&mut comms[1], 2);
    assert!(matches!(
        p1.wait(WAIT),
        Err(ServerError::CollectiveAborted { .. })
    ));
    still_works(&mut comms);
}

#[test]
fn an_input_never_provided_fails_the_call_everywhere() {
    let mut comms = group_with(
        2,
        CommConfig::default().with_timeout(Duration::from_millis(300)),
    );
    let (held, p0) = comms[0].post(all_reduce_u32()).expect("post");
    let p1 = post_u32(&mut comms[1], 2);
    match p0.wait(WAIT) {
        Err(ServerError::CollectiveTimeout {
            rank: 0, missing, ..
        }) => assert_eq!(missing, vec![0]),
        other => panic!("{other:?}"),
    }
    // Rank 1 timed out itself, or heard rank 0's abort first.
    match p1.wait(WAIT) {
        Err(ServerError::CollectiveTimeout {
            rank: 1, missing, ..
        }) => assert_eq!(missing, vec![0]),
        Err(ServerError::CollectiveAborted { .. }) => {}
        other => panic!("{other:?}"),
    }
    held.provide(Ok(Bytes::from_static(&[0; 4]))); // too late: ignored
    still_works(&mut comms);
}

#[test]
fn a_dropped_contribution_poisons_at_once() {
    let mut comms = group(2);
    let (dropped, p0) = comms[0].post(all_reduce_u32()).expect("post");
    drop(dropped);
    let p1 = post_u32(&mut comms[1], 2);
    for p in [p0, p1] {
        match p.wait(WAIT).expect("poisoned").poisoned {
            Some(ServerError::CollectiveInput { rank: 0, cause }) => {
                assert!(
                    matches!(*cause, ServerError::CollectiveState { .. }),
                    "{cause}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Runs `calls` with rank r providing `inputs[r]`, from one thread.
fn run_with(
    comms: &mut [Communicator],
    calls: &[CollectiveCall],
    inputs: Vec<Result<Bytes, Arc<ServerError>>>,
) -> Vec<Outcome> {
    let pending: Vec<_> = comms
        .iter_mut()
        .zip(calls)
        .zip(inputs)
        .map(|((comm, call), input)| {
            let (c, p) = comm.post(*call).expect("post");
            c.provide(input);
            p
        })
        .collect();
    pending
        .into_iter()
        .map(|p| p.wait(WAIT).expect("outcome"))
        .collect()
}

#[test]
fn a_failed_input_poisons_exactly_the_results_that_depend_on_it() {
    let ranks = 3;
    let mut comms = group(ranks);
    let cause = Arc::new(ServerError::Validation {
        message: "bad src".into(),
    });
    let poison = |rank| {
        Some(ServerError::CollectiveInput {
            rank,
            cause: cause.clone(),
        })
    };
    let inputs = |bad: &[usize], len: usize| -> Vec<Result<Bytes, Arc<ServerError>>> {
        (0..ranks)
            .map(|r| {
                if bad.contains(&r) {
                    Err(cause.clone())
                } else {
                    Ok(Bytes::from(vec![1u8; len]))
                }
            })
            .collect()
    };
    let f32_max = Reduction::max(DType::F32);
    let everyone = [
        (
            CollectiveCall::AllReduce {
                reduction: f32_max,
                len: 8,
            },
            8,
        ),
        (CollectiveCall::AllGather { src_len: 5 }, 5),
        (
            CollectiveCall::ReduceScatter {
                reduction: f32_max,
                dst_len: 4,
            },
            12,
        ),
        (CollectiveCall::AllToAll { len: 6 }, 6),
    ];
    for (call, len) in everyone {
        for bad in [&[1][..], &[2, 0]] {
            let lowest = *bad.iter().min().expect("a bad rank");
            for (r, out) in run_with(&mut comms, &same(call, ranks), inputs(bad, len))
                .into_iter()
                .enumerate()
            {
                assert_eq!(
                    out,
                    Outcome {
                        bytes: Bytes::new(),
                        poisoned: poison(lowest)
                    },
                    "{call}, rank {r}"
                );
            }
        }
    }
    // Broadcast: poisoned iff the root's input failed; a non-root has none.
    let bc = |root| {
        (0..ranks)
            .map(|r| CollectiveCall::Broadcast {
                root,
                len: 3,
                has_src: r == root,
            })
            .collect::<Vec<_>>()
    };
    for out in run_with(&mut comms, &bc(1), inputs(&[1], 3)) {
        assert_eq!(out.poisoned, poison(1));
    }
    let (c, _) = comms[0].post(bc(1)[0]).expect("post");
    assert!(!c.needs_input());
    drop(c);
    let rest: Vec<_> = comms[1..]
        .iter_mut()
        .enumerate()
        .map(|(i, comm)| {
            let (c, p) = comm.post(bc(1)[i + 1]).expect("post");
            c.provide(Ok(Bytes::from_static(b"abc")));
            p
        })
        .collect();
    for p in rest {
        assert_eq!(p.wait(WAIT).expect("broadcast").bytes.as_ref(), b"abc");
    }
    // Bytes of the wrong length are a failed input too.
    let outs = run_with(
        &mut comms,
        &same(CollectiveCall::AllGather { src_len: 2 }, ranks),
        vec![
            Ok(Bytes::from_static(b"ab")),
            Ok(Bytes::from_static(b"abc")),
            Ok(Bytes::from_static(b"ab")),
        ],
    );
    for out in outs {
        let cause = Arc::new(ServerError::SizeMismatch {
            expected: 2,
            actual: 3,
        });
        assert_eq!(
            out.poisoned,
            Some(ServerError::CollectiveInput { rank: 1, cause })
        );
    }
    // Poison does not stick: the next call is clean.
    still_works(&mut comms);
}

#[test]
fn a_recv_is_poisoned_iff_its_sender_is() {
    let mut comms = group(2);
    let cause = Arc::new(ServerError::DeviceLost {
        reason: "gone".into(),
    });
    for bad in [true, false] {
        let (c, send) = comms[0]
            .post(CollectiveCall::Send { peer: 1, len: 2 })
            .expect("post");
        c.provide(if bad {
            Err(cause.clone())
        } else {
            Ok(Bytes::from_static(b"hi"))
        });
        let (c, recv) = comms[1]
            .post(CollectiveCall::Recv { peer: 0, len: 2 })
            .expect("post");
        assert!(!c.needs_input());
        let (send, recv) = (
            send.wait(WAIT).expect("send"),
            recv.wait(WAIT).expect("recv"),
        );
        if bad {
            let poison = Some(ServerError::CollectiveInput {
                rank: 0,
                cause: cause.clone(),
            });
            assert_eq!(
                (send.poisoned.clone(), recv.poisoned.clone()),
                (poison.clone(), poison)
            );
            // The lost device is rank 0's, not the receiver's.
            assert!(!recv.poisoned.expect("poison").is_device_lost());
        } else {
            assert_eq!(recv, Outcome::ok(Bytes::from_static(b"hi")));
            assert_eq!(send, Outcome::ok(Bytes::new()));
        }
    }
}

#[test]
fn a_departed_rank_aborts_the_calls_waiting_for_it() {
    let mut comms = group(2);
    let gone = comms.pop().expect("rank 1");
    drop(gone);
    let start = Instant::now();
    match post_u32(&mut comms[0], 1).wait(WAIT) {
        Err(ServerError::CollectiveAborted { reason, .. }) => {
            assert!(reason.contains("rank 1 left"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}
