//! Launch-to-launch noise in every tax CI (DESIGN.md §4.3): the per-launch variance of each tax
//! metric pooled over the configs, estimated from every (config, cell) with ≥ 2 launches where
//! the config is not saturated — per cell where the cell's launches give enough contrasts, else
//! over every cell — and applied to every config, also those measured once.
//!
//! Degrees of freedom: a launch's level is shared by every cell it ran, so the df are the
//! independent launch contrasts, Σ over configs of (launches − 1), not the per-cell count (with
//! per-cell df, 2 configs × 3 cells × 2 launches claimed df 6 for 2 independent contrasts, and a
//! 0% tax was detected in 17/200 simulated datasets instead of ≤ 10).
//!
//! A statistic pooled over k launches gets replicates `est · exp(√v_b · z_b)` with
//! `v_b = max(σ²_b / k, v_req)`: `σ²_b = σ̂²_L · df / χ²_df` drawn once per replicate index and
//! shared by every statistic of the metric (so a tax, a difference of taxes or a ratio is
//! t-calibrated with df degrees of freedom, [`crate::stats::launch_noise`]), and `v_req` the
//! variance of the log request-level bootstrap replicates of that statistic — a floor, so a cell
//! with fewer requests than those the launch noise was pooled from never gets a narrower CI than
//! its own requests allow.
//!
//! The noise is estimated per cell as well: a cell's own variance is valid whether or not the
//! launch noise depends on the load, one pooled over the rates only if it does not, and queueing
//! amplifies a launch's speed near the knee. On the H200 TTFT p90 spread ±11% per launch at
//! 2 req/s, ±9% at 4 and ±31% at 6 req/s (df 7 each; the last mostly one slow launch, ±15%
//! without it: DESIGN.md §4.3 says how weak that evidence is). A statistic of a cell whose
//! launches give at least [`MIN_CELL_DF`] independent contrasts (Σ over configs of launches − 1 in
//! that cell) carries that cell's own variance, with its own df and its own draws (shared by
//! every statistic of the metric in that cell, so a tax is t-calibrated there); every other cell
//! (e.g. Phase B measured once) carries the variance pooled over all cells, as before.
//!
//! When no (config, cell) has two launches the launch-to-launch variance is unknown: the
//! replicates stay request-level, and every tax says so ([`Detection::NoLaunchNoise`]) instead of
//! claiming a detection.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{CellKey, CellStats, Detection};
use super::taxes::Metric;
use crate::stats::launch_noise::{PooledVariance, pooled_variance, replicates, variance_draws};
use ctax_schema::Phase;

/// The metrics a tax is computed on, with the name the summary uses.
const METRICS: [(Metric, &str); 4] = [
    (Metric::TtftP90, "ttft_p90"),
    (Metric::TpotP90, "tpot_p90"),
    (Metric::StepP50, "step_p50"),
    (Metric::CallbackP50, "callback_p50"),
];

/// A cell carries its own launch noise when its launches give at least this many independent
/// contrasts; below it, the variance pooled over every cell. The rule reads the launch counts
/// and which cells are saturated, never the spread of the values, so it cannot pick the narrower
/// of two intervals; 4 keeps the t-quantile of a cell's CI within 18% of the pooled one at df 7
/// (t₄ 2.776 vs t₇ 2.365), where df 2 would nearly double it (t₂ 4.303).
pub(crate) const MIN_CELL_DF: u32 = 4;

/// The reason a verdict cannot detect anything without launch noise.
pub(crate) const UNKNOWN_REASON: &str = "launch-to-launch variance unknown (one launch per config)";

/// What the summary reports about launch noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LaunchNoiseSummary {
    /// Launches per phase (keyed `A`, `B`, `Bp` in JSON) and config: the distinct launch indices
    /// with data in that phase. A launch index names one server launch within one phase (Phase
    /// A's `l0` and Phase B's `l0` are two launches), so launches are counted per phase.
    pub launches: BTreeMap<Phase, BTreeMap<String, u32>>,
    /// Per metric (`ttft_p90`, `tpot_p90`, `step_p50`, `callback_p50`): the per-launch variance
    /// on the log scale pooled over every cell, with its degrees of freedom; absent = unknown.
    /// Cells not listed in `cells` carry it.
    pub metrics: BTreeMap<String, PooledVariance>,
    /// Per cell (`<phase>/<cell>`, e.g. `A/r2_i4096_o256`) and metric: the variance of that cell's
    /// launches alone, listed where they give at least [`MIN_CELL_DF`] contrasts; a statistic of
    /// a listed cell carries it instead of the pooled one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cells: BTreeMap<String, BTreeMap<String, PooledVariance>>,
    /// The method in one sentence (also in the conventions).
    pub method: String,
}

