//! `send` / `recv`: messages pair per (sender, receiver), in order; rings
//! in both call orders; the sent bytes are `src` as of the call; a `recv` is
//! a `Wait` collective into its handle.
//!
//! A rank's collective calls run in the order they were made, so a `send`
//! completes when its `recv` is reached: a ring where every rank sends first
//! (or every rank receives first) is a cycle, which fails on the timeout
//! instead of completing (see the `collective_timeout` binary). Every ring
//! here has at least one rank of each order.

use compute_runtime::{CubeCount, DeviceId, Handle, ServerCommunication};

use super::group::*;
use super::oracle::*;
use crate::common::*;

/// One message: from, to, bytes.
type Message = (usize, usize, usize);

/// Posts `messages` in this global order (each rank makes its own calls in
/// it, so no rank waits on a call another rank has not reached), one rank
/// after the other; returns every rank's `(sender, receiver handle, bytes)`.
fn post(g: &mut Group, messages: &[Message]) -> Vec<Vec<(usize, Handle, Vec<u8>)>> {
    let mut recvs = vec![Vec::new(); g.n()];
    for (r, s) in g.s.iter_mut().enumerate() {
        for (k, &(from, to, len)) in messages.iter().enumerate() {
            let data = pattern(len, (k * 1000 + from * 10 + to) as u64);
            if from == r {
                let x = put_bytes(s, data, S0);
                s.send(x.copy_descriptor(), S0, g.ids[to])
                    .unwrap_or_else(|e| panic!("message {k}: send on rank {r}: {e}"));
            } else if to == r {
                let y = dst_bytes(s, len, S0);
                s.recv(y.clone(), S0, g.ids[from])
                    .unwrap_or_else(|e| panic!("message {k}: recv on rank {r}: {e}"));
                recvs[r].push((from, y, data));
            }
        }
    }
    recvs
}

fn check(g: &mut Group, recvs: &[Vec<(usize, Handle, Vec<u8>)>], what: &str) {
    for (r, mine) in recvs.iter().enumerate() {
        let s = &mut g.s[r];
        s.sync_collective(S0)
            .unwrap_or_else(|e| panic!("{what}: rank {r}: sync_collective: {e}"));
        let hs: Vec<Handle> = mine.iter().map(|(_, h, _)| h.clone()).collect();
        for ((from, _, want), got) in mine.iter().zip(read_all(s, &hs, S0)) {
            let what = format!("{what}: rank {r}: message from rank {from}");
            assert_same(&got, want, 1, &what);
        }
    }
}

/// Several messages per (sender, receiver) pair, of different sizes (0 and
/// 1 byte included), interleaved with other pairs: each pairs with its
/// counterpart by order within its pair.
#[test]
fn send_and_recv_pair_in_order_per_sender_and_receiver() {
    let mut g = Group::new(3);
    let messages = [
        (0, 2, 0),
        (0, 1, 5),
        (0, 2, 1000),
        (1, 2, 7),
        (0, 2, 1),
        (2, 0, 3),
        (0, 2, 4096),
        (1, 0, 64),
        (2, 1, 12),
        (1, 2, 8),
    ];
    let recvs = within(NO_WAIT, "posting", move || {
        let recvs = post(&mut g, &messages);
        (g, recvs)
    });
    let (mut g, recvs) = recvs;
    check(&mut g, &recvs, "interleaved pairs");
    g.assert_still_works(S0, "after the messages");
}

/// Rank `r` sends to `r + step` and receives from `r - step` (mod n), and
/// `sends_first(r)` says which of its two calls it makes first.
fn ring(g: &mut Group, step: usize, sends_first: impl Fn(usize) -> bool, what: &str) {
    let n = g.n();
    let len = 1000 + step;
    let data = |r: usize| pattern(len, (r * 7 + step) as u64);
    let mut recvs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let to: DeviceId = g.ids[(r + step) % n];
        let from: DeviceId = g.ids[(r + n - step) % n];
        let x = upload(s, data(r), S0);
        let y = alloc(s, len as u64, S0);
        let send = |s: &mut TestServer| s.send(x.copy_descriptor(), S0, to).expect("send");
        let recv = |s: &mut TestServer| s.recv(y.clone(), S0, from).expect("recv");
        if sends_first(r) {
            send(s);
            recv(s);
        } else {
            recv(s);
            send(s);
        }
        recvs.push(vec![((r + n - step) % n, y, data((r + n - step) % n))]);
    }
    check(g, &recvs, what);
}

