//! Collectives across servers on separate devices of one adapter.

use compute_runtime::{ComputeWait, DType, Reduction, ServerCommunication, StreamId};

use super::group::Group;
use crate::common::*;

const S0: StreamId = StreamId(0);

#[test]
fn all_reduce_sums_across_two_ranks_from_one_thread() {
    let Group { mut s, ids } = Group::new(2);
    let n = 1000;
    let mut dsts = Vec::new();
    for (r, server) in s.iter_mut().enumerate() {
        let data: Vec<f32> = (0..n).map(|i| (i + r * 10) as f32).collect();
        let src = upload(server, f32_bytes(&data), S0);
        let dst = alloc(server, 4 * n as u64, S0);
        server
            .all_reduce(
                src.binding(),
                dst.binding(),
                Reduction::sum(DType::F32),
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("all_reduce");
        dsts.push((src, dst));
    }
    for (server, (_, dst)) in s.iter_mut().zip(&dsts) {
        let got = bytes_f32(&read(server, dst, S0).expect("read"));
        let want: Vec<f32> = (0..n).map(|i| (2 * i + 10) as f32).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn consecutive_collectives_and_launches_on_one_rank_before_the_other_is_called() {
    let Group { mut s, ids } = Group::new(2);
    let n = 64usize;
    let mut outs = Vec::new();
    // Rank 0 does everything first, then rank 1: nothing may wait.
    for (r, server) in s.iter_mut().enumerate() {
        let x = upload(server, u32_bytes(&vec![r as u32 + 1; n]), S0);
        let y = alloc(server, 4 * n as u64, S0);
        let z = alloc(server, 4 * n as u64, S0);
        let red = Reduction::sum(DType::U32);
        server
            .all_reduce(
                x.binding(),
                y.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("first");
        // y += 1 on the device, after the first result.
        launch(
            server,
            inc_kernel(),
            compute_runtime::CubeCount::x(1),
            &[&y],
            S0,
        );
        server
            .all_reduce(
                y.binding(),
                z.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("second");
        outs.push((x, y, z));
    }
    for (server, (_, y, z)) in s.iter_mut().zip(&outs) {
        // first: 1 + 2 = 3; inc: 4; second: 4 + 4 = 8.
        assert_eq!(bytes_u32(&read(server, y, S0).expect("y")), vec![4; n]);
        assert_eq!(bytes_u32(&read(server, z, S0).expect("z")), vec![8; n]);
    }
}
