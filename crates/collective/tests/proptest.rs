//! Random (dtype, op, ranks, length) against the independent oracle: the
//! reduction called directly, and through communicators.

mod common;

use bytes::Bytes;
use common::*;
use compute_collective::reduce::{Parallelism, reduce};
use compute_collective::{CollectiveCall, CommConfig, DEFAULT_CHUNK_BYTES, Plan};
use compute_runtime::{DType, ReduceOp, Reduction};
use proptest::prelude::*;

fn reduction() -> impl Strategy<Value = Reduction> {
    (0..DType::ALL.len(), 0..ReduceOp::ALL.len())
        .prop_map(|(d, o)| Reduction::new(ReduceOp::ALL[o], DType::ALL[d]))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reduce_matches_the_oracle(
        reduction in reduction(),
        ranks in 1usize..=6,
        count in 0usize..600,
        seed in any::<u64>(),
        threads in 1usize..=4,
    ) {
        let inputs: Vec<Vec<u8>> = (0..ranks).map(|r| input(reduction, seed, r, count)).collect();
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut out = vec![0u8; count * reduction.dtype.size()];
        let parallelism = Parallelism { min_bytes: 0, max_threads: threads };
        reduce(reduction, &refs, &mut out, parallelism).expect("reduce");
        check(reduction, &out, &expected_all(reduction, seed, ranks, count), "proptest");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn communicators_match_the_oracle(
        reduction in reduction(),
        ranks in 1usize..=4,
        count in 0usize..200,
        seed in any::<u64>(),
        threads in any::<bool>(),
        chunk in prop_oneof![Just(8usize), Just(24), Just(64), Just(DEFAULT_CHUNK_BYTES)],
    ) {
        let pattern = if threads { Pattern::Threads } else { Pattern::Single };
        // Calls cut into steps of `chunk` bytes, or (the default) not cut.
        let config = CommConfig::default().with_timeout(WAIT).with_chunk_bytes(chunk);
        let mut comms = group_with(ranks, config);
        let size = reduction.dtype.size();
        // all_reduce of `count` elements.
        let inputs: Vec<Bytes> = (0..ranks).map(|r| input(reduction, seed, r, count).into()).collect();
        let call = CollectiveCall::AllReduce { reduction, len: count * size };
        let want = expected_all(reduction, seed, ranks, count);
        for bytes in clean(run(pattern, &mut comms, &same(call, ranks), &inputs)) {
            check(reduction, &bytes, &want, "all_reduce");
        }
        // reduce_scatter of `count` elements per rank.
        let inputs: Vec<Bytes> =
            (0..ranks).map(|r| input(reduction, seed, r, count * ranks).into()).collect();
        let call = CollectiveCall::ReduceScatter { reduction, dst_len: count * size };
        let want = expected_all(reduction, seed, ranks, count * ranks);
        for (r, bytes) in clean(run(pattern, &mut comms, &same(call, ranks), &inputs)).iter().enumerate() {
            check(reduction, bytes, &want[r * count..(r + 1) * count], "reduce_scatter");
        }
    }
}

/// A call of one of the seven kinds, for plans.
fn call() -> impl Strategy<Value = (CollectiveCall, usize)> {
    let red = Reduction::sum(DType::F16);
    (0usize..7, 1usize..=5, 0usize..300, 0usize..5).prop_map(move |(kind, ranks, len, peer)| {
        let peer = peer % ranks;
        let call = match kind {
            0 => CollectiveCall::AllReduce {
                reduction: red,
                len: len * 2,
            },
            1 => CollectiveCall::AllGather { src_len: len },
            2 => CollectiveCall::ReduceScatter {
                reduction: red,
                dst_len: len * 2,
            },
            3 => CollectiveCall::Broadcast {
                root: peer,
                len,
                has_src: peer == 0,
            },
            4 => CollectiveCall::AllToAll { len: len * ranks },
            5 => CollectiveCall::Send { peer, len },
            _ => CollectiveCall::Recv { peer, len },
        };
        (call, ranks)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every byte of `src` is some step's input exactly once, every byte of
    /// `dst` some step's output exactly once, and a call of several steps
    /// puts every piece on a 4-byte word.
    #[test]
    fn plans_cover_every_byte_once((call, ranks) in call(), chunk in 1usize..200) {
        let plan = Plan::new(call, ranks, chunk);
        let input = call.input_len(ranks).unwrap_or(0);
        let output = call.output_len(ranks);
        let mut read = vec![0u8; input];
        let mut written = vec![0u8; output];
        for step in 0..plan.steps() {
            let pieces = plan.input_pieces(step);
            let total: usize = pieces.iter().map(|r| r.len()).sum();
            prop_assert_eq!(total, plan.input_len(step));
            for r in pieces {
                prop_assert!(plan.steps() == 1 || r.start % 4 == 0, "{:?} {:?}", call, r);
                for b in r { read[b] += 1; }
            }
            let mut from = vec![0u8; plan.output_len(step)];
            for p in plan.output_pieces(step) {
                prop_assert!(plan.steps() == 1 || p.to % 4 == 0, "{:?} {:?}", call, p);
                for i in 0..p.len {
                    written[p.to + i] += 1;
                    from[p.from + i] += 1;
                }
            }
            prop_assert!(from.iter().all(|c| *c == 1), "{:?} step {}", call, step);
        }
        prop_assert!(read.iter().all(|c| *c == 1), "{:?}: src", call);
        prop_assert!(written.iter().all(|c| *c == 1), "{:?}: dst", call);
    }
}
