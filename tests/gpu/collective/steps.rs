//! Calls cut into many steps: servers formed with a chunk of [`CHUNK`]
//! bytes, so every call below takes more steps than the staging window
//! holds (16): the first steps are staged at the call, the rest refilled
//! from the server's device copy of `src` as the host uses the first, and
//! each step's result is written into `dst` as it comes.

use compute_runtime::{
    ComputeWait, CubeCount, DType, DeviceId, Handle, ReduceOp, Reduction, Server,
    ServerCommunication, StreamId,
};

use super::group::*;
use super::oracle::*;
use crate::common::*;

/// Bytes of a block per step.
const CHUNK: usize = 256;

/// Elements of 4 bytes: well past 16 steps, and a tail that is not a step.
const LEN: usize = 40 * CHUNK / 4 + 3;

#[test]
fn reductions_in_many_steps_match_the_oracle() {
    let n = 3;
    let mut g = Group::stepped(n, CHUNK);
    let cases = [
        (Reduction::sum(DType::F32), false, ComputeWait::Wait),
        (
            Reduction::new(ReduceOp::Max, DType::U32),
            false,
            ComputeWait::Overlap,
        ),
        (Reduction::mean(DType::F16), false, ComputeWait::Wait),
        (Reduction::sum(DType::I32), true, ComputeWait::Wait),
    ];
    let mut posted: Vec<Vec<Handle>> = vec![Vec::new(); n];
    let mut wants = Vec::new();
    let mut keep = Vec::new();
    for (k, &(red, scatter, mode)) in cases.iter().enumerate() {
        let total = if scatter { n * LEN } else { LEN };
        let vals = inputs(red.dtype, red.op, n, total, 300 + k as u64);
        let reduced = reduce(red.dtype, red.op, &vals);
        let mut want = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let x = upload(s, encode(red.dtype, &vals[r]), S0);
            let y = alloc(s, (LEN * red.dtype.size()) as u64, S0);
            let called = match scatter {
                true => s.reduce_scatter(x.binding(), y.binding(), red, S0, g.ids.clone()),
                false => s.all_reduce(x.binding(), y.binding(), red, S0, g.ids.clone(), mode),
            };
            called.unwrap_or_else(|e| panic!("{red}: rank {r}: {e}"));
            want.push(match scatter {
                true => encode(red.dtype, &reduced[r * LEN..(r + 1) * LEN]),
                false => encode(red.dtype, &reduced),
            });
            keep.push(x);
            posted[r].push(y);
        }
        wants.push((red, want));
    }
    for (r, mine) in posted.iter().enumerate() {
        let s = &mut g.s[r];
        s.sync_collective(S0).expect("sync_collective");
        for ((red, want), got) in wants.iter().zip(read_all(s, mine, S0)) {
            assert_same(
                &got,
                &want[r],
                red.dtype.size(),
                &format!("{red}: rank {r}"),
            );
        }
    }
    g.assert_still_works(S0, "after stepped reductions");
}

#[test]
fn data_movement_in_many_steps_arrives_bit_for_bit() {
    let n = 3;
    let mut g = Group::stepped(n, CHUNK);
    let block = 4 * LEN;
    let src = |r: usize, len: usize| pattern(len, (r * 31 + len) as u64);
    let mut outs: Vec<Vec<Handle>> = vec![Vec::new(); n];
    let mut keep = Vec::new();
    for (r, out) in outs.iter_mut().enumerate() {
        let s = &mut g.s[r];
        let ids = g.ids.clone();
        // all_gather of `block` bytes per rank.
        let x = upload(s, src(r, block), S0);
        let y = alloc(s, (n * block) as u64, S0);
        s.all_gather(x.binding(), y.binding(), S0, ids.clone())
            .expect("all_gather");
        out.push(y);
        keep.push(x);
        // all_to_all of `block` bytes per destination.
        let x = upload(s, src(r + 10, n * block), S0);
        let y = alloc(s, (n * block) as u64, S0);
        s.all_to_all(x.binding(), y.binding(), S0, ids.clone())
            .expect("all_to_all");
        out.push(y);
        keep.push(x);
        // broadcast from rank 1 of an odd number of bytes (the last step
        // ends mid-word, at the end of `dst`).
        let odd = block + 3;
        let x = (r == 1).then(|| upload(s, src(99, odd), S0));
        let y = alloc(s, odd as u64, S0);
        s.broadcast(
            x.as_ref().map(Handle::binding),
            y.binding(),
            S0,
            ids[1],
            ids.clone(),
        )
        .expect("broadcast");
        out.push(y);
        keep.extend(x);
    }
    for (r, out) in outs.iter().enumerate() {
        let s = &mut g.s[r];
        let got = read_all(s, out, S0);
        let gathered: Vec<u8> = (0..n).flat_map(|q| src(q, block)).collect();
        assert_same(&got[0], &gathered, 1, &format!("all_gather: rank {r}"));
        let swapped: Vec<u8> = (0..n)
            .flat_map(|q| src(q + 10, n * block)[r * block..(r + 1) * block].to_vec())
            .collect();
        assert_same(&got[1], &swapped, 1, &format!("all_to_all: rank {r}"));
        assert_same(
            &got[2],
            &src(99, block + 3),
            1,
            &format!("broadcast: rank {r}"),
        );
    }
}

