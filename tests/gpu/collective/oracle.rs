//! The suite's own oracle, independent of `compute-collective`: the values
//! each rank gives, their bytes in every [`DType`], and what every reduction
//! and every data movement must produce, in plain loops.
//!
//! Values are small integers held as `i128` ("logical values"), chosen so
//! every reduction is exact in any order and in every dtype: every partial
//! sum of four ranks stays within 256 in magnitude (bf16 holds every integer
//! up to 256 exactly, f16 up to 2048), products stay within 81 (factors from
//! -2..=3, never 0, so no float product is a signed zero), and a float mean
//! divides exactly (the last rank's value is nudged so the sum is a multiple
//! of the rank count). Integer means are *not* nudged: [`ReduceOp::Mean`] on
//! integers is the exact mean truncated toward zero, which is what Rust's
//! `/` on `i128` computes, negative sums included.

use compute_runtime::{DType, ReduceOp};

/// Signed dtypes get negative values too.
fn signed(dtype: DType) -> bool {
    !matches!(dtype, DType::U32 | DType::U64)
}

/// A well-mixed hash of a few numbers.
fn mix(a: u64, b: u64, c: u64) -> u64 {
    let mut h = a
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
        .wrapping_add(c.wrapping_mul(0x1656_67b1_9e37_79f9));
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

/// The value rank `r` gives at element `i` of case `salt`.
fn value(dtype: DType, op: ReduceOp, r: usize, i: usize, salt: u64) -> i128 {
    let h = mix(i as u64, r as u64, salt);
    match op {
        ReduceOp::Prod if signed(dtype) => [-2, -1, 1, 2, 3][(h % 5) as usize],
        ReduceOp::Prod => [1, 2, 3][(h % 3) as usize],
        _ if signed(dtype) => (h % 61) as i128 - 30,
        _ => (h % 61) as i128,
    }
}

/// Every rank's `len` values for `op` over `dtype` among `n` ranks.
pub fn inputs(dtype: DType, op: ReduceOp, n: usize, len: usize, salt: u64) -> Vec<Vec<i128>> {
    let mut v: Vec<Vec<i128>> = (0..n)
        .map(|r| (0..len).map(|i| value(dtype, op, r, i, salt)).collect())
        .collect();
    if op == ReduceOp::Mean && dtype.is_float() {
        let (last, n) = (n - 1, n as i128);
        for i in 0..len {
            let sum: i128 = v.iter().map(|x| x[i]).sum();
            v[last][i] += (n - sum.rem_euclid(n)) % n;
        }
    }
    v
}

/// The element-wise reduction of every rank's values, in logical values.
pub fn reduce(dtype: DType, op: ReduceOp, ranks: &[Vec<i128>]) -> Vec<i128> {
    let n = ranks.len() as i128;
    let len = ranks.first().map_or(0, Vec::len);
    (0..len)
        .map(|i| {
            let column = ranks.iter().map(|x| x[i]);
            match op {
                // Wrapping in i128 is exact modulo 2^128, so modulo the
                // width of every integer dtype too.
                ReduceOp::Sum => column.fold(0, i128::wrapping_add),
                ReduceOp::Prod => column.fold(1, i128::wrapping_mul),
                ReduceOp::Min => column.min().expect("ranks"),
                ReduceOp::Max => column.max().expect("ranks"),
                ReduceOp::Mean => {
                    let sum: i128 = column.sum();
                    if dtype.is_float() {
                        assert_eq!(sum % n, 0, "a float mean the oracle cannot write");
                    }
                    // Truncates toward zero.
                    sum / n
                }
            }
        })
        .collect()
}

/// The IEEE binary16 bits of integer `v` (|v| <= 2048, exact).
pub fn f16_bits(v: i128) -> u16 {
    if v == 0 {
        return 0;
    }
    let sign: u16 = if v < 0 { 0x8000 } else { 0 };
    let m = u32::try_from(v.unsigned_abs()).expect("small");
    assert!(m <= 2048, "{v} is not exact in f16");
    let e = 31 - m.leading_zeros(); // 2^e <= m < 2^(e+1)
    let scaled = (m - (1 << e)) << 10;
    assert_eq!(scaled % (1 << e), 0, "{v} is not exact in f16");
    let exponent = u16::try_from(e + 15).expect("exponent") << 10;
    sign | exponent | u16::try_from(scaled >> e).expect("mantissa")
}

/// The bfloat16 bits of integer `v` (exact: the low half of the `f32` is 0).
pub fn bf16_bits(v: i128) -> u16 {
    let x = v as f32;
    assert_eq!(x as i128, v, "{v} is not exact in f32");
    let bits = x.to_bits();
    assert_eq!(bits & 0xffff, 0, "{v} is not exact in bf16");
    (bits >> 16) as u16
}

/// Appends the bytes of logical value `v` as `dtype`: floats must hold it
/// exactly; integers wrap (two's complement), as the reductions do.
pub fn put(out: &mut Vec<u8>, dtype: DType, v: i128) {
    match dtype {
        DType::F16 => out.extend_from_slice(&f16_bits(v).to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&bf16_bits(v).to_le_bytes()),
        DType::F32 => {
            let x = v as f32;
            assert_eq!(x as i128, v, "{v} is not exact in f32");
            out.extend_from_slice(&x.to_le_bytes());
        }
        DType::F64 => {
            let x = v as f64;
            assert_eq!(x as i128, v, "{v} is not exact in f64");
            out.extend_from_slice(&x.to_le_bytes());
        }
        DType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        DType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
        DType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
        DType::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
    }
}

/// The bytes of `values` as `dtype`.
pub fn encode(dtype: DType, values: &[i128]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size());
    for v in values {
        put(&mut out, dtype, *v);
    }
    out
}

