//! The suite through the servers: every collective and dtype, messages, large buffers, a mismatch.

use super::*;

// ----------------------------------------------------------- server level --

pub(crate) fn init_all(ctx: &mut Ctx) {
    ctx.server.comm_init(ctx.ids.clone()).expect("comm_init");
}

pub(crate) fn unowned_device(ctx: &mut Ctx) {
    let mut list = ctx.ids.clone();
    list.push(DeviceId(ctx.size as u64 + 4));
    let t = Instant::now();
    let e = ctx.server.comm_init(list).expect_err("no process owns it");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "the refusal waited {:?}",
        t.elapsed()
    );
    assert!(matches!(e, ServerError::CollectiveState { .. }), "{e}");
    assert!(e.to_string().contains("no process owns"), "{e}");
    ctx.same_everywhere("the unowned-device error", &e.to_string());
    // The real communicator, for the tests after this one.
    init_all(ctx);
}

/// Posts every call (`Wait`), then reads every destination.
pub(crate) fn all_reduce_table(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    let mut posted = Vec::new();
    for (k, reduction) in oracle::reductions().into_iter().enumerate() {
        for count in [1usize, 7, 1031] {
            let seed = (k * 100 + count) as u64;
            let src = upload(
                &mut ctx.server,
                oracle::input(reduction, seed, rank, count),
                S0,
            );
            let dst = alloc(&mut ctx.server, (count * reduction.dtype.size()) as u64, S0);
            ctx.server
                .all_reduce(
                    src.binding(),
                    dst.binding(),
                    reduction,
                    S0,
                    ctx.ids.clone(),
                    ComputeWait::Wait,
                )
                .expect("all_reduce");
            posted.push((reduction, seed, count, src, dst));
        }
    }
    for (reduction, seed, count, _src, dst) in posted {
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want = oracle::expected_all(reduction, seed, ranks, count);
        oracle::check(
            reduction,
            &got,
            &want,
            &format!("rank {rank}, {count} elements"),
        );
    }
}

pub(crate) fn reduce_scatter_table(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    let mut posted = Vec::new();
    for (k, reduction) in oracle::reductions().into_iter().enumerate() {
        for count in [1usize, 5] {
            // 16-bit types: an even chunk, so each rank's destination ends
            // on a 4-byte boundary.
            let count = if reduction.dtype.size() == 2 {
                count * 2
            } else {
                count
            };
            let seed = (k * 7 + count) as u64 + 1;
            let size = reduction.dtype.size();
            let src = upload(
                &mut ctx.server,
                oracle::input(reduction, seed, rank, count * ranks),
                S0,
            );
            let dst = alloc(&mut ctx.server, (count * size) as u64, S0);
            ctx.server
                .reduce_scatter(src.binding(), dst.binding(), reduction, S0, ctx.ids.clone())
                .expect("reduce_scatter");
            posted.push((reduction, seed, count, src, dst));
        }
    }
    for (reduction, seed, count, _src, dst) in posted {
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want = oracle::expected_all(reduction, seed, ranks, count * ranks);
        oracle::check(
            reduction,
            &got,
            &want[rank * count..(rank + 1) * count],
            &format!("rank {rank}, {count} per rank"),
        );
    }
}

pub(crate) fn all_gather(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    for len in [4usize, 13, 4096] {
        let mine = oracle::pattern_bytes(rank as u64 + 7 * len as u64, len);
        let src = upload(&mut ctx.server, mine, S0);
        let dst = alloc(&mut ctx.server, (len * ranks) as u64, S0);
        ctx.server
            .all_gather(src.binding(), dst.binding(), S0, ctx.ids.clone())
            .expect("all_gather");
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want: Vec<u8> = (0..ranks)
            .flat_map(|r| oracle::pattern_bytes(r as u64 + 7 * len as u64, len).to_vec())
            .collect();
        assert_eq!(got.as_ref(), &want[..], "rank {rank}, {len} B");
    }
}

