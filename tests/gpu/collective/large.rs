//! MiB-sized collectives (f32 and u32 only: the dtype matrix runs at small
//! sizes): several staging pages' worth of bytes, and all-reduces past the
//! 4 MiB where host reductions split across threads, with a tail that is not
//! a whole block.

use compute_runtime::{ComputeWait, DType, Handle, ReduceOp, Reduction, ServerCommunication};

use super::group::*;
use super::oracle::*;
use crate::common::*;

const MIB: usize = 1 << 20;

#[test]
fn mib_sized_all_reduce_and_reduce_scatter() {
    let n = 3;
    let mut g = Group::new(n);
    // (reduction, elements per rank out, scatter, mode)
    let cases = [
        (
            Reduction::sum(DType::F32),
            MIB + 3,
            false,
            ComputeWait::Wait,
        ),
        (
            Reduction::max(DType::U32),
            5 * MIB / 4,
            false,
            ComputeWait::Overlap,
        ),
        (
            Reduction::mean(DType::F32),
            MIB / 4,
            true,
            ComputeWait::Wait,
        ),
        (
            Reduction::new(ReduceOp::Sum, DType::U32),
            MIB / 2 + 1,
            true,
            ComputeWait::Wait,
        ),
    ];
    let mut posted: Vec<Vec<Handle>> = vec![Vec::new(); n];
    let mut wants = Vec::new();
    let mut keep = Vec::new();
    for (k, &(red, len, scatter, mode)) in cases.iter().enumerate() {
        let total = if scatter { n * len } else { len };
        let vals = inputs(red.dtype, red.op, n, total, 900 + k as u64);
        let reduced = reduce(red.dtype, red.op, &vals);
        let mut want = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let x = upload(s, encode(red.dtype, &vals[r]), S0);
            let y = alloc(s, (len * red.dtype.size()) as u64, S0);
            let called = match scatter {
                true => s.reduce_scatter(x.binding(), y.binding(), red, S0, g.ids.clone()),
                false => s.all_reduce(x.binding(), y.binding(), red, S0, g.ids.clone(), mode),
            };
            called.unwrap_or_else(|e| panic!("{red} of {len}: rank {r}: {e}"));
            want.push(match scatter {
                true => encode(red.dtype, &reduced[r * len..(r + 1) * len]),
                false => encode(red.dtype, &reduced),
            });
            keep.push(x);
            posted[r].push(y);
        }
        wants.push((red, len, want));
    }
    for (r, mine) in posted.iter().enumerate() {
        let s = &mut g.s[r];
        s.sync_collective(S0).expect("sync_collective");
        for ((red, len, want), got) in wants.iter().zip(read_all(s, mine, S0)) {
            let what = format!("{red} of {len} elements: rank {r}");
            assert_same(&got, &want[r], red.dtype.size(), &what);
        }
    }
}

#[test]
fn mib_sized_all_gather_broadcast_all_to_all_and_send() {
    let n = 3;
    let mut g = Group::new(n);
    let len = MIB + 4;
    let data = |r: usize| pattern(len, 4242 + r as u64);
    let mut outs = Vec::new();
    let mut keep = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, data(r), S0);
        let gathered = alloc(s, (n * len) as u64, S0);
        s.all_gather(x.binding(), gathered.binding(), S0, g.ids.clone())
            .expect("all_gather");
        // Broadcast 2 MiB from rank 2.
        let root = n - 1;
        let big = (r == root).then(|| upload(s, pattern(2 * MIB, 77), S0));
        let bcast = alloc(s, 2 * MIB as u64, S0);
        s.broadcast(
            big.as_ref().map(Handle::binding),
            bcast.binding(),
            S0,
            g.ids[root],
            g.ids.clone(),
        )
        .expect("broadcast");
        // All-to-all of 3 MiB + 12 B per rank.
        let a2a_src = upload(s, pattern(3 * len, 100 + r as u64), S0);
        let a2a = alloc(s, (3 * len) as u64, S0);
        s.all_to_all(a2a_src.binding(), a2a.binding(), S0, g.ids.clone())
            .expect("all_to_all");
        // A 2 MiB message round the ring, rank 0 first.
        let to = g.ids[(r + 1) % n];
        let from = g.ids[(r + n - 1) % n];
        let msg = upload(s, pattern(2 * MIB, 500 + r as u64), S0);
        let got = alloc(s, 2 * MIB as u64, S0);
        if r == 0 {
            s.send(msg.copy_descriptor(), S0, to).expect("send");
            s.recv(got.clone(), S0, from).expect("recv");
        } else {
            s.recv(got.clone(), S0, from).expect("recv");
            s.send(msg.copy_descriptor(), S0, to).expect("send");
        }
        keep.extend([x, a2a_src, msg]);
        keep.extend(big);
        outs.push([gathered, bcast, a2a, got]);
    }
    for (r, hs) in outs.iter().enumerate() {
        let s = &mut g.s[r];
        s.sync_collective(S0).expect("sync_collective");
        let got = read_all(s, hs, S0);
        let gathered: Vec<u8> = (0..n).flat_map(data).collect();
        assert_same(&got[0], &gathered, len, &format!("all_gather: rank {r}"));
        assert_same(
            &got[1],
            &pattern(2 * MIB, 77),
            1,
            &format!("broadcast: rank {r}"),
        );
        let a2a: Vec<u8> = (0..n)
            .flat_map(|q| pattern(3 * len, 100 + q as u64)[r * len..(r + 1) * len].to_vec())
            .collect();
        assert_same(&got[2], &a2a, len, &format!("all_to_all: rank {r}"));
        let from = (r + n - 1) % n;
        let msg = pattern(2 * MIB, 500 + from as u64);
        assert_same(&got[3], &msg, 1, &format!("recv: rank {r}"));
    }
}
