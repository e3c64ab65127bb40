//! Trust across ranks. Poison in: a rank whose `src` is untrusted still
//! takes part, and every result that depends on its input is poisoned, on
//! every rank, with [`ServerError::CollectiveInput`] naming it (its own
//! cause inside). Poison out: a failed collective poisons its `dst`; after a
//! failed `Wait` collective, the work queued on its stream does not run and
//! its writes are poisoned; a successful collective that covers its whole
//! `dst` makes it trusted again.

use compute_runtime::{
    ComputeWait, CubeCount, DType, Handle, Reduction, Server, ServerCommunication, ServerError,
    StreamId,
};
use wgpu_server::{BindingAccess, WgslKernel};

use super::group::*;
use crate::common::*;

/// Poisons `h` with a `SizeMismatch` through the public write scope (what
/// any failing write of it would do). Not with a host write of the wrong
/// size: refused at the call, it touches nothing and poisons nothing.
fn poison_with_size_mismatch(s: &mut TestServer, h: &Handle) {
    let mismatch = ServerError::SizeMismatch {
        expected: h.size,
        actual: 3,
    };
    let _ = compute_stream::write_scope(s, S0, &[h.binding()], |_| Err::<(), _>(mismatch));
    assert!(s.check(vec![h.binding()], S0).is_err(), "poisoned");
}

/// Poisons `h` with a launch that fails (its kernel does not compile).
fn poison_by_failed_launch(s: &mut TestServer, h: &Handle) {
    let broken = WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read_write> y: array<u32>;\n\
         @compute @workgroup_size(64) fn main() { y[0] = 1.5; }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    launch(s, broken, CubeCount::x(1), &[h], S0);
    assert!(s.check(vec![h.binding()], S0).is_err(), "poisoned");
}

/// `e` is the poison of rank `bad`'s input, whose own error `cause` accepts.
fn assert_input_poison(e: &ServerError, bad: usize, cause: fn(&ServerError) -> bool, what: &str) {
    assert!(matches!(e, ServerError::Untrusted { .. }), "{what}: {e}");
    assert_eq!(input_rank(e), Some(bad), "{what}: {e}");
    assert!(cause(e.root_cause()), "{what}: {e}");
}

fn size_mismatch(e: &ServerError) -> bool {
    matches!(e, ServerError::SizeMismatch { .. })
}

/// Clears what each rank's stream has to report.
fn settle(g: &mut Group) {
    for s in &mut g.s {
        let _ = s.sync_collective(S0);
        let _ = sync(s, S0);
    }
}

/// Rank 1's `src` is untrusted: the result of every op is poisoned on every
/// rank, naming rank 1 (for `broadcast`, rank 1 is the root; a message from
/// rank 1 poisons its receiver's handle). The untrusted rank's own calls
/// succeed: it takes part. One op per round, the failure reported before
/// the next round.
#[test]
fn an_untrusted_src_poisons_every_rank_s_result_naming_its_rank() {
    let n = 3;
    let bad = 1;
    let mut g = Group::new(n);
    let ops = [
        "all_reduce",
        "overlapping all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "broadcast",
        "send",
    ];
    for op in ops {
        let mut dsts: Vec<Option<Handle>> = Vec::new();
        let mut keep = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let ids = g.ids.clone();
            let x = upload(s, vec![1; 12], S0);
            if r == bad {
                poison_with_size_mismatch(s, &x);
            }
            let red = Reduction::sum(DType::U32);
            let mut dst = |len: u64| {
                let y = alloc(s, len, S0);
                dsts.push(Some(y.clone()));
                y
            };
            let called = match op {
                "all_reduce" | "overlapping all_reduce" => {
                    let mode = match op {
                        "all_reduce" => ComputeWait::Wait,
                        _ => ComputeWait::Overlap,
                    };
                    let y = dst(12);
                    s.all_reduce(x.binding(), y.binding(), red, S0, ids, mode)
                }
                "all_gather" => {
                    let y = dst(36);
                    s.all_gather(x.binding(), y.binding(), S0, ids)
                }
                "reduce_scatter" => {
                    let y = dst(4);
                    s.reduce_scatter(x.binding(), y.binding(), red, S0, ids)
                }
                "all_to_all" => {
                    let y = dst(12);
                    s.all_to_all(x.binding(), y.binding(), S0, ids)
                }
                "broadcast" => {
                    let y = dst(12);
                    let src = (r == bad).then(|| x.binding());
                    s.broadcast(src, y.binding(), S0, ids[bad], ids.clone())
                }
                _ => match r {
                    1 => {
                        dsts.push(None);
                        s.send(x.copy_descriptor(), S0, ids[2])
                    }
                    2 => {
                        let y = dst(12);
                        s.recv(y, S0, ids[bad])
                    }
                    _ => {
                        dsts.push(None);
                        Ok(())
                    }
                },
            };
            called.unwrap_or_else(|e| panic!("{op}: rank {r}: {e}"));
            keep.push(x);
        }
        for (r, (s, y)) in g.s.iter_mut().zip(&dsts).enumerate() {
            let _ = s.sync_collective(S0);
            if let Some(y) = y {
                let e = read(s, y, S0).expect_err("poisoned");
                assert_input_poison(&e, bad, size_mismatch, &format!("{op}: rank {r}"));
            }
        }
        settle(&mut g);
    }
    g.assert_still_works(S0, "after the poisoned inputs");
}