pub(crate) fn broadcast(ctx: &mut Ctx) {
    let rank = ctx.rank;
    for root in 0..ctx.size {
        for len in [4usize, 1001] {
            let data = oracle::pattern_bytes(root as u64 * 31 + len as u64, len);
            let src = (rank == root).then(|| upload(&mut ctx.server, data.clone(), S0));
            let dst = alloc(&mut ctx.server, len as u64, S0);
            ctx.server
                .broadcast(
                    src.as_ref().map(Handle::binding),
                    dst.binding(),
                    S0,
                    ctx.ids[root],
                    ctx.ids.clone(),
                )
                .expect("broadcast");
            let got = read(&mut ctx.server, &dst, S0).expect("read");
            assert_eq!(got, data, "root {root}, rank {rank}, {len} B");
        }
    }
}

pub(crate) fn all_to_all(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    for chunk in [4usize, 12, 4096] {
        let len = chunk * ranks;
        let of = |r: usize| oracle::pattern_bytes(r as u64 * 1000 + chunk as u64, len);
        let src = upload(&mut ctx.server, of(rank), S0);
        let dst = alloc(&mut ctx.server, len as u64, S0);
        ctx.server
            .all_to_all(src.binding(), dst.binding(), S0, ctx.ids.clone())
            .expect("all_to_all");
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want: Vec<u8> = (0..ranks)
            .flat_map(|r| of(r)[rank * chunk..(rank + 1) * chunk].to_vec())
            .collect();
        assert_eq!(got.as_ref(), &want[..], "rank {rank}, chunk {chunk}");
    }
}

/// A ring (even ranks send first, odd ranks receive first, as a rank's
/// calls run in order), then three messages on one link.
pub(crate) fn send_recv(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    let next = (rank + 1) % ranks;
    let prev = (rank + ranks - 1) % ranks;
    let msg =
        |from: usize, k: usize| oracle::pattern_bytes(from as u64 * 10 + k as u64, 64 + 4 * k);
    let mut recvs = Vec::new();
    let do_send = |ctx: &mut Ctx, k: usize| {
        let h = upload(&mut ctx.server, msg(rank, k), S0);
        ctx.server
            .send(h.copy_descriptor(), S0, ctx.ids[next])
            .expect("send");
        h
    };
    let do_recv = |ctx: &mut Ctx, k: usize| {
        let h = alloc(&mut ctx.server, msg(prev, k).len() as u64, S0);
        ctx.server.recv(h.clone(), S0, ctx.ids[prev]).expect("recv");
        h
    };
    let mut sent = Vec::new();
    if rank % 2 == 0 {
        sent.push(do_send(ctx, 0));
        recvs.push((0, do_recv(ctx, 0)));
    } else {
        recvs.push((0, do_recv(ctx, 0)));
        sent.push(do_send(ctx, 0));
    }
    // Three more on the link from the last rank to rank 0, in order.
    for k in 1..4 {
        if rank == ranks - 1 {
            let h = upload(&mut ctx.server, msg(rank, k), S0);
            ctx.server
                .send(h.copy_descriptor(), S0, ctx.ids[0])
                .expect("send");
            sent.push(h);
        } else if rank == 0 {
            let h = alloc(&mut ctx.server, msg(ranks - 1, k).len() as u64, S0);
            ctx.server
                .recv(h.clone(), S0, ctx.ids[ranks - 1])
                .expect("recv");
            recvs.push((k, h));
        }
    }
    ctx.server.sync_collective(S0).expect("sync_collective");
    for (k, h) in recvs {
        let from = if k == 0 { prev } else { ranks - 1 };
        let got = read(&mut ctx.server, &h, S0).expect("read");
        assert_eq!(got, msg(from, k), "rank {rank}, message {k} from {from}");
    }
}

