//! Reductions over MPI: which MPI operation and datatype each
//! [`Reduction`] takes, and the user operations over [`reduce::combine`].
//!
//! | dtype          | sum, prod                      | min, max                | mean |
//! |----------------|--------------------------------|-------------------------|------|
//! | i32, u32       | `MPI_SUM`/`MPI_PROD` on `uint32_t` | `MPI_MIN`/`MPI_MAX` on the type | widened to 64 bits, `MPI_SUM`, divided once |
//! | i64, u64       | `MPI_SUM`/`MPI_PROD` on `uint64_t` | `MPI_MIN`/`MPI_MAX` on the type | widened to 128 bits, user op (wrapping 128-bit add), divided once |
//! | f32, f64       | `MPI_SUM`/`MPI_PROD` on `float`/`double` | user op (NaN propagates) | `MPI_SUM`, then [`reduce::finish`] |
//! | f16, bf16      | user op                        | user op                 | user op sum, then [`reduce::finish`] |
//!
//! **Exact where built in.** Integer sums and products wrap (two's
//! complement), and a signed type's wrapped sum or product has the bits of
//! its unsigned one, so they run as unsigned C arithmetic, which wraps by
//! definition; min and max do not depend on the order. Integer means are
//! the exact mean truncated toward zero, as [`reduce::reduce`]'s.
//!
//! **Floats.** The user operations are created non-commutative, so MPI
//! keeps the ranks' order of operands (OpenMPI then reduces with an
//! in-order tree and broadcasts: every rank gets the same bits, run after
//! run). `f32`/`f64` sums and products use MPI's built-in operations, which
//! MPI may apply in any order (OpenMPI's ring and recursive-doubling
//! algorithms for large and small buffers): every rank gets the same bits,
//! but the last bits may differ from the in-process transport's rank-order
//! fold. Min and max are user operations because C's comparisons do not
//! propagate NaN the way [`reduce`] does.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use bytes::Bytes;
use compute_runtime::CollectiveFault;
use compute_runtime::{DType, ReduceOp, Reduction, ServerError};
use mpi::ffi;

use super::pool::Pool;
use super::world::{Comm, Dt, Op, World, check, count};
use crate::reduce;

/// The user operation of a wide (128-bit) signed sum.
const WIDE_I128: u8 = 64;
/// The user operation of a wide (128-bit) unsigned sum.
const WIDE_U128: u8 = 65;

/// How one reduction runs over MPI.
#[derive(Clone, Copy, Debug)]
struct Plan {
    dt: Dt,
    op: Op,
    /// Elements are widened before and narrowed after (integer means).
    widen: Option<Widen>,
    /// Bytes of one element as MPI moves it.
    elem: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Widen {
    I32,
    U32,
    I64,
    U64,
}

fn code(r: Reduction) -> u8 {
    let d = DType::ALL.iter().position(|x| *x == r.dtype).unwrap_or(0);
    let o = ReduceOp::ALL.iter().position(|x| *x == r.op).unwrap_or(0);
    (d * 8 + o) as u8
}

type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut ffi::MPI_Datatype);

fn user_function(code: u8) -> Option<UserFn> {
    macro_rules! table {
        ($($c:literal)*) => {
            match code {
                $($c => Some(user_fn::<$c> as UserFn),)*
                _ => None,
            }
        };
    }
    // f16, bf16, f32, f64 (DType::ALL[0..4]) x sum, prod, min, max; the
    // wide sums.
    table!(0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 64 65)
}

/// What the user operation `CODE` combines, and its element size.
fn user_kind(code: u8) -> Option<(Option<Reduction>, usize)> {
    match code {
        WIDE_I128 | WIDE_U128 => Some((None, 16)),
        _ => {
            let dtype = *DType::ALL.get(usize::from(code / 8))?;
            let op = *ReduceOp::ALL.get(usize::from(code % 8))?;
            Some((Some(Reduction::new(op, dtype)), dtype.size()))
        }
    }
}

