//! Automatic block length for the moving-block bootstrap: Politis & White (2004), with the
//! correction of Patton, Politis & White (2009) (the circular/moving-block constant 4/3).
//!
//! ```text
//! ρ̂(k), R̂(k) = Σ e_t e_{t+k} / n            sample autocorrelation / autocovariance, e = x − x̄
//! m̂  = smallest m with |ρ̂(m+1..m+K_N)| < 2·√(log10 n / n),   K_N = max(5, ⌊log10 n⌋)
//! M  = min(2·max(m̂, 1), ⌈√n⌉ + K_N)         (M = ⌈√n⌉ + K_N when no such m exists)
//! λ(t) = 1 for |t| ≤ ½, 2(1 − |t|) for ½ < |t| ≤ 1          flat-top lag window
//! Ĝ  = Σ_{|k|≤M} λ(k/M) |k| R̂(k),   ĝ = Σ_{|k|≤M} λ(k/M) R̂(k)
//! b  = (2 Ĝ² / ((4/3) ĝ²))^{1/3} · n^{1/3},  clamped to [1, ⌈min(3√n, n/3)⌉]
//! ```
//!
//! Latencies of consecutive requests share the server's batch: on the H200 (results/h200-
//! 2026-11-29) TPOT's lag-1 autocorrelation by send order is 0.88–0.98 and TTFT's 0.06–0.65, so
//! an iid bootstrap understates the uncertainty of a cell's percentiles (DESIGN.md §4.3).

/// Politis–White block length of `x` (in send order); 1 for fewer than 8 values or a
/// constant series.
pub(crate) fn politis_white(x: &[f64]) -> usize {
    let n = x.len();
    if n < 8 {
        return 1;
    }
    let nf = n as f64;
    let mean = x.iter().sum::<f64>() / nf;
    let e: Vec<f64> = x.iter().map(|v| v - mean).collect();
    let r0 = e.iter().map(|v| v * v).sum::<f64>() / nf;
    if r0 <= 0.0 || !r0.is_finite() {
        return 1;
    }
    let kn = 5usize.max(nf.log10().floor() as usize);
    let m_max = (nf.sqrt().ceil() as usize + kn).min(n - 1);
    let acv: Vec<f64> = (0..=m_max)
        .map(|k| {
            e[..n - k]
                .iter()
                .zip(&e[k..])
                .map(|(a, b)| a * b)
                .sum::<f64>()
                / nf
        })
        .collect();
    let cv = 2.0 * (nf.log10() / nf).sqrt();
    let insignificant = |k: usize| (acv[k] / r0).abs() < cv;
    let m_hat = (0..m_max.saturating_sub(kn) + 1)
        .find(|&m| (m + 1..=m + kn).all(|k| k <= m_max && insignificant(k)));
    let m = match m_hat {
        Some(m) => (2 * m.max(1)).min(m_max),
        None => m_max,
    };
    let (mut g, mut ghat) = (0.0, r0);
    for (k, r) in acv.iter().enumerate().take(m + 1).skip(1) {
        let t = k as f64 / m as f64;
        let lambda = if t <= 0.5 { 1.0 } else { 2.0 * (1.0 - t) };
        g += 2.0 * lambda * k as f64 * r;
        ghat += 2.0 * lambda * r;
    }
    if ghat <= 0.0 {
        return 1;
    }
    let b = (2.0 * g * g / (4.0 / 3.0 * ghat * ghat)).cbrt() * nf.cbrt();
    let b_max = (3.0 * nf.sqrt()).min(nf / 3.0).ceil();
    b.round().clamp(1.0, b_max.max(1.0)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    fn ar1(phi: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut x = 0.0;
        (0..n)
            .map(|_| {
                // a sum of 12 uniforms − 6 is close enough to a standard normal here
                let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                x = phi * x + z;
                x
            })
            .collect()
    }

    /// For AR(1) with coefficient φ the population quantities are G = 2σ²φ/(1−φ)² and
    /// g = σ²(1+φ)/(1−φ), so b = (6φ² / (1−φ²)²)^{1/3} n^{1/3} (hand calculation):
    /// φ = 0.5, n = 20,000: (6·0.25/0.5625)^{1/3} · 27.14 = 1.387 · 27.14 = 37.6.
    #[test]
    fn ar1_matches_theory() {
        let b = politis_white(&ar1(0.5, 20_000, 3));
        assert!((28..=48).contains(&b), "b = {b}, theory 37.6");
    }

    /// Independent data need no blocks; strong dependence needs long ones.
    #[test]
    fn iid_short_dependent_long() {
        assert!(politis_white(&ar1(0.0, 2000, 5)) <= 3);
        let strong = politis_white(&ar1(0.9, 2000, 5));
        assert!(strong >= 20, "b = {strong}");
        assert_eq!(politis_white(&[1.0; 50]), 1);
        assert_eq!(politis_white(&[1.0, 2.0]), 1);
    }
}
