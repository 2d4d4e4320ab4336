//! Seeded percentile-bootstrap replicates of a quantile.
//!
//! Three resampling schemes, chosen by the data's shape and [`Method`]:
//! - **iid, one launch** (default): the bootstrap distribution of a linear quantile is sampled
//!   *exactly* without materialising resamples. The j-th order statistic of an iid resample of
//!   size n from sorted `x` is `x[⌊n·U₍ⱼ₎⌋]` with `U₍ⱼ₎ ~ Beta(j, n+1−j)`, and the next order
//!   statistic is `U₍ⱼ₊₁₎ = U₍ⱼ₎ + (1−U₍ⱼ₎)(1 − V^{1/(n−j)})`, V uniform. O(1) per replicate.
//! - **moving block** over send order (option): blocks of `b` consecutive requests (default
//!   `b` = Politis–White automatic length of each launch's series) drawn with replacement until
//!   n values; keeps short-range correlation.
//! - **hierarchical** (a config with several launches): draw launches with replacement, then
//!   resample requests from the drawn launches, so CIs include launch-to-launch variation.
//!   iid: the N = Σ nⱼ requests are drawn from the pooled data of the drawn launches (each launch
//!   weighted by how often it was drawn), again sampled exactly through order statistics:
//!   a draw at virtual position k of the weighted sorted pool is found by binary search over
//!   per-launch cumulative counts, O(L·log N) per replicate. Block: each drawn launch
//!   contributes its own block resample (materialised).
//!
//! Determinism: every replicate vector is a pure function of (data, q, method, resamples, seed,
//! key). Work is split in fixed chunks, each with its own RNG seeded from (seed, key, chunk), so
//! rayon's scheduling never changes a result.

use rand::RngExt;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use statrs::distribution::Beta;

use super::percentile::{quantile_select, quantile_sorted, sort};

/// Resampling scheme inside one launch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Method {
    Iid,
    /// Moving-block bootstrap over send order; `block_len: None` = Politis–White automatic
    /// length per launch (evidence in DESIGN.md §4.3).
    MovingBlock {
        block_len: Option<usize>,
    },
}

/// Bootstrap settings. `Default` is the documented default: 10,000 resamples, 95%, iid, seed 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapConfig {
    pub resamples: usize,
    pub confidence: f64,
    pub seed: u64,
    pub method: Method,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig {
            resamples: 10_000,
            confidence: 0.95,
            seed: 0,
            method: Method::Iid,
        }
    }
}

const CHUNK: usize = 512;

/// Replicates of the linear `q`-quantile of the pooled data. `groups` holds one slice per
/// launch, each in send order. Empty groups are ignored; `None` when there is no data.
pub fn quantile_replicates(
    groups: &[&[f64]],
    q: f64,
    cfg: &BootstrapConfig,
    key: &str,
) -> Option<Vec<f64>> {
    quantiles_replicates(groups, &[q], cfg, key).map(|mut v| v.remove(0))
}

/// Like [`quantile_replicates`] for several quantiles at once (data sorted once; with
/// materialised resamples every quantile comes from the same resample). Each quantile's
/// replicate vector is seeded by (seed, key, q) — identical to a single-quantile call in the
/// iid case.
pub(crate) fn quantiles_replicates(
    groups: &[&[f64]],
    qs: &[f64],
    cfg: &BootstrapConfig,
    key: &str,
) -> Option<Vec<Vec<f64>>> {
    let groups: Vec<&[f64]> = groups.iter().copied().filter(|g| !g.is_empty()).collect();
    if groups.is_empty() || cfg.resamples == 0 || qs.is_empty() {
        return None;
    }
    if groups.len() == 1 && cfg.method == Method::Iid {
        let mut x = groups[0].to_vec();
        sort(&mut x);
        return Some(
            qs.iter()
                .map(|&q| iid_orderstat_sorted(&x, q, cfg.resamples, stable_seed(cfg.seed, key, q)))
                .collect(),
        );
    }
    if cfg.method == Method::Iid {
        let pool = WeightedPool::new(&groups);
        return Some(
            qs.iter()
                .map(|&q| pool.replicates(q, cfg.resamples, stable_seed(cfg.seed, key, q)))
                .collect(),
        );
    }
    let seed = stable_seed(cfg.seed, key, qs[0]);
    let hierarchical = groups.len() > 1;
    let Method::MovingBlock { block_len } = cfg.method else {
        unreachable!("iid handled above")
    };
    Some(brute_force(
        &groups,
        qs,
        cfg.resamples,
        seed,
        block_len,
        hierarchical,
    ))
}

