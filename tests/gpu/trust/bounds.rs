//! Bounds and identity: profile windows capped, foreign tokens and
//! graphs unknown, bad bindings refused, idle streams retired, odd tails.

use super::*;
use compute_runtime::{
    BufferBinding, Bytes, CopyDescriptor, CubeCount, Handle, ManagedMemoryHandle,
    MemoryConfiguration, ProfileError, Server, ServerError, StreamId, TimingMethod,
};

#[test]
fn profile_windows_are_capped_closing_the_oldest_and_their_slots_are_pooled() {
    const CAP: usize = 4096;
    const EXTRA: usize = 8;
    let mut f = fixture();
    let slots = f.s.profile_slots_created();
    f.begin(S0);
    let mut tokens: Vec<_> = (0..CAP + EXTRA)
        .map(|_| f.s.start_profile(S0).expect("start"))
        .collect();
    assert_eq!(f.s.open_profile_windows(), CAP);
    if f.s.timing_method() == TimingMethod::Device {
        f.end();
    }
    let bound = slots + CAP + 1;
    assert!(
        f.s.profile_slots_created() <= bound,
        "{} slots for {} windows",
        f.s.profile_slots_created(),
        CAP + EXTRA
    );
    // The oldest were closed.
    for t in tokens.drain(..EXTRA) {
        let id = t.id;
        match f.s.end_profile(S0, t) {
            Err(ProfileError::UnknownToken { token, stream }) => {
                assert_eq!((token, stream), (id, S0))
            }
            other => panic!("expected UnknownToken, got {other:?}"),
        }
    }
    // The rest are open: the first of them resolves, the others are
    // abandoned.
    let first = tokens.remove(0);
    let d = f.s.end_profile(S0, first).expect("open window");
    futures::executor::block_on(d.resolve()).expect("resolves");
    for t in tokens {
        f.s.abandon_profile(S0, t);
    }
    assert_eq!(f.s.open_profile_windows(), 0);
    // Reopening as many reuses the pooled slots.
    let created = f.s.profile_slots_created();
    let again: Vec<_> = (0..CAP)
        .map(|_| f.s.start_profile(S0).expect("start"))
        .collect();
    assert_eq!(f.s.profile_slots_created(), created, "slots not pooled");
    for t in again {
        f.s.abandon_profile(S0, t);
    }
    if f.s.timing_method() == TimingMethod::System {
        // System windows drain at start: no batch to share.
        launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&f.after], S0);
    }
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn tokens_and_graph_ids_of_another_server_are_unknown_here() {
    let mut f = fixture();
    let mut other: TestServer = options().open().expect("other server");
    let h = upload(&mut other, u32_bytes(&[1; N]), S0);
    launch(&mut other, inc_kernel(), CubeCount::x(1), &[&h], S0);
    sync(&mut other, S0).expect("warm-up");
    other.begin_capture(S0).expect("begin");
    launch(&mut other, inc_kernel(), CubeCount::x(1), &[&h], S0);
    let foreign_graph = other.end_capture(S0).expect("end");
    let foreign_token = other.start_profile(S0).expect("start");
    let foreign_id = foreign_token.id;
    // A graph of this server's own, for comparison.
    let mine = upload(&mut f.s, u32_bytes(&[0; N]), S1);
    f.s.begin_capture(S1).expect("begin");
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&mine], S1);
    let my_graph = f.s.end_capture(S1).expect("end");
    assert_ne!(my_graph, foreign_graph, "graph ids are process-unique");

    f.begin(S0);
    match f.s.end_profile(S0, foreign_token) {
        Err(ProfileError::UnknownToken { token, .. }) => assert_eq!(token, foreign_id),
        other => panic!("expected UnknownToken, got {other:?}"),
    }
    let err = f.s.replay(foreign_graph, S0).expect_err("foreign graph");
    assert_eq!(
        err,
        ServerError::UnknownGraph {
            graph: foreign_graph
        }
    );
    f.s.graph_destroy(foreign_graph, S0);
    f.end();

    // The other server still has both.
    assert_eq!(other.graph_count(), 1, "destroyed through another server");
    assert_eq!(other.open_profile_windows(), 1);
    let t = compute_runtime::ProfilingToken { id: foreign_id };
    let d = other.end_profile(S0, t).expect("its own token");
    futures::executor::block_on(d.resolve()).expect("resolves");
    other.replay(foreign_graph, S0).expect("its own graph");
    assert_eq!(
        bytes_u32(&read(&mut other, &h, S0).expect("read")),
        vec![3; N]
    );
    f.s.replay(my_graph, S1).expect("own graph");
    assert_eq!(
        bytes_u32(&read(&mut f.s, &mine, S1).expect("read")),
        vec![1; N]
    );
    assert_eq!(f.s.graph_count(), 1);
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn sync_refuses_an_out_of_bounds_or_unknown_binding_with_the_error_check_gives() {
    let mut f = fixture();
    let h = upload(&mut f.s, u32_bytes(&[5; 16]), S0);
    let bad = upload(&mut f.s, u32_bytes(&[6; 16]), S1);
    let bad_cause = poison(&mut f.s, &bad, S1);
    sync(&mut f.s, S0).expect("setup");
    let past_end = BufferBinding {
        memory: h.memory.clone(),
        offset: 32,
        size: 64,
    };
    let stranger = ManagedMemoryHandle::new().binding(16);
    let mut other: TestServer = options().open().expect("other server");
    let foreign = upload(&mut other, u32_bytes(&[1; 4]), S0).binding();
    // A failure pending on the stream: a refused sync leaves it for the
    // next one.
    let short = upload(&mut f.s, u32_bytes(&[0; 4]), S0);
    f.s.write(
        vec![(short.copy_descriptor(), Bytes::from(vec![0u8; 3]))],
        S0,
    );

    f.begin(S0);
    for binding in [past_end, stranger, foreign] {
        let checked = f.s.check(vec![binding.clone()], S0).expect_err("check");
        assert!(
            matches!(
                checked,
                ServerError::OutOfBounds { .. } | ServerError::UnknownHandle { .. }
            ),
            "{checked}"
        );
        let synced = futures::executor::block_on(f.s.sync(vec![h.binding(), binding], S0))
            .expect_err("sync");
        assert_eq!(synced, checked);
    }
    f.end();
    let err = sync(&mut f.s, S0).expect_err("the pending failure");
    assert!(
        matches!(err.root_cause(), ServerError::SizeMismatch { .. }),
        "{err}"
    );
    // An untrusted binding: the same error as check, too.
    let synced =
        futures::executor::block_on(f.s.sync(vec![bad.binding()], S0)).expect_err("untrusted");
    assert_eq!(
        synced,
        ServerError::Untrusted {
            memory: bad.memory.id(),
            cause: bad_cause
        }
    );
    futures::executor::block_on(f.s.sync(vec![h.binding()], S0)).expect("a good binding");
    f.assert_neighbours_and_bystander();
}