impl LaunchNoiseSummary {
    /// TTFT p90's launch noise is what every hypothesis needs.
    pub fn ttft_known(&self) -> bool {
        self.metrics.contains_key("ttft_p90")
    }

    /// How many launches measured `config` in `phase` (`None`: none).
    pub fn launches_of(&self, phase: Phase, config: &str) -> Option<u32> {
        self.launches.get(&phase)?.get(config).copied()
    }

    /// The variance a statistic of `metric` in (`phase`, `cell`) carries: the cell's own where
    /// it has one, else the pooled one (`None`: unknown).
    pub fn variance_at(&self, metric: &str, phase: Phase, cell: &str) -> Option<&PooledVariance> {
        self.cells
            .get(&cell_tag(phase, cell))
            .and_then(|m| m.get(metric))
            .or_else(|| self.metrics.get(metric))
    }
}

/// `A/r2_i4096_o256`: how the summary names a cell's own noise.
pub(crate) fn cell_tag(phase: Phase, cell: &str) -> String {
    format!("{phase}/{cell}")
}

/// The model the tax engine draws replicates from.
#[derive(Debug, Clone, Default)]
pub(crate) struct NoiseModel {
    /// Per metric, the draws of the variance pooled over every cell.
    draws: BTreeMap<&'static str, Vec<f64>>,
    /// Per metric and `<phase>/<cell>`, the draws of a cell's own variance ([`MIN_CELL_DF`]).
    cell_draws: BTreeMap<(&'static str, String), Vec<f64>>,
    seed: u64,
}

impl NoiseModel {
    /// Estimates the pooled variances from the per-launch cell statistics. `pooled` must carry
    /// the saturation flags (so saturated cells, whose spread is the queue's, are left out).
    pub(crate) fn estimate(
        pooled: &[CellStats],
        per_launch: &[CellStats],
        resamples: usize,
        seed: u64,
    ) -> (NoiseModel, LaunchNoiseSummary) {
        Self::estimate_without(pooled, per_launch, None, resamples, seed)
    }

    /// [`Self::estimate`] leaving out every cell of `exclude`.
    fn estimate_without(
        pooled: &[CellStats],
        per_launch: &[CellStats],
        exclude: Option<&str>,
        resamples: usize,
        seed: u64,
    ) -> (NoiseModel, LaunchNoiseSummary) {
        let kept = |c: &&CellStats| exclude != Some(c.key.config.as_str());
        let per_launch: Vec<&CellStats> = per_launch.iter().filter(kept).collect();
        let mut launches: BTreeMap<Phase, BTreeMap<String, std::collections::BTreeSet<u32>>> =
            BTreeMap::new();
        for c in &per_launch {
            if let Some(l) = c.launch {
                launches
                    .entry(c.key.phase)
                    .or_default()
                    .entry(c.key.config.clone())
                    .or_default()
                    .insert(l);
            }
        }
        let unsaturated: Vec<&CellKey> = pooled
            .iter()
            .filter(kept)
            .filter(|c| c.launch.is_none())
            .filter(|c| !c.saturated())
            .map(|c| &c.key)
            .collect();
        let mut model = NoiseModel {
            draws: BTreeMap::new(),
            cell_draws: BTreeMap::new(),
            seed,
        };
        let mut summary = LaunchNoiseSummary {
            launches: launches
                .into_iter()
                .map(|(p, by)| {
                    let counts = by.into_iter().map(|(c, s)| (c, s.len() as u32)).collect();
                    (p, counts)
                })
                .collect(),
            metrics: BTreeMap::new(),
            cells: BTreeMap::new(),
            method: METHOD.into(),
        };
        for (m, name) in METRICS {
            let groups: Vec<((&str, Phase), Vec<f64>)> = unsaturated
                .iter()
                .map(|key| {
                    (
                        (key.config.as_str(), key.phase),
                        per_launch
                            .iter()
                            .filter(|c| c.launch.is_some() && &c.key == *key)
                            .filter_map(|c| m.point(c))
                            .collect(),
                    )
                })
                .collect();
            let values: Vec<Vec<f64>> = groups.iter().map(|g| g.1.clone()).collect();
            if let Some(mut pv) = pooled_variance(&values) {
                // A launch's level is shared by all its cells, so the cells of one config are not
                // independent evidence about it: the degrees of freedom are the independent
                // launch contrasts, Σ over (config, phase) of (launches − 1), when that is fewer
                // (each phase launches its own servers).
                let mut per_config: BTreeMap<(&str, Phase), u32> = BTreeMap::new();
                for (c, v) in &groups {
                    let k = v.len() as u32;
                    let e = per_config.entry(*c).or_default();
                    *e = (*e).max(k.saturating_sub(1));
                }
                let contrasts: u32 = per_config.values().sum();
                pv.df = pv.df.min(contrasts.max(1));
                summary.metrics.insert(name.to_owned(), pv);
                model
                    .draws
                    .insert(name, variance_draws(&pv, resamples, seed, name));
            }
            // Each cell alone: one group per config, so its df are exactly the launch
            // contrasts in that cell.
            let mut by_cell: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
            for (key, (_, v)) in unsaturated.iter().zip(&groups) {
                by_cell
                    .entry(cell_tag(key.phase, &key.cell))
                    .or_default()
                    .push(v.clone());
            }
            for (tag, values) in by_cell {
                let Some(pv) = pooled_variance(&values).filter(|pv| pv.df >= MIN_CELL_DF) else {
                    continue;
                };
                let draws = variance_draws(&pv, resamples, seed, &format!("{name}|{tag}"));
                summary
                    .cells
                    .entry(tag.clone())
                    .or_default()
                    .insert(name.to_owned(), pv);
                model.cell_draws.insert((name, tag), draws);
            }
        }
        (model, summary)
    }

