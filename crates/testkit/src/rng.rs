//! The one PRNG of the tests and benchmarks: xorshift64* (Vigna), 64 bits
//! of state, no dependency.
//!
//! Sequences are part of what the tests and benchmarks document (the
//! memory trace's figure, the random IR corpus of each seed), so every
//! method here keeps the exact draw it was written with: [`Rng::below`]
//! (a remainder of the high 32 bits) and [`Rng::below_u64`] (a
//! multiply-shift of all 64) are different draws, not one in two widths.

/// The golden-ratio constant: spreads nearby seeds and replaces a zero one.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// xorshift64*: small, deterministic, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator that starts from `seed` as is (a zero seed is replaced,
    /// since zero is a fixed point of xorshift).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 { GOLDEN } else { seed })
    }

    /// A generator from `seed * GOLDEN | 1`: nearby seeds (0, 1, 2, ...)
    /// start far apart. The random IR programs and per-thread streams use
    /// it.
    pub fn spread(seed: u64) -> Self {
        Self(seed.wrapping_mul(GOLDEN) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The high 32 of the next 64 bits.
    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n`: the high 32 bits modulo `n` (`n == 0` counts as 1).
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.next_u64() >> 32) % u64::from(n.max(1))) as u32
    }

    /// Uniform in `0..n`: `next_u64() * n >> 64` (0 for `n == 0`).
    pub fn below_u64(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u32) -> bool {
        self.below(100) < p
    }

    /// One of `xs`, uniformly (`xs` non-empty).
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u32) as usize]
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in `[min, max]` (`1 <= min <= max`).
    pub fn log_uniform(&mut self, min: u64, max: u64) -> u64 {
        let (lo, hi) = ((min.max(1)) as f64, (max.max(min).max(1)) as f64);
        let v = (lo.ln() + self.unit() * (hi.ln() - lo.ln())).exp();
        (v as u64).clamp(min, max)
    }

    /// Uniform in `[-1, 1)` in steps of `2^-23`, never zero (a zero drawn
    /// becomes 0.5), so products and sums of test data are not trivially 0.
    pub fn f32_signed(&mut self) -> f32 {
        let x = (self.u32() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0;
        if x == 0.0 { 0.5 } else { x }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn a_zero_seed_is_not_a_fixed_point() {
        let mut r = Rng::new(0);
        assert_ne!(r.next_u64(), 0);
        assert_eq!(
            Rng::new(0).next_u64(),
            Rng::new(0x9e37_79b9_7f4a_7c15).next_u64()
        );
    }

    /// The sequences the tests and benchmarks were written with (the random
    /// IR programs', the memory trace's, the reference kernels' data).
    #[test]
    fn sequences_are_pinned() {
        let mut a = Rng::spread(5);
        assert_eq!(a.next_u64(), 0xea84_212b_3f89_10e2);
        assert_eq!((a.below(64), a.below(3)), (58, 2));
        let mut t = Rng::new(0x2753_eab8_6f16_9930);
        assert_eq!(t.next_u64(), 0x51c8_64b8_d4ca_261b);
        assert_eq!(t.below_u64(512), 191);
        assert_eq!(t.log_uniform(256, 64 << 20), 859_935);
        let mut k = Rng::new(42);
        assert_eq!(k.next_u64(), 0x56ce_4ab7_719b_a3a0);
        assert_eq!(k.u32(), 3_359_763_283);
        assert_eq!(k.f32_signed().to_bits(), 1_058_311_382);
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = Rng::spread(3);
        for _ in 0..1000 {
            assert!(r.below(7) < 7);
            assert!(r.below_u64(5) < 5);
            assert!((0.0..1.0).contains(&r.unit()));
            let f = r.f32_signed();
            assert!((-1.0..1.0).contains(&f) && f != 0.0);
            let l = r.log_uniform(256, 1 << 20);
            assert!((256..=1 << 20).contains(&l));
        }
        assert_eq!(r.below_u64(0), 0);
        assert_eq!(r.below(0), 0);
    }
}
