//! Coverage check of the bootstrap CIs (the number a paper cites is only as good as its CI).
//! Truth: TTFTs are lognormal with median 100 ms and σ = 0.5, so the true p90 is
//! 100·exp(0.5·z₀.₉) with z₀.₉ = 1.2815515655446004 (the standard normal 90% quantile), i.e.
//! 189.7870 ms. Over 400 seeded simulations of n = 200 requests, the 95% CI should cover the
//! true value in ~95% of repeats; we require ≥ 90% (the bar) and print the figure.

use connector_tax::stats::{BootstrapConfig, Method, percentile_interval, quantile_replicates};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

const Z90: f64 = 1.2815515655446004;

fn lognormal(rng: &mut Xoshiro256PlusPlus, median: f64, sigma: f64) -> f64 {
    let u: f64 = rng.random::<f64>().max(1e-300);
    let v: f64 = rng.random::<f64>();
    median * (sigma * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()).exp()
}

fn coverage(method: Method, repeats: u64, n: usize) -> f64 {
    let truth = 100.0 * (0.5 * Z90).exp();
    let cfg = BootstrapConfig {
        method,
        ..Default::default()
    };
    let mut covered = 0;
    for rep in 0..repeats {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(10_000 + rep);
        let x: Vec<f64> = (0..n).map(|_| lognormal(&mut rng, 100.0, 0.5)).collect();
        let reps = quantile_replicates(&[&x], 0.9, &cfg, &format!("cov{rep}")).unwrap();
        let (lo, hi) = percentile_interval(&reps, 0.95).unwrap();
        if lo <= truth && truth <= hi {
            covered += 1;
        }
    }
    covered as f64 / repeats as f64
}

#[test]
fn p90_ci_covers_the_true_value() {
    let iid = coverage(Method::Iid, 400, 200);
    eprintln!(
        "coverage of the 95% CI of p90 (n=200, 400 repeats, 10,000 resamples): iid {:.1}%",
        iid * 100.0
    );
    assert!(iid >= 0.90, "iid coverage {iid}");
    let block = coverage(Method::MovingBlock { block_len: None }, 200, 200);
    eprintln!(
        "  moving block (b = ceil(n^(1/3)) = 6): {:.1}%",
        block * 100.0
    );
    assert!(block >= 0.85, "block coverage {block}");
}

/// The tax CI: plain and a config whose TTFT is exactly 1.2 × plain's in distribution. The CI
/// of p90(X)/p90(plain) − 1 should cover 0.20 in ≥ 90% of repeats.
#[test]
fn tax_ci_covers_the_true_tax() {
    let cfg = BootstrapConfig::default();
    let repeats = 300;
    let mut covered = 0;
    for rep in 0..repeats {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(50_000 + rep);
        let p: Vec<f64> = (0..200).map(|_| lognormal(&mut rng, 100.0, 0.5)).collect();
        let x: Vec<f64> = (0..200).map(|_| lognormal(&mut rng, 120.0, 0.5)).collect();
        let rp = quantile_replicates(&[&p], 0.9, &cfg, &format!("p{rep}")).unwrap();
        let rx = quantile_replicates(&[&x], 0.9, &cfg, &format!("x{rep}")).unwrap();
        let tax: Vec<f64> = rx.iter().zip(&rp).map(|(a, b)| a / b - 1.0).collect();
        let (lo, hi) = percentile_interval(&tax, 0.95).unwrap();
        if lo <= 0.20 && 0.20 <= hi {
            covered += 1;
        }
    }
    let c = covered as f64 / repeats as f64;
    eprintln!(
        "coverage of the 95% CI of a 20% TTFT p90 tax (n=200 each, {repeats} repeats): {:.1}%",
        c * 100.0
    );
    assert!(c >= 0.90, "tax CI coverage {c}");
}
