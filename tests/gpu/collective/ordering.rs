//! Ordering and progress: `ComputeWait::Wait` and `Overlap`, streams,
//! `sync_collective`, and the two threading patterns (one thread calling
//! every rank in turn, one thread per rank). Nothing but `read`, `sync` and
//! `sync_collective` may wait for another rank.

use compute_runtime::{ComputeWait, DType, Reduction, ServerCommunication};

use super::group::*;
use crate::common::*;

/// A 0-byte collective behind a `Wait` collective on the same stream has
/// nothing to stage and must not wait for the earlier one (it did: staging
/// submitted the held stream, which waited for the other ranks).
#[test]
fn zero_byte_collectives_behind_a_wait_collective_do_not_wait_for_the_other_ranks() {
    let n = 2;
    let g = Group::new(n);
    let red = Reduction::sum(DType::U32);
    let (mut g, outs) = within(NO_WAIT, "rank by rank", move || {
        let mut g = g;
        let mut outs = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let ids = g.ids.clone();
            let x = upload(s, u32_bytes(&[r as u32 + 1; 4]), S0);
            let y = alloc(s, 16, S0);
            s.all_reduce(
                x.binding(),
                y.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("all_reduce");
            let empty = put_bytes(s, Vec::new(), S0);
            let none = dst_bytes(s, 0, S0);
            s.all_reduce(
                empty.binding(),
                none.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("0-byte all_reduce");
            s.all_gather(empty.binding(), none.binding(), S0, ids.clone())
                .expect("0-byte all_gather");
            s.reduce_scatter(empty.binding(), none.binding(), red, S0, ids.clone())
                .expect("0-byte reduce_scatter");
            s.all_to_all(empty.binding(), none.binding(), S0, ids.clone())
                .expect("0-byte all_to_all");
            let z = alloc(s, 16, S0);
            s.all_reduce(y.binding(), z.binding(), red, S0, ids, ComputeWait::Wait)
                .expect("all_reduce after");
            outs.push((x, y, z, empty, none));
        }
        (g, outs)
    });
    for (s, (_, y, z, _, _)) in g.s.iter_mut().zip(&outs) {
        assert_eq!(bytes_u32(&read(s, y, S0).expect("y")), vec![3; 4]);
        assert_eq!(bytes_u32(&read(s, z, S0).expect("z")), vec![6; 4]);
    }
}
