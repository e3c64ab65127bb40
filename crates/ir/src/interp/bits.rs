//! `extractBits` and `insertBits` on one 32-bit lane, as WGSL defines them:
//! the offset and count are clamped to the width (`o = min(offset, 32)`,
//! `c = min(count, 32 - o)`), so every input has a meaning, and the device
//! (naga clamps the same way before its SPIR-V bit-field instructions)
//! agrees with this for every one.

use crate::Scalar;

/// The clamped offset and count.
fn clamp(offset: u32, count: u32) -> (u32, u32) {
    let o = offset.min(32);
    (o, count.min(32 - o))
}

/// `extractBits(e, offset, count)` for a lane of `s` (i32 or u32).
pub fn extract(s: Scalar, e: u64, offset: u32, count: u32) -> u64 {
    let (o, c) = clamp(offset, count);
    if c == 0 {
        return 0;
    }
    // c > 0, so o < 32 and c <= 32 - o.
    let field = ((e as u32) >> o) & (u32::MAX >> (32 - c));
    match s {
        Scalar::U32 => u64::from(field),
        // Bit c - 1 of the field fills the bits above it.
        Scalar::I32 => u64::from(((field << (32 - c)) as i32 >> (32 - c)) as u32),
        // Refused by the type check.
        Scalar::Bool | Scalar::F32 | Scalar::F16 | Scalar::I64 | Scalar::U64 | Scalar::F64 => 0,
    }
}

/// `insertBits(e, newbits, offset, count)` for a lane of i32 or u32.
pub fn insert(e: u64, newbits: u64, offset: u32, count: u32) -> u64 {
    let (o, c) = clamp(offset, count);
    let e = e as u32;
    if c == 0 {
        return u64::from(e);
    }
    let mask = (u32::MAX >> (32 - c)) << o;
    u64::from((e & !mask) | (((newbits as u32) << o) & mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit by bit, from the definition: bit i of the result is bit o + i of
    /// e for i < c; above, 0 (u32) or bit c - 1 (i32).
    fn extract_spec(signed: bool, e: u32, offset: u32, count: u32) -> u32 {
        let o = offset.min(32);
        let c = count.min(32 - o);
        let mut r = 0u32;
        for i in 0..32 {
            let bit = if i < c {
                (e >> (o + i)) & 1
            } else if signed && c > 0 {
                (e >> (o + c - 1)) & 1
            } else {
                0
            };
            r |= bit << i;
        }
        r
    }

    fn insert_spec(e: u32, n: u32, offset: u32, count: u32) -> u32 {
        let o = offset.min(32);
        let c = count.min(32 - o);
        let mut r = 0u32;
        for i in 0..32 {
            let bit = if i >= o && i < o + c {
                (n >> (i - o)) & 1
            } else {
                (e >> i) & 1
            };
            r |= bit << i;
        }
        r
    }

    #[test]
    fn every_offset_and_count_agrees_with_the_definition_bit_by_bit() {
        let values = [0u32, 1, 0x8000_0000, 0xDEAD_BEEF, u32::MAX, 0x1234_5678];
        for &e in &values {
            for &n in &values {
                for offset in [0u32, 1, 7, 16, 31, 32, 33, 1000, u32::MAX] {
                    for count in [0u32, 1, 5, 16, 31, 32, 33, u32::MAX] {
                        let u = extract(Scalar::U32, u64::from(e), offset, count);
                        assert_eq!(u, u64::from(extract_spec(false, e, offset, count)));
                        let i = extract(Scalar::I32, u64::from(e), offset, count);
                        assert_eq!(i, u64::from(extract_spec(true, e, offset, count)));
                        let r = insert(u64::from(e), u64::from(n), offset, count);
                        assert_eq!(r, u64::from(insert_spec(e, n, offset, count)));
                    }
                }
            }
        }
    }
}
