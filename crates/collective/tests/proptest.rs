//! Random (dtype, op, ranks, length) against the independent oracle: the
//! reduction called directly, and through communicators.

mod common;

use bytes::Bytes;
use common::*;
use compute_collective::CollectiveCall;
use compute_collective::reduce::{Parallelism, reduce};
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
    ) {
        let pattern = if threads { Pattern::Threads } else { Pattern::Single };
        let mut comms = group(ranks);
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
