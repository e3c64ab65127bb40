//! Host reductions: element-wise combination of little-endian byte buffers,
//! for every [`DType`] x [`ReduceOp`].
//!
//! **Order.** [`reduce`] folds the ranks' buffers in rank order:
//! `((x0 op x1) op x2) op ...`, then finishes a mean by dividing by the rank
//! count. The same inputs give the same bits on every run, every thread
//! count and every rank, because the split across threads is by element,
//! never by rank.
//!
//! **Arithmetic.** `f32` in `f32` and `f64` in `f64`; `f16`/`bf16` widened to
//! `f32`, combined, and rounded back (to nearest, ties to even) after every
//! step, so a fold of `combine` and one `reduce` agree bit for bit. `Min` and
//! `Max` on floats propagate NaN (a NaN on any rank gives NaN). A float `Mean`
//! is the rank-order sum divided by the rank count in the same arithmetic.
//! Integer `Sum` and `Prod` wrap (two's complement), as NCCL's do. Integer
//! `Mean` in [`reduce`] is the *exact* mean, truncated toward zero: the sum is
//! accumulated in a wider integer (`i64`/`u64` for 32-bit types,
//! `i128`/`u128` for 64-bit ones) and divided once.
//!
//! **Buys:** typed loops over `as_chunks` arrays and `from_le_bytes`, which
//! the compiler vectorises (no alignment assumptions, no `unsafe`); cache
//! blocking (every rank's block is folded while it is hot); the host-copy
//! pool's threads (`compute_runtime::hostcopy::pool`, started once) for
//! buffers of [`Parallelism::min_bytes`] and more. **Doesn't buy:** a
//! pairwise tree (the fold is sequential over ranks, which is what makes it
//! reproducible), or exact integer means through the pairwise
//! [`combine`]/[`finish`] pair, which wraps like `Sum` (it is the shape an
//! MPI user-defined operation takes; [`reduce`] is exact).

use compute_runtime::{DType, ReduceOp, Reduction, ServerError};

use crate::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

/// Bytes of output one cache block holds (a multiple of every element size).
const BLOCK: usize = 16 * 1024;

/// When and how widely [`reduce`] splits its work across threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallelism {
    /// Buffers this large (in bytes) and larger are split across threads.
    pub min_bytes: usize,
    /// The most threads one reduction uses (the caller's included).
    pub max_threads: usize,
}

impl Default for Parallelism {
    /// 1 MiB and up, on up to the host-copy pool's threads
    /// (`compute_runtime::hostcopy::max_threads`).
    fn default() -> Self {
        Parallelism {
            min_bytes: 1 << 20,
            max_threads: compute_runtime::hostcopy::max_threads(),
        }
    }
}

impl Parallelism {
    /// One thread, whatever the size.
    pub const SERIAL: Parallelism = Parallelism {
        min_bytes: usize::MAX,
        max_threads: 1,
    };

    /// Threads for a buffer of `len` bytes: one below `min_bytes` (or for
    /// an empty buffer), else `max_threads`.
    pub fn threads_for(&self, len: usize) -> usize {
        if len == 0 || len < self.min_bytes {
            1
        } else {
            self.max_threads.max(1)
        }
    }
}

/// `acc = acc op x`, element-wise. `Mean` combines as `Sum` (wrapping for
/// integers); [`finish`] divides. Errors on buffers of different lengths or
/// lengths that are not a whole number of elements.
pub fn combine(reduction: Reduction, acc: &mut [u8], x: &[u8]) -> Result<(), ServerError> {
    check_len(reduction.dtype, acc.len(), x.len())?;
    combine_unchecked(reduction, acc, x);
    Ok(())
}

