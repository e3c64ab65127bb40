//! Ordering and progress: `ComputeWait::Wait` and `Overlap`, streams,
//! `sync_collective`, and the two threading patterns (one thread calling
//! every rank in turn, one thread per rank). Nothing but `read`, `sync` and
//! `sync_collective` may wait for another rank.

use compute_runtime::{
    ComputeWait, CubeCount, DType, Handle, Reduction, Server, ServerCommunication, StreamId,
};

use super::group::*;
use super::oracle::*;
use crate::common::*;
use compute_testkit::bytes::{bytes_i32, i32_bytes};

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

/// Host writes on a stream held behind a `Wait` collective must not wait
/// for the other ranks either (they did: a write first submitted the
/// stream's pending work on its range, which waited for the collective).
/// Both ways a write meets held work: refilling the `src` of a collective
/// whose input copy is still held, and writing memory freed by a `src` whose
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

/// `Wait`: later work on the stream (a launch, the next collective, a read)
/// sees the result with no `sync_collective`. Every call of rank 0 is made
/// before rank 1 is called.
#[test]
fn wait_results_are_seen_by_later_launches_collectives_and_reads_without_sync_collective() {
    let n = 3;
    let g = Group::new(n);
    let len = 64usize;
    let (mut g, outs) = within(NO_WAIT, "rank by rank", move || {
        let mut g = g;
        let mut outs = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let ids = g.ids.clone();
            let red = Reduction::sum(DType::U32);
            let x = upload(s, u32_bytes(&vec![r as u32 + 1; len]), S0);
            let y = alloc(s, 4 * len as u64, S0);
            let z = alloc(s, 4 * len as u64, S0);
            s.all_reduce(
                x.binding(),
                y.binding(),
                red,
                S0,
                ids.clone(),
                ComputeWait::Wait,
            )
            .expect("first");
            // y += 1 on the device, after the first result.
            launch(s, inc_kernel(), CubeCount::x(1), &[&y], S0);
            s.all_reduce(y.binding(), z.binding(), red, S0, ids, ComputeWait::Wait)
                .expect("second");
            launch(s, inc_kernel(), CubeCount::x(1), &[&z], S0);
            outs.push((x, y, z));
        }
        (g, outs)
    });
    for (s, (_, y, z)) in g.s.iter_mut().zip(&outs) {
        // first: 1 + 2 + 3 = 6; inc: 7; second: 21; inc: 22.
        assert_eq!(bytes_u32(&read(s, y, S0).expect("y")), vec![7; len]);
        assert_eq!(bytes_u32(&read(s, z, S0).expect("z")), vec![22; len]);
    }
}

/// `Wait` on one stream, then a read and a launch of `dst` on other
/// streams: they are ordered after the result too.
#[test]
fn a_wait_result_is_seen_from_other_streams() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, u32_bytes(&[r as u32 + 5; 16]), StreamId(1));
        let y = alloc(s, 64, StreamId(1));
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(DType::U32),
            StreamId(1),
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
        outs.push((x, y));
    }
    for (s, (_, y)) in g.s.iter_mut().zip(&outs) {
        assert_eq!(
            bytes_u32(&read(s, y, StreamId(2)).expect("read")),
            vec![11; 16]
        );
        launch(s, inc_kernel(), CubeCount::x(1), &[y], StreamId(3));
        assert_eq!(
            bytes_u32(&read(s, y, StreamId(3)).expect("read")),
            vec![12; 16]
        );
    }
}

/// `Overlap`: `sync_collective` writes the result; work after it sees it.
/// Several overlapping collectives, mixed with `Wait` ones, are written by
/// one `sync_collective`.
#[test]
fn overlap_results_are_written_by_sync_collective() {
    let n = 3;
    let mut g = Group::new(n);
    let red = Reduction::max(DType::I32);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let mut mine = Vec::new();
        for k in 0..4i32 {
            let x = upload(s, i32_bytes(&[k * 10 + r as i32; 8]), S0);
            let y = alloc(s, 32, S0);
            let mode = match k {
                2 => ComputeWait::Wait,
                _ => ComputeWait::Overlap,
            };
            s.all_reduce(x.binding(), y.binding(), red, S0, g.ids.clone(), mode)
                .expect("all_reduce");
            mine.push((x, y));
        }
        outs.push(mine);
    }
    for (s, mine) in g.s.iter_mut().zip(&outs) {
        s.sync_collective(S0).expect("sync_collective");
        s.sync_collective(S0).expect("again: nothing left");
        for (k, (_, y)) in mine.iter().enumerate() {
            launch(s, inc_kernel(), CubeCount::x(1), &[y], S0);
            let want = vec![k as i32 * 10 + n as i32 - 1 + 1; 8];
            assert_eq!(bytes_i32(&read(s, y, S0).expect("read")), want, "call {k}");
        }
    }
}

