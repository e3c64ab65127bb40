//! burn's collectives run natively on this server: data-parallel training
//! on three ranks of one adapter averages its gradients through the
//! server's collectives (the bridge counts every call it hands over; the
//! emulated path, which cubecl takes without a device transport, makes
//! none), and the ranks' weights stay bit-identical.

use burn_on_server::programs::data_parallel::{devices, train};

#[test]
fn data_parallel_training_all_reduces_natively_and_keeps_the_ranks_identical() {
    let ranks = devices(3);
    let before = cubecl_bridge::collective::calls();
    let weights = train(&ranks, 2, 96, 16);
    let calls = cubecl_bridge::collective::calls() - before;
    // Four parameter tensors (two weights, two biases), two steps, one
    // all_reduce per rank each: at least 24 calls.
    assert!(calls >= 24, "{calls} collective calls reached the servers");
    assert_eq!(weights.len(), 3);
    for w in &weights[1..] {
        let same = w
            .iter()
            .zip(&weights[0])
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same && w.len() == weights[0].len(), "ranks differ");
    }
}