/// Finishes a fold of [`combine`] over `ranks` buffers: divides by `ranks`
/// for `Mean` (integers truncate toward zero), does nothing otherwise.
pub fn finish(reduction: Reduction, acc: &mut [u8], ranks: usize) -> Result<(), ServerError> {
    check_len(reduction.dtype, acc.len(), acc.len())?;
    if ranks == 0 {
        return Err(invalid("a mean over zero ranks".to_string()));
    }
    if reduction.op == ReduceOp::Mean {
        divide(reduction.dtype, acc, ranks);
    }
    Ok(())
}

/// Reduces `inputs` (one buffer per rank, in rank order) into `out`, which
/// has their common length. See the module doc for order and arithmetic.
pub fn reduce(
    reduction: Reduction,
    inputs: &[&[u8]],
    out: &mut [u8],
    parallelism: Parallelism,
) -> Result<(), ServerError> {
    if inputs.is_empty() {
        return Err(invalid("a reduction over zero ranks".to_string()));
    }
    for input in inputs {
        check_len(reduction.dtype, out.len(), input.len())?;
    }
    let size = reduction.dtype.size();
    let threads = parallelism.threads_for(out.len()).min(out.len() / size);
    if threads <= 1 {
        reduce_range(reduction, inputs, out, 0);
        return Ok(());
    }
    // A few chunks per thread on the process's host-copy threads (started
    // once: a thread start per call cost more than a pipelined step's
    // work); the split is by element, so the bits never depend on it.
    let per_chunk = out.len().div_ceil(size).div_ceil(threads * 4) * size;
    match compute_runtime::hostcopy::pool() {
        Some(pool) => pool.install(|| {
            use rayon::prelude::*;
            out.par_chunks_mut(per_chunk)
                .enumerate()
                .for_each(|(i, chunk)| reduce_range(reduction, inputs, chunk, i * per_chunk));
        }),
        None => reduce_range(reduction, inputs, out, 0),
    }
    Ok(())
}

fn check_len(dtype: DType, acc: usize, x: usize) -> Result<(), ServerError> {
    if acc != x {
        return Err(ServerError::SizeMismatch {
            expected: acc as u64,
            actual: x as u64,
        });
    }
    if !acc.is_multiple_of(dtype.size()) {
        return Err(invalid(format!(
            "{acc} bytes is not a whole number of {dtype} elements ({} bytes each)",
            dtype.size()
        )));
    }
    Ok(())
}

fn invalid(reason: String) -> ServerError {
    ServerError::InvalidArgument { reason }
}

/// Reduces bytes `offset..offset + out.len()` of every input into `out`,
/// block by block.
fn reduce_range(reduction: Reduction, inputs: &[&[u8]], out: &mut [u8], offset: usize) {
    let exact_mean = reduction.op == ReduceOp::Mean && !reduction.dtype.is_float();
    let mut wide = WideAcc::default();
    for (b, block) in out.chunks_mut(BLOCK).enumerate() {
        let start = offset + b * BLOCK;
        let end = start + block.len();
        if exact_mean {
            wide.mean(reduction.dtype, inputs, start..end, block);
            continue;
        }
        let (first, rest) = match inputs.split_first() {
            Some(split) => split,
            None => return,
        };
        block.copy_from_slice(&first[start..end]);
        for x in rest {
            combine_unchecked(reduction, block, &x[start..end]);
        }
        if reduction.op == ReduceOp::Mean {
            divide(reduction.dtype, block, inputs.len());
        }
    }
}

/// `*a = f(*a, b)` over the whole `W`-byte elements of two equal buffers.
#[inline(always)]
fn zip_map<const W: usize>(acc: &mut [u8], x: &[u8], f: impl Fn([u8; W], [u8; W]) -> [u8; W]) {
    let (acc, _) = acc.as_chunks_mut::<W>();
    let (x, _) = x.as_chunks::<W>();
    for (a, b) in acc.iter_mut().zip(x) {
        *a = f(*a, *b);
    }
}

/// `*a = f(*a)` over the whole `W`-byte elements of a buffer.
#[inline(always)]
fn map<const W: usize>(acc: &mut [u8], f: impl Fn([u8; W]) -> [u8; W]) {
    let (acc, _) = acc.as_chunks_mut::<W>();
    for a in acc.iter_mut() {
        *a = f(*a);
    }
}

