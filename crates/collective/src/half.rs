//! `f16` and `bf16` <-> `f32` conversions, written here rather than pulled in.
//!
//! Narrowing rounds to nearest, ties to even; infinities stay infinities,
//! values too large for the narrow type become infinities, NaNs stay NaNs
//! (quieted, sign and top payload bits kept). Widening is exact. The
//! reductions compute 16-bit floats in `f32` and narrow once per combine.
//!
//! **Buys:** no dependency, and conversions that are checked against every
//! one of the 65 536 bit patterns. **Doesn't buy:** hardware conversion
//! instructions (F16C and the like): these are portable scalar bit
//! manipulations, which the compiler may or may not vectorise.

/// The `f32` an IEEE binary16 bit pattern denotes (exact).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    // Re-bias the exponent in place; subnormals are renormalised by one f32
    // subtraction (exact), infinities and NaNs get the all-ones exponent
    // (the NaN payload is kept). Every case is computed and one selected,
    // without branches, so loops over it vectorise.
    const SHIFTED_EXP: u32 = 0x7c00 << 13;
    let h = u32::from(h);
    let shifted = (h & 0x7fff) << 13;
    let exp = shifted & SHIFTED_EXP;
    let normal = shifted + (112 << 23);
    let inf_nan = normal + (112 << 23);
    let subnormal = (f32::from_bits(normal + (1 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let bits = if exp == SHIFTED_EXP { inf_nan } else { normal };
    let bits = if exp == 0 { subnormal } else { bits };
    f32::from_bits(bits | ((h & 0x8000) << 16))
}

/// The IEEE binary16 bit pattern nearest to `x` (ties to even).
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    const F32_INF: u32 = 0xff << 23;
    // The smallest f32 that is too large for binary16, rounding aside.
    const F16_OVER: u32 = (127 + 16) << 23;
    // Adding 0.5 (in the units of the f16 subnormal) lets the FPU's own
    // round-to-nearest-even place the subnormal's bits.
    const DENORM_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    let bits = x.to_bits();
    let sign = (bits >> 16) & 0x8000;
    let abs = bits & 0x7fff_ffff;
    // Every case, computed without branches; then one is selected.
    // NaN: quiet, top payload bits kept; else infinity.
    let nan = 0x7e00 | ((abs >> 13) & 0x03ff);
    let over = if abs > F32_INF { nan } else { 0x7c00 };
    // A binary16 subnormal or zero.
    let subnormal = (f32::from_bits(abs) + f32::from_bits(DENORM_MAGIC))
        .to_bits()
        .wrapping_sub(DENORM_MAGIC);
    // Normal: re-bias, round to nearest even on the 13 dropped bits (a carry
    // bumps the exponent, up to infinity, as it should).
    let odd = (abs >> 13) & 1;
    let normal = abs.wrapping_sub(112 << 23).wrapping_add(0x0fff + odd) >> 13;
    let magnitude = if abs < (113 << 23) { subnormal } else { normal };
    let magnitude = if abs >= F16_OVER { over } else { magnitude };
    (sign | magnitude) as u16
}

/// The `f32` a bfloat16 bit pattern denotes (exact).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// The bfloat16 bit pattern nearest to `x` (ties to even).
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
    // a carry into the exponent (up to infinity) is the right answer.
    let bias = 0x7fff + ((bits >> 16) & 1);
    ((bits + bias) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A straightforward reference narrowing, case by case, to check the
    /// fast one against.
    fn reference_f32_to_f16(x: f32) -> u16 {
        let round = |kept: u32, rest: u32, half: u32| {
            if rest > half || (rest == half && kept & 1 == 1) {
                kept + 1
            } else {
                kept
            }
        };
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exp = ((bits >> 23) & 0xff) as i32;
        let man = bits & 0x007f_ffff;
        if exp == 0xff {
            return sign
                | if man == 0 {
                    0x7c00
                } else {
                    0x7e00 | (man >> 13) as u16
                };
        }
        let e = exp - 112;
        if e >= 0x1f {
            return sign | 0x7c00;
        }
        if e <= 0 {
            let shift = (14 - e) as u32;
            if shift > 24 {
                return sign;
            }
            let significand = man | 0x0080_0000;
            let kept = significand >> shift;
            let rest = significand & ((1 << shift) - 1);
            return sign | round(kept, rest, 1 << (shift - 1)) as u16;
        }
        sign | round(((e as u32) << 10) | (man >> 13), man & 0x1fff, 0x1000) as u16
    }

    #[test]
    fn f16_narrowing_matches_the_reference() {
        // Every f32 with the low 7 bits cycling through a pattern: every
        // exponent, every rounding case (the 13 dropped bits vary).
        let mut bits = 0u32;
        loop {
            let x = f32::from_bits(bits);
            let (fast, slow) = (f32_to_f16(x), reference_f32_to_f16(x));
            assert_eq!(fast, slow, "{bits:#010x}");
            match bits.checked_add(0x7f + (bits & 0x3f)) {
                Some(next) => bits = next,
                None => break,
            }
        }
        for x in [
            0.0f32,
            -0.0,
            1e-8,
            -1e-8,
            5.9604645e-8,
            2.9802322e-8,
            65519.996,
            65520.0,
        ] {
            assert_eq!(f32_to_f16(x), reference_f32_to_f16(x), "{x}");
        }
    }

    #[test]
    fn f16_round_trips_every_pattern() {
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert!(f16_to_f32(f32_to_f16(x)).is_nan(), "{h:#06x}");
            } else {
                assert_eq!(f32_to_f16(x), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn bf16_round_trips_every_pattern() {
        for h in 0..=u16::MAX {
            let x = bf16_to_f32(h);
            if x.is_nan() {
                assert!(bf16_to_f32(f32_to_bf16(x)).is_nan(), "{h:#06x}");
            } else {
                assert_eq!(f32_to_bf16(x), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        // 1 + 2^-11 is halfway between 1 and the next f16: ties to even (1).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        // Just above the halfway point rounds up.
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11) + 2f32.powi(-20)), 0x3c01);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // halfway to 2^16: overflow
        assert_eq!(f32_to_f16(-1e10), 0xfc00);
        assert_eq!(f32_to_f16(2f32.powi(-24)), 0x0001);
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0x0000); // tie, to even
        assert_eq!(f32_to_f16(1.5 * 2f32.powi(-25)), 0x0001);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3f80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80);
        assert_eq!(f32_to_bf16(f32::NEG_INFINITY), 0xff80);
        assert!(bf16_to_f32(f32_to_bf16(-f32::NAN)).is_nan());
    }
}
