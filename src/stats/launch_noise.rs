//! Launch-to-launch noise: a pooled random-effects variance and replicates that carry it.
//!
//! Model (per metric, on the log scale): the estimate of launch ℓ of config c in cell s is
//! `y = μ_cs + u_ℓ + e_ℓ`, with `u` the launch effect and `e` the launch's own sampling error.
//! The two are not separated: `σ²_L = Var(u + e)` is the *total* per-launch variance, estimated
//! by pooling the within-group spread of every (config, cell) group that has ≥ 2 launches:
//!
//! ```text
//! σ̂²_L = Σ_g Σ_ℓ (y_gℓ − ȳ_g)² / df,      df = Σ_g (k_g − 1)
//! ```
//!
//! (the pooled variance of a one-way ANOVA). A config's pooled estimate over k launches then has
//! variance σ²_L / k, whatever the config's own launch count — a config measured once borrows the
//! noise level the others showed. With df small, σ̂²_L is itself uncertain; replicates draw
//! `σ²_b = σ̂²_L · df / χ²_df` once per replicate index (shared by every statistic that carries
//! the same variance — one metric in one cell, or pooled over cells, `analysis::launch_noise` —
//! so differences of two estimates are t-distributed with df degrees of freedom, as in a pooled
//! two-sample t-test), and `log θ_b = log θ̂ + √(σ²_b / k) · z_b` with `z_b` standard normal,
//! seeded by the statistic's key. The request-level bootstrap is not added on top: σ²_L already
//! contains each launch's sampling error, measured rather than modelled (so within-cell
//! autocorrelation cannot make it too small).

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr_lite::{chi_squared, standard_normal};

use super::bootstrap::stable_seed;

/// The pooled per-launch variance of one metric (log scale) and its degrees of freedom.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PooledVariance {
    /// σ̂²_L on the log scale.
    pub var: f64,
    /// Σ (k_g − 1) over the groups with ≥ 2 launches.
    pub df: u32,
    /// Number of groups that contributed.
    pub groups: u32,
}

impl PooledVariance {
    /// σ̂_L as a relative (multiplicative) standard deviation, `exp(σ̂) − 1`.
    pub(crate) fn relative_sd(&self) -> f64 {
        self.var.sqrt().exp_m1()
    }
}

/// Pools the within-group variance of per-launch log estimates. Groups with fewer than 2
/// launches add nothing; non-finite or non-positive estimates are ignored. `None` when no group
/// has 2 launches (the launch-to-launch variance is then unknown).
pub(crate) fn pooled_variance(groups: &[Vec<f64>]) -> Option<PooledVariance> {
    let mut ss = 0.0;
    let mut df = 0u32;
    let mut n_groups = 0u32;
    for g in groups {
        let logs: Vec<f64> = g
            .iter()
            .filter(|v| v.is_finite() && **v > 0.0)
            .map(|v| v.ln())
            .collect();
        if logs.len() < 2 {
            continue;
        }
        let m = logs.iter().sum::<f64>() / logs.len() as f64;
        ss += logs.iter().map(|y| (y - m) * (y - m)).sum::<f64>();
        df += logs.len() as u32 - 1;
        n_groups += 1;
    }
    (df > 0).then(|| PooledVariance {
        var: ss / f64::from(df),
        df,
        groups: n_groups,
    })
}

/// `σ²_b = σ̂² · df / χ²_df` for b = 0..n: the variance drawn for each replicate index. Seeded by
/// `(seed, key)`; every statistic of one metric must use the same draws (same key).
pub(crate) fn variance_draws(pv: &PooledVariance, n: usize, seed: u64, key: &str) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(stable_seed(seed, key, 0.0));
    let df = f64::from(pv.df);
    (0..n)
        .map(|_| pv.var * df / chi_squared(&mut rng, pv.df))
        .collect()
}

/// Replicates of a positive statistic `est` pooled over `k` launches: `est · exp(√(σ²_b/k) z_b)`.
pub(crate) fn replicates(est: f64, k: u32, sigma2: &[f64], seed: u64, key: &str) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(stable_seed(seed, key, 1.0));
    let k = f64::from(k.max(1));
    sigma2
        .iter()
        .map(|s2| est * ((s2 / k).sqrt() * standard_normal(&mut rng)).exp())
        .collect()
}

/// Small, exact samplers (Box–Muller normal; χ² as a sum of squared normals for the small
/// integer df used here, which is exact). Kept local so the sampler is fixed by this file and
/// results never change with a dependency's algorithm.
mod rand_distr_lite {
    use rand::RngExt;
    use rand::rngs::Xoshiro256PlusPlus;

    pub(super) fn standard_normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
        // Box–Muller on (0, 1] × [0, 1).
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    pub(super) fn chi_squared(rng: &mut Xoshiro256PlusPlus, df: u32) -> f64 {
        (0..df)
            .map(|_| {
                let z = standard_normal(rng);
                z * z
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::percentile_interval;

    /// Hand calculation: groups {e^0, e^1} and {e^2, e^2, e^5}: SS = 0.5 + (0 + 0 + 6) = 6.5…
    #[test]
    fn pooled_variance_by_hand() {
        let e = f64::exp;
        let pv = pooled_variance(&[
            vec![e(0.0), e(1.0)],
            vec![e(2.0), e(2.0), e(5.0)],
            vec![e(3.0)],
        ])
        .unwrap();
        // group 1: mean 0.5, SS = 0.25 + 0.25 = 0.5; group 2: mean 3, SS = 1 + 1 + 4 = 6
        assert_eq!(pv.df, 1 + 2);
        assert_eq!(pv.groups, 2);
        assert!((pv.var - 6.5 / 3.0).abs() < 1e-12, "{pv:?}");
        assert!(pooled_variance(&[vec![1.0], vec![2.0]]).is_none());
    }

    /// The CI of a difference of two statistics built from shared variance draws is the pooled
    /// t-interval: for df = 4, k = 1 on both sides and σ̂² = 0.01, the 97.5% point of
    /// log(θ₁/θ₂) is t₄,0.975 · √(2 · 0.01) = 2.776 · 0.1414 = 0.3926 (t table).
    #[test]
    fn difference_is_t_distributed() {
        let pv = PooledVariance {
            var: 0.01,
            df: 4,
            groups: 4,
        };
        let n = 200_000;
        let s2 = variance_draws(&pv, n, 7, "ttft_p90");
        let a = replicates(1.0, 1, &s2, 7, "a");
        let b = replicates(1.0, 1, &s2, 7, "b");
        let d: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (x / y).ln()).collect();
        let (lo, hi) = percentile_interval(&d, 0.95).unwrap();
        let expect = 2.776445 * (2.0f64 * 0.01).sqrt(); // t(4, 0.975) from the t table
        assert!((hi - expect).abs() < 0.012, "hi {hi}");
        assert!((lo + expect).abs() < 0.012, "lo {lo}");
    }

    #[test]
    fn draws_are_seeded_and_positive() {
        let pv = PooledVariance {
            var: 0.02,
            df: 2,
            groups: 2,
        };
        let a = variance_draws(&pv, 1000, 1, "k");
        assert_eq!(a, variance_draws(&pv, 1000, 1, "k"));
        assert_ne!(a, variance_draws(&pv, 1000, 1, "other"));
        assert!(a.iter().all(|v| *v > 0.0 && v.is_finite()));
    }
}