/// Several MiB through the servers: f32 sum and exact i64 mean.
pub(crate) fn large_buffers(ctx: &mut Ctx) {
    let (rank, ranks) = (ctx.rank, ctx.size);
    for reduction in [Reduction::sum(DType::F32), Reduction::mean(DType::I64)] {
        let count = (5 << 20) / reduction.dtype.size() + 3;
        let seed = 99;
        let src = upload(
            &mut ctx.server,
            oracle::input(reduction, seed, rank, count),
            S0,
        );
        let dst = alloc(&mut ctx.server, (count * reduction.dtype.size()) as u64, S0);
        ctx.server
            .all_reduce(
                src.binding(),
                dst.binding(),
                reduction,
                S0,
                ctx.ids.clone(),
                ComputeWait::Wait,
            )
            .expect("all_reduce");
        let got = read(&mut ctx.server, &dst, S0).expect("read");
        let want = oracle::expected_all(reduction, seed, ranks, count);
        oracle::check(reduction, &got, &want, &format!("rank {rank}"));
    }
}

/// Rank 1 sums 8 elements, the others 4: every rank's destination fails
/// with the same `CollectiveMismatch`, and the next call works.
pub(crate) fn mismatch(ctx: &mut Ctx) {
    let rank = ctx.rank;
    let n = if rank == 1 { 8usize } else { 4 };
    let src = upload(&mut ctx.server, vec![1u8; 4 * n], S0);
    let dst = alloc(&mut ctx.server, 4 * n as u64, S0);
    ctx.server
        .all_reduce(
            src.binding(),
            dst.binding(),
            Reduction::sum(DType::U32),
            S0,
            ctx.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
    let e = read(&mut ctx.server, &dst, S0).expect_err("mismatch");
    let root = e.root_cause().clone();
    assert!(
        matches!(root, ServerError::CollectiveMismatch { .. }),
        "rank {rank}: {e}"
    );
    assert!(root.to_string().contains("ranks disagree"), "{root}");
    ctx.same_everywhere("the mismatch", &root.to_string());
    still_works(ctx);
}

/// A call rank 1's caller refused before it reached the server
/// (`refuse_collective`, what the client's `Communicator` posts for a
/// reduction over an untyped buffer) takes its place across processes:
/// every other rank's `dst` is poisoned naming rank 1 and its refusal, and
/// the next call pairs.
pub(crate) fn refused(ctx: &mut Ctx) {
    let rank = ctx.rank;
    let src = upload(&mut ctx.server, vec![1u8; 16], S0);
    let dst = alloc(&mut ctx.server, 16, S0);
    if rank == 1 {
        let e = ctx.server.refuse_collective(
            ServerError::InvalidArgument {
                reason: "no element type (test)".into(),
            },
            ctx.ids.clone(),
        );
        assert!(matches!(e, ServerError::InvalidArgument { .. }), "{e}");
    } else {
        ctx.server
            .all_reduce(
                src.binding(),
                dst.binding(),
                Reduction::sum(DType::U32),
                S0,
                ctx.ids.clone(),
                ComputeWait::Wait,
            )
            .expect("posted");
        let e = read(&mut ctx.server, &dst, S0).expect_err("poisoned");
        let ServerError::Untrusted { cause, .. } = &e else {
            panic!("rank {rank}: {e}");
        };
        assert!(
            matches!(**cause, ServerError::CollectiveInput { rank: 1, .. }),
            "rank {rank}: {e}"
        );
        assert!(e.to_string().contains("no element type (test)"), "{e}");
        let _ = common::sync(&mut ctx.server, S0);
    }
    still_works(ctx);
}

/// A clean all_reduce through the servers.
pub(crate) fn still_works(ctx: &mut Ctx) {
    let src = upload(&mut ctx.server, 1u32.to_le_bytes().to_vec(), S0);
    let dst = alloc(&mut ctx.server, 4, S0);
    ctx.server
        .all_reduce(
            src.binding(),
            dst.binding(),
            Reduction::sum(DType::U32),
            S0,
            ctx.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
    let got = read(&mut ctx.server, &dst, S0).expect("clean call");
    assert_eq!(got.as_ref(), &(ctx.size as u32).to_le_bytes());
}
