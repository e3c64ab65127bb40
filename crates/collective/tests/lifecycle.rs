//! Joining, notification of results (poll, await, callback), inputs from
//! other threads, and the freeing of completed calls.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use compute_collective::{CollectiveCall, CommConfig, Communicator, ServerError};
use compute_runtime::{CollectiveFault, DeviceId, RankListProblem};

#[test]
fn joins_are_checked() {
    let devices = fresh_devices(2);
    let state = |r: Result<Communicator, ServerError>| match r {
        Err(ServerError::CollectiveState {
            fault: CollectiveFault::RankList { problem, .. },
        }) => problem,
        other => panic!("{other:?}"),
    };
    let config = CommConfig::default().with_timeout(WAIT);
    let join = |ids: &[DeviceId], me| Communicator::join_in_process(ids, me, config.clone());
    let stranger = DeviceId(u64::MAX);
    assert_eq!(
        state(join(&devices, stranger)),
        RankListProblem::NotIn { device: stranger }
    );
    assert_eq!(
        state(join(&[devices[0], devices[0]], devices[0])),
        RankListProblem::Twice { device: devices[0] }
    );
    assert_eq!(state(join(&[], devices[0])), RankListProblem::Empty);
    let a = join(&devices, devices[0]).expect("rank 0");
    assert_eq!(
        state(join(&devices, devices[0])),
        RankListProblem::Joined { device: devices[0] }
    );
    let b = join(&devices, devices[1]).expect("rank 1");
    let mut comms = vec![a, b];
    still_works(&mut comms);
    assert_eq!(
        (
            comms[1].rank(),
            comms[1].size(),
            comms[1].rank_of(devices[0])
        ),
        (1, 2, Some(0))
    );
    // Dropping every rank ends the communicator; joining again starts anew.
    drop(comms);
    let deadline = Instant::now() + WAIT;
    let mut comms = loop {
        // The old engines leave once their queues drain (at once here).
        match (join(&devices, devices[0]), Instant::now() < deadline) {
            (Ok(a), _) => break vec![a, join(&devices, devices[1]).expect("rank 1 again")],
            (Err(_), true) => std::thread::sleep(Duration::from_millis(5)),
            (Err(e), false) => panic!("{e}"),
        }
    };
    still_works(&mut comms);
}

#[test]
fn results_can_be_polled_awaited_or_called_back() {
    let mut comms = group(2);
    let mut p0 = post_u32(&mut comms[0], 1);
    assert!(!p0.is_ready());
    assert!(p0.try_take().is_none());
    let (tx, rx) = mpsc::channel();
    p0.on_ready(move || tx.send("ready").expect("send"));
    // Post rank 1, provide its input from another thread (a GPU callback).
    let (c, p1) = comms[1].post(all_reduce_u32()).expect("post");
    std::thread::spawn(move || c.provide(Ok(Bytes::copy_from_slice(&2u32.to_le_bytes()))));
    assert_eq!(rx.recv_timeout(WAIT), Ok("ready"));
    assert!(p0.is_ready());
    let (tx, rx) = mpsc::channel();
    p0.on_ready(move || tx.send("at once").expect("send"));
    assert_eq!(rx.try_recv(), Ok("at once"));
    assert_eq!(
        p0.try_take().expect("ready").expect("ok").bytes.as_ref(),
        &3u32.to_le_bytes()
    );
    assert!(matches!(
        p0.try_take(),
        Some(Err(ServerError::CollectiveState { .. }))
    ));
    let out = futures::executor::block_on(p1).expect("awaited");
    assert_eq!(out.bytes.as_ref(), &3u32.to_le_bytes());
}

#[test]
fn inputs_provided_later_from_other_threads_in_any_order() {
    let ranks = 4;
    let mut comms = group(ranks);
    let mut contributions = Vec::new();
    let mut pending = Vec::new();
    for comm in comms.iter_mut() {
        let (c, p) = comm.post(all_reduce_u32()).expect("post");
        contributions.push(c);
        pending.push(p);
    }
    let threads: Vec<_> = contributions
        .into_iter()
        .enumerate()
        .rev()
        .map(|(r, c)| {
            std::thread::spawn(move || {
                c.provide(Ok(Bytes::copy_from_slice(&(r as u32).to_le_bytes())))
            })
        })
        .collect();
    for p in pending {
        assert_eq!(
            p.wait(WAIT).expect("ok").bytes.as_ref(),
            &6u32.to_le_bytes()
        );
    }
    threads
        .into_iter()
        .for_each(|t| t.join().expect("provider"));
}

#[test]
fn completed_calls_free_their_rounds() {
    let (mut comms, transports) = group_inspectable(3, WAIT);
    for _ in 0..50 {
        let gather = same(CollectiveCall::AllGather { src_len: 64 }, 3);
        clean(run_single(
            &mut comms,
            &gather,
            &[
                pattern_bytes(1, 64),
                pattern_bytes(2, 64),
                pattern_bytes(3, 64),
            ],
        ));
        let (c, s) = comms[0]
            .post(CollectiveCall::Send { peer: 2, len: 8 })
            .expect("send");
        c.provide(Ok(pattern_bytes(4, 8)));
        let (_, r) = comms[2]
            .post(CollectiveCall::Recv { peer: 0, len: 8 })
            .expect("recv");
        s.wait(WAIT).expect("send");
        r.wait(WAIT).expect("recv");
    }
    for t in &transports {
        assert_eq!(t.rounds_held(), 0);
    }
}
