//! nccl-tests-style correctness of every collective, for 2, 3 and 4 ranks,
//! against the independent oracle of `common`.

mod common;

use bytes::Bytes;
use common::*;
use compute_collective::{CollectiveCall, Communicator};
use compute_runtime::{DType, Reduction};

const RANKS: [usize; 3] = [2, 3, 4];
/// Element counts: none, one, odd, an odd count past a cache block.
const COUNTS: [usize; 4] = [0, 1, 7, 4099];

fn all_reduce_matrix(pattern: Pattern) {
    for ranks in RANKS {
        let mut comms = group(ranks);
        for (k, reduction) in reductions().into_iter().enumerate() {
            for count in COUNTS {
                let seed = (k * 100 + count) as u64;
                let len = count * reduction.dtype.size();
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| input(reduction, seed, r, count).into())
                    .collect();
                let call = CollectiveCall::AllReduce { reduction, len };
                let out = clean(run(pattern, &mut comms, &same(call, ranks), &inputs));
                let want = expected_all(reduction, seed, ranks, count);
                for (r, bytes) in out.iter().enumerate() {
                    check(
                        reduction,
                        bytes,
                        &want,
                        &format!("{ranks} ranks, rank {r}, {count}"),
                    );
                }
            }
        }
    }
}

#[test]
fn all_reduce_every_dtype_op_and_size_one_thread() {
    all_reduce_matrix(Pattern::Single);
}

#[test]
fn all_reduce_every_dtype_op_and_size_thread_per_rank() {
    all_reduce_matrix(Pattern::Threads);
}

#[test]
fn reduce_scatter_every_dtype_and_op() {
    for (ranks, pattern) in [
        (2, Pattern::Single),
        (3, Pattern::Threads),
        (4, Pattern::Single),
    ] {
        let mut comms = group(ranks);
        for (k, reduction) in reductions().into_iter().enumerate() {
            for count in [0, 1, 5, 1031] {
                let seed = (k * 7 + count) as u64 + 1;
                let size = reduction.dtype.size();
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| input(reduction, seed, r, count * ranks).into())
                    .collect();
                let call = CollectiveCall::ReduceScatter {
                    reduction,
                    dst_len: count * size,
                };
                let out = clean(run(pattern, &mut comms, &same(call, ranks), &inputs));
                let want = expected_all(reduction, seed, ranks, count * ranks);
                for (r, bytes) in out.iter().enumerate() {
                    let chunk = &want[r * count..(r + 1) * count];
                    check(
                        reduction,
                        bytes,
                        chunk,
                        &format!("{ranks} ranks, rank {r}, {count}"),
                    );
                }
            }
        }
    }
}

#[test]
fn large_buffers_take_the_parallel_path() {
    // Several MiB: past the 4 MiB threshold where reductions split threads.
    for (ranks, pattern) in [
        (2, Pattern::Threads),
        (3, Pattern::Single),
        (4, Pattern::Threads),
    ] {
        let mut comms = group(ranks);
        for reduction in [
            Reduction::sum(DType::F32),
            Reduction::mean(DType::I64),
            Reduction::max(DType::BF16),
        ] {
            let count = (5 << 20) / reduction.dtype.size() + 3;
            let seed = ranks as u64;
            let inputs: Vec<Bytes> = (0..ranks)
                .map(|r| input(reduction, seed, r, count).into())
                .collect();
            let call = CollectiveCall::AllReduce {
                reduction,
                len: count * reduction.dtype.size(),
            };
            let out = clean(run(pattern, &mut comms, &same(call, ranks), &inputs));
            let want = expected_all(reduction, seed, ranks, count);
            for (r, bytes) in out.iter().enumerate() {
                check(reduction, bytes, &want, &format!("{ranks} ranks, rank {r}"));
            }
        }
    }
}