/// Percentile interval of replicates at `confidence` (linear quantiles of the replicates).
pub fn percentile_interval(replicates: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = replicates
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    // A replicate that is not finite (e.g. a ratio over a zero) makes the interval unusable.
    if v.len() < replicates.len() || v.is_empty() {
        return None;
    }
    sort(&mut v);
    let a = (1.0 - confidence) / 2.0;
    Some((quantile_sorted(&v, a)?, quantile_sorted(&v, 1.0 - a)?))
}

#[cfg(test)]
fn iid_orderstat(data: &[f64], q: f64, resamples: usize, seed: u64) -> Vec<f64> {
    let mut x = data.to_vec();
    sort(&mut x);
    iid_orderstat_sorted(&x, q, resamples, seed)
}

fn iid_orderstat_sorted(x: &[f64], q: f64, resamples: usize, seed: u64) -> Vec<f64> {
    let n = x.len();
    if n == 1 {
        return vec![x[0]; resamples];
    }
    let h = (n - 1) as f64 * q;
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    // U_(lo+1) ~ Beta(lo+1, n-lo)  (1-based order statistic lo+1)
    let beta = Beta::new((lo + 1) as f64, (n - lo) as f64).expect("valid beta shape");
    let remaining = (n - lo - 1) as f64; // uniforms above U_(lo+1)
    let pick = |u: f64| x[((n as f64 * u) as usize).min(n - 1)];
    chunked(resamples, seed, |rng, out| {
        let u1: f64 = rng.sample(beta);
        let a = pick(u1);
        if frac == 0.0 || remaining < 1.0 {
            out.push(a);
            return;
        }
        let v: f64 = rng.random::<f64>();
        let u2 = u1 + (1.0 - u1) * (1.0 - v.powf(1.0 / remaining));
        let b = pick(u2);
        out.push(a + frac * (b - a));
    })
}

/// Sorted pooled values of several launches with, per launch, the count of its values ≤ each
/// pooled value; answers "value at virtual position k" of a multiplicity-weighted pool.
struct WeightedPool {
    pooled: Vec<f64>,
    /// `cum[j][p]` = number of values of launch j that are ≤ `pooled[p]`.
    cum: Vec<Vec<u32>>,
    sizes: Vec<usize>,
}

impl WeightedPool {
    fn new(groups: &[&[f64]]) -> Self {
        let mut pooled: Vec<f64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
        sort(&mut pooled);
        let cum = groups
            .iter()
            .map(|g| {
                let mut s = g.to_vec();
                sort(&mut s);
                let mut i = 0usize;
                pooled
                    .iter()
                    .map(|&x| {
                        while i < s.len() && s[i] <= x {
                            i += 1;
                        }
                        i as u32
                    })
                    .collect()
            })
            .collect();
        WeightedPool {
            pooled,
            cum,
            sizes: groups.iter().map(|g| g.len()).collect(),
        }
    }

    /// Value at 0-based position `k` of the sorted pool where launch j counts `mult[j]` times.
    fn at(&self, mult: &[u32], k: u64) -> f64 {
        let weighted = |p: usize| -> u64 {
            self.cum
                .iter()
                .zip(mult)
                .map(|(c, &m)| u64::from(c[p]) * u64::from(m))
                .sum()
        };
        // First p with weighted(p) > k.
        let (mut lo, mut hi) = (0usize, self.pooled.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if weighted(mid) > k {
                hi = mid
            } else {
                lo = mid + 1
            }
        }
        self.pooled[lo]
    }