#[test]
fn a_message_in_many_steps_arrives_whole() {
    let mut g = Group::stepped(2, CHUNK);
    let len = 50 * CHUNK + 6;
    let data = pattern(len, 7);
    let x = upload(&mut g.s[0], data.clone(), S0);
    let y = alloc(&mut g.s[1], len as u64, S0);
    let (a, b) = (g.ids[0], g.ids[1]);
    g.s[0].send(x.copy_descriptor(), S0, b).expect("send");
    g.s[1].recv(y.clone(), S0, a).expect("recv");
    let got = read(&mut g.s[1], &y, S0).expect("recv dst");
    assert_same(&got, &data, 1, "recv");
    sync(&mut g.s[0], S0).expect("send side");
}

/// A `src` whose slice starts mid-word (an `f16` sub-range at byte 2): each
/// step's pieces are copied word by word and cut out on the host.
#[test]
fn a_src_that_starts_mid_word_is_cut_out_step_by_step() {
    let n = 2;
    let mut g = Group::stepped(n, CHUNK);
    let red = Reduction::sum(DType::F16);
    let per = 2 * LEN; // f16 elements each rank gets: a whole number of words
    let vals = inputs(red.dtype, red.op, n, n * per, 41);
    let reduced = reduce(red.dtype, red.op, &vals);
    let mut ys = Vec::new();
    let mut keep = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let mut bytes = vec![0xee, 0xee];
        bytes.extend(encode(red.dtype, &vals[r]));
        bytes.extend([0xee, 0xee]);
        let whole = upload(s, bytes, S0);
        let x = sub(&whole, 2, (2 * n * per) as u64);
        let y = alloc(s, (2 * per) as u64, S0);
        s.reduce_scatter(x.binding(), y.binding(), red, S0, g.ids.clone())
            .expect("reduce_scatter");
        ys.push(y);
        keep.push(whole);
    }
    for (r, s) in g.s.iter_mut().enumerate() {
        let got = read(s, &ys[r], S0).expect("dst");
        let want = encode(red.dtype, &reduced[r * per..(r + 1) * per]);
        assert_same(&got, &want, 2, &format!("rank {r}"));
    }
}

/// The steps past the window are staged after the call, from a device copy
/// made at the call: a host write of `src` right after an `Overlap` call
/// (which holds nothing back) changes nothing in the result.
#[test]
fn steps_staged_after_the_call_still_read_src_as_of_the_call() {
    let n = 2;
    let mut g = Group::stepped(n, CHUNK);
    let red = Reduction::sum(DType::U32);
    let mut hs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, u32_bytes(&vec![r as u32 + 1; LEN]), S0);
        let y = alloc(s, (4 * LEN) as u64, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            g.ids.clone(),
            ComputeWait::Overlap,
        )
        .expect("all_reduce");
        s.write(
            vec![(x.copy_descriptor(), u32_bytes(&vec![1000; LEN]).into())],
            S0,
        );
        hs.push((x, y));
    }
    for (r, (s, (x, y))) in g.s.iter_mut().zip(&hs).enumerate() {
        s.sync_collective(S0).expect("sync_collective");
        assert_eq!(
            bytes_u32(&read(s, y, S0).expect("dst")),
            vec![3; LEN],
            "rank {r}"
        );
        assert_eq!(
            bytes_u32(&read(s, x, S0).expect("src")),
            vec![1000; LEN],
            "rank {r}"
        );
    }
}

/// A `Wait` call in more steps than the window copies its later steps from
/// `src` itself: a write of `src` on another stream right after the call
/// (host write and launch) waits for the result without blocking the
/// caller, and the result is `src` as of the call.
#[test]
fn a_wait_call_in_many_steps_holds_writes_of_src_until_its_result() {
    fn issue(r: usize, s: &mut TestServer, ids: &[DeviceId]) -> [Handle; 2] {
        let red = Reduction::sum(DType::U32);
        let x = upload(s, u32_bytes(&vec![r as u32 + 1; LEN]), S0);
        let y = alloc(s, (4 * LEN) as u64, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            ids.to_vec(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
        let s1 = StreamId(1);
        s.write(
            vec![(x.copy_descriptor(), u32_bytes(&vec![10; LEN]).into())],
            s1,
        );
        launch(
            s,
            inc_kernel(),
            CubeCount::x(LEN.div_ceil(64) as u32),
            &[&x],
            s1,
        );
        // Submitted now, were it not held behind the result.
        s.flush(s1).expect("flush");
        [x, y]
    }
    fn check(r: usize, s: &mut TestServer, [x, y]: [Handle; 2]) {
        let got = read(s, &y, S0).expect("dst");
        assert_same(&got, &u32_bytes(&vec![3; LEN]), 4, &format!("rank {r}"));
        let src = read(s, &x, StreamId(1)).expect("src");
        let what = format!("rank {r}: the writes of src landed after");
        assert_same(&src, &u32_bytes(&vec![11; LEN]), 4, &what);
    }
    both_ways_on(|| Group::stepped(2, CHUNK), issue, check);
}
