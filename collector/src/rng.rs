//! Seeded randomness with a fixed, documented algorithm (SplitMix64), so prompts and arrival
//! schedules are identical across builds, platforms and `rand` versions.

/// SplitMix64 (Steele, Lea & Flood 2014), the seeding generator of the xoshiro family.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// Uniform in [0, 1) with 53 bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [lo, hi) (Lemire's multiply-shift with rejection: no modulo bias).
    #[inline]
    pub fn range_u32(&mut self, lo: u32, hi: u32) -> u32 {
        debug_assert!(hi > lo);
        let span = u64::from(hi - lo);
        let threshold = span.wrapping_neg() % span;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(span);
            if (m as u64) >= threshold {
                return lo + (m >> 64) as u32;
            }
        }
    }

    /// Exponential with mean `mean`.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -(1.0 - self.next_f64()).ln() * mean
    }
}

/// The SplitMix64 output function: a good 64-bit mixer.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a over bytes (for deriving nonces from names).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values_are_stable() {
        // First outputs of SplitMix64 seeded with 0 (published reference values).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ranges_and_means() {
        let mut r = SplitMix64::new(42);
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let x = r.range_u32(10, 13);
            assert!((10..13).contains(&x));
            sum += r.exp(2.0);
        }
        assert!((sum / 100_000.0 - 2.0).abs() < 0.05);
    }
}
