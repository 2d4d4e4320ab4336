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
use rand_distr_lite::chi_squared;
pub(crate) use rand_distr_lite::standard_normal;

use super::bootstrap::stable_seed;
use super::linear::two_way_dummies;

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

/// Pools the within-group variance of per-launch log estimates (the one-way ANOVA). Groups with
/// fewer than 2 launches add nothing; non-finite or non-positive estimates are ignored. `None`
/// when no group has 2 launches. The analysis uses [`additive_residual`], which reduces to this
/// on one machine; the tests keep it as that reference.
#[cfg(test)]
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

/// One launch's estimate in the two-way layout of the launch noise: its config, the machine it
/// ran on, and the estimate (> 0; the model is on its log).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LaunchObs<'a> {
    pub config: &'a str,
    pub machine: &'a str,
    pub value: f64,
}

/// The launch noise left by an additive model of the log estimates, `log y = config +
/// machine + e`: the residual sum of squares and its degrees of freedom, n − rank. That is the
/// within-machine spread of launches of one config (pure error) plus the lack of fit — a
/// config whose difference from another changes between machines — wherever the design can
/// see it (a cycle of configs and machines); machine-to-machine differences shared by every
/// config are not noise (taxes compare within machines). With one machine it is the one-way
/// ANOVA within configs ([`pooled_variance`] with one group per config). Non-finite or
/// non-positive estimates are ignored.
pub(crate) fn additive_residual(rows: &[LaunchObs]) -> (f64, u32) {
    let rows: Vec<&LaunchObs> = rows
        .iter()
        .filter(|r| r.value.is_finite() && r.value > 0.0)
        .collect();
    let keys: Vec<(&str, &str)> = rows.iter().map(|r| (r.config, r.machine)).collect();
    let y: Vec<f64> = rows.iter().map(|r| r.value.ln()).collect();
    let (rss, rank) = super::linear::least_squares_rss(&two_way_dummies(&keys, true), &y);
    (rss.max(0.0), (rows.len() - rank) as u32)
}

/// [`additive_residual`] as a variance; `None` with no degrees of freedom. `groups` counts the
/// configs in `rows`.
pub(crate) fn residual_variance(rows: &[LaunchObs]) -> Option<PooledVariance> {
    let (ss, df) = additive_residual(rows);
    let mut configs: Vec<&str> = rows.iter().map(|r| r.config).collect();
    configs.sort();
    configs.dedup();
    (df > 0).then(|| PooledVariance {
        var: ss / f64::from(df),
        df,
        groups: configs.len() as u32,
    })
}

/// The independent contrasts among launches identified by (config, machine): n − rank of the
/// config + machine design, what every cell of those launches together can tell about the
/// noise (a launch's level is shared by all its cells).
pub(crate) fn launch_contrasts(launches: &[(&str, &str)]) -> u32 {
    if launches.is_empty() {
        return 0;
    }
    let (_, rank) = super::linear::least_squares_rss(
        &two_way_dummies(launches, true),
        &vec![0.0; launches.len()],
    );
    (launches.len() - rank) as u32
}

/// A group whose launches spread more than the pool of the others allows: its index in the
/// input, its share of the pool ([`share_of_pool`]), the variance ratio `F = s²_group /
/// s²_rest`, its degrees of freedom, and the Holm-adjusted one-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NoisierGroup {
    pub index: usize,
    pub variance: PooledVariance,
    pub f: f64,
    pub df: (u32, u32),
    pub p_adjusted: f64,
}

/// A group's share of a pool: what adding its launches to the pool of the others (`without`)
/// adds to the residual sum of squares (`with`), over the degrees of freedom it adds —
/// `(SS_with − SS_without) / (df_with − df_without)`. For groups whose pools simply add (one-way
/// ANOVA) that is the group's own variance; in the additive config + machine model it is the
/// group's within-machine spread *and* its lack of fit (a config whose difference from the
/// others changes between machines), which the group's own launches cannot show when it ran once
/// per machine. Under the model (one noise level, additive) it is σ²·χ²_df/df, independent of
/// the pool without it (recursive residuals), so its ratio to that pool is F-distributed. `None`
/// when the group adds no degrees of freedom.
pub(crate) fn share_of_pool(
    with: Option<PooledVariance>,
    without: Option<PooledVariance>,
) -> Option<PooledVariance> {
    let with = with?;
    let (ss0, df0) = without.map_or((0.0, 0), |p| (p.var * f64::from(p.df), p.df));
    let df = with.df.checked_sub(df0).filter(|d| *d > 0)?;
    Some(PooledVariance {
        var: (with.var * f64::from(with.df) - ss0).max(0.0) / f64::from(df),
        df,
        groups: 1,
    })
}

