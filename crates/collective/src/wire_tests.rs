//! Unit tests of `wire.rs`.

use super::*;

fn roundtrip(e: &Entry) -> Entry {
    let (h, t) = e.encode();
    assert_eq!(Entry::text_len(&h), t.len());
    Entry::decode(&h, &t).expect("decode")
}

#[test]
fn every_call_and_text_round_trips() {
    let mut calls = Vec::new();
    for d in DType::ALL {
        for o in ReduceOp::ALL {
            let r = Reduction::new(o, d);
            calls.push(CollectiveCall::AllReduce {
                reduction: r,
                len: 12,
            });
            calls.push(CollectiveCall::ReduceScatter {
                reduction: r,
                dst_len: 7,
            });
        }
    }
    calls.extend([
        CollectiveCall::AllGather { src_len: 3 },
        CollectiveCall::Broadcast {
            root: 2,
            len: 9,
            has_src: true,
        },
        CollectiveCall::Broadcast {
            root: 1,
            len: 0,
            has_src: false,
        },
        CollectiveCall::AllToAll { len: 6 },
        CollectiveCall::Send { peer: 1, len: 5 },
        CollectiveCall::Recv { peer: 0, len: 5 },
        CollectiveCall::Refused,
    ]);
    for (i, call) in calls.into_iter().enumerate() {
        let id = if call.is_group() {
            CallId::Group { seq: i as u64 }
        } else {
            CallId::P2p(Link {
                from: 0,
                to: 1,
                seq: i as u64,
            })
        };
        let d = Descriptor {
            rank: 1,
            call,
            invalid: (i % 3 == 0).then(|| "not whole élements".to_string()),
            input: if i % 2 == 0 {
                Ok(())
            } else {
                Err(Arc::new(ServerError::DeviceLost {
                    reason: "gone".into(),
                }))
            },
            on_device: i % 4 == 1,
        };
        let e = Entry::of(id, &d);
        let back = roundtrip(&e);
        assert_eq!(back, e);
        let got = back.descriptor().expect("a call");
        assert_eq!(got.call, d.call);
        assert_eq!(got.invalid, d.invalid);
        // The remote error reads as the original did.
        assert_eq!(
            got.input.map_err(|e| e.to_string()),
            d.input.map_err(|e| e.to_string())
        );
    }
}

#[test]
fn an_abandoned_call_carries_its_abort() {
    let error = ServerError::CollectiveAborted {
        call: "all_reduce #4".into(),
        reason: "the input of rank 2 did not arrive within 10 ms".into(),
    };
    let e = Entry::abandoned(2, CallId::Group { seq: 4 }, &error);
    let back = roundtrip(&e);
    assert_eq!(back.descriptor(), None);
    assert_eq!(back.abort_error(), Some(error));
}

#[test]
fn garbage_is_refused() {
    assert!(Entry::decode(&[0u8; HEADER_LEN], &[]).is_err());
    assert!(Entry::decode(&[0u8; 3], &[]).is_err());
}

#[test]
fn joins_agree_or_fail_the_same_way() {
    let ids = [DeviceId(0), DeviceId(1)];
    let join = |rank: u64, hash| Join {
        devices_per_process: 1,
        process: rank,
        device: rank,
        list_len: 2,
        list_hash: hash,
        chunk_bytes: 4096 * (rank + 1),
    };
    let h = list_hash(&ids);
    assert!(check_joins(&ids, &[0, 1], &[Some(join(0, h)), Some(join(1, h))]).is_ok());
    let bad = check_joins(&ids, &[0, 1], &[Some(join(0, h)), Some(join(1, h ^ 1))]);
    assert!(
        matches!(bad, Err(ServerError::CollectiveMismatch { ref reason }) if reason.contains("rank 1")),
        "{bad:?}"
    );
    assert_eq!(Join::decode(&join(1, h).encode()), Some(join(1, h)));
}
