//! Calls cut into steps ([`Plan`]): every operation, fed step by step (in
//! any order) or whole, taken piece by piece or whole, gives what the call
//! gives in one step; a step whose input fails poisons the call on every
//! rank that depends on it; a consumer that stops taking pieces fails the
//! call instead of hanging it.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use compute_collective::{CollectiveCall, CommConfig, Delivery, Outcome, Plan, ServerError};
use compute_runtime::{CollectiveFault, DType, Reduction};

/// A chunk small enough that every call below takes several steps.
const CHUNK: usize = 16;

fn stepped(n: usize) -> Vec<compute_collective::Communicator> {
    group_with(
        n,
        CommConfig::default()
            .with_timeout(WAIT)
            .with_chunk_bytes(CHUNK),
    )
}

/// Step `step`'s input from `whole`, as a server stages it.
fn step_input(plan: &Plan, whole: &[u8], step: usize) -> Bytes {
    let mut out = Vec::new();
    for r in plan.input_pieces(step) {
        out.extend_from_slice(&whole[r]);
    }
    Bytes::from(out)
}

/// How a rank gives its input and takes its result.
#[derive(Clone, Copy, Debug)]
struct Way {
    /// Fed step by step, last step first (else whole).
    fed: bool,
    /// Taken piece by piece as they come (else whole).
    streamed: bool,
}

const WAYS: [Way; 3] = [
    Way {
        fed: true,
        streamed: true,
    },
    Way {
        fed: true,
        streamed: false,
    },
    Way {
        fed: false,
        streamed: true,
    },
];

/// One thread per rank: post, give the input `way`, take the result `way`.
fn run_way(
    comms: &mut [compute_collective::Communicator],
    calls: &[CollectiveCall],
    inputs: &[Bytes],
    way: Way,
) -> Vec<Result<Outcome, ServerError>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter_mut()
            .enumerate()
            .map(|(r, comm)| {
                let (call, input) = (calls[r], inputs[r].clone());
                s.spawn(move || {
                    let ranks = comm.size();
                    let (contribution, pending) = comm.post(call)?;
                    let mut pending = if way.streamed {
                        pending.take_as_they_come()
                    } else {
                        pending
                    };
                    if way.fed {
                        let feed = contribution.feed();
                        let plan = *feed.plan();
                        for step in (0..plan.steps()).rev() {
                            feed.provide(step, Ok(step_input(&plan, &input, step)));
                        }
                    } else {
                        contribution.provide(Ok(input));
                    }
                    if !way.streamed {
                        return pending.wait(WAIT);
                    }
                    let mut out = vec![0u8; call.output_len(ranks)];
                    loop {
                        match pending.next(WAIT) {
                            Delivery::Piece { offset, bytes } => {
                                out[offset..offset + bytes.len()].copy_from_slice(&bytes);
                            }
                            Delivery::Done(result) => {
                                return result.map(|o| match o.poisoned {
                                    Some(_) => o,
                                    None => Outcome::ok(Bytes::from(out)),
                                });
                            }
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    })
}

#[test]
fn all_reduce_and_reduce_scatter_in_steps_match_the_oracle() {
    for ranks in [2, 3] {
        let mut comms = stepped(ranks);
        for way in WAYS {
            for reduction in [
                Reduction::sum(DType::F32),
                Reduction::mean(DType::I64),
                Reduction::max(DType::F16),
            ] {
                let size = reduction.dtype.size();
                // Less than a chunk, a whole number of chunks, and a tail.
                for count in [1, CHUNK / size * 3, 37] {
                    let inputs: Vec<Bytes> = (0..ranks)
                        .map(|r| input(reduction, count as u64, r, count).into())
                        .collect();
                    let call = CollectiveCall::AllReduce {
                        reduction,
                        len: count * size,
                    };
                    let out = clean(run_way(&mut comms, &same(call, ranks), &inputs, way));
                    let want = expected_all(reduction, count as u64, ranks, count);
                    for (r, bytes) in out.iter().enumerate() {
                        let what = format!("all_reduce {reduction} {count} on rank {r}, {way:?}");
                        check(reduction, bytes, &want, &what);
                    }
                    // Reduce-scatter: `count` elements per rank.
                    let inputs: Vec<Bytes> = (0..ranks)
                        .map(|r| input(reduction, 7, r, count * ranks).into())
                        .collect();
                    let call = CollectiveCall::ReduceScatter {
                        reduction,
                        dst_len: count * size,
                    };
                    let out = clean(run_way(&mut comms, &same(call, ranks), &inputs, way));
                    let want = expected_all(reduction, 7, ranks, count * ranks);
                    for (r, bytes) in out.iter().enumerate() {
                        let what = format!("reduce_scatter {reduction} {count} rank {r}, {way:?}");
                        check(reduction, bytes, &want[r * count..(r + 1) * count], &what);
                    }
                }
            }
        }
    }
}

#[test]
fn data_movement_in_steps_matches_the_oracle() {
    for ranks in [2, 4] {
        let mut comms = stepped(ranks);
        for way in WAYS {
            // Blocks of whole words are cut into steps; 6 bytes are not.
            for block in [0, 6, CHUNK, 44] {
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| pattern_bytes(r as u64 + 3 * block as u64, block))
                    .collect();
                let call = CollectiveCall::AllGather { src_len: block };
                let out = clean(run_way(&mut comms, &same(call, ranks), &inputs, way));
                let want: Vec<u8> = inputs.iter().flat_map(|b| b.iter().copied()).collect();
                for (r, bytes) in out.iter().enumerate() {
                    assert_eq!(
                        bytes.as_ref(),
                        &want[..],
                        "all_gather {block} rank {r} {way:?}"
                    );
                }

                let len = block * ranks;
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| pattern_bytes(r as u64 * 1000 + block as u64, len))
                    .collect();
                let call = CollectiveCall::AllToAll { len };
                let out = clean(run_way(&mut comms, &same(call, ranks), &inputs, way));
                for (r, bytes) in out.iter().enumerate() {
                    let want: Vec<u8> = inputs
                        .iter()
                        .flat_map(|src| src[r * block..(r + 1) * block].iter().copied())
                        .collect();
                    assert_eq!(
                        bytes.as_ref(),
                        &want[..],
                        "all_to_all {block} rank {r} {way:?}"
                    );
                }

                let root = ranks - 1;
                let src = pattern_bytes(99 + block as u64, len + 3);
                let calls: Vec<CollectiveCall> = (0..ranks)
                    .map(|r| CollectiveCall::Broadcast {
                        root,
                        len: src.len(),
                        has_src: r == root,
                    })
                    .collect();
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| if r == root { src.clone() } else { Bytes::new() })
                    .collect();
                let out = clean(run_way(&mut comms, &calls, &inputs, way));
                for (r, bytes) in out.iter().enumerate() {
                    assert_eq!(bytes, &src, "broadcast {block} rank {r} {way:?}");
                }
            }
        }
    }
}