    /// Whether the launch noise of `m` is known.
    pub(crate) fn known(&self, m: Metric) -> bool {
        self.draws.contains_key(name(m))
    }

    /// Replicates of a statistic of (`phase`, `cell`) with estimate `est` pooled over `k`
    /// launches, given its request-level replicates (`key` seeds its own normal draws): the
    /// cell's own launch noise where it has one, else the pooled one. `None` when the launch
    /// noise of `m` is unknown (use the request-level replicates, and say so).
    pub(crate) fn widen(
        &self,
        m: Metric,
        (phase, cell): (Phase, &str),
        est: f64,
        k: u32,
        request: &[f64],
        key: &str,
    ) -> Option<Vec<f64>> {
        let draws = self
            .cell_draws
            .get(&(name(m), cell_tag(phase, cell)))
            .or_else(|| self.draws.get(name(m)))?;
        if est <= 0.0 || !est.is_finite() || draws.len() != request.len() {
            return None;
        }
        let logs: Vec<f64> = request
            .iter()
            .filter(|v| **v > 0.0 && v.is_finite())
            .map(|v| v.ln())
            .collect();
        let v_req = if logs.len() > 1 {
            let mean = logs.iter().sum::<f64>() / logs.len() as f64;
            logs.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (logs.len() - 1) as f64
        } else {
            0.0
        };
        let k = f64::from(k.max(1));
        let floored: Vec<f64> = draws.iter().map(|s2| (s2 / k).max(v_req)).collect();
        // `replicates` divides by k itself; hand it the floored per-statistic variance at k = 1.
        Some(replicates(est, 1, &floored, self.seed, key))
    }
}

/// Per config, the noise model estimated from every OTHER config's cells (for the config's A/A
/// tax); absent where the others give no TTFT launch noise.
pub(crate) fn leave_one_config_out(
    pooled: &[CellStats],
    per_launch: &[CellStats],
    resamples: usize,
    seed: u64,
) -> BTreeMap<String, NoiseModel> {
    let mut configs: Vec<&str> = pooled.iter().map(|c| c.key.config.as_str()).collect();
    configs.sort();
    configs.dedup();
    configs
        .into_iter()
        .filter_map(|c| {
            let (m, s) = NoiseModel::estimate_without(pooled, per_launch, Some(c), resamples, seed);
            s.ttft_known().then(|| (c.to_owned(), m))
        })
        .collect()
}

/// How a tax's detection reads when its metric has no launch noise.
pub(crate) fn detection_without_noise(d: Detection) -> Detection {
    match d {
        Detection::Tax | Detection::Negative | Detection::Inconclusive => Detection::NoLaunchNoise,
        Detection::Unknown | Detection::NoLaunchNoise => d,
    }
}

fn name(m: Metric) -> &'static str {
    METRICS
        .iter()
        .find(|(x, _)| *x == m)
        .map(|(_, n)| *n)
        .expect("every metric is listed")
}

pub(crate) const METHOD: &str = "launch-level random effect: per metric, the pooled within-config variance of log \
     per-launch estimates (one-way ANOVA over the configs with >= 2 launches, unsaturated cells only, \
     df = sum of launches - 1), applied to every config; estimated per cell where the cell's launches \
     give >= 4 contrasts (launches can spread more near the knee), else pooled over every cell; a \
     statistic pooled over k launches gets replicates est * exp(sqrt(max(s2_b / k, v_req)) * z), \
     s2_b = s2 * df / chi2_df drawn once per replicate and shared by every statistic of the metric \
     in the cell (t-calibrated taxes), v_req the request-level bootstrap variance (a floor); with no \
     cell at >= 2 launches no tax is called detected";
