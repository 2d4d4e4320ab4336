//! Tests of the bootstrap: exactness of the order-statistic sampler against brute force,
//! determinism, block and hierarchical resampling.

use super::*;

fn lcg_data(n: usize, seed: u64) -> Vec<f64> {
    // Deterministic skewed data (lognormal-ish) without extra dependencies.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u: f64 = rng.random::<f64>().max(1e-12);
            let v: f64 = rng.random::<f64>();
            let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
            (100.0 * (0.5 * z).exp()).round() / 10.0
        })
        .collect()
}

#[test]
fn same_input_same_replicates_and_key_changes_them() {
    let x = lcg_data(300, 1);
    let cfg = BootstrapConfig {
        resamples: 2000,
        ..Default::default()
    };
    let a = quantile_replicates(&[&x], 0.9, &cfg, "k").unwrap();
    let b = quantile_replicates(&[&x], 0.9, &cfg, "k").unwrap();
    let c = quantile_replicates(&[&x], 0.9, &cfg, "other").unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 2000);
}

#[test]
fn replicates_stay_within_data_range_and_ci_contains_estimate() {
    let x = lcg_data(200, 2);
    let (min, max) = x
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    for method in [Method::Iid, Method::MovingBlock { block_len: None }] {
        let cfg = BootstrapConfig {
            resamples: 4000,
            method,
            ..Default::default()
        };
        let reps = quantile_replicates(&[&x], 0.9, &cfg, "k").unwrap();
        assert!(reps.iter().all(|&r| r >= min && r <= max));
        let (lo, hi) = percentile_interval(&reps, 0.95).unwrap();
        let est = super::super::percentile::quantile(&x, 0.9).unwrap();
        assert!(lo <= est && est <= hi, "{method:?}: {lo} {est} {hi}");
    }
}

/// The Beta/order-statistic shortcut must reproduce brute-force resampling. Both are Monte
/// Carlo estimates of the same bootstrap distribution; with 40k replicates each, the 2.5%
/// and 97.5% points agree to within a small fraction of the interval's width.
#[test]
fn orderstat_shortcut_matches_brute_force() {
    let x = lcg_data(400, 3);
    for q in [0.5, 0.9, 0.99] {
        let fast = iid_orderstat(&x, q, 40_000, 7);
        let slow = brute_force(&[&x], &[q], 40_000, 8, Some(1), false).remove(0);
        let (fl, fh) = percentile_interval(&fast, 0.95).unwrap();
        let (sl, sh) = percentile_interval(&slow, 0.95).unwrap();
        let width = sh - sl;
        assert!(
            (fl - sl).abs() < 0.1 * width && (fh - sh).abs() < 0.1 * width,
            "q={q}: fast [{fl},{fh}] slow [{sl},{sh}]"
        );
        let fm = super::super::percentile::mean(&fast).unwrap();
        let sm = super::super::percentile::mean(&slow).unwrap();
        assert!((fm - sm).abs() < 0.05 * width, "q={q}: means {fm} {sm}");
    }
}

/// On positively autocorrelated data (AR(1), φ = 0.8) the block bootstrap must give a wider
/// interval than the iid one, which ignores the correlation.
#[test]
fn block_bootstrap_is_wider_on_autocorrelated_data() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut y = 0.0f64;
    let x: Vec<f64> = (0..2000)
        .map(|_| {
            let e: f64 = rng.random::<f64>() - 0.5;
            y = 0.8 * y + e;
            y
        })
        .collect();
    let iid = BootstrapConfig {
        resamples: 4000,
        ..Default::default()
    };
    let blk = BootstrapConfig {
        resamples: 4000,
        method: Method::MovingBlock {
            block_len: Some(50),
        },
        ..Default::default()
    };
    let w = |c: &BootstrapConfig| {
        let r = quantile_replicates(&[&x], 0.5, c, "ar").unwrap();
        let (l, h) = percentile_interval(&r, 0.95).unwrap();
        h - l
    };
    let (wi, wb) = (w(&iid), w(&blk));
    assert!(wb > 1.5 * wi, "block {wb} vs iid {wi}");
}