#[test]
fn all_gather_concatenates_in_rank_order() {
    for ranks in RANKS {
        for pattern in [Pattern::Single, Pattern::Threads] {
            let mut comms = group(ranks);
            for len in [0, 1, 13, 3 << 20] {
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| pattern_bytes(r as u64 + 7 * len as u64, len))
                    .collect();
                let call = CollectiveCall::AllGather { src_len: len };
                let out = clean(run(pattern, &mut comms, &same(call, ranks), &inputs));
                let want: Vec<u8> = inputs.iter().flat_map(|b| b.iter().copied()).collect();
                for (r, bytes) in out.iter().enumerate() {
                    assert_eq!(
                        bytes.as_ref(),
                        &want[..],
                        "{ranks} ranks, rank {r}, {len} B"
                    );
                }
            }
        }
    }
}

#[test]
fn broadcast_from_every_root() {
    for ranks in RANKS {
        let mut comms = group(ranks);
        for root in 0..ranks {
            for (len, pattern) in [
                (0, Pattern::Single),
                (1, Pattern::Threads),
                (1001, Pattern::Single),
            ] {
                let src = pattern_bytes(root as u64 * 31 + len as u64, len);
                let calls: Vec<CollectiveCall> = (0..ranks)
                    .map(|r| CollectiveCall::Broadcast {
                        root,
                        len,
                        has_src: r == root,
                    })
                    .collect();
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| if r == root { src.clone() } else { Bytes::new() })
                    .collect();
                let out = clean(run(pattern, &mut comms, &calls, &inputs));
                for (r, bytes) in out.iter().enumerate() {
                    assert_eq!(bytes, &src, "{ranks} ranks, root {root}, rank {r}");
                }
            }
        }
    }
}

#[test]
fn all_to_all_sends_chunk_r_to_rank_r() {
    for ranks in RANKS {
        for pattern in [Pattern::Single, Pattern::Threads] {
            let mut comms = group(ranks);
            for chunk in [0, 1, 3, 4096] {
                let len = chunk * ranks;
                let inputs: Vec<Bytes> = (0..ranks)
                    .map(|r| pattern_bytes(r as u64 * 1000 + chunk as u64, len))
                    .collect();
                let call = CollectiveCall::AllToAll { len };
                let out = clean(run(pattern, &mut comms, &same(call, ranks), &inputs));
                for (r, bytes) in out.iter().enumerate() {
                    let want: Vec<u8> = inputs
                        .iter()
                        .flat_map(|src| src[r * chunk..(r + 1) * chunk].iter().copied())
                        .collect();
                    assert_eq!(
                        bytes.as_ref(),
                        &want[..],
                        "{ranks} ranks, rank {r}, chunk {chunk}"
                    );
                }
            }
        }
    }
}

/// Posts `sends` (sender, receiver, bytes) on one thread, in the order given
/// (each receiver posts its recv right after the send), and checks arrivals.
fn messages(comms: &mut [Communicator], sends: &[(usize, usize, Bytes)], recv_first: bool) {
    let mut pending = Vec::new();
    for (from, to, bytes) in sends {
        let send = CollectiveCall::Send {
            peer: *to,
            len: bytes.len(),
        };
        let recv = CollectiveCall::Recv {
            peer: *from,
            len: bytes.len(),
        };
        let mut post = |rank: usize, call: CollectiveCall| {
            let (contribution, result) = comms[rank].post(call).expect("post");
            contribution.provide(Ok(bytes.clone()));
            pending.push((call, bytes.clone(), result));
        };
        if recv_first {
            post(*to, recv);
            post(*from, send);
        } else {
            post(*from, send);
            post(*to, recv);
        }
    }
    for (call, bytes, result) in pending {
        let outcome = result.wait(WAIT).expect("message");
        assert_eq!(outcome.poisoned, None);
        match call {
            CollectiveCall::Send { .. } => assert!(outcome.bytes.is_empty()),
            _ => assert_eq!(outcome.bytes, bytes, "{call}"),
        }
    }
}

#[test]
fn send_recv_pairs_in_order() {
    for ranks in RANKS {
        let mut comms = group(ranks);
        // A ring, then several messages on one link (they pair in order),
        // both with the send posted first and with the recv posted first.
        let mut sends: Vec<(usize, usize, Bytes)> = (0..ranks)
            .map(|r| (r, (r + 1) % ranks, pattern_bytes(r as u64, 17 + r)))
            .collect();
        for k in 0..4 {
            sends.push((ranks - 1, 0, pattern_bytes(100 + k, 3 * k as usize)));
        }
        messages(&mut comms, &sends, false);
        messages(&mut comms, &sends, true);
    }
}

