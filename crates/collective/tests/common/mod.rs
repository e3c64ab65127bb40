//! Test support: fresh device lists, drivers for both threading patterns, and
//! an oracle written independently of the crate (naive per-element loops,
//! its own 16-bit float decoding and table-based rounding; it never calls the
//! crate's reduction or conversion code).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use compute_collective::{
    CollectiveCall, CommConfig, Communicator, InProcessTransport, JoinOptions, Outcome,
    PendingResult, ServerError,
};
use compute_runtime::{DType, DeviceId, ReduceOp, Reduction};

/// How long a test waits for a result that should come.
pub const WAIT: Duration = Duration::from_secs(30);

/// `n` device ids no other test uses (the registry is process-global).
pub fn fresh_devices(n: usize) -> Vec<DeviceId> {
    static NEXT: AtomicU64 = AtomicU64::new(10_000);
    let base = NEXT.fetch_add(n as u64 + 1, Ordering::Relaxed);
    (0..n as u64).map(|i| DeviceId(base + i)).collect()
}

/// A communicator per rank, joined in rank order from this thread.
pub fn group(n: usize) -> Vec<Communicator> {
    group_with(n, CommConfig::default().with_timeout(WAIT))
}

pub fn group_with(n: usize, config: CommConfig) -> Vec<Communicator> {
    let devices = fresh_devices(n);
    devices
        .iter()
        .map(|me| Communicator::join_in_process(&devices, *me, config.clone()).expect("join"))
        .collect()
}

pub type Results = Vec<Result<Outcome, ServerError>>;

/// One thread drives every rank: post and provide on rank 0, then on rank 1,
/// ..., then waits on each.
pub fn run_single(
    comms: &mut [Communicator],
    calls: &[CollectiveCall],
    inputs: &[Bytes],
) -> Results {
    let pending: Vec<_> = comms
        .iter_mut()
        .enumerate()
        .map(|(r, comm)| {
            let (contribution, pending) = comm.post(calls[r]).expect("post");
            contribution.provide(Ok(inputs[r].clone()));
            pending
        })
        .collect();
    pending.into_iter().map(|p| p.wait(WAIT)).collect()
}

/// One thread per rank: each posts, provides and waits.
pub fn run_threads(
    comms: &mut [Communicator],
    calls: &[CollectiveCall],
    inputs: &[Bytes],
) -> Results {
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter_mut()
            .enumerate()
            .map(|(r, comm)| {
                let (call, input) = (calls[r], inputs[r].clone());
                s.spawn(move || {
                    let (contribution, pending) = comm.post(call)?;
                    contribution.provide(Ok(input));
                    pending.wait(WAIT)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    })
}

/// Which driver a test uses.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    Single,
    Threads,
}

pub fn run(
    pattern: Pattern,
    comms: &mut [Communicator],
    calls: &[CollectiveCall],
    inputs: &[Bytes],
) -> Results {
    match pattern {
        Pattern::Single => run_single(comms, calls, inputs),
        Pattern::Threads => run_threads(comms, calls, inputs),
    }
}

/// The bytes of every rank's outcome, asserting none failed or was poisoned.
pub fn clean(results: Results) -> Vec<Bytes> {
    results
        .into_iter()
        .enumerate()
        .map(|(r, result)| {
            let outcome = result.unwrap_or_else(|e| panic!("rank {r} failed: {e}"));
            assert_eq!(outcome.poisoned, None, "rank {r} poisoned");
            outcome.bytes
        })
        .collect()
}

// ---------------------------------------------------------------- oracle --

/// A deterministic pseudo-random 64-bit value (splitmix64).
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The value rank `rank` holds at element `i`: small integers for floats
/// (exact in every format and every order), anything for integers (their
/// wrapping sum and product do not depend on the order).
pub fn value(reduction: Reduction, seed: u64, rank: usize, i: usize) -> i128 {
    let h = mix(seed ^ mix((rank as u64) << 40 ^ i as u64));
    if reduction.dtype.is_float() {
        if reduction.op == ReduceOp::Prod {
            [-2, -1, 1, 2, 1][(h % 5) as usize]
        } else {
            (h % 17) as i128 - 8
        }
    } else {
        match reduction.dtype {
            DType::I32 => i128::from(h as u32 as i32),
            DType::U32 => i128::from(h as u32),
            DType::I64 => i128::from(h as i64),
            _ => i128::from(h),
        }
    }
}

/// `count` elements of rank `rank`'s values, encoded.
pub fn input(reduction: Reduction, seed: u64, rank: usize, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * reduction.dtype.size());
    for i in 0..count {
        out.extend(encode_exact(
            reduction.dtype,
            value(reduction, seed, rank, i),
        ));
    }
    out
}

