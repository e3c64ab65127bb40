//! The collectives that move bytes without reducing them: `all_gather`,
//! `broadcast` (from every root) and `all_to_all`, on 2, 3 and 4 ranks.
//! Their bytes are opaque, so the ladder is in bytes: the element sizes of
//! every dtype (2, 4, 8) times 0, 1, 7 and 1000, plus odd byte counts;
//! patterned bytes (NaN payloads included) must arrive bit for bit.

use compute_runtime::{DType, Handle, ServerCommunication};

use super::group::*;
use super::oracle::*;
use crate::common::*;

const RANKS: [usize; 3] = [2, 3, 4];

/// Byte lengths: odd ones, then `dtype.size() * {1, 7, 1000}` for every
/// dtype (0 included once).
fn ladder() -> Vec<usize> {
    let mut v = vec![0, 1, 3, 5];
    for dtype in DType::ALL {
        for elems in [1, 7, 1000] {
            v.push(dtype.size() * elems);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// `all_gather`: `dst` is every rank's `src`, concatenated in rank order.
#[test]
fn all_gather_concatenates_in_rank_order() {
    for n in RANKS {
        let mut g = Group::new(n);
        let lens = ladder();
        let src = |r: usize, len: usize| pattern(len, (r * 7919 + len) as u64);
        let mut dsts: Vec<Vec<Handle>> = Vec::new();
        let mut keep = Vec::new();
        for r in 0..n {
            let s = &mut g.s[r];
            let mut mine = Vec::new();
            for &len in &lens {
                let x = put_bytes(s, src(r, len), S0);
                let y = dst_bytes(s, n * len, S0);
                s.all_gather(x.binding(), y.binding(), S0, g.ids.clone())
                    .unwrap_or_else(|e| panic!("{len} B on {n} ranks: rank {r}: {e}"));
                keep.push(x);
                mine.push(y);
            }
            dsts.push(mine);
        }
        for (r, mine) in dsts.iter().enumerate() {
            let got = read_all(&mut g.s[r], mine, S0);
            for (&len, b) in lens.iter().zip(&got) {
                let want: Vec<u8> = (0..n).flat_map(|q| src(q, len)).collect();
                let what = format!("all_gather of {len} B on {n} ranks: rank {r}");
                assert_same(b, &want, len.max(1), &what);
            }
        }
    }
}

/// `broadcast` from every root (the non-zero ones included): every rank's
/// `dst`, the root's too, is the root's `src`; only the root gives a `src`.
#[test]
fn broadcast_from_every_root() {
    for n in RANKS {
        let mut g = Group::new(n);
        let lens = ladder();
        let data = |root: usize, len: usize| pattern(len, (root * 104_729 + len) as u64);
        let mut dsts: Vec<Vec<(usize, usize, Handle)>> = Vec::new();
        let mut keep = Vec::new();
        for r in 0..n {
            let s = &mut g.s[r];
            let mut mine = Vec::new();
            for root in 0..n {
                for &len in &lens {
                    let x = (r == root).then(|| put_bytes(s, data(root, len), S0));
                    let y = dst_bytes(s, len, S0);
                    s.broadcast(
                        x.as_ref().map(Handle::binding),
                        y.binding(),
                        S0,
                        g.ids[root],
                        g.ids.clone(),
                    )
                    .unwrap_or_else(|e| panic!("root {root}, {len} B: rank {r}: {e}"));
                    keep.extend(x);
                    mine.push((root, len, y));
                }
            }
            dsts.push(mine);
        }
        for (r, mine) in dsts.iter().enumerate() {
            let hs: Vec<Handle> = mine.iter().map(|(_, _, h)| h.clone()).collect();
            let got = read_all(&mut g.s[r], &hs, S0);
            for ((root, len, _), b) in mine.iter().zip(&got) {
                let what = format!("broadcast of {len} B from root {root} of {n}: rank {r}");
                assert_same(b, &data(*root, *len), 1, &what);
            }
        }
    }
}

/// `all_to_all`: chunk q of rank r's `src` becomes chunk r of rank q's
/// `dst`.
#[test]
fn all_to_all_swaps_chunks() {
    for n in RANKS {
        let mut g = Group::new(n);
        let chunks = [0usize, 1, 2, 3, 4, 7, 8, 14, 250, 1000];
        let src = |r: usize, chunk: usize| pattern(n * chunk, (r * 31 + chunk) as u64 + 77);
        let mut dsts: Vec<Vec<Handle>> = Vec::new();
        let mut keep = Vec::new();
        for r in 0..n {
            let s = &mut g.s[r];
            let mut mine = Vec::new();
            for &chunk in &chunks {
                let x = put_bytes(s, src(r, chunk), S0);
                let y = dst_bytes(s, n * chunk, S0);
                s.all_to_all(x.binding(), y.binding(), S0, g.ids.clone())
                    .unwrap_or_else(|e| panic!("chunks of {chunk} B: rank {r}: {e}"));
                keep.push(x);
                mine.push(y);
            }
            dsts.push(mine);
        }
        for (r, mine) in dsts.iter().enumerate() {
            let got = read_all(&mut g.s[r], mine, S0);
            for (&chunk, b) in chunks.iter().zip(&got) {
                let want: Vec<u8> = (0..n)
                    .flat_map(|q| src(q, chunk)[r * chunk..(r + 1) * chunk].to_vec())
                    .collect();
                let what = format!("all_to_all of {chunk} B chunks on {n} ranks: rank {r}");
                assert_same(b, &want, chunk.max(1), &what);
            }
        }
    }
}