/// A `Wait` collective that failed holds back the work queued after it on
/// its stream only until its outcome is known, then lets it run: the next
/// collective (whose input is clean) succeeds on every rank.
#[test]
fn a_collective_queued_behind_a_failed_wait_collective_still_runs() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        if r == 1 {
            poison_by_failed_launch(s, &x);
        }
        let clean = upload(s, u32_bytes(&[1; 4]), S0);
        let (y, z) = (alloc(s, 16, S0), alloc(s, 16, S0));
        let red = Reduction::sum(DType::U32);
        s.all_reduce(
            x.binding(),
            y.binding(),
            red,
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("first");
        // Rank 0's input copy of the second waits behind the first.
        s.all_reduce(
            clean.binding(),
            z.binding(),
            red,
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("second");
        outs.push((x, clean, y, z));
    }
    for (r, (s, (_, _, y, z))) in g.s.iter_mut().zip(&outs).enumerate() {
        let e = read(s, y, S0).expect_err("first");
        assert_eq!(input_rank(&e), Some(1), "first: rank {r}: {e}");
        let got = read(s, z, S0).unwrap_or_else(|e| panic!("second: rank {r}: {e}"));
        assert_eq!(bytes_u32(&got), [2; 4], "second: rank {r}");
    }
    settle(&mut g);
    g.assert_still_works(S0, "after the failures");
}

/// A `src` poisoned by a launch that failed: the cause inside the poison is
/// the launch's. A broadcast depends only on the root's input: a poisoned
/// non-root `src` does not matter, as it gives none.
#[test]
fn a_src_poisoned_by_a_failed_launch_poisons_the_result_and_only_the_root_matters_to_a_broadcast() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, u32_bytes(&[r as u32; 8]), S0);
        if r == 0 {
            poison_by_failed_launch(s, &x);
        }
        // Broadcast from rank 1, whose input is clean (first: a collective
        // queued behind a failed `Wait` one on its stream fails too).
        let b = (r == 1).then(|| upload(s, u32_bytes(&[9; 8]), S0));
        let z = alloc(s, 32, S0);
        s.broadcast(
            b.as_ref().map(Handle::binding),
            z.binding(),
            S0,
            g.ids[1],
            g.ids.clone(),
        )
        .expect("broadcast");
        let y = alloc(s, 32, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::max(DType::U32),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
        outs.push((x, y, z, b));
    }
    for (r, (s, (_, y, z, _))) in g.s.iter_mut().zip(&outs).enumerate() {
        let e = read(s, y, S0).expect_err("poisoned");
        let compilation = |e: &ServerError| matches!(e, ServerError::Compilation { .. });
        assert_input_poison(&e, 0, compilation, &format!("all_reduce: rank {r}"));
        assert_eq!(bytes_u32(&read(s, z, S0).expect("clean root")), vec![9; 8]);
    }
}

/// Poison follows data: work that reads a poisoned result is refused and
/// its output poisoned too; a later successful collective into the same
/// `dst` (covering it whole) trusts it again.
#[test]
fn a_poisoned_result_poisons_what_reads_it_until_a_good_collective_overwrites_it() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let x = upload(s, f32_bytes(&[r as f32 + 1.0; 64]), S0);
        if r == 1 {
            poison_with_size_mismatch(s, &x);
        }
        let y = alloc(s, 256, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(DType::F32),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
        let out = upload(s, f32_bytes(&[0.0; 64]), S0);
        launch(s, add_kernel(), CubeCount::x(1), &[&y, &y, &out], S0);
        outs.push((x, y, out));
    }
    for (r, (s, (_, _, out))) in g.s.iter_mut().zip(&outs).enumerate() {
        let e = read(s, out, S0).expect_err("poisoned downstream");
        assert_eq!(input_rank(&e), Some(1), "rank {r}: {e}");
    }
    settle(&mut g);
    // A clean input everywhere, into the same `dst`s.
    for (r, (s, (x, y, _))) in g.s.iter_mut().zip(&outs).enumerate() {
        s.write(
            vec![(x.copy_descriptor(), f32_bytes(&[r as f32 + 1.0; 64]).into())],
            S0,
        );
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(DType::F32),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("all_reduce");
    }
    for (s, (_, y, _)) in g.s.iter_mut().zip(&outs) {
        assert_eq!(
            bytes_f32(&read(s, y, S0).expect("trusted again")),
            vec![3.0; 64]
        );
    }
}