/// The bytes of an integer value in `dtype` (floats: the value is a small
/// integer, exact in every format).
pub fn encode_exact(dtype: DType, v: i128) -> Vec<u8> {
    match dtype {
        DType::F16 => nearest_bits(f16_table(), v as f64).to_le_bytes().to_vec(),
        DType::BF16 => nearest_bits(bf16_table(), v as f64).to_le_bytes().to_vec(),
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => (v as f64).to_le_bytes().to_vec(),
        DType::I32 => (v as i32).to_le_bytes().to_vec(),
        DType::U32 => (v as u32).to_le_bytes().to_vec(),
        DType::I64 => (v as i64).to_le_bytes().to_vec(),
        DType::U64 => (v as u64).to_le_bytes().to_vec(),
    }
}

/// What an element of the result must be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expected {
    Float(f64),
    Int(i128),
}

/// The oracle for one element: the reduction of `values` (one per rank).
pub fn expected(reduction: Reduction, values: &[i128]) -> Expected {
    let n = values.len() as i128;
    let dtype = reduction.dtype;
    if dtype.is_float() {
        let exact = match reduction.op {
            ReduceOp::Sum | ReduceOp::Mean => values.iter().sum::<i128>(),
            ReduceOp::Prod => values.iter().product::<i128>(),
            ReduceOp::Min => *values.iter().min().unwrap_or(&0),
            ReduceOp::Max => *values.iter().max().unwrap_or(&0),
        };
        if reduction.op != ReduceOp::Mean {
            return Expected::Float(exact as f64);
        }
        // The mean is computed in the format's arithmetic (f32 for the
        // 16-bit formats), then rounded to the format.
        let q = match dtype {
            DType::F64 => exact as f64 / n as f64,
            _ => f64::from(exact as f32 / n as f32),
        };
        return Expected::Float(match dtype {
            DType::F16 => decode_f16(nearest_bits(f16_table(), q)),
            DType::BF16 => decode_bf16(nearest_bits(bf16_table(), q)),
            _ => q,
        });
    }
    let bits = (dtype.size() * 8) as u32;
    let wrap = |v: i128| -> i128 {
        let m = v.rem_euclid(1i128 << bits);
        let signed = matches!(dtype, DType::I32 | DType::I64);
        if signed && m >= 1i128 << (bits - 1) {
            m - (1i128 << bits)
        } else {
            m
        }
    };
    Expected::Int(match reduction.op {
        ReduceOp::Sum => wrap(values.iter().sum()),
        ReduceOp::Prod => values.iter().fold(1, |acc, v| wrap(acc.wrapping_mul(*v))),
        ReduceOp::Min => *values.iter().min().unwrap_or(&0),
        ReduceOp::Max => *values.iter().max().unwrap_or(&0),
        ReduceOp::Mean => values.iter().sum::<i128>() / n,
    })
}

fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    b.try_into().expect("one element")
}

/// Element `i` of `bytes`, decoded.
pub fn decode(dtype: DType, bytes: &[u8], i: usize) -> Expected {
    let s = dtype.size();
    let b = &bytes[i * s..(i + 1) * s];
    let u16v = || u16::from(b[0]) | u16::from(b[1]) << 8;
    match dtype {
        DType::F16 => Expected::Float(decode_f16(u16v())),
        DType::BF16 => Expected::Float(decode_bf16(u16v())),
        DType::F32 => Expected::Float(f64::from(f32::from_le_bytes(le(b)))),
        DType::F64 => Expected::Float(f64::from_le_bytes(le(b))),
        DType::I32 => Expected::Int(i128::from(i32::from_le_bytes(le(b)))),
        DType::U32 => Expected::Int(i128::from(u32::from_le_bytes(le(b)))),
        DType::I64 => Expected::Int(i128::from(i64::from_le_bytes(le(b)))),
        DType::U64 => Expected::Int(i128::from(u64::from_le_bytes(le(b)))),
    }
}

/// The expected result bytes' elements of a reduction over `ranks` ranks.
pub fn expected_all(reduction: Reduction, seed: u64, ranks: usize, count: usize) -> Vec<Expected> {
    (0..count)
        .map(|i| {
            let values: Vec<i128> = (0..ranks).map(|r| value(reduction, seed, r, i)).collect();
            expected(reduction, &values)
        })
        .collect()
}

/// Asserts `bytes` holds `expected` from element `first` on.
pub fn check(reduction: Reduction, bytes: &[u8], expected: &[Expected], what: &str) {
    assert_eq!(
        bytes.len(),
        expected.len() * reduction.dtype.size(),
        "{what}: length"
    );
    for (i, want) in expected.iter().enumerate() {
        let got = decode(reduction.dtype, bytes, i);
        assert_eq!(got, *want, "{what}: element {i} of {reduction}");
    }
}

