//! Collective calls in the wrong state: inside a graph capture (refused
//! with `CaptureState`), before `comm_init`, with a rank list no
//! `comm_init` named, with a peer that is this rank; `comm_init`'s own
//! refusals; communicators over overlapping rank lists.

use compute_runtime::{
    ComputeWait, DType, DeviceId, Reduction, Server, ServerCommunication, ServerError, StreamId,
};

use super::group::*;
use crate::common::*;

fn is_capture(e: &ServerError) -> bool {
    matches!(e, ServerError::CaptureState { .. })
}

fn is_state(e: &ServerError) -> bool {
    matches!(e, ServerError::CollectiveState { .. })
}

/// Every collective call of one rank on `stream` (`send` and `recv` too
/// when `p2p`); each result with its name.
fn every_call(
    s: &mut TestServer,
    r: usize,
    ids: &[DeviceId],
    stream: StreamId,
    p2p: bool,
) -> Vec<(&'static str, Result<(), ServerError>)> {
    let x = alloc(s, 16, StreamId(7));
    let y = alloc(s, 16 * ids.len() as u64, StreamId(7));
    let y1 = sub(&y, 0, 16);
    let red = Reduction::sum(DType::U32);
    let peer = ids[(r + 1) % ids.len()];
    let v = ids.to_vec();
    let root_src = (r == 0).then(|| x.binding());
    let mut calls = vec![
        (
            "all_reduce",
            s.all_reduce(
                x.binding(),
                y1.binding(),
                red,
                stream,
                v.clone(),
                ComputeWait::Wait,
            ),
        ),
        (
            "overlapping all_reduce",
            s.all_reduce(
                x.binding(),
                y1.binding(),
                red,
                stream,
                v.clone(),
                ComputeWait::Overlap,
            ),
        ),
        (
            "all_gather",
            s.all_gather(x.binding(), y.binding(), stream, v.clone()),
        ),
        (
            "reduce_scatter",
            s.reduce_scatter(y.binding(), x.binding(), red, stream, v.clone()),
        ),
        (
            "broadcast",
            s.broadcast(root_src, y1.binding(), stream, ids[0], v.clone()),
        ),
        (
            "all_to_all",
            s.all_to_all(y.binding(), y.binding(), stream, v),
        ),
    ];
    // A refused call is still posted (its peers fail with it rather than
    // pairing with the next one), and a rank runs its calls in order, a
    // send waiting for its recv: even ranks send first, odd ranks receive
    // first, or the two would wait for each other.
    if p2p && r.is_multiple_of(2) {
        calls.push(("send", s.send(x.copy_descriptor(), stream, peer)));
        calls.push(("recv", s.recv(y1.clone(), stream, peer)));
    } else if p2p {
        calls.push(("recv", s.recv(y1.clone(), stream, peer)));
        calls.push(("send", s.send(x.copy_descriptor(), stream, peer)));
    }
    calls
}

/// Inside a capture every collective is refused with `CaptureState` (a graph
/// replays dispatches; a collective is a host exchange), and nothing is
/// posted: once every rank ends its capture, the communicator pairs the
/// next calls as before. Collectives on a stream that is not capturing go
/// on meanwhile; the capture itself is unharmed.
#[test]
fn collectives_inside_a_capture_are_refused_with_capture_state() {
    let n = 2;
    let mut g = Group::new(n);
    let mut graphs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        s.begin_capture(S0).expect("begin_capture");
        for (what, called) in every_call(s, r, &g.ids.clone(), S0, true) {
            let e = called.expect_err("refused");
            assert!(is_capture(&e), "{what}: rank {r}: {e}");
        }
    }
    // Another stream is not capturing.
    g.assert_still_works(StreamId(1), "on another stream during the capture");
    for s in &mut g.s {
        graphs.push(s.end_capture(S0).expect("end_capture"));
    }
    for (s, graph) in g.s.iter_mut().zip(graphs) {
        s.replay(graph, S0).expect("replay");
    }
    g.assert_still_works(S0, "after the capture");
}

