//! The reducing collectives, `all_reduce` and `reduce_scatter`, over every
//! [`DType`] x [`ReduceOp`] on 2, 3 and 4 ranks, at 0, 1, 7 and 1000
//! elements, against the oracle; then the integer edge cases (wrapping, the
//! exact mean) and NaN in `Min`/`Max`.
//!
//! One thread drives every rank in turn, and every call of rank 0 is made
//! before rank 1 is called at all: nothing in a call waits for another rank.

use compute_runtime::{ComputeWait, DType, Handle, ReduceOp, Reduction, ServerCommunication};

use super::group::*;
use super::oracle::*;
use crate::common::*;

/// Elements per rank for the full dtype x op matrix.
const LADDER: [usize; 4] = [0, 1, 7, 1000];

/// One call of the matrix: its reduction, mode, every rank's `src` bytes and
/// every rank's expected `dst` bytes.
struct Case {
    what: String,
    reduction: Reduction,
    mode: ComputeWait,
    src: Vec<Vec<u8>>,
    want: Vec<Vec<u8>>,
}

/// Every dtype x op x ladder size, for `n` ranks; `scatter` makes the
/// reduce-scatter cases (each rank gives `n` chunks, gets its own).
fn matrix(n: usize, scatter: bool) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut salt = 0;
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            for len in LADDER {
                salt += 1;
                let total = if scatter { n * len } else { len };
                let vals = inputs(dtype, op, n, total, salt);
                let reduced = reduce(dtype, op, &vals);
                let want = (0..n)
                    .map(|r| match scatter {
                        true => encode(dtype, &reduced[r * len..(r + 1) * len]),
                        false => encode(dtype, &reduced),
                    })
                    .collect();
                cases.push(Case {
                    what: format!("{op}({dtype}) of {len} elements on {n} ranks"),
                    reduction: Reduction::new(op, dtype),
                    // Half the all-reduces overlap: sync_collective writes them.
                    mode: match salt % 2 {
                        0 if !scatter => ComputeWait::Overlap,
                        _ => ComputeWait::Wait,
                    },
                    src: vals.iter().map(|v| encode(dtype, v)).collect(),
                    want,
                });
            }
        }
    }
    cases
}

fn run_matrix(n: usize, scatter: bool) {
    let g = Group::new(n);
    // Every call of rank 0, then every call of rank 1, ...: none may wait.
    let (mut g, cases, _srcs, dsts) = within(NO_WAIT, "posting", move || {
        let mut g = g;
        let cases = matrix(n, scatter);
        let mut srcs: Vec<Handle> = Vec::new();
        let mut dsts: Vec<Vec<Handle>> = Vec::new();
        for r in 0..n {
            let s = &mut g.s[r];
            let mut mine = Vec::new();
            for c in &cases {
                let src = put_bytes(s, c.src[r].clone(), S0);
                let dst = dst_bytes(s, c.want[r].len(), S0);
                let ids = g.ids.clone();
                let called = match scatter {
                    true => s.reduce_scatter(src.binding(), dst.binding(), c.reduction, S0, ids),
                    false => {
                        s.all_reduce(src.binding(), dst.binding(), c.reduction, S0, ids, c.mode)
                    }
                };
                called.unwrap_or_else(|e| panic!("{}: rank {r}: {e}", c.what));
                srcs.push(src);
                mine.push(dst);
            }
            dsts.push(mine);
        }
        (g, cases, srcs, dsts)
    });
    for (r, mine) in dsts.iter().enumerate() {
        let s = &mut g.s[r];
        s.sync_collective(S0)
            .unwrap_or_else(|e| panic!("rank {r}: sync_collective: {e}"));
        let got = read_all(s, mine, S0);
        for (c, b) in cases.iter().zip(&got) {
            let what = format!("{}: rank {r}", c.what);
            assert_same(b, &c.want[r], c.reduction.dtype.size(), &what);
        }
    }
}

#[test]
fn all_reduce_every_dtype_and_op_on_2_ranks() {
    run_matrix(2, false);
}

#[test]
fn all_reduce_every_dtype_and_op_on_3_ranks() {
    run_matrix(3, false);
}

#[test]
fn all_reduce_every_dtype_and_op_on_4_ranks() {
    run_matrix(4, false);
}

#[test]
fn reduce_scatter_every_dtype_and_op_on_2_ranks() {
    run_matrix(2, true);
}

#[test]
fn reduce_scatter_every_dtype_and_op_on_3_ranks() {
    run_matrix(3, true);
}

#[test]
fn reduce_scatter_every_dtype_and_op_on_4_ranks() {
    run_matrix(4, true);
}

/// The extremes of an integer dtype.
fn extremes(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        other => panic!("{other} is not an integer dtype"),
    }
}

