//! Ordering and progress: `ComputeWait::Wait` and `Overlap`, streams,
//! `sync_collective`, and the two threading patterns (one thread calling
//! every rank in turn, one thread per rank). Nothing but `read`, `sync` and
//! `sync_collective` may wait for another rank.

use compute_runtime::{
    ComputeWait, CubeCount, DType, Handle, Reduction, Server, ServerCommunication,
};

use super::group::*;
use crate::common::*;

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

/// copy is held. The collectives still see `src` as of their call.
#[test]
fn host_writes_behind_a_wait_collective_do_not_wait_for_the_other_ranks() {
    let n = 2;
    let g = Group::new(n);
    let red = Reduction::sum(DType::U32);
    let (mut g, outs) = within(NO_WAIT, "rank by rank", move || {
        let mut g = g;
        let mut outs = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let ids = g.ids.clone();
            let r = r as u32;
            let a = upload(s, u32_bytes(&[r + 1; 4]), S0);
            let b = alloc(s, 16, S0);
            s.all_reduce(
                a.binding(),
                b.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("first");
            // Its input copy is held behind the first.
            let x = upload(s, u32_bytes(&[10 * (r + 1); 4]), S0);
            let y = alloc(s, 16, S0);
            s.all_reduce(
                x.binding(),
                y.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("second");
            // Refill the src for the next step.
            s.write(
                vec![(x.copy_descriptor(), u32_bytes(&[1000; 4]).into())],
                S0,
            );
            // A src freed while its input copy is held; then fresh writes.
            let t = upload(s, u32_bytes(&[100 * (r + 1); 4]), S0);
            let u = alloc(s, 16, S0);
            s.all_reduce(t.binding(), u.binding(), red, S0, ids, ComputeWait::Overlap)
                .expect("third");
            drop(t);
            let fresh: Vec<Handle> = (0..4)
                .map(|k| upload(s, u32_bytes(&[k + 7; 4]), S0))
                .collect();
            outs.push((a, b, x, y, u, fresh));
        }
        (g, outs)
    });
    for (s, (_, b, x, y, u, fresh)) in g.s.iter_mut().zip(&outs) {
        s.sync_collective(S0).expect("sync_collective");
        assert_eq!(bytes_u32(&read(s, b, S0).expect("b")), vec![3; 4]);
        assert_eq!(
            bytes_u32(&read(s, y, S0).expect("y")),
            vec![30; 4],
            "src as of the call"
        );
        assert_eq!(
            bytes_u32(&read(s, x, S0).expect("x")),
            vec![1000; 4],
            "refilled"
        );
        assert_eq!(bytes_u32(&read(s, u, S0).expect("u")), vec![300; 4]);
        for (k, h) in fresh.iter().enumerate() {
            assert_eq!(
                bytes_u32(&read(s, h, S0).expect("fresh")),
                vec![k as u32 + 7; 4]
            );
        }
    }
}

/// second all-reduce must see `x` before the increment.
#[test]
fn later_work_never_overtakes_a_batch_held_behind_a_collective() {
    let n = 2;
    let rounds = 200u32;
    let g = Group::open(n);
    within(NO_WAIT * 2, "rounds", move || {
        let mut g = g;
        let ids = g.ids.clone();
        std::thread::scope(|scope| {
            for (r, s) in g.s.iter_mut().enumerate() {
                let ids = ids.clone();
                scope.spawn(move || {
                    s.comm_init(ids.clone()).expect("comm_init");
                    let red = Reduction::sum(DType::U32);
                    for round in 0..rounds {
                        if r == 1 {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        let a = upload(s, u32_bytes(&[1; 64]), S0);
                        let b = alloc(s, 256, S0);
                        let x = upload(s, u32_bytes(&[10; 64]), S0);
                        let y = alloc(s, 256, S0);
                        let ids = ids.clone();
                        s.all_reduce(
                            a.binding(),
                            b.binding(),
                            red,
                            S0,
                            ids.clone(),
                            ComputeWait::Wait,
                        )
                        .expect("first");
                        s.all_reduce(x.binding(), y.binding(), red, S0, ids, ComputeWait::Overlap)
                            .expect("second");
                        launch(s, inc_kernel(), CubeCount::x(1), &[&x], S0);
                        assert_eq!(bytes_u32(&read(s, &b, S0).expect("b")), vec![2; 64]);
                        s.sync_collective(S0).expect("sync_collective");
                        let got = bytes_u32(&read(s, &y, S0).expect("y"));
                        assert_eq!(got, vec![20; 64], "round {round}, rank {r}: y");
                        assert_eq!(bytes_u32(&read(s, &x, S0).expect("x")), vec![11; 64]);
                    }
                });
            }
        });
    });
}
