//! Host-side inputs: a small deterministic PRNG (SplitMix64), so every
//! build feeds burn the same bytes whatever its device RNG does.

/// SplitMix64.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (`n > 0`; 0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64().checked_rem(n).unwrap_or(0)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` uniform values in `[lo, hi)`.
    pub fn uniforms(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| lo + (hi - lo) * self.unit() as f32)
            .collect()
    }

    /// `n` standard normal values (Box-Muller).
    pub fn normals(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let u = self.unit().max(f64::MIN_POSITIVE);
                let v = self.unit();
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
            })
            .collect()
    }

    /// `n` integers in `[lo, hi)`.
    pub fn ints(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        let span = hi.saturating_sub(lo).max(1) as u64;
        (0..n).map(|_| lo + self.below(span) as i64).collect()
    }
}