/// Before `comm_init` there is no communicator; after it, a rank list in
/// another order, or another set, names none either. Such calls fail at
/// once with `CollectiveState` and post nothing.
#[test]
fn calls_without_a_communicator_for_their_rank_list_are_collective_state() {
    let n = 3;
    let mut g = Group::open(n);
    let ids = g.ids.clone();
    for (what, called) in every_call(&mut g.s[0], 0, &ids, S0, true) {
        let e = called.expect_err("no communicator");
        assert!(is_state(&e), "before comm_init: {what}: {e}");
    }
    g.s[0].sync_collective(S0).expect("nothing posted");
    g.init();
    let reversed: Vec<DeviceId> = ids.iter().rev().copied().collect();
    let fewer = ids[..2].to_vec();
    let stranger = vec![ids[0], ids[1], ids[2], DeviceId(u64::MAX)];
    for other in [reversed, fewer, stranger] {
        // (send and recv name a peer, not a list: they would find it.)
        for (what, called) in every_call(&mut g.s[0], 0, &other, S0, false) {
            let e = called.expect_err("no communicator");
            assert!(is_state(&e), "rank list {other:?}: {what}: {e}");
        }
    }
    let x = alloc(&mut g.s[0], 4, S0);
    let e = g.s[0]
        .send(x.copy_descriptor(), S0, DeviceId(u64::MAX))
        .expect_err("no communicator has the peer");
    assert!(is_state(&e), "{e}");
    let e = g.s[0]
        .recv(x.clone(), S0, DeviceId(u64::MAX))
        .expect_err("no communicator has the peer");
    assert!(is_state(&e), "{e}");
    g.assert_still_works(S0, "after the refusals");
}

/// `comm_init` again with the same list is a no-op; a list without this
/// device, with a device twice, or empty is refused.
#[test]
fn comm_init_is_idempotent_and_refuses_bad_rank_lists() {
    let mut g = Group::new(2);
    let ids = g.ids.clone();
    g.s[0].comm_init(ids.clone()).expect("again");
    for bad in [vec![ids[1]], vec![ids[0], ids[0]], vec![]] {
        let e = g.s[0].comm_init(bad.clone()).expect_err("refused");
        assert!(is_state(&e), "{bad:?}: {e}");
    }
    g.assert_still_works(S0, "after the refusals");
}

/// A message to or from this rank itself is refused (`InvalidArgument`) and
/// takes no place in the pair's order: the next real message is #0.
#[test]
fn a_message_to_or_from_itself_is_invalid_and_takes_no_turn() {
    let mut g = Group::new(2);
    let me = g.ids[0];
    let x = upload(&mut g.s[0], u32_bytes(&[4; 4]), S0);
    let e = g.s[0]
        .send(x.copy_descriptor(), S0, me)
        .expect_err("to itself");
    assert!(matches!(e, ServerError::InvalidArgument { .. }), "{e}");
    let other = alloc(&mut g.s[0], 16, S0);
    let e = g.s[0].recv(other, S0, me).expect_err("from itself");
    assert!(matches!(e, ServerError::InvalidArgument { .. }), "{e}");
    let y = alloc(&mut g.s[1], 16, S0);
    let (to, from) = (g.ids[1], g.ids[0]);
    g.s[0].send(x.copy_descriptor(), S0, to).expect("send");
    g.s[1].recv(y.clone(), S0, from).expect("recv");
    assert_eq!(bytes_u32(&read(&mut g.s[1], &y, S0).expect("recv")), [4; 4]);
}

/// Communicators over overlapping rank lists are independent: ranks 0 and
/// 1 belong to both the 3-rank and a 2-rank communicator, each on its own
/// stream, and call them in opposite orders.
#[test]
fn communicators_over_overlapping_rank_lists_are_independent() {
    let mut g = Group::new(3);
    let pair = g.ids[..2].to_vec();
    for s in &mut g.s[..2] {
        s.comm_init(pair.clone()).expect("comm_init pair");
    }
    let (s1, s2) = (StreamId(1), StreamId(2));
    let red = Reduction::sum(DType::U32);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let all = |s: &mut TestServer| {
            let x = upload(s, u32_bytes(&[r as u32 + 1; 4]), s1);
            let y = alloc(s, 16, s1);
            s.all_reduce(
                x.binding(),
                y.binding(),
                red,
                s1,
                g.ids.clone(),
                ComputeWait::Wait,
            )
            .expect("all three");
            (x, y)
        };
        let two = |s: &mut TestServer| {
            let x = upload(s, u32_bytes(&[10 * (r as u32 + 1); 4]), s2);
            let y = alloc(s, 16, s2);
            s.all_reduce(
                x.binding(),
                y.binding(),
                red,
                s2,
                pair.clone(),
                ComputeWait::Wait,
            )
            .expect("the pair");
            (x, y)
        };
        let (a, b) = match r {
            0 => (all(s), Some(two(s))),
            1 => {
                let b = two(s);
                (all(s), Some(b))
            }
            _ => (all(s), None),
        };
        outs.push((a, b));
    }
    for (r, (s, (a, b))) in g.s.iter_mut().zip(&outs).enumerate() {
        assert_eq!(
            bytes_u32(&read(s, &a.1, s1).expect("all three")),
            [6; 4],
            "rank {r}"
        );
        if let Some((_, y)) = b {
            assert_eq!(
                bytes_u32(&read(s, y, s2).expect("pair")),
                [30; 4],
                "rank {r}"
            );
        }
    }
}