/// `len` bytes of a pattern seeded by `seed`: every byte value occurs, so
/// data movement of any dtype (NaN payloads included) is checked bit for bit.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (mix(i as u64, seed, 0x5eed) >> 24) as u8)
        .collect()
}

/// Panics with the first element where `got` and `want` differ.
pub fn assert_same(got: &[u8], want: &[u8], elem: usize, what: &str) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} bytes, expected {}",
        got.len(),
        want.len()
    );
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        let e = at / elem;
        let range = e * elem..((e + 1) * elem).min(got.len());
        panic!(
            "{what}: element {e} (byte {at}) is {:02x?}, expected {:02x?}",
            &got[range.clone()],
            &want[range]
        );
    }
}

#[test]
fn the_oracle_encodes_known_bits() {
    // binary16 and bfloat16, from their specifications.
    let f16: Vec<u16> = [0, 1, -1, 2, 3, -2, 1000, 2048, -30]
        .iter()
        .map(|v| f16_bits(*v))
        .collect();
    assert_eq!(
        f16,
        [
            0x0000, 0x3c00, 0xbc00, 0x4000, 0x4200, 0xc000, 0x63d0, 0x6800, 0xcf80
        ]
    );
    let bf16: Vec<u16> = [0, 1, -1, 3, 256, -30]
        .iter()
        .map(|v| bf16_bits(*v))
        .collect();
    assert_eq!(bf16, [0x0000, 0x3f80, 0xbf80, 0x4040, 0x4380, 0xc1f0]);
    // The integer mean truncates toward zero; the float mean is exact.
    let m = reduce(DType::I32, ReduceOp::Mean, &[vec![-7, 7], vec![0, 0]]);
    assert_eq!(m, [-3, 3]);
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            for n in [2, 3, 4] {
                let v = inputs(dtype, op, n, 257, 9);
                // Every partial result of a rank-order fold is exact in
                // the dtype (`put` asserts it for floats).
                for i in 0..257 {
                    let mut acc = v[0][i];
                    for x in &v[1..] {
                        acc = match op {
                            ReduceOp::Prod => acc * x[i],
                            _ => acc + x[i],
                        };
                        assert!(acc.abs() <= 256, "{dtype} {op} {n}: partial {acc}");
                        put(&mut Vec::new(), dtype, acc);
                    }
                }
                let _ = encode(dtype, &reduce(dtype, op, &v));
            }
        }
    }
}