/// Integer reductions at the edges, on 3 ranks: `Sum` and `Prod` wrap (two's
/// complement); `Min`/`Max` see the extremes; `Mean` is the exact mean (the
/// sum does not wrap first), truncated toward zero (-7/3 is -2, not -3).
#[test]
fn integer_reductions_wrap_and_the_mean_is_exact_and_truncates_toward_zero() {
    let n = 3;
    let mut g = Group::new(n);
    let mut cases = Vec::new();
    for dtype in [DType::I32, DType::U32, DType::I64, DType::U64] {
        let (min, max) = extremes(dtype);
        let half = 1i128 << (dtype.size() * 4); // its square wraps to 0
        // Columns: one element, every rank's value.
        let columns: Vec<[i128; 3]> = if min < 0 {
            vec![
                [max, max, max],
                [min, min, -1],
                [-7, 0, 0],
                [7, -1, 0],
                [min, max, 0],
                [-1, -1, -1],
                [half, half, 3],
                [half, -half, 1],
                [5, -6, 0],
            ]
        } else {
            vec![
                [max, max, max],
                [max, max, 1],
                [7, 0, 0],
                [max, 1, 0],
                [0, max, 2],
                [half, half, 3],
                [half, 2, 1],
            ]
        };
        let ranks: Vec<Vec<i128>> = (0..n)
            .map(|r| columns.iter().map(|c| c[r]).collect())
            .collect();
        for op in ReduceOp::ALL {
            let want = encode(dtype, &reduce(dtype, op, &ranks));
            cases.push((Reduction::new(op, dtype), ranks.clone(), want));
        }
    }
    // Spot checks of the oracle itself, in words.
    let i32_mean = reduce(
        DType::I32,
        ReduceOp::Mean,
        &[
            vec![-7, i32::MAX.into()],
            vec![0, i32::MAX.into()],
            vec![0, i32::MAX.into()],
        ],
    );
    assert_eq!(i32_mean, [-2, i32::MAX.into()]);
    let mut dsts = Vec::new();
    let mut keep = Vec::new();
    for r in 0..n {
        let s = &mut g.s[r];
        let mut mine = Vec::new();
        for (reduction, ranks, want) in &cases {
            let src = upload(s, encode(reduction.dtype, &ranks[r]), S0);
            let dst = alloc(s, want.len() as u64, S0);
            s.all_reduce(
                src.binding(),
                dst.binding(),
                *reduction,
                S0,
                g.ids.clone(),
                ComputeWait::Wait,
            )
            .unwrap_or_else(|e| panic!("{reduction}: rank {r}: {e}"));
            keep.push(src);
            mine.push(dst);
        }
        dsts.push(mine);
    }
    for (r, mine) in dsts.iter().enumerate() {
        let got = read_all(&mut g.s[r], mine, S0);
        for ((reduction, _, want), b) in cases.iter().zip(&got) {
            let what = format!("{reduction} at the edges: rank {r}");
            assert_same(b, want, reduction.dtype.size(), &what);
        }
    }
}

/// Whether the `dtype` element at `b` is a NaN.
fn is_nan(dtype: DType, b: &[u8]) -> bool {
    match dtype {
        DType::F16 => {
            let h = u16::from_le_bytes([b[0], b[1]]);
            h & 0x7c00 == 0x7c00 && h & 0x03ff != 0
        }
        DType::BF16 => {
            let h = u16::from_le_bytes([b[0], b[1]]);
            h & 0x7f80 == 0x7f80 && h & 0x007f != 0
        }
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_nan(),
        DType::F64 => {
            let mut w = [0; 8];
            w.copy_from_slice(&b[..8]);
            f64::from_le_bytes(w).is_nan()
        }
        _ => false,
    }
}

/// The quiet NaN of a float dtype, as bytes.
fn nan(dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F16 => 0x7e00u16.to_le_bytes().to_vec(),
        DType::BF16 => 0x7fc0u16.to_le_bytes().to_vec(),
        DType::F32 => f32::NAN.to_le_bytes().to_vec(),
        DType::F64 => f64::NAN.to_le_bytes().to_vec(),
        other => panic!("{other} has no NaN"),
    }
}

/// A NaN on any rank makes a float `Min` or `Max` NaN (documented in the
/// reductions: NaN propagates); elements without one are reduced as usual.
#[test]
fn float_min_and_max_propagate_nan_from_any_rank() {
    let n = 3;
    let mut g = Group::new(n);
    let floats = [DType::F16, DType::BF16, DType::F32, DType::F64];
    // Element 0: NaN on rank 0; 1: on rank 2; 2: none (values 5, -3, 9).
    let src = |dtype: DType, r: usize| {
        let mut b = Vec::new();
        let clean = [5, -3, 9][r];
        for nan_rank in [Some(0), Some(2), None] {
            match nan_rank == Some(r) {
                true => b.extend(nan(dtype)),
                false => put(&mut b, dtype, clean),
            }
        }
        b
    };
    let mut dsts = Vec::new();
    let mut keep = Vec::new();
    for r in 0..n {
        let s = &mut g.s[r];
        for dtype in floats {
            for op in [ReduceOp::Min, ReduceOp::Max] {
                let x = upload(s, src(dtype, r), S0);
                let y = alloc(s, 3 * dtype.size() as u64, S0);
                s.all_reduce(
                    x.binding(),
                    y.binding(),
                    Reduction::new(op, dtype),
                    S0,
                    g.ids.clone(),
                    ComputeWait::Wait,
                )
                .expect("all_reduce");
                keep.push(x);
                dsts.push((r, dtype, op, y));
            }
        }
    }
    for (r, dtype, op, y) in dsts {
        let b = read(&mut g.s[r], &y, S0).expect("read");
        let size = dtype.size();
        assert!(
            is_nan(dtype, &b[..size]),
            "{op}({dtype}) rank {r}: element 0"
        );
        assert!(
            is_nan(dtype, &b[size..2 * size]),
            "{op}({dtype}): element 1"
        );
        let mut clean = Vec::new();
        put(&mut clean, dtype, if op == ReduceOp::Min { -3 } else { 9 });
        assert_eq!(
            &b[2 * size..],
            &clean[..],
            "{op}({dtype}) rank {r}: element 2"
        );
    }
}