/// Rings both ways on 2, 3 and 4 ranks, with rank 0 sending first and the
/// others receiving first, the converse, and alternating orders.
#[test]
fn rings_of_send_and_recv_in_both_call_orders() {
    for n in [2, 3, 4] {
        let g = Group::new(n);
        let mut g = within(NO_WAIT, &format!("rings on {n} ranks"), move || {
            let mut g = g;
            for step in [1, n - 1] {
                ring(&mut g, step, |r| r == 0, "rank 0 sends first");
                ring(&mut g, step, |r| r != 0, "rank 0 receives first");
                ring(&mut g, step, |r| r % 2 == 0, "even ranks send first");
            }
            g
        });
        g.assert_still_works(S0, "after the rings");
    }
}

/// A send ships `src` as of the call: work on the stream after it (an
/// increment of `src`) is not seen by the receiver, and sees the send done.
#[test]
fn a_send_ships_src_as_of_the_call_and_a_recv_is_seen_by_later_work() {
    let mut g = Group::new(2);
    let (to, from) = (g.ids[1], g.ids[0]);
    let x = upload(&mut g.s[0], u32_bytes(&[10, 20, 30, 40]), S0);
    g.s[0].send(x.copy_descriptor(), S0, to).expect("send");
    launch(&mut g.s[0], inc_kernel(), CubeCount::x(1), &[&x], S0);
    let y = alloc(&mut g.s[1], 16, S0);
    g.s[1].recv(y.clone(), S0, from).expect("recv");
    // The recv is a `Wait` collective: the increment after it sees its bytes.
    launch(&mut g.s[1], inc_kernel(), CubeCount::x(1), &[&y], S0);
    g.s[0].sync_collective(S0).expect("sync_collective");
    assert_eq!(
        bytes_u32(&read(&mut g.s[1], &y, S0).expect("y")),
        [11, 21, 31, 41]
    );
    assert_eq!(
        bytes_u32(&read(&mut g.s[0], &x, S0).expect("x")),
        [11, 21, 31, 41]
    );
}

/// A recv into part of a slice writes that part only.
#[test]
fn a_recv_into_a_sub_range_leaves_the_rest_of_its_slice_intact() {
    let mut g = Group::new(2);
    let whole = pattern(64, 5);
    let sent = pattern(20, 6);
    let x = upload(&mut g.s[0], sent.clone(), S0);
    let h = upload(&mut g.s[1], whole.clone(), S0);
    let part = sub(&h, 16, 20);
    let (to, from) = (g.ids[1], g.ids[0]);
    g.s[0].send(x.copy_descriptor(), S0, to).expect("send");
    g.s[1].recv(part, S0, from).expect("recv");
    let got = read(&mut g.s[1], &h, S0).expect("read");
    let mut want = whole;
    want[16..36].copy_from_slice(&sent);
    assert_same(&got, &want, 1, "slice around the recv");
}

/// Messages go through the pair's own communicator when both ends joined
/// one, whatever order each joined the others in: here rank 0 joins the
/// pair before the group of three and rank 1 after it (with "the most
/// recent communicator with the peer" they picked different ones and never
/// paired).
#[test]
fn messages_use_the_pairs_own_communicator_whatever_the_join_order() {
    let mut g = Group::open(3);
    let ids = g.ids.clone();
    let pair = vec![ids[0], ids[1]];
    g.s[0].comm_init(pair.clone()).expect("pair");
    for s in &mut g.s {
        s.comm_init(ids.clone()).expect("group");
    }
    g.s[1].comm_init(pair).expect("pair");
    let x = upload(&mut g.s[0], vec![5u8; 12], S0);
    let y = alloc(&mut g.s[1], 12, S0);
    let (mut g, y) = within(NO_WAIT, "posting", move || {
        g.s[0].send(x.copy_descriptor(), S0, ids[1]).expect("send");
        g.s[1].recv(y.clone(), S0, ids[0]).expect("recv");
        (g, y)
    });
    g.s[0].sync_collective(S0).expect("sent");
    assert_eq!(
        read(&mut g.s[1], &y, S0).expect("received").to_vec(),
        vec![5; 12]
    );
}