/// `Overlap` does not hold the stream: on rank 0, a launch after an
/// overlapping collective runs and is read back before rank 1 is called.
#[test]
fn overlap_does_not_hold_later_work_on_its_stream() {
    let n = 2;
    let g = Group::new(n);
    let (mut g, outs, w) = within(NO_WAIT, "rank 0 alone", move || {
        let mut g = g;
        let s = &mut g.s[0];
        let x = upload(s, u32_bytes(&[1; 8]), S0);
        let y = alloc(s, 32, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(DType::U32),
            S0,
            g.ids.clone(),
            ComputeWait::Overlap,
        )
        .expect("all_reduce");
        let w = upload(s, u32_bytes(&[41; 8]), S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&w], S0);
        let got = bytes_u32(&read(s, &w, S0).expect("read w"));
        assert_eq!(got, vec![42; 8]);
        (g, vec![(x, y)], w)
    });
    drop(w);
    let s = &mut g.s[1];
    let x = upload(s, u32_bytes(&[2; 8]), S0);
    let y = alloc(s, 32, S0);
    s.all_reduce(
        x.binding(),
        y.binding(),
        Reduction::sum(DType::U32),
        S0,
        g.ids.clone(),
        ComputeWait::Overlap,
    )
    .expect("all_reduce");
    let mut outs = outs;
    outs.push((x, y));
    for (s, (_, y)) in g.s.iter_mut().zip(&outs) {
        s.sync_collective(S0).expect("sync_collective");
        assert_eq!(bytes_u32(&read(s, y, S0).expect("read")), vec![3; 8]);
    }
}

/// A collective's input is `src` as of the call: an increment of `src`
/// queued right after it on the stream does not reach the result, in either
/// mode.
#[test]
fn the_input_is_src_as_of_the_call() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let mut mine = Vec::new();
        for mode in [ComputeWait::Wait, ComputeWait::Overlap] {
            let x = upload(s, u32_bytes(&[100 * (r as u32 + 1); 8]), S0);
            let y = alloc(s, 32, S0);
            s.all_reduce(
                x.binding(),
                y.binding(),
                Reduction::sum(DType::U32),
                S0,
                g.ids.clone(),
                mode,
            )
            .expect("all_reduce");
            launch(s, inc_kernel(), CubeCount::x(1), &[&x], S0);
            mine.push((x, y));
        }
        outs.push(mine);
    }
    for (r, (s, mine)) in g.s.iter_mut().zip(&outs).enumerate() {
        s.sync_collective(S0).expect("sync_collective");
        for (x, y) in mine {
            assert_eq!(bytes_u32(&read(s, y, S0).expect("y")), vec![300; 8]);
            assert_eq!(
                bytes_u32(&read(s, x, S0).expect("x")),
                vec![100 * (r as u32 + 1) + 1; 8]
            );
        }
    }
}

/// `src` and `dst` may be parts of larger slices (at offsets, with odd
/// lengths at the end of a slice): the rest of the slice is left intact.
#[test]
fn sub_ranges_as_src_and_dst_leave_the_rest_of_their_slices_intact() {
    let n = 3;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        // src: 6 f16 (12 B) at byte 6 of a 40-byte slice (not 4-aligned).
        let mut src_slice = pattern(40, r as u64);
        let vals: Vec<i128> = (0..6).map(|i| i * 3 + r as i128).collect();
        src_slice[6..18].copy_from_slice(&encode(DType::F16, &vals));
        let x = upload(s, src_slice, S0);
        // dst: at byte 8 of a 32-byte slice; the gather's 3 B per rank end
        // on the slice's last byte.
        let around = pattern(32, 99);
        let y = upload(s, around.clone(), S0);
        s.all_reduce(
            sub(&x, 6, 12).binding(),
            sub(&y, 8, 12).binding(),
            Reduction::sum(DType::F16),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
        let z = upload(s, pattern(4 + 3 * n, 98), S0);
        s.all_gather(
            sub(&x, 1, 3).binding(),
            sub(&z, 4, 3 * n as u64).binding(),
            S0,
            g.ids.clone(),
        )
        .expect("all_gather");
        outs.push((x, y, z, around));
    }
    let sums: Vec<i128> = (0..6).map(|i| n as i128 * i * 3 + 3).collect();
    for (r, (s, (_, y, z, around))) in g.s.iter_mut().zip(&outs).enumerate() {
        let got = read(s, y, S0).expect("y");
        let mut want = around.clone();
        want[8..20].copy_from_slice(&encode(DType::F16, &sums));
        assert_same(&got, &want, 1, &format!("all_reduce dst slice: rank {r}"));
        let got = read(s, z, S0).expect("z");
        let mut want = pattern(4 + 3 * n, 98);
        for q in 0..n {
            want[4 + 3 * q..7 + 3 * q].copy_from_slice(&pattern(40, q as u64)[1..4]);
        }
        assert_same(&got, &want, 1, &format!("all_gather dst slice: rank {r}"));
    }
}

/// `sync_collective` with nothing posted, and on a stream never used.
#[test]
fn sync_collective_with_nothing_posted_is_ok() {
    let mut g = Group::new(2);
    g.s[0].sync_collective(S0).expect("nothing posted");
    g.s[1].sync_collective(StreamId(9)).expect("unused stream");
    g.assert_still_works(S0, "after empty syncs");
}

/// Work on a stream after a held batch never overtakes it (it did, now and
/// then: the applier submits the batch once the collective holding it is
/// in, and a read waiting for that collective submitted the stream's later
/// work at the same moment). Each round, rank 0 posts a `Wait` all-reduce,
/// an `Overlap` one on `x` (its input copy is held behind the first), an
/// increment of `x`, and a read that waits for the first; rank 1 posts a
/// little later, so the read is waiting when the first completes. The
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