/// `inoutvec = invec op inoutvec`, element-wise, with `invec` the
/// lower ranks' (left) operand. Never panics (MPI calls it from C).
///
/// # Safety
/// MPI's contract for user functions: `invec` and `inoutvec` hold `*len`
/// elements of the operation's datatype.
unsafe extern "C" fn user_fn<const CODE: u8>(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    let Some((reduction, elem)) = user_kind(CODE) else {
        return;
    };
    // SAFETY: MPI passes a valid count.
    let n = usize::try_from(unsafe { *len }).unwrap_or(0);
    let bytes = n * elem;
    if bytes == 0 {
        return;
    }
    // SAFETY: MPI's contract (see the doc); the buffers do not overlap.
    let (left, acc) = unsafe {
        (
            std::slice::from_raw_parts(invec as *const u8, bytes),
            std::slice::from_raw_parts_mut(inoutvec as *mut u8, bytes),
        )
    };
    // `combine` folds into its left operand; keep MPI's operand order
    // through a small buffer on the stack.
    let mut tmp = [0u8; 4096];
    for (l, a) in left.chunks(tmp.len()).zip(acc.chunks_mut(tmp.len())) {
        let t = &mut tmp[..l.len()];
        t.copy_from_slice(l);
        match reduction {
            Some(r) => {
                let _ = reduce::combine(r, t, a);
            }
            None if CODE == WIDE_I128 => wide_add::<true>(t, a),
            None => wide_add::<false>(t, a),
        }
        a.copy_from_slice(t);
    }
}

/// `acc += x` over 128-bit little-endian elements (wrapping; a sum of
/// 64-bit values never wraps 128 bits in practice).
fn wide_add<const SIGNED: bool>(acc: &mut [u8], x: &[u8]) {
    let (acc, _) = acc.as_chunks_mut::<16>();
    let (x, _) = x.as_chunks::<16>();
    for (a, b) in acc.iter_mut().zip(x) {
        *a = if SIGNED {
            i128::from_le_bytes(*a)
                .wrapping_add(i128::from_le_bytes(*b))
                .to_le_bytes()
        } else {
            u128::from_le_bytes(*a)
                .wrapping_add(u128::from_le_bytes(*b))
                .to_le_bytes()
        };
    }
}

/// The user operation `code`, created on first use.
fn user_op(world: &World, code: u8) -> Result<Op, ServerError> {
    let mut ops = world.user_ops.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(op) = ops.get(&code) {
        return Ok(*op);
    }
    let function = user_function(code).ok_or(ServerError::CollectiveState {
        fault: CollectiveFault::Misuse("no MPI user operation for this reduction"),
    })?;
    // SAFETY: reading a library constant.
    let mut op = Op(unsafe { ffi::RSMPI_SUM });
    // SAFETY: `function` follows MPI's user-function contract; 0 = not
    // commutative, so MPI keeps the operands' rank order.
    check(
        unsafe { ffi::MPI_Op_create(Some(function), 0, &mut op.0) },
        "MPI_Op_create",
    )?;
    ops.insert(code, op);
    Ok(op)
}

