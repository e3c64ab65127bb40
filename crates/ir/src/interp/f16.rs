//! IEEE binary16 <-> binary32, round to nearest even (no `half` dependency).

/// f16 bits to f32 (exact).
pub fn to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: renormalise.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// f32 to f16 bits, rounding to nearest even; overflow goes to infinity.
pub fn from_f32(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1; // may carry into the exponent, up to infinity: correct
    }
    sign | r as u16
}

/// f64 to f16 bits, rounding to nearest even once: the f64 is first
/// narrowed to f32 rounding to odd (which has enough spare bits that the
/// second rounding is then exact), then rounded as [`from_f32`].
pub fn from_f64(f: f64) -> u16 {
    let n = f as f32;
    if n.is_nan() || n.is_infinite() || f64::from(n) == f {
        return from_f32(n);
    }
    // `n` is the nearest f32; step toward zero if it is beyond `f`, then
    // set the lowest bit (sticky: inexact).
    let mut bits = n.to_bits();
    if f64::from(n).abs() > f.abs() {
        bits -= 1;
    }
    from_f32(f32::from_bits(bits | 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rounds() {
        for h in [0u16, 0x3c00, 0xbc00, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0x3555] {
            assert_eq!(from_f32(to_f32(h)), h, "{h:#x}");
        }
        assert_eq!(from_f32(1.0), 0x3c00);
        assert_eq!(from_f32(65520.0), 0x7c00);
        assert_eq!(to_f32(0x0001), 2f32.powi(-24));
        // 1 + 2^-11 is a tie in f16 (to 1.0); a hair above it rounds up, even
        // where f32 would round the hair away.
        assert_eq!(from_f64(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(from_f64(1.0 + 2f64.powi(-11) + 2f64.powi(-40)), 0x3c01);
        assert_eq!(from_f64(1.5), 0x3e00);
    }
}