    fn replicates(&self, q: f64, resamples: usize, seed: u64) -> Vec<f64> {
        let l = self.sizes.len();
        chunked_with_buf(resamples, seed, 0, |rng, _buf, out| {
            let mut mult = vec![0u32; l];
            for _ in 0..l {
                mult[rng.random_range(0..l)] += 1;
            }
            let n: u64 = self
                .sizes
                .iter()
                .zip(&mult)
                .map(|(&s, &m)| s as u64 * u64::from(m))
                .sum();
            let nf = n as f64;
            let h = (nf - 1.0) * q;
            let lo = h.floor();
            let frac = h - lo;
            let u1 = sample_beta(rng, lo + 1.0, nf - lo);
            let pick = |u: f64| self.at(&mult, ((nf * u) as u64).min(n - 1));
            let a = pick(u1);
            let remaining = nf - lo - 1.0;
            if frac == 0.0 || remaining < 1.0 {
                out.push(a);
                return;
            }
            let v: f64 = rng.random::<f64>();
            let u2 = u1 + (1.0 - u1) * (1.0 - v.powf(1.0 / remaining));
            let b = pick(u2);
            out.push(a + frac * (b - a));
        })
    }
}

fn sample_beta(rng: &mut Xoshiro256PlusPlus, a: f64, b: f64) -> f64 {
    rng.sample(Beta::new(a, b).expect("valid beta shape"))
}

/// Materialised resamples. `hierarchical`: draw groups with replacement first.
/// `block_len`: `Some(1)` = iid inside a group; `Some(b)` fixed; `None` = Politis–White per
/// group ([`super::block_length`]).
fn brute_force(
    groups: &[&[f64]],
    qs: &[f64],
    resamples: usize,
    seed: u64,
    block_len: Option<usize>,
    hierarchical: bool,
) -> Vec<Vec<f64>> {
    let total: usize = groups.iter().map(|g| g.len()).sum();
    let k = qs.len();
    // Block length per group, once: fixed, or Politis–White on the group's own send order.
    let lens: Vec<usize> = groups
        .iter()
        .map(|g| {
            block_len
                .unwrap_or_else(|| super::block_length::politis_white(g))
                .clamp(1, g.len().max(1))
        })
        .collect();
    // Replicate r's quantiles are stored at out[r*k .. r*k+k], then transposed.
    let flat = chunked_with_buf(resamples, seed, total, |rng, buf, out| {
        buf.clear();
        for gi in 0..groups.len() {
            let pick = if hierarchical {
                rng.random_range(0..groups.len())
            } else {
                gi
            };
            let g = groups[pick];
            let n = g.len();
            let b = lens[pick];
            let mut taken = 0;
            while taken < n {
                let start = rng.random_range(0..=n - b);
                let take = b.min(n - taken);
                buf.extend_from_slice(&g[start..start + take]);
                taken += take;
            }
        }
        if k == 1 {
            out.push(quantile_select(buf, qs[0]).expect("non-empty resample"));
        } else {
            sort(buf);
            out.extend(
                qs.iter()
                    .map(|&q| quantile_sorted(buf, q).expect("non-empty resample")),
            );
        }
    });
    (0..k)
        .map(|j| flat.iter().skip(j).step_by(k).copied().collect())
        .collect()
}

fn chunked(
    resamples: usize,
    seed: u64,
    f: impl Fn(&mut Xoshiro256PlusPlus, &mut Vec<f64>) + Sync,
) -> Vec<f64> {
    chunked_with_buf(resamples, seed, 0, |rng, _buf, out| f(rng, out))
}

fn chunked_with_buf(
    resamples: usize,
    seed: u64,
    buf_cap: usize,
    f: impl Fn(&mut Xoshiro256PlusPlus, &mut Vec<f64>, &mut Vec<f64>) + Sync,
) -> Vec<f64> {
    let chunks = resamples.div_ceil(CHUNK);
    let parts: Vec<Vec<f64>> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix(seed ^ mix(c as u64 + 1)));
            let len = CHUNK.min(resamples - c * CHUNK);
            let mut out = Vec::with_capacity(len * 4);
            let mut buf = Vec::with_capacity(buf_cap);
            for _ in 0..len {
                f(&mut rng, &mut buf, &mut out);
            }
            out
        })
        .collect();
    parts.concat()
}

/// A seed that depends only on the global seed, the statistic's key and the quantile.
pub(crate) fn stable_seed(seed: u64, key: &str, q: f64) -> u64 {
    // FNV-1a over the key bytes and q's bit pattern, then SplitMix64 finalisation.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in key
        .as_bytes()
        .iter()
        .chain(q.to_bits().to_le_bytes().iter())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