fn plan(world: &World, r: Reduction) -> Result<Plan, ServerError> {
    // SAFETY: reading library constants.
    let (sum, prod, min, max) = unsafe {
        (
            Op(ffi::RSMPI_SUM),
            Op(ffi::RSMPI_PROD),
            Op(ffi::RSMPI_MIN),
            Op(ffi::RSMPI_MAX),
        )
    };
    // SAFETY: as above.
    let (u16t, u32t, u64t, i32t, i64t, f32t, f64t) = unsafe {
        (
            Dt(ffi::RSMPI_UINT16_T),
            Dt(ffi::RSMPI_UINT32_T),
            Dt(ffi::RSMPI_UINT64_T),
            Dt(ffi::RSMPI_INT32_T),
            Dt(ffi::RSMPI_INT64_T),
            Dt(ffi::RSMPI_FLOAT),
            Dt(ffi::RSMPI_DOUBLE),
        )
    };
    let builtin = |dt: Dt, op: Op, elem: usize| Plan {
        dt,
        op,
        widen: None,
        elem,
    };
    let user = |dt: Dt, reduction: Reduction, elem: usize| -> Result<Plan, ServerError> {
        Ok(Plan {
            dt,
            op: user_op(world, code(reduction))?,
            widen: None,
            elem,
        })
    };
    use DType::*;
    use ReduceOp::*;
    Ok(match (r.dtype, r.op) {
        (F16 | BF16, Mean) => user(u16t, Reduction::sum(r.dtype), 2)?,
        (F16 | BF16, _) => user(u16t, r, 2)?,
        (F32, Sum | Mean) => builtin(f32t, sum, 4),
        (F32, Prod) => builtin(f32t, prod, 4),
        (F32, Min | Max) => user(u32t, r, 4)?,
        (F64, Sum | Mean) => builtin(f64t, sum, 8),
        (F64, Prod) => builtin(f64t, prod, 8),
        (F64, Min | Max) => user(u64t, r, 8)?,
        (I32 | U32, Sum) => builtin(u32t, sum, 4),
        (I32 | U32, Prod) => builtin(u32t, prod, 4),
        (I32, Min) => builtin(i32t, min, 4),
        (I32, Max) => builtin(i32t, max, 4),
        (U32, Min) => builtin(u32t, min, 4),
        (U32, Max) => builtin(u32t, max, 4),
        (I64 | U64, Sum) => builtin(u64t, sum, 8),
        (I64 | U64, Prod) => builtin(u64t, prod, 8),
        (I64, Min) => builtin(i64t, min, 8),
        (I64, Max) => builtin(i64t, max, 8),
        (U64, Min) => builtin(u64t, min, 8),
        (U64, Max) => builtin(u64t, max, 8),
        (I32, Mean) => Plan {
            widen: Some(Widen::I32),
            ..builtin(i64t, sum, 8)
        },
        (U32, Mean) => Plan {
            widen: Some(Widen::U32),
            ..builtin(u64t, sum, 8)
        },
        (I64, Mean) => Plan {
            widen: Some(Widen::I64),
            op: user_op(world, WIDE_I128)?,
            dt: world.wide,
            elem: 16,
        },
        (U64, Mean) => Plan {
            widen: Some(Widen::U64),
            op: user_op(world, WIDE_U128)?,
            dt: world.wide,
            elem: 16,
        },
    })
}

/// The elements of `input` in the plan's wider type.
fn widen(w: Widen, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() * 2);
    match w {
        Widen::I32 => input
            .as_chunks::<4>()
            .0
            .iter()
            .for_each(|b| out.extend(i64::from(i32::from_le_bytes(*b)).to_le_bytes())),
        Widen::U32 => input
            .as_chunks::<4>()
            .0
            .iter()
            .for_each(|b| out.extend(u64::from(u32::from_le_bytes(*b)).to_le_bytes())),
        Widen::I64 => input
            .as_chunks::<8>()
            .0
            .iter()
            .for_each(|b| out.extend(i128::from(i64::from_le_bytes(*b)).to_le_bytes())),
        Widen::U64 => input
            .as_chunks::<8>()
            .0
            .iter()
            .for_each(|b| out.extend(u128::from(u64::from_le_bytes(*b)).to_le_bytes())),
    }
    out
}

/// The exact mean of widened sums over `ranks`, narrowed back (truncated
/// toward zero; |sum / ranks| fits the narrow type).
fn narrow_mean(w: Widen, sums: &[u8], ranks: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(sums.len() / 2);
    let n = ranks.max(1);
    match w {
        Widen::I32 => sums.as_chunks::<8>().0.iter().for_each(|b| {
            let m = i64::from_le_bytes(*b) / n as i64;
            out.extend(i32::try_from(m).unwrap_or_default().to_le_bytes());
        }),
        Widen::U32 => sums.as_chunks::<8>().0.iter().for_each(|b| {
            let m = u64::from_le_bytes(*b) / n as u64;
            out.extend(u32::try_from(m).unwrap_or_default().to_le_bytes());
        }),
        Widen::I64 => sums.as_chunks::<16>().0.iter().for_each(|b| {
            let m = i128::from_le_bytes(*b) / n as i128;
            out.extend(i64::try_from(m).unwrap_or_default().to_le_bytes());
        }),
        Widen::U64 => sums.as_chunks::<16>().0.iter().for_each(|b| {
            let m = u128::from_le_bytes(*b) / n as u128;
            out.extend(u64::try_from(m).unwrap_or_default().to_le_bytes());
        }),
    }
    out
}