#[test]
fn messages_in_steps_arrive_whole() {
    let mut comms = stepped(2);
    for way in WAYS {
        for len in [0, 5, CHUNK * 4 + 3] {
            let bytes = pattern_bytes(len as u64, len);
            let calls = [
                CollectiveCall::Send { peer: 1, len },
                CollectiveCall::Recv { peer: 0, len },
            ];
            let inputs = [bytes.clone(), Bytes::new()];
            let out = clean(run_way(&mut comms, &calls, &inputs, way));
            assert!(out[0].is_empty());
            assert_eq!(out[1], bytes, "{len} B {way:?}");
        }
    }
}

/// Rank `bad` gives steps 0 and 1, then a failure: every rank's result is
/// poisoned, naming it, though the first steps' pieces were handed out.
#[test]
fn a_step_that_fails_after_the_data_started_poisons_every_rank() {
    let ranks = 3;
    let bad = 1;
    let mut comms = stepped(ranks);
    let call = CollectiveCall::AllReduce {
        reduction: Reduction::sum(DType::U32),
        len: CHUNK * 4,
    };
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter_mut()
            .enumerate()
            .map(|(r, comm)| {
                s.spawn(move || {
                    let (contribution, pending) = comm.post(call).expect("post");
                    let mut pending = pending.take_as_they_come();
                    let feed = contribution.feed();
                    let plan = *feed.plan();
                    assert_eq!(plan.steps(), 4);
                    for step in 0..plan.steps() {
                        let input = if r == bad && step == 2 {
                            Err(std::sync::Arc::new(ServerError::DeviceLost {
                                reason: "step 2 never landed".into(),
                            }))
                        } else {
                            Ok(Bytes::from(vec![1u8; plan.input_len(step)]))
                        };
                        feed.provide(step, input);
                    }
                    let mut pieces = 0;
                    loop {
                        match pending.next(WAIT) {
                            Delivery::Piece { .. } => pieces += 1,
                            Delivery::Done(result) => return (pieces, result),
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect::<Vec<_>>()
    });
    for (r, (pieces, result)) in results.into_iter().enumerate() {
        assert_eq!(pieces, 4, "rank {r}: every step's piece came");
        let outcome = result.expect("the call completes");
        match outcome.poisoned {
            Some(ServerError::CollectiveInput { rank, cause }) => {
                assert_eq!(rank, bad, "rank {r}");
                assert!(cause.to_string().contains("never landed"), "{cause}");
            }
            other => panic!("rank {r}: {other:?}"),
        }
    }
    still_works(&mut comms);
}

#[test]
fn a_feed_dropped_before_every_step_poisons_the_call() {
    let mut comms = stepped(2);
    let call = CollectiveCall::AllGather { src_len: CHUNK * 2 };
    let mut pending = Vec::new();
    for (r, comm) in comms.iter_mut().enumerate() {
        let (contribution, p) = comm.post(call).expect("post");
        let feed = contribution.feed();
        let steps = if r == 0 { 1 } else { feed.plan().steps() };
        for step in 0..steps {
            feed.provide(
                step,
                Ok(Bytes::from(vec![0u8; feed.plan().input_len(step)])),
            );
        }
        pending.push(p);
    }
    for (r, p) in pending.into_iter().enumerate() {
        let outcome = p.wait(WAIT).expect("completes");
        assert!(
            matches!(
                outcome.poisoned,
                Some(ServerError::CollectiveInput { rank: 0, .. })
            ),
            "rank {r}: {:?}",
            outcome.poisoned
        );
    }
    still_works(&mut comms);
}

/// A consumer that said it takes pieces as they come, then took none: the
/// call fails within the timeout, on every rank, instead of hanging.
#[test]
fn a_consumer_that_stops_taking_pieces_fails_the_call() {
    let timeout = Duration::from_millis(400);
    let mut comms = group_with(
        2,
        CommConfig::default()
            .with_timeout(timeout)
            .with_chunk_bytes(CHUNK),
    );
    let call = CollectiveCall::AllReduce {
        reduction: Reduction::sum(DType::U32),
        // Far more than the queue's few steps.
        len: CHUNK * 64,
    };
    let mut pending = Vec::new();
    for comm in comms.iter_mut() {
        let (contribution, p) = comm.post(call).expect("post");
        contribution.provide(Ok(Bytes::from(vec![0u8; CHUNK * 64])));
        pending.push(p.take_as_they_come());
    }
    std::thread::sleep(timeout * 3);
    let mut errors = Vec::new();
    for mut p in pending {
        let error = loop {
            match p.next(WAIT) {
                Delivery::Piece { .. } => {}
                Delivery::Done(result) => break result.expect_err("the call fails"),
            }
        };
        errors.push(error);
    }
    assert!(
        errors.iter().any(|e| matches!(
            e,
            ServerError::CollectiveState {
                fault: CollectiveFault::ResultNotTaken { .. }
            }
        )),
        "{errors:?}"
    );
}

/// Calls that disagree, one of one step and one of several: every rank
/// opens the same way, so both fail with the mismatch at once instead of
/// waiting for each other in different rounds.
#[test]
fn calls_of_different_step_counts_fail_as_a_mismatch() {
    let mut comms = stepped(2);
    let started = std::time::Instant::now();
    let red = Reduction::sum(DType::U32);
    let calls = [
        CollectiveCall::AllReduce {
            reduction: red,
            len: 8,
        },
        CollectiveCall::AllReduce {
            reduction: red,
            len: CHUNK * 4,
        },
    ];
    let inputs = [Bytes::from(vec![0u8; 8]), Bytes::from(vec![0u8; CHUNK * 4])];
    for way in WAYS {
        for result in run_way(&mut comms, &calls, &inputs, way) {
            assert!(
                matches!(result, Err(ServerError::CollectiveMismatch { .. })),
                "{result:?}"
            );
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    still_works(&mut comms);
}