/// IEEE binary16, decoded from its definition.
pub fn decode_f16(h: u16) -> f64 {
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 10) & 0x1f);
    let m = f64::from(h & 0x3ff);
    match e {
        0 => sign * m * 2f64.powi(-24),
        31 if m == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

/// bfloat16, decoded from its definition.
pub fn decode_bf16(h: u16) -> f64 {
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 7) & 0xff);
    let m = f64::from(h & 0x7f);
    match e {
        0 => sign * m * 2f64.powi(-133),
        255 if m == 0.0 => sign * f64::INFINITY,
        255 => f64::NAN,
        _ => sign * (1.0 + m / 128.0) * 2f64.powi(e - 127),
    }
}

/// Every finite value of a 16-bit format with its bits, sorted by value.
fn table(decode: fn(u16) -> f64) -> Vec<(f64, u16)> {
    let mut t: Vec<(f64, u16)> = (0..=u16::MAX)
        .map(|h| (decode(h), h))
        .filter(|(v, _)| v.is_finite())
        .collect();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    t
}

pub fn f16_table() -> &'static [(f64, u16)] {
    static T: OnceLock<Vec<(f64, u16)>> = OnceLock::new();
    T.get_or_init(|| table(decode_f16))
}

pub fn bf16_table() -> &'static [(f64, u16)] {
    static T: OnceLock<Vec<(f64, u16)>> = OnceLock::new();
    T.get_or_init(|| table(decode_bf16))
}

/// The bits of the value of `table` nearest to `x`, ties to the even bit
/// pattern (for in-range `x`).
pub fn nearest_bits(table: &[(f64, u16)], x: f64) -> u16 {
    let at = table.partition_point(|(v, _)| *v < x);
    let mut best: Option<(f64, u16)> = None;
    for &(v, bits) in table.iter().skip(at.saturating_sub(2)).take(4) {
        let d = (v - x).abs();
        best = match best {
            None => Some((d, bits)),
            Some((bd, bb)) if d < bd || (d == bd && bits & 1 == 0 && bb & 1 == 1) => {
                Some((d, bits))
            }
            keep => keep,
        };
    }
    best.map_or(0, |(_, bits)| bits)
}

/// Every (dtype, op) pair.
pub fn reductions() -> Vec<Reduction> {
    DType::ALL
        .iter()
        .flat_map(|d| ReduceOp::ALL.iter().map(|op| Reduction::new(*op, *d)))
        .collect()
}

/// The same call on every rank.
pub fn same(call: CollectiveCall, ranks: usize) -> Vec<CollectiveCall> {
    vec![call; ranks]
}

/// Arbitrary bytes for data-movement tests.
pub fn pattern_bytes(seed: u64, len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| mix(seed ^ i as u64) as u8)
            .collect::<Vec<u8>>(),
    )
}

// ------------------------------------------------- fault-test helpers --

/// Communicators over in-process transports the test keeps a handle on.
pub fn group_inspectable(
    n: usize,
    timeout: Duration,
) -> (Vec<Communicator>, Vec<Arc<InProcessTransport>>) {
    group_inspectable_with(n, timeout, JoinOptions::default())
}

/// As [`group_inspectable`], the hub formed with `options`.
pub fn group_inspectable_with(
    n: usize,
    timeout: Duration,
    options: JoinOptions,
) -> (Vec<Communicator>, Vec<Arc<InProcessTransport>>) {
    let devices = fresh_devices(n);
    let config = CommConfig::default().with_timeout(timeout);
    let transports: Vec<Arc<InProcessTransport>> = devices
        .iter()
        .map(|me| Arc::new(InProcessTransport::join(&devices, *me, options).expect("join")))
        .collect();
    let comms = transports
        .iter()
        .map(|t| {
            Communicator::with_transport(t.clone(), devices.clone(), config.clone())
                .expect("communicator")
        })
        .collect();
    (comms, transports)
}

/// A 4-byte u32 sum.
pub fn all_reduce_u32() -> CollectiveCall {
    CollectiveCall::AllReduce {
        reduction: Reduction::sum(DType::U32),
        len: 4,
    }
}

/// Posts [`all_reduce_u32`] and provides `v`.
pub fn post_u32(comm: &mut Communicator, v: u32) -> PendingResult {
    let (c, p) = comm.post(all_reduce_u32()).expect("post");
    c.provide(Ok(Bytes::copy_from_slice(&v.to_le_bytes())));
    p
}

/// A clean all_reduce over every rank: the sequence is still aligned.
pub fn still_works(comms: &mut [Communicator]) {
    let ranks = comms.len() as u32;
    let pending: Vec<_> = comms.iter_mut().map(|c| post_u32(c, 1)).collect();
    for p in pending {
        let out = p.wait(WAIT).expect("clean call");
        assert_eq!(out.bytes.as_ref(), &ranks.to_le_bytes());
    }
}