macro_rules! float_fns {
    ($t:ty, $w:literal, $combine:ident, $divide:ident, $max:ident, $min:ident) => {
        #[inline(always)]
        fn $max(a: $t, b: $t) -> $t {
            if a.is_nan() || b.is_nan() {
                <$t>::NAN
            } else if b > a {
                b
            } else {
                a
            }
        }

        #[inline(always)]
        fn $min(a: $t, b: $t) -> $t {
            if a.is_nan() || b.is_nan() {
                <$t>::NAN
            } else if b < a {
                b
            } else {
                a
            }
        }

        fn $combine(op: ReduceOp, acc: &mut [u8], x: &[u8]) {
            let ld = <$t>::from_le_bytes;
            match op {
                ReduceOp::Sum | ReduceOp::Mean => {
                    zip_map::<$w>(acc, x, |a, b| (ld(a) + ld(b)).to_le_bytes())
                }
                ReduceOp::Prod => zip_map::<$w>(acc, x, |a, b| (ld(a) * ld(b)).to_le_bytes()),
                ReduceOp::Min => zip_map::<$w>(acc, x, |a, b| $min(ld(a), ld(b)).to_le_bytes()),
                ReduceOp::Max => zip_map::<$w>(acc, x, |a, b| $max(ld(a), ld(b)).to_le_bytes()),
            }
        }

        fn $divide(acc: &mut [u8], ranks: usize) {
            let n = ranks as $t;
            map::<$w>(acc, |a| (<$t>::from_le_bytes(a) / n).to_le_bytes());
        }
    };
}

float_fns!(f32, 4, combine_f32, divide_f32, max_f32, min_f32);
float_fns!(f64, 8, combine_f64, divide_f64, max_f64, min_f64);

macro_rules! half_fns {
    ($combine:ident, $divide:ident, $widen:path, $narrow:path) => {
        fn $combine(op: ReduceOp, acc: &mut [u8], x: &[u8]) {
            let ld = |b: [u8; 2]| $widen(u16::from_le_bytes(b));
            let st = |v: f32| $narrow(v).to_le_bytes();
            match op {
                ReduceOp::Sum | ReduceOp::Mean => zip_map::<2>(acc, x, |a, b| st(ld(a) + ld(b))),
                ReduceOp::Prod => zip_map::<2>(acc, x, |a, b| st(ld(a) * ld(b))),
                ReduceOp::Min => zip_map::<2>(acc, x, |a, b| st(min_f32(ld(a), ld(b)))),
                ReduceOp::Max => zip_map::<2>(acc, x, |a, b| st(max_f32(ld(a), ld(b)))),
            }
        }

        fn $divide(acc: &mut [u8], ranks: usize) {
            let n = ranks as f32;
            map::<2>(acc, |a| {
                $narrow($widen(u16::from_le_bytes(a)) / n).to_le_bytes()
            });
        }
    };
}

half_fns!(combine_f16, divide_f16, f16_to_f32, f32_to_f16);
half_fns!(combine_bf16, divide_bf16, bf16_to_f32, f32_to_bf16);

macro_rules! int_fns {
    ($t:ty, $w:literal, $combine:ident, $divide:ident) => {
        fn $combine(op: ReduceOp, acc: &mut [u8], x: &[u8]) {
            let ld = <$t>::from_le_bytes;
            match op {
                ReduceOp::Sum | ReduceOp::Mean => {
                    zip_map::<$w>(acc, x, |a, b| ld(a).wrapping_add(ld(b)).to_le_bytes())
                }
                ReduceOp::Prod => {
                    zip_map::<$w>(acc, x, |a, b| ld(a).wrapping_mul(ld(b)).to_le_bytes())
                }
                ReduceOp::Min => zip_map::<$w>(acc, x, |a, b| ld(a).min(ld(b)).to_le_bytes()),
                ReduceOp::Max => zip_map::<$w>(acc, x, |a, b| ld(a).max(ld(b)).to_le_bytes()),
            }
        }

        fn $divide(acc: &mut [u8], ranks: usize) {
            // Division truncates toward zero; a rank count too large for the
            // type (never, in practice) divides by the type's maximum.
            let n = <$t>::try_from(ranks).unwrap_or(<$t>::MAX);
            map::<$w>(acc, |a| (<$t>::from_le_bytes(a) / n).to_le_bytes());
        }
    };
}

