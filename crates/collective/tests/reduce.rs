//! The host reductions, called directly, against the independent oracle:
//! every dtype x op, rank order, thread splits, IEEE corner cases, integer
//! wrapping and exact integer means.

mod common;

use common::*;
use compute_collective::ServerError;
use compute_collective::reduce::{Parallelism, combine, finish, reduce};
use compute_runtime::{DType, ReduceOp, Reduction};

fn reduced(reduction: Reduction, inputs: &[Vec<u8>], parallelism: Parallelism) -> Vec<u8> {
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let mut out = vec![0u8; inputs[0].len()];
    reduce(reduction, &refs, &mut out, parallelism).expect("reduce");
    out
}

const SPLIT: Parallelism = Parallelism {
    min_bytes: 0,
    max_threads: 3,
};

#[test]
fn every_dtype_and_op_matches_the_oracle_serial_and_split() {
    for reduction in reductions() {
        for ranks in 1..=5 {
            for count in [0, 1, 2, 3, 17, 8195] {
                let seed = (ranks * 1000 + count) as u64;
                let inputs: Vec<Vec<u8>> = (0..ranks)
                    .map(|r| input(reduction, seed, r, count))
                    .collect();
                let want = expected_all(reduction, seed, ranks, count);
                let serial = reduced(reduction, &inputs, Parallelism::SERIAL);
                check(
                    reduction,
                    &serial,
                    &want,
                    &format!("{ranks} ranks, {count}"),
                );
                // Splitting across threads changes nothing, bit for bit.
                assert_eq!(reduced(reduction, &inputs, SPLIT), serial, "{reduction}");
            }
        }
    }
}

#[test]
fn a_fold_of_combine_then_finish_is_reduce() {
    for reduction in reductions() {
        // Integer means are exact in `reduce` only; the fold wraps.
        if reduction.op == ReduceOp::Mean && !reduction.dtype.is_float() {
            continue;
        }
        let inputs: Vec<Vec<u8>> = (0..4).map(|r| input(reduction, 9, r, 33)).collect();
        let mut acc = inputs[0].clone();
        for x in &inputs[1..] {
            combine(reduction, &mut acc, x).expect("combine");
        }
        finish(reduction, &mut acc, inputs.len()).expect("finish");
        assert_eq!(
            acc,
            reduced(reduction, &inputs, Parallelism::SERIAL),
            "{reduction}"
        );
    }
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f16s(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn nan_and_infinity_are_kept() {
    let nan = f32::NAN;
    let a = f32s(&[nan, 1.0, f32::INFINITY, -f32::INFINITY]);
    let b = f32s(&[1.0, nan, 1.0, -1.0]);
    for op in [
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Mean,
    ] {
        let out = reduced(
            Reduction::new(op, DType::F32),
            &[a.clone(), b.clone()],
            Parallelism::SERIAL,
        );
        let v: Vec<f64> = (0..4)
            .map(|i| match decode(DType::F32, &out, i) {
                Expected::Float(f) => f,
                Expected::Int(_) => unreachable!(),
            })
            .collect();
        assert!(
            v[0].is_nan() && v[1].is_nan(),
            "{op}: NaN on any rank gives NaN"
        );
        match op {
            ReduceOp::Max => assert_eq!((v[2], v[3]), (f64::INFINITY, -1.0)),
            ReduceOp::Min => assert_eq!((v[2], v[3]), (1.0, f64::NEG_INFINITY)),
            _ => assert!(v[2] == f64::INFINITY && v[3].is_infinite(), "{op}: {v:?}"),
        }
    }
    // f16: 65504 + 65504 overflows to infinity; NaN stays NaN.
    let max = 0x7bff;
    let out = reduced(
        Reduction::sum(DType::F16),
        &[f16s(&[max, 0x7e00]), f16s(&[max, 0x3c00])],
        Parallelism::SERIAL,
    );
    assert_eq!(decode(DType::F16, &out, 0), Expected::Float(f64::INFINITY));
    assert!(matches!(decode(DType::F16, &out, 1), Expected::Float(f) if f.is_nan()));
    // bf16 keeps the f32 range: 2^127 * 2 is infinity, 2^127 + 2^127 too.
    let big = 0x7f00;
    let out = reduced(
        Reduction::prod(DType::BF16),
        &[f16s(&[big]), f16s(&[0x4000])],
        Parallelism::SERIAL,
    );
    assert_eq!(decode(DType::BF16, &out, 0), Expected::Float(f64::INFINITY));
}

#[test]
fn sixteen_bit_means_round_to_nearest_even() {
    // mean(1, 2, 2) = 5/3: rounded once to the format, as the oracle does.
    for dtype in [DType::F16, DType::BF16] {
        let reduction = Reduction::mean(dtype);
        let inputs: Vec<Vec<u8>> = [1, 2, 2].iter().map(|v| encode_exact(dtype, *v)).collect();
        let out = reduced(reduction, &inputs, Parallelism::SERIAL);
        assert_eq!(
            decode(dtype, &out, 0),
            expected(reduction, &[1, 2, 2]),
            "{dtype}"
        );
    }
}

#[test]
fn integers_wrap_and_means_are_exact() {
    let i32s = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let i64s = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let u64s = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let s = Parallelism::SERIAL;
    assert_eq!(
        reduced(
            Reduction::sum(DType::I32),
            &[i32s(&[i32::MAX]), i32s(&[1])],
            s
        ),
        i32s(&[i32::MIN])
    );
    assert_eq!(
        reduced(
            Reduction::prod(DType::U64),
            &[u64s(&[1 << 63]), u64s(&[2])],
            s
        ),
        u64s(&[0])
    );
    // Exact means: no wrapping, truncation toward zero.
    assert_eq!(
        reduced(
            Reduction::mean(DType::I64),
            &[
                i64s(&[i64::MAX, -3, 3, i64::MIN]),
                i64s(&[i64::MAX, 0, 0, i64::MIN])
            ],
            s
        ),
        i64s(&[i64::MAX, -1, 1, i64::MIN])
    );
    assert_eq!(
        reduced(
            Reduction::mean(DType::U64),
            &[
                u64s(&[u64::MAX, 1]),
                u64s(&[u64::MAX, 0]),
                u64s(&[u64::MAX - 3, 0])
            ],
            s
        ),
        u64s(&[u64::MAX - 1, 0])
    );
    assert_eq!(
        reduced(
            Reduction::mean(DType::I32),
            &[i32s(&[i32::MIN, -7]), i32s(&[i32::MIN, 0])],
            s
        ),
        i32s(&[i32::MIN, -3])
    );
}

#[test]
fn bad_lengths_are_errors_not_panics() {
    let r = Reduction::sum(DType::F32);
    let mut out = vec![0u8; 8];
    assert!(matches!(
        reduce(r, &[&[0u8; 8], &[0u8; 4]], &mut out, Parallelism::SERIAL),
        Err(ServerError::SizeMismatch { .. })
    ));
    assert!(matches!(
        reduce(r, &[], &mut out, Parallelism::SERIAL),
        Err(ServerError::InvalidArgument { .. })
    ));
    let mut odd = vec![0u8; 6];
    assert!(matches!(
        reduce(r, &[&[0u8; 6]], &mut odd, Parallelism::SERIAL),
        Err(ServerError::InvalidArgument { .. })
    ));
    assert!(matches!(
        combine(r, &mut out, &[0u8; 12]),
        Err(ServerError::SizeMismatch { .. })
    ));
    assert!(matches!(
        finish(Reduction::mean(DType::F32), &mut out, 0),
        Err(ServerError::InvalidArgument { .. })
    ));
}
