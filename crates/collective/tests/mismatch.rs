//! Calls that disagree fail with `CollectiveMismatch` on every rank, with the
//! same reason, and the communicator stays usable.

mod common;

use bytes::Bytes;
use common::*;
use compute_collective::{CollectiveCall, Communicator, PendingResult, ServerError};
use compute_runtime::{DType, Reduction};

/// Posts `calls[r]` on rank r from one thread (providing inputs of the right
/// length), and returns what every rank got: post's error, or the result.
fn outcome_per_rank(comms: &mut [Communicator], calls: &[CollectiveCall]) -> Vec<ServerError> {
    let ranks = comms.len();
    let posted: Vec<Result<PendingResult, ServerError>> = comms
        .iter_mut()
        .zip(calls)
        .map(|(comm, call)| {
            let (contribution, pending) = comm.post(*call)?;
            let len = call.input_len(ranks).unwrap_or(0);
            contribution.provide(Ok(Bytes::from(vec![0u8; len])));
            Ok(pending)
        })
        .collect();
    posted
        .into_iter()
        .enumerate()
        .map(|(r, p)| match p.and_then(|p| p.wait(WAIT)) {
            Err(e) => e,
            Ok(outcome) => panic!("rank {r} succeeded: {outcome:?}"),
        })
        .collect()
}

/// Asserts every rank got the same mismatch, mentioning every `needle`.
fn assert_mismatch(errors: &[ServerError], needles: &[&str]) {
    let first = &errors[0];
    let ServerError::CollectiveMismatch { reason } = first else {
        panic!("not a mismatch: {first}");
    };
    for needle in needles {
        assert!(reason.contains(needle), "`{reason}` lacks `{needle}`");
    }
    for (r, e) in errors.iter().enumerate() {
        assert_eq!(e, first, "rank {r} got another error");
    }
}

/// A clean all_reduce on every rank: the sequence is still aligned.
fn still_works(comms: &mut [Communicator]) {
    let ranks = comms.len();
    let reduction = Reduction::sum(DType::U32);
    let inputs: Vec<Bytes> = (0..ranks)
        .map(|r| Bytes::from((r as u32).to_le_bytes().to_vec()))
        .collect();
    let want = (0..ranks as u32).sum::<u32>().to_le_bytes();
    let out = clean(run_single(
        comms,
        &same(CollectiveCall::AllReduce { reduction, len: 4 }, ranks),
        &inputs,
    ));
    for bytes in out {
        assert_eq!(bytes.as_ref(), &want);
    }
}

fn with_rank_changed(
    ranks: usize,
    base: CollectiveCall,
    rank: usize,
    other: CollectiveCall,
) -> Vec<CollectiveCall> {
    let mut calls = same(base, ranks);
    calls[rank] = other;
    calls
}

#[test]
fn disagreements_fail_on_every_rank() {
    let f32_sum = Reduction::sum(DType::F32);
    let base = CollectiveCall::AllReduce {
        reduction: f32_sum,
        len: 16,
    };
    let cases: Vec<(CollectiveCall, &[&str])> = vec![
        (
            CollectiveCall::AllGather { src_len: 16 },
            &["all_gather", "all_reduce"],
        ),
        (
            CollectiveCall::AllReduce {
                reduction: Reduction::sum(DType::I32),
                len: 16,
            },
            &["sum(i32)", "sum(f32)"],
        ),
        (
            CollectiveCall::AllReduce {
                reduction: Reduction::max(DType::F32),
                len: 16,
            },
            &["max(f32)"],
        ),
        (
            CollectiveCall::AllReduce {
                reduction: f32_sum,
                len: 32,
            },
            &["32 B", "16 B"],
        ),
        (
            CollectiveCall::ReduceScatter {
                reduction: f32_sum,
                dst_len: 16,
            },
            &["reduce_scatter"],
        ),
        (CollectiveCall::AllToAll { len: 48 }, &["all_to_all"]),
    ];
    for ranks in [2, 3, 4] {
        let mut comms = group(ranks);
        for (other, needles) in &cases {
            for odd in [0, ranks - 1] {
                let calls = with_rank_changed(ranks, base, odd, *other);
                let errors = outcome_per_rank(&mut comms, &calls);
                assert_mismatch(&errors, needles);
                assert_mismatch(&errors, &[&format!("rank {odd}: {other}")]);
            }
        }
        still_works(&mut comms);
    }
}

#[test]
fn reduce_scatter_and_broadcast_disagreements() {
    let ranks = 3;
    let mut comms = group(ranks);
    let reduction = Reduction::prod(DType::F64);
    let rs = |dst_len| CollectiveCall::ReduceScatter { reduction, dst_len };
    let errors = outcome_per_rank(&mut comms, &[rs(8), rs(16), rs(8)]);
    assert_mismatch(
        &errors,
        &["rank 1: reduce_scatter(prod(f64), 16 B per rank)"],
    );
    // Different roots (each with the source flag its own root implies).
    let bc = |root, rank| CollectiveCall::Broadcast {
        root,
        len: 4,
        has_src: root == rank,
    };
    let errors = outcome_per_rank(&mut comms, &[bc(0, 0), bc(0, 1), bc(1, 2)]);
    assert_mismatch(&errors, &["root 0", "root 1"]);
    // Different lengths.
    let errors = outcome_per_rank(
        &mut comms,
        &[
            bc(2, 0),
            CollectiveCall::Broadcast {
                root: 2,
                len: 5,
                has_src: false,
            },
            bc(2, 2),
        ],
    );
    assert_mismatch(&errors, &["5 B", "4 B"]);
    still_works(&mut comms);
}