int_fns!(i32, 4, combine_i32, divide_i32);
int_fns!(u32, 4, combine_u32, divide_u32);
int_fns!(i64, 8, combine_i64, divide_i64);
int_fns!(u64, 8, combine_u64, divide_u64);

fn combine_unchecked(reduction: Reduction, acc: &mut [u8], x: &[u8]) {
    let op = reduction.op;
    match reduction.dtype {
        DType::F16 => combine_f16(op, acc, x),
        DType::BF16 => combine_bf16(op, acc, x),
        DType::F32 => combine_f32(op, acc, x),
        DType::F64 => combine_f64(op, acc, x),
        DType::I32 => combine_i32(op, acc, x),
        DType::U32 => combine_u32(op, acc, x),
        DType::I64 => combine_i64(op, acc, x),
        DType::U64 => combine_u64(op, acc, x),
    }
}

fn divide(dtype: DType, acc: &mut [u8], ranks: usize) {
    match dtype {
        DType::F16 => divide_f16(acc, ranks),
        DType::BF16 => divide_bf16(acc, ranks),
        DType::F32 => divide_f32(acc, ranks),
        DType::F64 => divide_f64(acc, ranks),
        DType::I32 => divide_i32(acc, ranks),
        DType::U32 => divide_u32(acc, ranks),
        DType::I64 => divide_i64(acc, ranks),
        DType::U64 => divide_u64(acc, ranks),
    }
}

/// Wide accumulators for exact integer means, reused block after block.
#[derive(Default)]
struct WideAcc {
    signed: Vec<i128>,
    unsigned: Vec<u128>,
}

macro_rules! exact_mean {
    ($acc:expr, $t:ty, $wide:ty, $w:literal, $inputs:expr, $range:expr, $out:expr) => {{
        let acc = $acc;
        acc.clear();
        let (out, _) = $out.as_chunks_mut::<$w>();
        acc.resize(out.len(), 0);
        for input in $inputs {
            let (x, _) = input[$range.clone()].as_chunks::<$w>();
            for (a, b) in acc.iter_mut().zip(x) {
                *a += <$wide>::from(<$t>::from_le_bytes(*b));
            }
        }
        let n = <$wide>::try_from($inputs.len()).unwrap_or(<$wide>::MAX);
        for (o, a) in out.iter_mut().zip(acc.iter()) {
            // |a / n| <= the largest |input|, so the narrowing is exact.
            *o = <$t>::try_from(*a / n).unwrap_or_default().to_le_bytes();
        }
    }};
}

impl WideAcc {
    /// The exact mean of the inputs' bytes `range`, truncated toward zero.
    fn mean(
        &mut self,
        dtype: DType,
        inputs: &[&[u8]],
        range: std::ops::Range<usize>,
        out: &mut [u8],
    ) {
        match dtype {
            DType::I32 => exact_mean!(&mut self.signed, i32, i128, 4, inputs, range, out),
            DType::U32 => exact_mean!(&mut self.unsigned, u32, u128, 4, inputs, range, out),
            DType::I64 => exact_mean!(&mut self.signed, i64, i128, 8, inputs, range, out),
            DType::U64 => exact_mean!(&mut self.unsigned, u64, u128, 8, inputs, range, out),
            // Floats never take this path; keep their meaning anyway.
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
                reduce_range(Reduction::mean(dtype), inputs, out, range.start)
            }
        }
    }
}