#[test]
fn send_recv_thread_per_rank() {
    let ranks = 4;
    let mut comms = group(ranks);
    std::thread::scope(|s| {
        for (rank, comm) in comms.iter_mut().enumerate() {
            s.spawn(move || {
                // Even ranks send to the next rank, then receive from the
                // previous one; odd ranks do it the other way round.
                let next = (rank + 1) % ranks;
                let prev = (rank + ranks - 1) % ranks;
                let mine = pattern_bytes(rank as u64, 1000 + rank);
                let theirs_len = 1000 + prev;
                let send = CollectiveCall::Send {
                    peer: next,
                    len: mine.len(),
                };
                let recv = CollectiveCall::Recv {
                    peer: prev,
                    len: theirs_len,
                };
                let order = if rank % 2 == 0 {
                    [send, recv]
                } else {
                    [recv, send]
                };
                let mut results = Vec::new();
                for call in order {
                    let (contribution, result) = comm.post(call).expect("post");
                    contribution.provide(Ok(mine.clone()));
                    results.push((call, result));
                }
                for (call, result) in results {
                    let outcome = result.wait(WAIT).expect("message");
                    if let CollectiveCall::Recv { .. } = call {
                        assert_eq!(outcome.bytes, pattern_bytes(prev as u64, theirs_len));
                    }
                }
            });
        }
    });
}

#[test]
fn group_calls_and_messages_interleave() {
    let ranks = 3;
    let mut comms = group(ranks);
    let reduction = Reduction::sum(DType::I32);
    let mut pending = Vec::new();
    for (rank, comm) in comms.iter_mut().enumerate() {
        let v = i32::try_from(rank).expect("rank") + 1;
        let (c, all) = comm
            .post(CollectiveCall::AllReduce { reduction, len: 4 })
            .expect("post");
        c.provide(Ok(Bytes::copy_from_slice(&v.to_le_bytes())));
        let message = if rank == 0 {
            CollectiveCall::Send { peer: 2, len: 2 }
        } else if rank == 2 {
            CollectiveCall::Recv { peer: 0, len: 2 }
        } else {
            CollectiveCall::AllGather { src_len: 1 }
        };
        let (c, m) = comm.post(message).expect("post");
        c.provide(Ok(Bytes::from_static(b"hi")));
        let (c, gather) = if rank == 1 {
            (None, None)
        } else {
            let (c, g) = comm
                .post(CollectiveCall::AllGather { src_len: 1 })
                .expect("post");
            (Some(c), Some(g))
        };
        if let Some(c) = c {
            c.provide(Ok(Bytes::copy_from_slice(&[rank as u8])));
        }
        pending.push((all, m, gather));
    }
    // Rank 1's all_gather was posted as its second call: it provided "hi"
    // (two bytes for a one-byte source), so that gather is poisoned for all.
    for (rank, (all, m, gather)) in pending.into_iter().enumerate() {
        let all = all.wait(WAIT).expect("all_reduce");
        assert_eq!(all.bytes.as_ref(), &6i32.to_le_bytes());
        let m = m.wait(WAIT).expect("second call");
        let gather = gather.map_or(m.clone(), |g| g.wait(WAIT).expect("all_gather"));
        if rank == 2 {
            assert_eq!(m.bytes.as_ref(), b"hi");
        }
        let poison = gather.poisoned.expect("poisoned gather");
        assert!(
            matches!(
                poison,
                compute_collective::ServerError::CollectiveInput { rank: 1, .. }
            ),
            "{poison}"
        );
    }
}

#[test]
fn a_single_rank_communicator_works() {
    let mut comms = group(1);
    let reduction = Reduction::mean(DType::F16);
    let src = input(reduction, 3, 0, 9);
    let out = clean(run_single(
        &mut comms,
        &[CollectiveCall::AllReduce {
            reduction,
            len: src.len(),
        }],
        &[src.clone().into()],
    ));
    assert_eq!(out[0].as_ref(), &src[..]);
}