#[test]
fn idle_streams_beyond_64_are_retired_and_any_stream_id_still_syncs() {
    let mut f = fixture();
    let xs: Vec<Handle> = (0..8)
        .map(|_| upload(&mut f.s, u32_bytes(&[0; N]), S0))
        .collect();
    // A failure on stream 7, not reported yet: its stream is not retired.
    let short = upload(&mut f.s, u32_bytes(&[0; 4]), S0);
    sync(&mut f.s, S0).expect("setup");
    f.s.write(
        vec![(short.copy_descriptor(), Bytes::from(vec![0u8; 3]))],
        StreamId(7),
    );
    f.begin(S0);
    for i in 0..300u64 {
        let stream = StreamId(1000 + i);
        let x = &xs[i as usize % xs.len()];
        launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[x], stream);
        if i % 2 == 0 {
            sync(&mut f.s, stream).expect("sync");
        } else {
            f.s.flush(stream).expect("flush");
        }
        assert!(
            f.s.stream_ids().len() <= 64 + 2,
            "{} streams kept",
            f.s.stream_ids().len()
        );
    }
    // The case's own stream sits idle while the fresh streams come and go,
    // so a sweep submits its pending batch (idle streams' work is submitted
    // rather than kept forever): one submit more than the cases' own.
    f.end_after(301);
    // Retired or not, every id syncs and flushes.
    for i in [0u64, 1, 150, 299] {
        sync(&mut f.s, StreamId(1000 + i)).expect("sync of a retired stream");
        f.s.flush(StreamId(1000 + i))
            .expect("flush of a retired stream");
    }
    sync(&mut f.s, StreamId(123_456)).expect("sync of a stream never used");
    let err = sync(&mut f.s, StreamId(7)).expect_err("kept for its report");
    assert!(
        matches!(err.root_cause(), ServerError::SizeMismatch { .. }),
        "{err}"
    );
    for (k, x) in xs.iter().enumerate() {
        let launches = (0..300).filter(|i| i % xs.len() == k).count() as u32;
        assert_eq!(
            bytes_u32(&read(&mut f.s, x, StreamId(2000)).expect("x")),
            vec![launches; N],
            "a launch on a retired stream was lost"
        );
    }
    f.assert_neighbours_and_bystander();
}

#[test]
fn the_tail_of_an_odd_sized_slice_reads_back() {
    let mut f = fixture_with(options().memory(MemoryConfiguration::ExclusivePages));
    let data: Vec<u8> = (0..1023u32).map(|i| (i * 37 + 11) as u8).collect();
    let h = upload(&mut f.s, Bytes::from(data.clone()), S1);
    sync(&mut f.s, S1).expect("setup");
    let part = |offset: u64, size: u64| {
        CopyDescriptor::contiguous(BufferBinding {
            memory: h.memory.clone(),
            offset,
            size,
        })
    };
    f.begin(S0);
    assert_eq!(read(&mut f.s, &h, S1).expect("whole").as_ref(), &data[..]);
    for (offset, size) in [(1020, 3), (1021, 2), (1022, 1), (1016, 7), (3, 1020)] {
        let got = read_desc(&mut f.s, part(offset, size), S1).expect("tail");
        assert_eq!(
            got.as_ref(),
            &data[offset as usize..(offset + size) as usize],
            "bytes {offset}..+{size}"
        );
    }
    // A write of the tail (it ends the slice, so it may be unaligned).
    f.s.write(vec![(part(1020, 3), Bytes::from(vec![1u8, 2, 3]))], S1);
    let got = read_desc(&mut f.s, part(1020, 3), S1).expect("tail");
    assert_eq!(got.as_ref(), &[1, 2, 3]);
    f.end_after(7);
    sync(&mut f.s, S1).expect("no failure");
    f.assert_neighbours_and_bystander();
}