#[test]
fn a_locally_invalid_call_fails_its_rank_at_post_and_every_peer() {
    let ranks = 3;
    let mut comms = group(ranks);
    let f32_sum = Reduction::sum(DType::F32);
    let cases: Vec<(Vec<CollectiveCall>, usize, &str)> = vec![
        // all_to_all whose size does not divide by the rank count, on one rank.
        (
            vec![
                CollectiveCall::AllToAll { len: 9 },
                CollectiveCall::AllToAll { len: 10 },
                CollectiveCall::AllToAll { len: 9 },
            ],
            1,
            "10 bytes do not divide into 3 equal chunks",
        ),
        // A length that is not a whole number of elements.
        (
            with_rank_changed(
                3,
                CollectiveCall::AllReduce {
                    reduction: f32_sum,
                    len: 8,
                },
                2,
                CollectiveCall::AllReduce {
                    reduction: f32_sum,
                    len: 6,
                },
            ),
            2,
            "6 bytes is not a whole number of f32 elements",
        ),
        (
            same(
                CollectiveCall::ReduceScatter {
                    reduction: Reduction::min(DType::U64),
                    dst_len: 4,
                },
                3,
            ),
            0,
            "4 bytes is not a whole number of u64 elements",
        ),
        // A root that is not a rank.
        (
            vec![
                CollectiveCall::Broadcast {
                    root: 7,
                    len: 4,
                    has_src: false,
                },
                CollectiveCall::Broadcast {
                    root: 7,
                    len: 4,
                    has_src: false,
                },
                CollectiveCall::Broadcast {
                    root: 7,
                    len: 4,
                    has_src: false,
                },
            ],
            0,
            "root 7 is not a rank",
        ),
        // The root without a source; a non-root with one.
        (
            vec![
                CollectiveCall::Broadcast {
                    root: 1,
                    len: 4,
                    has_src: false,
                },
                CollectiveCall::Broadcast {
                    root: 1,
                    len: 4,
                    has_src: false,
                },
                CollectiveCall::Broadcast {
                    root: 1,
                    len: 4,
                    has_src: false,
                },
            ],
            1,
            "rank 1 is the root but gave no source",
        ),
        (
            vec![
                CollectiveCall::Broadcast {
                    root: 1,
                    len: 4,
                    has_src: false,
                },
                CollectiveCall::Broadcast {
                    root: 1,
                    len: 4,
                    has_src: true,
                },
                CollectiveCall::Broadcast {
                    root: 1,
                    len: 4,
                    has_src: true,
                },
            ],
            2,
            "rank 2 gave a source but the root is rank 1",
        ),
    ];
    for (calls, culprit, needle) in cases {
        let errors = outcome_per_rank(&mut comms, &calls);
        // A rank whose own call is invalid hears of it at post; every other
        // rank hears of the lowest invalid rank's, with the same words.
        for (r, (error, call)) in errors.iter().zip(&calls).enumerate() {
            let named = if call.problem(r, ranks).is_some() {
                r
            } else {
                culprit
            };
            assert_mismatch(
                std::slice::from_ref(error),
                &[needle, &format!("rank {named} posted an invalid call")],
            );
            if named == culprit {
                assert_eq!(error, &errors[culprit], "rank {r}");
            }
        }
    }
    still_works(&mut comms);
}

#[test]
fn the_invalid_rank_hears_at_post() {
    let mut comms = group(2);
    let err = comms[0]
        .post(CollectiveCall::AllToAll { len: 3 })
        .expect_err("invalid");
    assert!(
        matches!(err, ServerError::CollectiveMismatch { .. }),
        "{err}"
    );
    // The peer posts a valid call later and learns of the failure.
    let (c, pending) = comms[1]
        .post(CollectiveCall::AllToAll { len: 4 })
        .expect("post");
    c.provide(Ok(Bytes::from_static(&[1, 2, 3, 4])));
    assert_eq!(pending.wait(WAIT).expect_err("mismatch"), err);
    still_works(&mut comms);
}