/// What a group's variance is in [`noisier_groups`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum GroupVariance<'a> {
    /// Its own variance as given, one per group (`None`: not testable).
    Own(&'a [Option<PooledVariance>]),
    /// Its own variance where it has one (df ≥ 1), else its share of the pool
    /// ([`share_of_pool`]; a config run once per machine: its lack of fit across machines).
    /// `pool_of` must then return true sums of squares (`var · df` = the residual SS, df =
    /// n − rank), as one cell's additive model does.
    OwnElseShare(&'a [Option<PooledVariance>]),
}

/// The groups (configs) whose variance ([`GroupVariance`]: their share of the pool, or their
/// own) is significantly larger than the pool of the others: a step-down of one-sided F-tests,
/// each group against the pool of the groups still in it without it (`pool_of(indices)`: the
/// pool exactly as the caller will report it), the smallest p first, Holm-adjusted (p × groups tested in that step, never
/// below the previous step's) and stopped at the first that is not below `alpha` — the
/// variance-outlier screen of inter-laboratory studies (ISO 5725-2 tests the largest lab
/// variance, Cochran's C, at 1%), for unequal df. The pool is recomputed after each removal, so
/// this is Holm's bound on the first step and a step-down screen after it. A group is tested
/// when it adds df ≥ 1 to a rest with df ≥ 1; a rest whose variance is 0 flags any group with a
/// positive share (F = ∞, p = 0); ties of the p-value go to the lower index. Flagging reads the
/// values, so the pool of the rest is what a variance screen leaves: at `alpha` = 1% it drops a
/// homogeneous group rarely (`ctax calibrate-noise` checks the coverage that results, DESIGN.md
/// §4.3).
pub(crate) fn noisier_groups(
    n: usize,
    groups: GroupVariance,
    pool_of: impl Fn(&[usize]) -> Option<PooledVariance>,
    alpha: f64,
) -> Vec<NoisierGroup> {
    use statrs::distribution::{ContinuousCDF, FisherSnedecor};
    let mut pool: Vec<usize> = (0..n).collect();
    let mut out = Vec::new();
    let mut previous = 0.0f64;
    while pool.len() >= 2 {
        let all = match groups {
            GroupVariance::Own(_) => None,
            _ => pool_of(&pool),
        };
        let mut best: Option<NoisierGroup> = None;
        let mut tested = 0usize;
        for &i in &pool {
            let others: Vec<usize> = pool.iter().copied().filter(|&j| j != i).collect();
            let rest = pool_of(&others).filter(|r| r.df > 0 && r.var.is_finite());
            let Some(rest) = rest else { continue };
            let own = |o: &[Option<PooledVariance>]| o.get(i).copied().flatten();
            let g = match groups {
                GroupVariance::Own(o) => own(o),
                GroupVariance::OwnElseShare(o) => own(o)
                    .filter(|g| g.df > 0)
                    .or_else(|| share_of_pool(all, Some(rest))),
            };
            let Some(g) = g.filter(|g| g.df > 0 && g.var.is_finite()) else {
                continue;
            };
            let (f, p) = if rest.var > 0.0 {
                let f = g.var / rest.var;
                let Ok(dist) = FisherSnedecor::new(f64::from(g.df), f64::from(rest.df)) else {
                    continue;
                };
                (f, dist.sf(f))
            } else if g.var > 0.0 {
                (f64::INFINITY, 0.0)
            } else {
                continue;
            };
            tested += 1;
            if best.is_none_or(|b| p < b.p_adjusted) {
                best = Some(NoisierGroup {
                    index: i,
                    variance: g,
                    f,
                    df: (g.df, rest.df),
                    p_adjusted: p,
                });
            }
        }
        let Some(mut b) = best else { break };
        b.p_adjusted = (b.p_adjusted * tested as f64).min(1.0).max(previous);
        if b.p_adjusted >= alpha {
            break;
        }
        previous = b.p_adjusted;
        out.push(b);
        pool.retain(|&i| i != b.index);
    }
    out
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

/// The largest log-scale deviation a replicate takes: `exp(300)` ≈ 2·10¹³⁰, so a ratio or a
/// product of two replicates stays finite in f64. A variance with df 1 (a config's own, from two
/// launches) draws `σ̂² / χ²₁`, and χ²₁ can be 10⁻¹⁰: unclamped, `exp` overflows, the replicate
/// is infinite and the whole CI is dropped. Clamping keeps the order of one statistic's
/// replicates below the bound, and a ratio of two moves only where one of them was clamped, so
/// percentile CIs are unchanged unless more than their tail mass lies beyond it (for a t₁ tail
/// at an SE of 0.1, P(|dev| > 300) ≈ 2·10⁻⁴).
pub(crate) const MAX_LOG_DEV: f64 = 300.0;

/// Replicates of a positive statistic `est` pooled over `k` launches: `est · exp(√(σ²_b/k) z_b)`
/// (the exponent clamped to ±[`MAX_LOG_DEV`]).
pub(crate) fn replicates(est: f64, k: u32, sigma2: &[f64], seed: u64, key: &str) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(stable_seed(seed, key, 1.0));
    let k = f64::from(k.max(1));
    sigma2
        .iter()
        .map(|s2| {
            let dev = (s2 / k).sqrt() * standard_normal(&mut rng);
            est * dev.clamp(-MAX_LOG_DEV, MAX_LOG_DEV).exp()
        })
        .collect()
}

/// Small, exact samplers (Box–Muller normal; χ² as a sum of squared normals for the small
/// integer df used here, which is exact). Kept local so the sampler is fixed by this file and
/// results never change with a dependency's algorithm.
mod rand_distr_lite {
    use rand::RngExt;
    use rand::rngs::Xoshiro256PlusPlus;

    pub(crate) fn standard_normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
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

    fn obs<'a>(config: &'a str, machine: &'a str, log: f64) -> LaunchObs<'a> {
        LaunchObs {
            config,
            machine,
            value: log.exp(),
        }
    }

    /// On one machine the additive model is config alone: the residual is the one-way ANOVA
    /// within configs, the same hand values as `pooled_variance_by_hand` below.
    #[test]
    fn additive_residual_on_one_machine_is_the_one_way_anova() {
        let rows = [
            obs("a", "m", 0.0),
            obs("a", "m", 1.0),
            obs("b", "m", 2.0),
            obs("b", "m", 2.0),
            obs("b", "m", 5.0),
            obs("c", "m", 3.0),
        ];
        let pv = residual_variance(&rows).unwrap();
        assert_eq!((pv.df, pv.groups), (3, 3));
        assert!((pv.var - 6.5 / 3.0).abs() < 1e-12, "{pv:?}");
    }

    /// A machine level shared by every config is no noise; a config whose difference from
    /// another changes between machines is. Expected values by hand and numpy's lstsq.
    #[test]
    fn additive_residual_removes_machine_levels_and_keeps_lack_of_fit() {
        // Machine m2 is 0.3 above m1 for both configs (a: mean 0.01 → 0.31, b: 0.11 → 0.41);
        // a's two m1 launches differ by 0.02. Only their pure error is left: residuals ±0.01,
        // SS 2·10⁻⁴ on df 5 − rank 3 = 2 (numpy lstsq: 2.0e-4, rank 3; one df is the lack of
        // fit, zero here).
        let shifted = [
            obs("a", "m1", 0.00),
            obs("a", "m1", 0.02),
            obs("b", "m1", 0.11),
            obs("a", "m2", 0.31),
            obs("b", "m2", 0.41),
        ];
        let (ss, df) = additive_residual(&shifted);
        assert_eq!(df, 2);
        assert!((ss - 2.0e-4).abs() < 1e-12, "{ss}");
        // b's m2 launch 0.1 higher: a difference that changes between machines is noise
        // (lack of fit): numpy lstsq RSS 0.0030571…, rank 3.
        let mut interacting = shifted;
        interacting[4] = obs("b", "m2", 0.51);
        let (ss_i, df_i) = additive_residual(&interacting);
        assert_eq!(df_i, 2);
        assert!((ss_i - 0.003_057_142_857_142_859).abs() < 1e-12, "{ss_i}");
        // Ignoring machines (one machine for all) the shift is noise: far larger.
        let merged: Vec<LaunchObs> = shifted
            .iter()
            .map(|o| LaunchObs { machine: "m", ..*o })
            .collect();
        assert!(additive_residual(&merged).0 > 100.0 * ss);
        // The unbalanced 3 × 3 layout of stats::linear's test (values are the logs): numpy's
        // RSS 0.00108 at rank 5, so df 9 − 5 = 4.
        let layout = [
            obs("a", "m1", 0.10),
            obs("a", "m1", 0.12),
            obs("b", "m1", 0.31),
            obs("a", "m2", -0.05),
            obs("b", "m2", 0.16),
            obs("c", "m2", 0.40),
            obs("c", "m3", 0.62),
            obs("b", "m3", 0.41),
            obs("b", "m3", 0.37),
        ];
        let (ss, df) = additive_residual(&layout);
        assert_eq!(df, 4);
        assert!((ss - 0.001_08).abs() < 1e-12, "{ss}");
    }

    /// n − rank of the config + machine design, by hand: a on m1 twice, b on m1, a and b on
    /// m2: 5 launches, rank 3 (2 configs + 2 machines − 1), so 2 contrasts; a chain of machines
    /// each holding one new config adds none.
    #[test]
    fn launch_contrasts_by_hand() {
        let grid = [
            ("a", "m1"),
            ("a", "m1"),
            ("b", "m1"),
            ("a", "m2"),
            ("b", "m2"),
        ];
        assert_eq!(launch_contrasts(&grid), 2);
        let chain = [("a", "m1"), ("b", "m1"), ("b", "m2"), ("c", "m2")];
        assert_eq!(launch_contrasts(&chain), 0);
        assert_eq!(launch_contrasts(&[]), 0);
    }

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

    /// The 95% interval of log(a/b) − log(30/10) for two k = 1 statistics (30 and 10) sharing the
    /// variance draws of σ̂² = `var` at `df`, and the draws; every replicate must be finite.
    fn log_ratio_interval(var: f64, df: u32, n: usize, seed: u64) -> (f64, f64, Vec<f64>) {
        let pv = PooledVariance { var, df, groups: 1 };
        let s2 = variance_draws(&pv, n, seed, "metric");
        let a = replicates(30.0, 1, &s2, seed, "a");
        let b = replicates(10.0, 1, &s2, seed, "b");
        assert!(a.iter().chain(&b).all(|v| v.is_finite() && *v > 0.0));
        let d: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x / y).ln() - 3f64.ln())
            .collect();
        let (lo, hi) = percentile_interval(&d, 0.95).unwrap();
        (lo, hi, s2)
    }

    /// The CI of a difference of two statistics built from shared variance draws is the pooled
    /// t-interval: for df = 4, k = 1 on both sides and σ̂² = 0.01, the 97.5% point of
    /// log(θ₁/θ₂) is t₄,0.975 · √(2 · 0.01) = 2.776 · 0.1414 = 0.3926 (t table).
    #[test]
    fn difference_is_t_distributed() {
        let (lo, hi, _) = log_ratio_interval(0.01, 4, 200_000, 7);
        let expect = 2.776445 * (2.0f64 * 0.01).sqrt(); // t(4, 0.975) from the t table
        assert!((hi - expect).abs() < 0.012, "hi {hi}");
        assert!((lo + expect).abs() < 0.012, "lo {lo}");
    }

    /// Two-launch variances (df 1) draw σ̂²/χ²₁ with χ²₁ near 0 now and then: every replicate
    /// stays finite, so a CI exists, and it is the t₁ interval: t(1, 0.975) = 12.706 (t table)
    /// times √(2 · 0.01) for the difference of two k = 1 statistics sharing the draws.
    #[test]
    fn df_one_replicates_stay_finite_and_t_distributed() {
        let (lo, hi, s2) = log_ratio_interval(0.01, 1, 400_000, 3);
        // χ²₁ < 10⁻⁸ (P ≈ 8·10⁻⁵, ~32 of 400,000): σ_b > 1000, and exp(1000·|z|) overflows for
        // |z| > 0.71, about half of them; `log_ratio_interval` asserts every replicate finite.
        let huge = s2.iter().filter(|v| v.sqrt() > 1000.0).count();
        assert!(huge > 5, "{huge} draws with sd > 1000");
        let expect = 12.706 * (2.0f64 * 0.01).sqrt();
        assert!((hi / expect - 1.0).abs() < 0.05, "hi {hi} vs {expect}");
        assert!((lo / expect + 1.0).abs() < 0.05, "lo {lo} vs {expect}");
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

    /// F-table references: F(0.99; 1, 8) = 11.26 and F(0.99; 2, 5) = 13.27 (upper 1% points).
    /// Six groups, one with 30x the variance of five equal ones (df 2 each): F = 30 on (2, 10)
    /// df; for d1 = 2 the F survival function is closed-form, (1 + 2F/d2)^(-d2/2) = 7^-5, so
    /// Holm's x 6 gives 6/16807. It is flagged alone (the other five are equal). Equal
    /// variances flag none.
    /// The df-weighted pool of `groups[indices]` (Σ var·df / Σ df): the pooled variance of the
    /// groups' launches when each group's `var` is its own SS / df.
    fn pool_of(groups: &[PooledVariance], indices: &[usize]) -> Option<PooledVariance> {
        let df: u32 = indices.iter().map(|&i| groups[i].df).sum();
        let ss: f64 = indices
            .iter()
            .map(|&i| groups[i].var * f64::from(groups[i].df))
            .sum();
        (df > 0).then(|| PooledVariance {
            var: ss / f64::from(df),
            df,
            groups: indices.len() as u32,
        })
    }

    fn screen(groups: &[PooledVariance], alpha: f64) -> Vec<NoisierGroup> {
        let own: Vec<Option<PooledVariance>> = groups.iter().copied().map(Some).collect();
        noisier_groups(
            groups.len(),
            GroupVariance::Own(&own),
            |idx| pool_of(groups, idx),
            alpha,
        )
    }

    /// A config measured once per machine whose difference from the others changes between
    /// machines (its lack of fit) has no spread of its own (df 0 alone), but its share of the
    /// additive config + machine pool shows it. Three configs on three machines (log values);
    /// y is about +1 but +1.4 on m2. Reference (numpy `lstsq` on config + machine dummies,
    /// scipy `f.sf`): RSS 0.139135927 on df 8 with y, 0.000933333 on df 6 without; y's share
    /// (0.139135927 − 0.000933333) / 2 = 0.0691013, F = 0.0691013 / 0.000155556 = 444.2226 on
    /// (2, 6), p 3.0185e-7, × 3 configs tested = 9.0555e-7. Nothing else is flagged after it.
    #[test]
    fn share_of_the_two_way_pool_flags_a_config_whose_tax_changes_between_machines() {
        let rows: Vec<LaunchObs> = [
            ("plain", "m1", 0.00),
            ("plain", "m1", 0.02),
            ("plain", "m2", 0.10),
            ("plain", "m2", 0.12),
            ("plain", "m3", 0.20),
            ("x", "m1", 0.05),
            ("x", "m1", 0.07),
            ("x", "m2", 0.15),
            ("x", "m3", 0.25),
            ("x", "m3", 0.27),
            ("y", "m1", 1.0),
            ("y", "m2", 1.5),
            ("y", "m3", 1.0),
        ]
        .into_iter()
        .map(|(config, machine, log)| LaunchObs {
            config,
            machine,
            value: f64::exp(log),
        })
        .collect();
        let names = ["plain", "x", "y"];
        let of = |keep: &[&str]| -> Vec<LaunchObs> {
            rows.iter()
                .copied()
                .filter(|r| keep.contains(&r.config))
                .collect()
        };
        // Alone, y has no degrees of freedom: a screen of each config's own spread cannot see it.
        assert!(residual_variance(&of(&["y"])).is_none());
        let pool = |idx: &[usize]| {
            let keep: Vec<&str> = idx.iter().map(|&i| names[i]).collect();
            residual_variance(&of(&keep))
        };
        // Each config tested on its own spread where it has one (plain, x: df 2 each on one
        // machine), else on its share (y).
        let own: Vec<Option<PooledVariance>> =
            names.iter().map(|c| residual_variance(&of(&[c]))).collect();
        assert_eq!(
            own.iter().map(|o| o.map(|v| v.df)).collect::<Vec<_>>(),
            [Some(2), Some(2), None]
        );
        let out = noisier_groups(3, GroupVariance::OwnElseShare(&own), pool, 0.01);
        assert_eq!(out.len(), 1, "{out:?}");
        let y = &out[0];
        assert_eq!((y.index, y.df, y.variance.df), (2, (2, 6), 2));
        assert!(
            (y.variance.var - 0.069_101_296_720_061).abs() < 1e-12,
            "{y:?}"
        );
        assert!((y.f / 444.222_621_771_820_8 - 1.0).abs() < 1e-9, "{y:?}");
        assert!(
            (y.p_adjusted / 9.055_526_984_992_662e-7 - 1.0).abs() < 1e-6,
            "{y:?}"
        );
    }

    #[test]
    fn noisier_groups_by_f_test() {
        let g = |var: f64, df: u32| PooledVariance { var, df, groups: 1 };
        let mut groups = vec![g(0.001, 2); 5];
        groups.insert(2, g(0.03, 2));
        let out = screen(&groups, 0.01);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].index, 2);
        assert!((out[0].f - 30.0).abs() < 1e-9);
        assert_eq!(out[0].df, (2, 10));
        assert!((out[0].p_adjusted - 6.0 / 16807.0).abs() < 1e-9, "{out:?}");
        assert!(screen(&[g(0.001, 2); 6], 0.01).is_empty());
        // At the 1% point itself: one df-1 group at F = 11.26 against a rest of df 8 has the
        // one-sided p 0.01 before the adjustment, so x 2 groups is not below 1%: kept in.
        let edge = [g(11.26 * 0.002, 1), g(0.002, 8)];
        assert!(screen(&edge, 0.01).is_empty());
        let raw = screen(&edge, 0.021);
        assert_eq!(raw.len(), 1);
        assert!((raw[0].p_adjusted - 0.02).abs() < 2e-4, "{raw:?}");
        // Step-down: two loud groups of different size against four quiet ones; the louder goes
        // first (F(2, 10) = 0.05/0.0024, p x 6 = 0.0016), then the other against the quiet rest:
        // F(2, 8) = 0.01/0.0005 = 20, closed form p = (1 + 2·20/8)^-4 = 6^-4, x 5 = 0.0039.
        let mut two = vec![g(0.0005, 2); 4];
        two.push(g(0.01, 2));
        two.push(g(0.05, 2));
        let out = screen(&two, 0.01);
        assert_eq!(out.iter().map(|o| o.index).collect::<Vec<_>>(), vec![5, 4]);
        assert!((out[1].p_adjusted - 5.0 / 1296.0).abs() < 1e-9, "{out:?}");
        // Where the pools simply add (groups on one machine), a group's share of the pool is its
        // own variance: the share screen flags the same groups with the same F and p.
        let none = vec![None; two.len()];
        let share = noisier_groups(
            two.len(),
            GroupVariance::OwnElseShare(&none),
            |idx| pool_of(&two, idx),
            0.01,
        );
        assert_eq!(share.len(), out.len());
        for (a, b) in share.iter().zip(&out) {
            assert_eq!((a.index, a.df), (b.index, b.df));
            assert!(
                (a.f / b.f - 1.0).abs() < 1e-12 && (a.p_adjusted / b.p_adjusted - 1.0).abs() < 1e-9
            );
            assert!((a.variance.var / two[a.index].var - 1.0).abs() < 1e-12);
        }
        // Holm's adjusted p never decreases along the steps: a second group whose own p x
        // groups left is smaller than the first's reports the first's.
        let mut mono = vec![g(0.0005, 4); 4];
        mono.push(g(0.05, 2));
        mono.push(g(0.04, 8));
        let out = screen(&mono, 0.01);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[1].p_adjusted >= out[0].p_adjusted, "{out:?}");
        // A df-0 group is never tested; a rest of variance 0 flags a group with a positive one
        // (F = ∞), and two groups of variance 0 flag none.
        assert!(screen(&[g(0.5, 0), g(0.001, 3), g(0.001, 3)], 0.01).is_empty());
        let zero = screen(&[g(0.5, 1), g(0.0, 3), g(0.0, 2)], 0.01);
        assert_eq!(zero.len(), 1);
        assert_eq!((zero[0].index, zero[0].p_adjusted), (0, 0.0));
        assert!(zero[0].f.is_infinite());
        assert!(screen(&[g(0.0, 1), g(0.0, 3)], 0.01).is_empty());
    }
}