/// Two launches whose levels differ: the hierarchical interval must be much wider than the
/// iid interval of the pooled data (which pretends all 2n requests are one sample).
#[test]
fn hierarchical_includes_launch_variation() {
    let a = lcg_data(300, 4);
    let b: Vec<f64> = lcg_data(300, 5).iter().map(|v| v * 1.3).collect();
    let cfg = BootstrapConfig {
        resamples: 4000,
        ..Default::default()
    };
    let hier = quantile_replicates(&[&a, &b], 0.9, &cfg, "h").unwrap();
    let pooled: Vec<f64> = a.iter().chain(b.iter()).copied().collect();
    let flat = quantile_replicates(&[&pooled], 0.9, &cfg, "h").unwrap();
    let (hl, hh) = percentile_interval(&hier, 0.95).unwrap();
    let (fl, fh) = percentile_interval(&flat, 0.95).unwrap();
    assert!(
        hh - hl > 1.5 * (fh - fl),
        "hier [{hl},{hh}] flat [{fl},{fh}]"
    );
}

/// The weighted-pool order-statistic sampler must reproduce its brute-force definition:
/// draw L launches with replacement, pool them with multiplicity, draw N = Σ nⱼ values iid
/// from that pool, take the quantile.
#[test]
fn hierarchical_orderstat_matches_brute_force_definition() {
    let a = lcg_data(150, 21);
    let b: Vec<f64> = lcg_data(250, 22).iter().map(|v| v * 1.2 + 3.0).collect();
    let c = lcg_data(100, 23);
    let groups: Vec<&[f64]> = vec![&a, &b, &c];
    let pool = WeightedPool::new(&groups);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
    for q in [0.5, 0.9] {
        let fast = pool.replicates(q, 20_000, 5);
        let slow: Vec<f64> = (0..20_000)
            .map(|_| {
                let chosen: Vec<&[f64]> = (0..3).map(|_| groups[rng.random_range(0..3)]).collect();
                let pooled: Vec<f64> = chosen.iter().flat_map(|g| g.iter().copied()).collect();
                let n = pooled.len();
                let mut draw: Vec<f64> = (0..n).map(|_| pooled[rng.random_range(0..n)]).collect();
                quantile_select(&mut draw, q).unwrap()
            })
            .collect();
        let (fl, fh) = percentile_interval(&fast, 0.95).unwrap();
        let (sl, sh) = percentile_interval(&slow, 0.95).unwrap();
        let w = sh - sl;
        assert!(
            (fl - sl).abs() < 0.1 * w && (fh - sh).abs() < 0.1 * w,
            "q={q}: fast [{fl},{fh}] slow [{sl},{sh}]"
        );
    }
}

#[test]
fn weighted_pool_positions() {
    // groups [1,3] and [2]; multiplicities (2,1) -> virtual pool [1,1,2,3,3].
    let a = [3.0, 1.0];
    let b = [2.0];
    let pool = WeightedPool::new(&[&a, &b]);
    let got: Vec<f64> = (0..5).map(|k| pool.at(&[2, 1], k)).collect();
    assert_eq!(got, vec![1.0, 1.0, 2.0, 3.0, 3.0]);
    let got: Vec<f64> = (0..2).map(|k| pool.at(&[0, 2], k)).collect();
    assert_eq!(got, vec![2.0, 2.0]);
}

#[test]
fn non_finite_replicates_give_no_interval() {
    assert_eq!(percentile_interval(&[1.0, f64::INFINITY], 0.95), None);
    assert_eq!(percentile_interval(&[], 0.95), None);
    assert_eq!(percentile_interval(&[2.0, 2.0], 0.95), Some((2.0, 2.0)));
}