/// What a reduction's MPI call leaves, made into the call's result.
fn finish(
    r: Reduction,
    p: &Plan,
    mut out: Vec<u8>,
    ranks: usize,
    pool: &Arc<Pool>,
) -> Result<Bytes, ServerError> {
    if let Some(w) = p.widen {
        return Ok(Bytes::from(narrow_mean(w, &out, ranks)));
    }
    if r.op == ReduceOp::Mean {
        reduce::finish(r, &mut out, ranks)?;
    }
    Ok(pool.bytes(out))
}

/// `MPI_Allreduce` of `input` over `comm` (`ranks` ranks).
pub(crate) fn all_reduce(
    world: &World,
    pool: &Arc<Pool>,
    comm: Comm,
    ranks: usize,
    r: Reduction,
    input: Bytes,
) -> Result<Bytes, ServerError> {
    let p = plan(world, r)?;
    let wide;
    let send: &[u8] = match p.widen {
        Some(w) => {
            wide = widen(w, &input);
            &wide
        }
        None => &input,
    };
    let mut out = pool.take(send.len());
    let n = count(send.len() / p.elem)?;
    // SAFETY: both buffers hold `n` elements of `p.dt`; MPI reads `send`
    // only.
    let rc = unsafe {
        ffi::MPI_Allreduce(
            send.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            n,
            p.dt.0,
            p.op.0,
            comm.raw(),
        )
    };
    check(rc, "MPI_Allreduce")?;
    finish(r, &p, out, ranks, pool)
}

/// `MPI_Reduce_scatter_block` of `input` (one chunk per rank) over `comm`.
pub(crate) fn reduce_scatter(
    world: &World,
    pool: &Arc<Pool>,
    comm: Comm,
    ranks: usize,
    r: Reduction,
    input: Bytes,
) -> Result<Bytes, ServerError> {
    let p = plan(world, r)?;
    let wide;
    let send: &[u8] = match p.widen {
        Some(w) => {
            wide = widen(w, &input);
            &wide
        }
        None => &input,
    };
    let chunk = send.len() / ranks.max(1);
    let mut out = pool.take(chunk);
    let n = count(chunk / p.elem)?;
    // SAFETY: `send` holds `ranks * n` elements, `out` `n`.
    let rc = unsafe {
        ffi::MPI_Reduce_scatter_block(
            send.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            n,
            p.dt.0,
            p.op.0,
            comm.raw(),
        )
    };
    check(rc, "MPI_Reduce_scatter_block")?;
    finish(r, &p, out, ranks, pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_functions_fold_left_operand_first() {
        // The user function computes `left op right` into `right`, as
        // `combine(left, right)` would into `left`.
        let f = user_function(code(Reduction::max(DType::F32))).expect("fn");
        let mut left = Vec::new();
        let mut right = Vec::new();
        for i in 0..3000 {
            left.extend((i as f32).to_le_bytes());
            right.extend((2999.0 - i as f32).to_le_bytes());
        }
        let mut want = left.clone();
        reduce::combine(Reduction::max(DType::F32), &mut want, &right).expect("combine");
        let mut acc = right.clone();
        let mut len: c_int = 3000;
        // SAFETY: both buffers hold 3000 f32s.
        unsafe {
            f(
                left.as_mut_ptr().cast(),
                acc.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(acc, want);
    }

    #[test]
    fn widened_means_are_exact() {
        let vals: [i64; 3] = [i64::MAX, i64::MAX - 2, -7];
        let mut acc = widen(Widen::I64, &vals[0].to_le_bytes());
        for v in &vals[1..] {
            wide_add::<true>(&mut acc, &widen(Widen::I64, &v.to_le_bytes()));
        }
        let m = narrow_mean(Widen::I64, &acc, 3);
        let exact = (vals.iter().map(|v| i128::from(*v)).sum::<i128>() / 3) as i64;
        assert_eq!(m, exact.to_le_bytes());
        // u32::MAX on each of 3 ranks: the mean is u32::MAX, not a wrap.
        let one = widen(Widen::U32, &u32::MAX.to_le_bytes());
        let mut acc = one.clone();
        for _ in 0..2 {
            let sum =
                u64::from_le_bytes(acc[..8].try_into().expect("8 bytes")) + u64::from(u32::MAX);
            acc = sum.to_le_bytes().to_vec();
        }
        assert_eq!(narrow_mean(Widen::U32, &acc, 3), u32::MAX.to_le_bytes());
    }
}