#[test]
fn send_recv_length_mismatch_fails_both_sides() {
    for threads in [false, true] {
        let mut comms = group(3);
        let (left, right) = comms.split_at_mut(2);
        let (sender, receiver) = (&mut left[0], &mut right[0]);
        let exchange = |sender: &mut Communicator,
                        receiver: &mut Communicator,
                        sent: &'static [u8],
                        expected: usize| {
            let send = |comm: &mut Communicator| {
                let (c, p) = comm.post(CollectiveCall::Send {
                    peer: 2,
                    len: sent.len(),
                })?;
                c.provide(Ok(Bytes::from_static(sent)));
                p.wait(WAIT)
            };
            let recv = |comm: &mut Communicator| {
                let (_, p) = comm.post(CollectiveCall::Recv {
                    peer: 0,
                    len: expected,
                })?;
                p.wait(WAIT)
            };
            if threads {
                std::thread::scope(|s| {
                    let a = s.spawn(|| send(sender));
                    let b = s.spawn(|| recv(receiver));
                    (a.join().expect("sender"), b.join().expect("receiver"))
                })
            } else {
                // Post both before waiting on either.
                let (c, p) = sender
                    .post(CollectiveCall::Send {
                        peer: 2,
                        len: sent.len(),
                    })
                    .expect("post");
                c.provide(Ok(Bytes::from_static(sent)));
                let (_, q) = receiver
                    .post(CollectiveCall::Recv {
                        peer: 0,
                        len: expected,
                    })
                    .expect("post");
                (p.wait(WAIT), q.wait(WAIT))
            }
        };
        let (sent, received) = exchange(sender, receiver, &[7; 16], 8);
        let expected =
            "send #0 from rank 0 to rank 2: the sender sends 16 B, the receiver expects 8 B";
        for result in [&sent, &received] {
            match result {
                Err(ServerError::CollectiveMismatch { reason }) => assert_eq!(reason, expected),
                other => panic!("threads {threads}: {other:?}"),
            }
        }
        // The next message on the same link pairs cleanly.
        let (sent, received) = exchange(sender, receiver, b"ok", 2);
        assert!(sent.expect("send").bytes.is_empty());
        assert_eq!(received.expect("recv").bytes.as_ref(), b"ok");
        // Rank 1 took no part and the group sequence is untouched.
        still_works(&mut comms);
    }
}

#[test]
fn messages_to_no_rank_or_to_itself_are_refused_at_post() {
    let mut comms = group(2);
    for call in [
        CollectiveCall::Send { peer: 0, len: 1 },
        CollectiveCall::Recv { peer: 0, len: 1 },
        CollectiveCall::Send { peer: 2, len: 1 },
        CollectiveCall::Recv { peer: 9, len: 1 },
    ] {
        let err = comms[0].post(call).expect_err("refused");
        assert!(matches!(err, ServerError::InvalidArgument { .. }), "{err}");
    }
    still_works(&mut comms);
}

/// A call a rank refused before it could describe it (`post_refused`) takes
/// its place: whatever call of any kind the others posted (a call of one
/// step or of several), every one of them is poisoned with
/// `CollectiveInput` naming that rank and its refusal, and the next calls
/// pair as usual.
#[test]
fn a_refused_call_poisons_every_peer_call_and_keeps_the_sequence() {
    let f32_sum = Reduction::sum(DType::F32);
    let calls = [
        CollectiveCall::AllReduce {
            reduction: f32_sum,
            len: 16,
        },
        CollectiveCall::AllReduce {
            reduction: f32_sum,
            len: 1 << 20,
        },
        CollectiveCall::AllGather { src_len: 8 },
        CollectiveCall::ReduceScatter {
            reduction: f32_sum,
            dst_len: 8,
        },
        CollectiveCall::Broadcast {
            root: 0,
            len: 12,
            has_src: false,
        },
        CollectiveCall::AllToAll { len: 12 },
    ];
    let ranks = 3;
    let mut comms = group_with(
        ranks,
        compute_collective::CommConfig::default().with_chunk_bytes(4096),
    );
    for call in calls {
        for refusing in [0, 2] {
            let cause = ServerError::InvalidArgument {
                reason: "no element type".into(),
            };
            let pending: Vec<Option<PendingResult>> = comms
                .iter_mut()
                .enumerate()
                .map(|(r, comm)| {
                    if r == refusing {
                        comm.post_refused(std::sync::Arc::new(cause.clone()))
                            .expect("posted");
                        return None;
                    }
                    let call = match call {
                        CollectiveCall::Broadcast { root, len, .. } => CollectiveCall::Broadcast {
                            root,
                            len,
                            has_src: r == root,
                        },
                        other => other,
                    };
                    let (contribution, pending) = comm.post(call).expect("posted");
                    let len = call.input_len(ranks).unwrap_or(0);
                    contribution.provide(Ok(Bytes::from(vec![1u8; len])));
                    Some(pending)
                })
                .collect();
            for (r, p) in pending.into_iter().enumerate() {
                let Some(p) = p else { continue };
                let outcome = p.wait(WAIT).expect("completes");
                match outcome.poisoned {
                    Some(ServerError::CollectiveInput { rank, cause: c }) => {
                        assert_eq!(rank, refusing, "{call}: rank {r}");
                        assert_eq!(*c, cause, "{call}: rank {r}");
                    }
                    other => panic!("{call}: rank {r}: {other:?}"),
                }
            }
            still_works(&mut comms);
        }
    }
}
