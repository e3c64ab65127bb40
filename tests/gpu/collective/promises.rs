//! Promises a user found broken (issue 19), one test each, on 3 ranks in
//! both threading patterns ([`both_ways`]).

use compute_runtime::{
    Bytes, ComputeWait, DType, DeviceId, Handle, Reduction, Server, ServerCommunication,
    ServerError, StreamId,
};

use super::group::*;
use crate::common::*;

const N: usize = 3;

/// A `Wait` collective is ordered after everything issued before it on
/// its stream, whether or not its rank stages input: a host write of `x`
/// before a broadcast into `x` never lands after the result (it did on the
/// ranks with nothing to stage, and on every rank for a write of 1 MiB or
/// more, which goes through the mapped upload path).
#[test]
fn a_host_write_before_a_wait_collective_never_lands_after_its_result() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> Vec<(Handle, u8)> {
        let mut out = Vec::new();
        // Small, through `write_buffer`; a reused slice (its old bytes are
        // the freed buffer's); large, through the mapped upload path.
        for (len, root, reuse) in [(16usize, 1usize, false), (16, 1, true), (2 << 20, 0, false)] {
            if reuse {
                let old = upload(s, vec![0xAB; len], S0);
                drop(old);
            }
            let x = upload(s, vec![7u8; len], S0);
            let src = (r == root).then(|| upload(s, vec![9u8; len], S0));
            s.broadcast(
                src.as_ref().map(Handle::binding),
                x.binding(),
                S0,
                ids[root],
                ids.to_vec(),
            )
            .expect("broadcast");
            out.push((x, 9));
        }
        out
    }
    fn check(r: usize, s: &mut TestServer, xs: Vec<(Handle, u8)>) {
        for (i, (x, want)) in xs.into_iter().enumerate() {
            let got = read(s, &x, S0).unwrap_or_else(|e| panic!("rank {r}, case {i}: {e}"));
            let right = got.iter().filter(|b| **b == want).count();
            assert_eq!(
                right,
                got.len(),
                "rank {r}, case {i}: {right} of {} bytes are {want}: {:?}",
                got.len(),
                &got[..4]
            );
        }
    }
    both_ways(N, issue, check);
}
