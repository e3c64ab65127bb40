//! The two threading patterns over every kind of collective: one thread
//! calling every rank in turn (all of rank 0's calls, collectives and
//! launches, before rank 1 is called: nothing may wait until the reads), and
//! one thread per rank reading after every call (a read waits for the other
//! ranks, which run on their own threads).

use compute_runtime::{
    ComputeWait, CubeCount, DType, DeviceId, Handle, Reduction, ServerCommunication,
};

use super::group::*;
use super::oracle::*;
use crate::common::*;
use compute_testkit::bytes::i64_bytes;

/// The op sequence both threading patterns run: each collective kind, in
/// order, with the expected result of rank `r` of `n`.
struct Script {
    n: usize,
}

impl Script {
    /// Runs every call of rank `r` on `s`, reading after every collective
    /// when `read_each` (one thread per rank) or at the end (one thread for
    /// every rank), and checks the results.
    fn run(&self, s: &mut TestServer, ids: &[DeviceId], r: usize, read_each: bool) -> Vec<Check> {
        let n = self.n;
        let ids = ids.to_vec();
        let mut checks = Vec::new();
        let mut done = |s: &mut TestServer, h: Handle, want: Vec<u8>, what: &'static str| {
            if read_each {
                s.sync_collective(S0).expect("sync_collective");
                let got = read(s, &h, S0).unwrap_or_else(|e| panic!("{what}: rank {r}: {e}"));
                assert_same(&got, &want, 1, &format!("{what}: rank {r}"));
            } else {
                checks.push(Check { h, want, what });
            }
        };
        let red = Reduction::sum(DType::I64);
        // all_reduce, both modes.
        for mode in [ComputeWait::Wait, ComputeWait::Overlap] {
            let x = upload(s, i64_bytes(&[r as i64 - 1; 10]), S0);
            let y = alloc(s, 80, S0);
            s.all_reduce(x.binding(), y.binding(), red, S0, ids.clone(), mode)
                .expect("all_reduce");
            let sum: i64 = (0..n as i64).map(|q| q - 1).sum();
            done(s, y, i64_bytes(&[sum; 10]), "all_reduce");
        }
        // A launch between collectives.
        let counter = upload(s, u32_bytes(&[r as u32; 4]), S0);
        launch(s, inc_kernel(), CubeCount::x(1), &[&counter], S0);
        let gathered = alloc(s, 16 * n as u64, S0);
        s.all_gather(counter.binding(), gathered.binding(), S0, ids.clone())
            .expect("all_gather");
        let want: Vec<u32> = (0..n).flat_map(|q| [q as u32 + 1; 4]).collect();
        done(s, gathered, u32_bytes(&want), "all_gather");
        // reduce_scatter: rank q gives q + i at element i.
        let x: Vec<i64> = (0..2 * n as i64).map(|i| r as i64 + i).collect();
        let x = upload(s, i64_bytes(&x), S0);
        let y = alloc(s, 16, S0);
        s.reduce_scatter(x.binding(), y.binding(), red, S0, ids.clone())
            .expect("reduce_scatter");
        let total: i64 = (0..n as i64).sum();
        let want: Vec<i64> = (0..2)
            .map(|j| total + n as i64 * (2 * r as i64 + j))
            .collect();
        done(s, y, i64_bytes(&want), "reduce_scatter");
        // broadcast from the last rank.
        let root = n - 1;
        let x = (r == root).then(|| upload(s, pattern(24, 31), S0));
        let y = alloc(s, 24, S0);
        s.broadcast(
            x.as_ref().map(Handle::binding),
            y.binding(),
            S0,
            ids[root],
            ids.clone(),
        )
        .expect("broadcast");
        done(s, y, pattern(24, 31), "broadcast");
        // all_to_all of 8 B chunks.
        let x = upload(s, pattern(8 * n, 50 + r as u64), S0);
        let y = alloc(s, 8 * n as u64, S0);
        s.all_to_all(x.binding(), y.binding(), S0, ids.clone())
            .expect("all_to_all");
        let want: Vec<u8> = (0..n)
            .flat_map(|q| pattern(8 * n, 50 + q as u64)[8 * r..8 * r + 8].to_vec())
            .collect();
        done(s, y, want, "all_to_all");
        // A ring, rank 0 sending first.
        let x = upload(s, pattern(12, 70 + r as u64), S0);
        let y = alloc(s, 12, S0);
        let (to, from) = (ids[(r + 1) % n], ids[(r + n - 1) % n]);
        if r == 0 {
            s.send(x.copy_descriptor(), S0, to).expect("send");
            s.recv(y.clone(), S0, from).expect("recv");
        } else {
            s.recv(y.clone(), S0, from).expect("recv");
            s.send(x.copy_descriptor(), S0, to).expect("send");
        }
        done(s, y, pattern(12, 70 + ((r + n - 1) % n) as u64), "recv");
        checks
    }
}

struct Check {
    h: Handle,
    want: Vec<u8>,
    what: &'static str,
}

/// One thread per rank, each reading after every collective: a read waits
/// for the other ranks, which are running on their own threads.
#[test]
fn one_thread_per_rank_reading_after_every_call() {
    for n in [3, 4] {
        let g = Group::open(n);
        within(NO_WAIT, &format!("{n} threads"), move || {
            let mut g = g;
            let ids = g.ids.clone();
            std::thread::scope(|scope| {
                for (r, s) in g.s.iter_mut().enumerate() {
                    let ids = ids.clone();
                    scope.spawn(move || {
                        // Each rank joins from its own thread.
                        s.comm_init(ids.clone()).expect("comm_init");
                        Script { n }.run(s, &ids, r, true);
                        s.sync_collective(S0).expect("sync_collective");
                    });
                }
            });
        });
    }
}

/// One thread calls every rank in turn, all of rank 0's calls (collectives
/// and launches) before rank 1's: nothing waits until the reads at the end.
#[test]
fn one_thread_calling_every_rank_in_turn() {
    for n in [3, 4] {
        let g = Group::new(n);
        let (mut g, checks) = within(NO_WAIT, &format!("{n} ranks in turn"), move || {
            let mut g = g;
            let ids = g.ids.clone();
            let checks: Vec<Vec<Check>> =
                g.s.iter_mut()
                    .enumerate()
                    .map(|(r, s)| Script { n }.run(s, &ids, r, false))
                    .collect();
            (g, checks)
        });
        for (r, (s, mine)) in g.s.iter_mut().zip(&checks).enumerate() {
            s.sync_collective(S0).expect("sync_collective");
            for c in mine {
                let got = read(s, &c.h, S0).unwrap_or_else(|e| panic!("{}: rank {r}: {e}", c.what));
                assert_same(&got, &c.want, 1, &format!("{}: rank {r}", c.what));
            }
        }
    }
}