/// After a failed `Wait` collective (a dtype mismatch), the work queued on
/// its stream runs once the outcome is known: a launch and a host write
/// that do not read `dst` are trusted; a launch that reads `dst` (enqueued
/// before the failure was known) has its writes poisoned, naming `dst`,
/// with the collective's error inside. Another stream is not affected.
#[test]
fn work_after_a_failed_wait_collective_runs_and_only_what_read_its_dst_is_poisoned() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let dtype = if r == 0 { DType::F32 } else { DType::I32 };
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        let y = alloc(s, 16, S0);
        let w = upload(s, u32_bytes(&[5; 4]), S0);
        let v = upload(s, u32_bytes(&[5; 4]), S0);
        let q = alloc(s, 16, S0);
        let u = upload(s, u32_bytes(&[5; 4]), StreamId(1));
        sync(s, S0).expect("uploaded");
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(dtype),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
        launch(s, inc_kernel(), CubeCount::x(1), &[&w], S0);
        s.write(vec![(v.copy_descriptor(), u32_bytes(&[6; 4]).into())], S0);
        launch(s, add_kernel(), CubeCount::x(1), &[&y, &w, &q], S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&u], StreamId(1));
        outs.push((x, y, w, v, q, u));
    }
    for (r, (s, (_, y, w, v, q, u))) in g.s.iter_mut().zip(&outs).enumerate() {
        let e = read(s, y, S0).expect_err("dst poisoned");
        assert!(is_mismatch(&e), "dst: rank {r}: {e}");
        let e = read(s, q, S0).expect_err("read dst: poisoned");
        assert!(
            matches!(&e, ServerError::Untrusted { cause, .. }
                if matches!(&**cause, ServerError::UntrustedInput { input, .. } if *input == y.memory.id())),
            "reader of dst: rank {r}: {e}"
        );
        assert!(is_mismatch(&e), "reader of dst: rank {r}: {e}");
        assert_eq!(bytes_u32(&read(s, w, S0).expect("ran")), [6; 4], "rank {r}");
        assert_eq!(
            bytes_u32(&read(s, v, S0).expect("written")),
            [6; 4],
            "rank {r}"
        );
        assert_eq!(
            bytes_u32(&read(s, u, StreamId(1)).expect("other stream")),
            [6; 4]
        );
    }
    settle(&mut g);
    g.assert_still_works(S0, "after the failure");
}

/// A failed `Overlap` collective holds nothing back: later work on the
/// stream runs; `sync_collective` reports the failure and `dst` is poisoned.
#[test]
fn a_failed_overlap_collective_poisons_its_dst_and_sync_collective_reports_it() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let len = if r == 0 { 16 } else { 32 };
        let x = upload(s, vec![1; len], S0);
        let y = alloc(s, len as u64, S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(DType::U32),
            S0,
            g.ids.clone(),
            ComputeWait::Overlap,
        )
        .expect("posted");
        let w = upload(s, u32_bytes(&[5; 4]), S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&w], S0);
        outs.push((x, y, w));
    }
    for (r, (s, (_, y, w))) in g.s.iter_mut().zip(&outs).enumerate() {
        assert_eq!(bytes_u32(&read(s, w, S0).expect("ran")), [6; 4], "rank {r}");
        let e = s.sync_collective(S0).expect_err("reported");
        assert!(is_mismatch(&e), "rank {r}: {e}");
        let e = read(s, y, S0).expect_err("poisoned");
        assert!(is_mismatch(&e), "rank {r}: {e}");
    }
    settle(&mut g);
    g.assert_still_works(S0, "after the failure");
}

/// A read queued after a failed `Wait` collective, on its stream, never
/// returns stale bytes (it did: the batch holding the read's copy was
/// dropped with the stream's held work, and the read mapped its staging
/// buffer anyway). Bytes written before the collective read back as
/// written; work queued after it ran, and reads back as it wrote.
#[test]
fn a_read_after_a_failed_wait_collective_never_returns_stale_bytes() {
    let n = 2;
    let mut g = Group::new(n);
    let mut outs = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let dtype = if r == 0 { DType::F32 } else { DType::I32 };
        let x = upload(s, u32_bytes(&[1; 4]), S0);
        let y = alloc(s, 16, S0);
        let before = upload(s, u32_bytes(&[5; 4]), S0);
        s.all_reduce(
            x.binding(),
            y.binding(),
            Reduction::sum(dtype),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .expect("posted");
        let after = upload(s, u32_bytes(&[7; 4]), S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&after], S0);
        outs.push((x, y, before, after));
    }
    for (r, (s, (_, y, before, after))) in g.s.iter_mut().zip(&outs).enumerate() {
        // Wait until the failure is known here (no read: it would submit).
        let start = std::time::Instant::now();
        while s.check(vec![y.binding()], S0).is_ok() {
            assert!(
                start.elapsed() < NO_WAIT,
                "rank {r}: the failure never arrived"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let got = read(s, before, S0).expect("written before the collective");
        assert_eq!(bytes_u32(&got), [5; 4], "rank {r}: stale bytes");
        let got = read(s, after, S0).expect("written after the collective");
        assert_eq!(bytes_u32(&got), [8; 4], "rank {r}: the work after ran");
    }
}
