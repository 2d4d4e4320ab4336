//! Launch-to-launch noise in every tax CI (DESIGN.md §4.3): the per-launch variance of each tax
//! metric, estimated from every (config, cell) where the config is not saturated — per cell where
//! the cell's launches give enough degrees of freedom, else over every cell — and applied to
//! every config, also those measured once.
//!
//! **Machines** (DESIGN.md §4.3 "Machines"): launches on different machines differ by more than
//! launches on one machine (on the H200 ~20% in TTFT p90 between GPU sessions against ~5% within
//! one), and taxes compare launches on the same machine ([`super::taxes`]). So the noise is what
//! an additive model `log y = config + machine + e` leaves ([`additive_residual`]): the spread of
//! one config's launches on one machine, plus any config whose difference from another changes
//! between machines (where the design can see it); machine levels shared by every config are not
//! noise. On one machine this is the one-way ANOVA within configs it was before machines.
//!
//! Degrees of freedom: n − rank of the design in a cell; a launch's level is shared by every
//! cell it ran, so the pool over cells has at most the independent launch contrasts of the
//! config + machine design, per phase (with per-cell df, 2 configs × 3 cells × 2 launches claimed
//! df 6 for 2 independent contrasts, and a 0% tax was detected in 17/200 simulated datasets
//! instead of ≤ 10).
//!
//! A launch's estimate gets replicates `est · exp(√v_b · z_b)` with `v_b = max(σ²_b, v_req)`:
//! `σ²_b = σ̂²_L · df / χ²_df` drawn once per replicate index and shared by every statistic of
//! the metric (so a tax, a difference of taxes or a ratio is t-calibrated with df degrees of
//! freedom, [`crate::stats::launch_noise`]), and `v_req` the variance of the log request-level
//! bootstrap replicates of that launch's statistic — a floor, so a launch with fewer requests than
//! those the noise was estimated from never gets a narrower CI than its own requests allow. (A
//! statistic pooled over k launches, the connector-callback time, gets `max(σ²_b / k, v_req)`.)
//!
//! The noise is estimated per cell as well: a cell's own variance is valid whether or not the
//! launch noise depends on the load, one pooled over the rates only if it does not, and queueing
//! amplifies a launch's speed near the knee. A statistic of a cell whose launches give at least
//! [`MIN_CELL_DF`] degrees of freedom carries that cell's own variance, with its own df and its
//! own draws (shared by every statistic of the metric in that cell, so a tax is t-calibrated
//! there); every other cell (e.g. Phase B) carries the variance pooled over all cells.
//!
//! Configs need not share one noise level: on the H200 the LMCache configs' TPOT p90 moved
//! 10–23% between launches where every other config moved ~1–2% (their CPU-side store path runs
//! every step), and a pool over all configs spread that over every config's CI (±1.1% → ±5.6% at
//! 2 req/s). Before pooling, a screen ([`noisier_groups`], one-sided F-tests against the rest's
//! pool, Holm-adjusted, at [`OWN_NOISE_ALPHA`]) picks the configs whose launches spread
//! significantly more, each tested on what its launches can show: its own variance (its launches
//! alone, within machines) where they repeat on a machine, else — in a cell with its own pool —
//! its share of that pool, what its launches add to the additive model's residual over the df
//! they add ([`share_of_pool`](crate::stats::launch_noise::share_of_pool): its lack of fit across
//! machines, which a config run once per machine shows only there; over every cell the pool caps
//! its df at the launch contrasts, so it is no sum of squares to take a share of). Each flagged
//! config carries that variance and df ([`OwnNoise`], its own χ² draws: with two launches a t₁
//! interval), in
//! a cell or over every cell, and the pools leave it out. A config measured once cannot be
//! screened and carries the pool.
//!
//! When no (config, cell) has two launches the launch-to-launch variance is unknown: the
//! replicates stay request-level, and every tax says so ([`Detection::NoLaunchNoise`]) instead of
//! claiming a detection.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{CellKey, CellStats, Detection};
use super::taxes::Metric;
use crate::ingest::machine::UNRECORDED;
use crate::stats::launch_noise::{
    GroupVariance, LaunchObs, PooledVariance, additive_residual, launch_contrasts, noisier_groups,
    replicates, residual_variance, variance_draws,
};
use ctax_schema::Phase;

/// The metrics a tax is computed on, with the name the summary uses.
const METRICS: [(Metric, &str); 4] = [
    (Metric::TtftP90, "ttft_p90"),
    (Metric::TpotP90, "tpot_p90"),
    (Metric::StepP50, "step_p50"),
    (Metric::CallbackP50, "callback_p50"),
];

/// How reports name a metric of [`METRICS`] (`tpot_p90` → `TPOT p90`).
pub(crate) fn metric_label(m: &str) -> &str {
    match m {
        "ttft_p90" => "TTFT p90",
        "tpot_p90" => "TPOT p90",
        "step_p50" => "step p50",
        "callback_p50" => "callbacks p50",
        other => other,
    }
}

/// A cell carries its own launch noise when its launches give at least this many independent
/// contrasts; below it, the variance pooled over every cell. The rule reads the launch counts
/// and which cells are saturated, never the spread of the values, so it cannot pick the narrower
/// of two intervals; 4 keeps the t-quantile of a cell's CI within 18% of the pooled one at df 7
/// (t₄ 2.776 vs t₇ 2.365), where df 2 would nearly double it (t₂ 4.303).
pub(crate) const MIN_CELL_DF: u32 = 4;

/// The level of the screen that gives a config its own launch noise (Holm-adjusted one-sided
/// F-tests, [`noisier_groups`]): 1%, the outlier level of ISO 5725-2's variance screen.
pub(crate) const OWN_NOISE_ALPHA: f64 = 0.01;

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
    /// The configs whose launches spread significantly more than the others' (in one cell, or
    /// over every cell): each carries its own variance there, and the pools above leave it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own: Vec<OwnNoise>,
    /// The machines whose launches decide part of that screen ([`screen_without_each_machine`]):
    /// left out, the screen sets apart other configs than with them in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screen_flips: Vec<ScreenFlip>,
    /// Per metric, with launches in more than one phase: each phase's own variance (its cells'
    /// residuals, df its launch contrasts), of which `metrics` is the df-weighted mean. A phase
    /// whose variance is larger than the other phases' ([`Self::noisier_phases`]) carries a pool
    /// that understates its noise, and the analysis warns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<String, BTreeMap<Phase, PooledVariance>>,
    /// The method in one sentence (also in the conventions).
    pub method: String,
}

/// A phase whose launches spread more than the other phases' ([`LaunchNoiseSummary::noisier_phases`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NoisierPhase {
    pub metric: String,
    pub phase: Phase,
    /// The phase's own pooled variance of the log per-launch estimates.
    pub own: PooledVariance,
    /// The pool of the other phases.
    pub rest: PooledVariance,
    /// The one-sided F statistic `own / rest` and its p-value.
    pub f: f64,
    pub p: f64,
}

impl NoisierPhase {
    /// `TTFT p90 ±11.5% per launch (df 1) against ±4.1% (df 5), F 7.5, p 0.041`.
    pub fn spread(&self) -> String {
        format!(
            "{} ±{:.1}% per launch (df {}) against ±{:.1}% (df {}), F {:.1}, p {:.3}",
            metric_label(&self.metric),
            self.own.relative_sd() * 100.0,
            self.own.df,
            self.rest.relative_sd() * 100.0,
            self.rest.df,
            self.f,
            self.p
        )
    }
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

    /// The variance a statistic of `config`'s `metric` in (`phase`, `cell`) carries, found in
    /// [`in_lookup_order`] as [`NoiseModel::widen`] finds its draws (`None`: unknown).
    pub fn variance_of(
        &self,
        metric: &str,
        phase: Phase,
        cell: &str,
        config: &str,
    ) -> Option<&PooledVariance> {
        let tag = cell_tag(phase, cell);
        in_lookup_order(
            self.own_in(metric, Some(&tag), config).map(|o| &o.variance),
            self.cells.get(&tag).and_then(|m| m.get(metric)),
            || self.own_in(metric, None, config).map(|o| &o.variance),
            || self.metrics.get(metric),
        )
    }

    /// The own noise `config`'s `metric` carries in (`phase`, `cell`), if any: the one the
    /// screen gave it in that cell, else the one over every cell where the cell has no pool of
    /// its own (in a cell with its own pool, a config the cell's screen left carries that pool).
    pub fn own_at(
        &self,
        metric: &str,
        phase: Phase,
        cell: &str,
        config: &str,
    ) -> Option<&OwnNoise> {
        let tag = cell_tag(phase, cell);
        // The lookup stops at the cell's pool (no own noise), or at the pool over every cell.
        in_lookup_order(
            self.own_in(metric, Some(&tag), config).map(Some),
            self.cells
                .get(&tag)
                .and_then(|m| m.get(metric))
                .map(|_| None),
            || self.own_in(metric, None, config).map(Some),
            || None,
        )
        .flatten()
    }

    /// Per metric, the phases whose own variance is larger than the pool of the other phases
    /// at the 5% level (one-sided F-test). Their cells without a pool of their own carry the
    /// pool over every phase, which the others dominate, so their CIs may be too narrow.
    pub fn noisier_phases(&self) -> Vec<NoisierPhase> {
        use statrs::distribution::{ContinuousCDF, FisherSnedecor};
        let mut out = Vec::new();
        for (metric, phases) in &self.phases {
            for (phase, pv) in phases {
                let Some(rest) =
                    combine_phases(phases.iter().filter(|(p, _)| *p != phase).map(|(_, v)| v))
                else {
                    continue;
                };
                if rest.var <= 0.0 || pv.var <= rest.var {
                    continue;
                }
                let f = pv.var / rest.var;
                let Ok(d) = FisherSnedecor::new(f64::from(pv.df), f64::from(rest.df)) else {
                    continue;
                };
                let p = d.sf(f);
                if p < 0.05 {
                    out.push(NoisierPhase {
                        metric: metric.clone(),
                        phase: *phase,
                        own: *pv,
                        rest,
                        f,
                        p,
                    });
                }
            }
        }
        out
    }

    /// The own noise the screen gave `config`'s `metric` in scope `cell` (`None`: over every
    /// cell).
    fn own_in(&self, metric: &str, cell: Option<&str>, config: &str) -> Option<&OwnNoise> {
        self.own
            .iter()
            .find(|o| o.metric == metric && o.config == config && o.cell.as_deref() == cell)
    }
}

/// The one order in which a statistic finds its launch noise, for the draws
/// ([`NoiseModel::widen`]) and for what the summary says ([`LaunchNoiseSummary::variance_of`],
/// [`LaunchNoiseSummary::own_at`]): the config's own in the cell, the cell's pool, the config's
/// own over every cell, the pool over every cell.
fn in_lookup_order<T>(
    own_in_cell: Option<T>,
    cell_pool: Option<T>,
    own_over_all: impl FnOnce() -> Option<T>,
    pool: impl FnOnce() -> Option<T>,
) -> Option<T> {
    own_in_cell
        .or(cell_pool)
        .or_else(own_over_all)
        .or_else(pool)
}

/// A config whose launches spread significantly more than the other configs' launches: its own
/// per-launch variance, and the screen that gave it ([`noisier_groups`] at [`OWN_NOISE_ALPHA`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnNoise {
    pub config: String,
    /// `ttft_p90`, `tpot_p90`, `step_p50` or `callback_p50`.
    pub metric: String,
    /// `<phase>/<cell>`; absent: over every cell, carried in the cells without a pool of their
    /// own ([`LaunchNoiseSummary::own_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    pub variance: PooledVariance,
    /// Its variance over the rest's pooled variance, on (`variance.df`, `rest_df`) df.
    pub f: f64,
    pub rest_df: u32,
    /// Holm-adjusted one-sided p of the F-test.
    pub p_adjusted: f64,
}

/// A machine without whose launches the launch-noise screen ([`OwnNoise`]) sets apart other
/// configs: what it sets apart only with them in, and only without them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreenFlip {
    pub machine: String,
    /// `mooncake_both TTFT p90 in A/r6_i4096_o256` (or `over every cell`).
    pub only_with: Vec<String>,
    pub only_without: Vec<String>,
    /// The machine holds no launch of any config the flip names: it moves the screen only
    /// through the launches of others (plain's, mostly) that carry the pool's degrees of
    /// freedom, not through the flipped config's own.
    #[serde(default)]
    pub through_pool_only: bool,
}

/// The config a [`screened`] label is of (its first word).
fn label_config(label: &str) -> &str {
    label.split_whitespace().next().unwrap_or(label)
}

/// What the screen set apart, as `config metric in cell` labels.
fn screened(s: &LaunchNoiseSummary) -> std::collections::BTreeSet<String> {
    s.own
        .iter()
        .map(|o| {
            format!(
                "{} {} {}",
                o.config,
                metric_label(&o.metric),
                o.cell
                    .as_deref()
                    .map_or_else(|| "over every cell".to_owned(), |c| format!("in {c}"))
            )
        })
        .collect()
}

/// The screen's stability: [`NoiseModel::estimate`] again with each machine's launches left out
/// in turn, and the machines whose absence changes what the screen sets apart (a decision on
/// few degrees of freedom can rest on one machine: on the H200 one more machine's launches at
/// 6 req/s stopped setting mooncake_both apart there, and Phase B's pooled noise rose from
/// ±7.8% to ±12.6%). A machine whose launches are the only ones of some cell is left out too;
/// the comparison is of what both screens could test.
pub(crate) fn screen_without_each_machine(
    pooled: &[CellStats],
    per_launch: &[CellStats],
    resamples: usize,
    seed: u64,
    full: &LaunchNoiseSummary,
) -> Vec<ScreenFlip> {
    let with = screened(full);
    let mut machines: Vec<&str> = per_launch
        .iter()
        .filter_map(|c| c.machine.as_deref())
        .collect();
    machines.sort_unstable();
    machines.dedup();
    machines
        .into_iter()
        .filter_map(|m| {
            let rest: Vec<CellStats> = per_launch
                .iter()
                .filter(|c| c.machine.as_deref() != Some(m))
                .cloned()
                .collect();
            let (_, s) = NoiseModel::estimate(pooled, &rest, resamples, seed);
            let without = screened(&s);
            let only_with: Vec<String> = with.difference(&without).cloned().collect();
            let only_without: Vec<String> = without.difference(&with).cloned().collect();
            let holds = |label: &String| {
                per_launch
                    .iter()
                    .any(|c| c.machine.as_deref() == Some(m) && c.key.config == label_config(label))
            };
            let through_pool_only = !only_with.iter().chain(&only_without).any(holds);
            (!only_with.is_empty() || !only_without.is_empty()).then(|| ScreenFlip {
                machine: m.to_owned(),
                only_with,
                only_without,
                through_pool_only,
            })
        })
        .collect()
}

/// The report's warnings for the screen's flips. Machines whose absence changes the screen the
/// same way share one line: on the H100 root after its fifth stretch each of its four machines
/// alone undoes the one call the screen makes (two of them hold nixl_both's only launches, two
/// carry the pool's degrees of freedom), and four lines saying the same thing read as four
/// problems.
pub(crate) fn screen_flip_warnings(flips: &[ScreenFlip]) -> Vec<String> {
    let mut groups: Vec<(&ScreenFlip, Vec<&ScreenFlip>)> = Vec::new();
    for f in flips {
        match groups
            .iter_mut()
            .find(|(g, _)| g.only_with == f.only_with && g.only_without == f.only_without)
        {
            Some((_, machines)) => machines.push(f),
            None => groups.push((f, vec![f])),
        }
    }
    let part =
        |what: &str, v: &[String]| (!v.is_empty()).then(|| format!("{what} {}", v.join(", ")));
    groups
        .into_iter()
        .map(|(f, machines)| {
            let changes: Vec<String> = [
                part("would no longer set apart", &f.only_with),
                part("would set apart", &f.only_without),
            ]
            .into_iter()
            .flatten()
            .collect();
            let names = |v: &[&ScreenFlip]| {
                v.iter()
                    .map(|f| f.machine.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let (pool_only, own): (Vec<&ScreenFlip>, Vec<&ScreenFlip>) =
                machines.iter().partition(|f| f.through_pool_only);
            let mut configs: Vec<&str> = f
                .only_with
                .iter()
                .chain(&f.only_without)
                .map(|l| label_config(l))
                .collect();
            configs.sort_unstable();
            configs.dedup();
            let configs = configs.join(" or ");
            let why = match (pool_only.as_slice(), own.is_empty()) {
                ([], _) => String::new(),
                // One machine, holding none of them (the group is that machine alone).
                ([_], true) => format!(
                    " (it holds no launch of {configs}: it moves the screen through the pool's degrees of freedom)"
                ),
                (_, true) => format!(
                    " (none of them holds a launch of {configs}: they move the screen through the pool's degrees of freedom)"
                ),
                (p, false) => format!(
                    " ({} of them, {}, {} no launch of {configs}: {} the screen through the pool's degrees of freedom)",
                    p.len(),
                    names(p),
                    if p.len() == 1 { "holds" } else { "hold" },
                    if p.len() == 1 { "it moves" } else { "they move" },
                ),
            };
            let whose = match machines.as_slice() {
                [one] => format!(
                    "rests on one machine: without the launches of {}{why}",
                    one.machine
                ),
                many => format!(
                    "rests on each of {} machines: without the launches of any one of {}{why}",
                    many.len(),
                    names(many)
                ),
            };
            format!(
                "the launch-noise screen {whose} it {}; the pools, and the CIs of every config and cell that carry them, would move with it",
                changes.join(" and ")
            )
        })
        .collect()
}

/// The cells of `phase` whose `metric` (a [`METRICS`] name) carries the pool over every cell:
/// pooled cells with data for it and no noise of their own ([`LaunchNoiseSummary::cells`]),
/// sorted, each with whether a tax of that metric (one of `taxes` with a value for it) is read
/// there. What a warning about the pool is about.
pub(crate) fn cells_on_the_pool(
    summary: &LaunchNoiseSummary,
    cells: &[CellStats],
    taxes: &[super::model::Tax],
    phase: Phase,
    metric: &str,
) -> Vec<(String, bool)> {
    let Some(m) = METRICS.iter().find(|(_, n)| *n == metric).map(|(m, _)| *m) else {
        return Vec::new();
    };
    let mut out: Vec<String> = cells
        .iter()
        .filter(|c| c.launch.is_none() && c.key.phase == phase && m.point(c).is_some())
        .filter(|c| {
            summary
                .cells
                .get(&cell_tag(phase, &c.key.cell))
                .and_then(|own| own.get(metric))
                .is_none()
        })
        .map(|c| c.key.cell.clone())
        .collect();
    out.sort();
    out.dedup();
    out.into_iter()
        .map(|cell| {
            let taxed = taxes
                .iter()
                .any(|t| t.phase == phase && t.cell == cell && m.of_tax(t).is_some());
            (cell, taxed)
        })
        .collect()
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
    /// Per metric, scope (`<phase>/<cell>`, or `None` over every cell) and config, the draws of
    /// a config's own variance ([`OwnNoise`]).
    own_draws: BTreeMap<(&'static str, Option<String>, String), Vec<f64>>,
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

    /// [`Self::estimate`] without `exclude`'s own launch-to-launch spread: its launches on each
    /// machine enter as their mean, one row per machine, so the machines it links stay linked
    /// (dropping plain would leave the other configs' machines unconnected and the noise
    /// unestimable) while its launches cannot inflate the noise its A/A is judged against.
    fn estimate_without(
        pooled: &[CellStats],
        per_launch: &[CellStats],
        exclude: Option<&str>,
        resamples: usize,
        seed: u64,
    ) -> (NoiseModel, LaunchNoiseSummary) {
        let kept = |c: &&CellStats| exclude != Some(c.key.config.as_str());
        // The left-out config: its rows are its machines' means. What the screen can still find
        // in them is its lack of fit across machines (its tax changing between machines), often
        // on one degree of freedom. That keeps it out of the pools, as for any config, but is no
        // launch noise of its own (no own draws below): its A/A compares launches on one
        // machine, so it reads the others' noise (a 1-df variance would give t intervals
        // without bound).
        let collapsed = |config: &str| exclude == Some(config);
        let all_launches: Vec<&CellStats> = per_launch.iter().collect();
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
            .filter(|c| c.launch.is_none())
            .filter(|c| !c.saturated())
            .map(|c| &c.key)
            .collect();
        let mut model = NoiseModel {
            draws: BTreeMap::new(),
            cell_draws: BTreeMap::new(),
            own_draws: BTreeMap::new(),
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
            own: Vec::new(),
            screen_flips: Vec::new(),
            phases: BTreeMap::new(),
            method: METHOD.into(),
        };
        for (m, name) in METRICS {
            // Per (config, cell): the per-launch estimates with the machine each ran on.
            // Machine levels shared by every config are not noise (taxes compare launches on
            // the same machine): the noise is what an additive config + machine model leaves
            // ([`additive_residual`]).
            let obs: Vec<ConfigObs> = unsaturated
                .iter()
                .map(|key| {
                    (
                        (key.config.as_str(), key.phase),
                        observations(&all_launches, key, m, collapsed(&key.config)),
                    )
                })
                .collect();
            // Each cell alone first: its df are exactly the launch contrasts in that cell.
            let mut by_cell: BTreeMap<String, Vec<(&str, &Vec<Obs>)>> = BTreeMap::new();
            for (key, (_, v)) in unsaturated.iter().zip(&obs) {
                by_cell
                    .entry(cell_tag(key.phase, &key.cell))
                    .or_default()
                    .push((key.config.as_str(), v));
            }
            // (config, cell) groups the cell's screen gave their own noise: the pool over every
            // cell leaves them out too.
            let mut loud_in_cell: Vec<(String, String)> = Vec::new();
            for (tag, members) in by_cell {
                let of_configs = |keep: &dyn Fn(&str) -> bool| {
                    residual_variance(&rows(
                        members.iter().filter(|(c, _)| keep(c)).map(|(_, v)| *v),
                    ))
                };
                // Whether the cell carries its own noise reads the launch counts (and machines)
                // alone: the design's df do not depend on the values.
                if of_configs(&|_| true).is_none_or(|pv| pv.df < MIN_CELL_DF) {
                    continue;
                }
                let names: Vec<&str> = members.iter().map(|(c, _)| *c).collect();
                let pool_of_configs = |idx: &[usize]| {
                    let chosen: Vec<&str> = idx.iter().map(|&i| names[i]).collect();
                    of_configs(&|c| chosen.contains(&c))
                };
                // In one cell the pool is one additive model's residual (a true sum of squares):
                // each config is tested on its own spread within machines where its launches
                // repeat on one, else on its share of the pool (its lack of fit across machines).
                let own: Vec<Option<PooledVariance>> = members
                    .iter()
                    .map(|(_, v)| residual_variance(&rows([*v])))
                    .collect();
                let flagged = screen(
                    &names,
                    GroupVariance::OwnElseShare(&own),
                    pool_of_configs,
                    name,
                    Some(&tag),
                );
                let loud: Vec<&str> = flagged.iter().map(|(o, _)| o.config.as_str()).collect();
                // The configs the screen leaves keep the cell's pool while it has the contrasts
                // a cell needs; else they carry the pool over every cell.
                if let Some(pv) =
                    of_configs(&|c| !loud.contains(&c)).filter(|pv| pv.df >= MIN_CELL_DF)
                {
                    let draws = variance_draws(&pv, resamples, seed, &format!("{name}|{tag}"));
                    summary
                        .cells
                        .entry(tag.clone())
                        .or_default()
                        .insert(name.to_owned(), pv);
                    model.cell_draws.insert((name, tag.clone()), draws);
                }
                for (o, draws_key) in flagged {
                    let pv = o.variance;
                    if !collapsed(&o.config) {
                        model.own_draws.insert(
                            (name, Some(tag.clone()), o.config.clone()),
                            variance_draws(&pv, resamples, seed, &draws_key),
                        );
                    }
                    loud_in_cell.push((o.config.clone(), tag.clone()));
                    summary.own.push(o);
                }
            }
            // Over every cell: the (config, cell)s no cell's screen took, each config's own
            // share of the pool (its launches' spread and lack of fit), the screen, then the pool of the
            // configs it leaves — the rest in each F-test is that same pool.
            let kept: Vec<(String, &ConfigObs)> = unsaturated
                .iter()
                .zip(&obs)
                .map(|(key, g)| (cell_tag(key.phase, &key.cell), g))
                .filter(|(tag, ((c, _), _))| {
                    !loud_in_cell.iter().any(|(lc, lt)| lc == c && lt == tag)
                })
                .collect();
            let mut configs: Vec<&str> = kept.iter().map(|(_, ((c, _), _))| *c).collect();
            configs.sort();
            configs.dedup();
            // Per phase: the residual of each cell's additive model, summed over the phase's
            // cells, as a variance whose df are the phase's independent launch contrasts. A
            // launch's level is shared by all its cells, so the cells are not independent
            // evidence about it: a phase counts with the contrasts of its config + machine
            // launch design when that is fewer than its cells' df (each phase launches its own
            // servers).
            let phases_of = |keep: &dyn Fn(&str) -> bool| -> BTreeMap<Phase, PooledVariance> {
                let mut by_phase: BTreeMap<Phase, BTreeMap<&str, Vec<&Vec<Obs>>>> = BTreeMap::new();
                let mut launches: BTreeMap<Phase, Vec<(&str, &str, u32)>> = BTreeMap::new();
                for (tag, ((c, p), v)) in kept.iter().filter(|(_, ((c, _), _))| keep(c)) {
                    by_phase
                        .entry(*p)
                        .or_default()
                        .entry(tag.as_str())
                        .or_default()
                        .push(v);
                    for o in v.iter() {
                        launches
                            .entry(*p)
                            .or_default()
                            .push((*c, o.machine.as_str(), o.launch));
                    }
                }
                let mut out = BTreeMap::new();
                for (phase, cells) in by_phase {
                    let (mut ss, mut df) = (0.0, 0u32);
                    let mut configs: Vec<&str> = Vec::new();
                    for groups in cells.values() {
                        let r = rows(groups.iter().copied());
                        let (s, d) = additive_residual(&r);
                        ss += s;
                        df += d;
                        configs.extend(r.iter().map(|o| o.config));
                    }
                    let mut l = launches.remove(&phase).unwrap_or_default();
                    l.sort();
                    l.dedup();
                    let keys: Vec<(&str, &str)> = l.iter().map(|(c, m, _)| (*c, *m)).collect();
                    let w = df.min(launch_contrasts(&keys));
                    configs.sort();
                    configs.dedup();
                    if w > 0 {
                        out.insert(
                            phase,
                            PooledVariance {
                                var: ss / f64::from(df),
                                df: w,
                                groups: configs.len() as u32,
                            },
                        );
                    }
                }
                out
            };
            // The pool over every cell: the phases weighted by their contrasts, so Phase A's
            // rates over the same launches do not outvote another phase's own evidence.
            let of = |keep: &dyn Fn(&str) -> bool| combine_phases(phases_of(keep).values());
            let pool_of_configs = |idx: &[usize]| {
                let chosen: Vec<&str> = idx.iter().map(|&i| configs[i]).collect();
                of(&|x: &str| chosen.contains(&x))
            };
            // Over every cell the pool combines phases with df capped at their launch contrasts,
            // so var · df is no sum of squares and a share of it is not F-distributed: only each
            // config's own variance (its launches alone, within machines) is tested.
            let own_all: Vec<Option<PooledVariance>> =
                configs.iter().map(|c| of(&|x: &str| x == *c)).collect();
            let flagged_all = screen(
                &configs,
                GroupVariance::Own(&own_all),
                pool_of_configs,
                name,
                None,
            );
            for (o, draws_key) in flagged_all.iter().filter(|(o, _)| !collapsed(&o.config)) {
                let pv = o.variance;
                model.own_draws.insert(
                    (name, None, o.config.clone()),
                    variance_draws(&pv, resamples, seed, draws_key),
                );
            }
            let loud_all: Vec<String> = flagged_all.iter().map(|(o, _)| o.config.clone()).collect();
            summary.own.extend(flagged_all.into_iter().map(|(o, _)| o));
            let quiet = |x: &str| !loud_all.iter().any(|l| l == x);
            if let Some(pv) = of(&quiet) {
                summary.metrics.insert(name.to_owned(), pv);
                model
                    .draws
                    .insert(name, variance_draws(&pv, resamples, seed, name));
            }
            let phases = phases_of(&quiet);
            if phases.len() > 1 {
                summary.phases.insert(name.to_owned(), phases);
            }
        }
        (model, summary)
    }

    /// Whether the launch noise of `m` is known.
    pub(crate) fn known(&self, m: Metric) -> bool {
        self.draws.contains_key(name(m))
    }

    /// Replicates of a statistic of `config` in (`phase`, `cell`) with estimate `est` pooled
    /// over `k` launches, given its request-level replicates (`key` seeds its own normal
    /// draws), with the variance found in [`in_lookup_order`]. `None` when the
    /// launch noise of `m` is unknown (use the request-level replicates, and say so).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn widen(
        &self,
        m: Metric,
        (phase, cell): (Phase, &str),
        config: &str,
        est: f64,
        k: u32,
        request: &[f64],
        key: &str,
    ) -> Option<Vec<f64>> {
        let n = name(m);
        let tag = cell_tag(phase, cell);
        let draws = in_lookup_order(
            self.own_draws
                .get(&(n, Some(tag.clone()), config.to_owned())),
            self.cell_draws.get(&(n, tag)),
            || self.own_draws.get(&(n, None, config.to_owned())),
            || self.draws.get(n),
        )?;
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

/// One launch's estimate of a metric in one (config, cell), with the machine it ran on.
#[derive(Debug, Clone)]
struct Obs {
    config: String,
    machine: String,
    launch: u32,
    value: f64,
}

/// Phases' variances weighted by their df (the df-weighted mean of the variances, df summed);
/// `None` without any.
fn combine_phases<'p>(phases: impl Iterator<Item = &'p PooledVariance>) -> Option<PooledVariance> {
    let (mut weighted, mut df, mut groups) = (0.0, 0u32, 0u32);
    for pv in phases {
        weighted += f64::from(pv.df) * pv.var;
        df += pv.df;
        groups = groups.max(pv.groups);
    }
    (df > 0).then(|| PooledVariance {
        var: weighted / f64::from(df),
        df,
        groups,
    })
}

/// One (config, phase)'s estimates in one cell.
type ConfigObs<'a> = ((&'a str, Phase), Vec<Obs>);

/// The per-launch estimates of `m` in `key`'s cell.
/// With `collapse`, the launches on each machine enter as one observation, their geometric mean
/// (the lowest launch index names it): the config's machine levels without its own spread.
fn observations(per_launch: &[&CellStats], key: &CellKey, m: Metric, collapse: bool) -> Vec<Obs> {
    let obs: Vec<Obs> = per_launch
        .iter()
        .filter(|c| &c.key == key)
        .filter_map(|c| {
            Some(Obs {
                config: c.key.config.clone(),
                machine: c.machine.clone().unwrap_or_else(|| UNRECORDED.to_owned()),
                launch: c.launch?,
                value: m.point(c).filter(|v| v.is_finite() && *v > 0.0)?,
            })
        })
        .collect();
    if !collapse {
        return obs;
    }
    let mut by: BTreeMap<String, Vec<Obs>> = BTreeMap::new();
    for o in obs {
        by.entry(o.machine.clone()).or_default().push(o);
    }
    by.into_values()
        .map(|v| {
            let mean_log = v.iter().map(|o| o.value.ln()).sum::<f64>() / v.len() as f64;
            Obs {
                launch: v.iter().map(|o| o.launch).min().unwrap_or(0),
                value: mean_log.exp(),
                ..v[0].clone()
            }
        })
        .collect()
}

/// The rows of several (config, cell)s' estimates for [`additive_residual`].
fn rows<'o>(groups: impl IntoIterator<Item = &'o Vec<Obs>>) -> Vec<LaunchObs<'o>> {
    groups
        .into_iter()
        .flat_map(|g| g.iter())
        .map(|o| LaunchObs {
            config: o.config.as_str(),
            machine: o.machine.as_str(),
            value: o.value,
        })
        .collect()
}

/// The configs of `names` (the configs in one scope) the screen gives their own noise — their
/// variance as `groups` defines it (their own, or their share of one cell's pool) — with the key
/// that seeds their draws; `pool_of(indices)` is the pool of those configs as the summary
/// reports it.
fn screen(
    names: &[&str],
    groups: GroupVariance,
    pool_of: impl Fn(&[usize]) -> Option<PooledVariance>,
    metric: &str,
    cell: Option<&str>,
) -> Vec<(OwnNoise, String)> {
    noisier_groups(names.len(), groups, pool_of, OWN_NOISE_ALPHA)
        .into_iter()
        .map(|g| {
            let config = names[g.index];
            let key = format!("{metric}|own|{}|{config}", cell.unwrap_or("*"));
            let o = OwnNoise {
                config: config.to_owned(),
                metric: metric.to_owned(),
                cell: cell.map(str::to_owned),
                variance: g.variance,
                f: g.f,
                rest_df: g.df.1,
                p_adjusted: g.p_adjusted,
            };
            (o, key)
        })
        .collect()
}

/// Per config, the noise model estimated without the config's own launch-to-launch spread (its
/// launches on each machine enter as their mean, [`NoiseModel::estimate_without`]) for the
/// config's A/A tax; absent where the others give no TTFT launch noise.
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

pub(crate) const METHOD: &str = "launch-level random effect: per metric, the variance an additive \
     config + machine model leaves in the log per-launch estimates (least squares over the configs' \
     unsaturated cells: launches of one config on one machine, plus a config whose difference from \
     another changes between machines; machine levels shared by every config are not noise), df = \
     launches - rank, estimated per cell where that gives >= 4 df, else pooled over every cell with df \
     capped at the independent launch contrasts; a config whose variance exceeds the others' pool \
     (one-sided F-test, Holm-adjusted, 1%; its own launches' spread within machines, or where \
     they never repeat on a machine, in a cell, its share of the residual: what its launches add \
     to it over the df they add, its lack of fit across machines) carries that variance and df \
     there and is left out of the pool; a launch's estimate gets replicates est * exp(sqrt(max(s2_b, v_req)) * z), s2_b = s2 \
     * df / chi2_df drawn once per replicate and shared by every statistic of the metric in the cell \
     (t-calibrated taxes), v_req the launch's request-level bootstrap variance (a floor); with no cell \
     at >= 2 launches no tax is called detected";

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(var: f64, df: u32) -> PooledVariance {
        PooledVariance { var, df, groups: 2 }
    }

    /// Machines a and c undo the same call (nixl_both's TPOT at 2 req/s), b another: two lines,
    /// the first naming a and c in the order the flips came, the second b alone in the
    /// one-machine wording; a flip that both removes and adds a call keeps both halves.
    #[test]
    fn machines_that_flip_the_screen_alike_share_one_warning() {
        let flip = |m: &str, with: &[&str], without: &[&str]| ScreenFlip {
            machine: m.to_owned(),
            only_with: with.iter().map(|s| s.to_string()).collect(),
            only_without: without.iter().map(|s| s.to_string()).collect(),
            through_pool_only: false,
        };
        let nixl = "nixl_both TPOT p90 in A/r2_i4096_o256";
        let w = screen_flip_warnings(&[
            flip("boot a", &[nixl], &[]),
            flip("boot b", &[nixl], &["plain step p50 in A/r2_i4096_o256"]),
            flip("boot c", &[nixl], &[]),
        ]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with(&format!(
                "the launch-noise screen rests on each of 2 machines: without the launches of any one of boot a, boot c it would no longer set apart {nixl};"
            )),
            "{w:?}"
        );
        assert!(
            w[1].starts_with(&format!(
                "the launch-noise screen rests on one machine: without the launches of boot b it would no longer set apart {nixl} and would set apart plain step p50 in A/r2_i4096_o256;"
            )),
            "{w:?}"
        );
        assert!(screen_flip_warnings(&[]).is_empty());
    }

    /// Machines that hold no launch of the config a flip names (the H100 root's plain-only
    /// machines, which carry the pool's df) are said to be such: all of one group, part of
    /// it (named, with the verb in number), or a lone machine; a machine holding the config's
    /// launches adds nothing to the line.
    #[test]
    fn machines_that_move_the_screen_only_through_the_pool_are_said_to() {
        let flip = |m: &str, pool: bool| ScreenFlip {
            machine: m.to_owned(),
            only_with: vec!["lmcache_only step p50 in A/r2_i4096_o256".to_owned()],
            only_without: Vec::new(),
            through_pool_only: pool,
        };
        let why = "through the pool's degrees of freedom";
        let w = screen_flip_warnings(&[
            flip("boot a", false),
            flip("boot d", true),
            flip("boot e", true),
        ]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("any one of boot a, boot d, boot e (2 of them, boot d, boot e, hold no launch of lmcache_only: they move the screen through"),
            "{w:?}"
        );
        let w = screen_flip_warnings(&[flip("boot a", false), flip("boot d", true)]);
        assert!(
            w[0].contains("boot a, boot d (1 of them, boot d, holds no launch of lmcache_only: it moves the screen"),
            "{w:?}"
        );
        let w = screen_flip_warnings(&[flip("boot d", true), flip("boot e", true)]);
        assert!(
            w[0].contains("boot d, boot e (none of them holds a launch of lmcache_only: they move"),
            "{w:?}"
        );
        let w = screen_flip_warnings(&[flip("boot d", true)]);
        assert!(
            w[0].contains(
                "without the launches of boot d (it holds no launch of lmcache_only: it moves"
            ),
            "{w:?}"
        );
        let w = screen_flip_warnings(&[flip("boot a", false)]);
        assert!(!w[0].contains(why), "{w:?}");
    }

    /// plain and mooncake_both, two launches each on one machine, Phase A at 1, 2 and 4 req/s
    /// (nothing saturates, so ref_safe = ref_load = 4, the highest rate) and Phase B at two
    /// shapes: 2 contrasts per cell, so no cell has noise of its own and every cell of a phase
    /// carries the pool, Phase A's three and Phase B's two, each listed once (the per-launch
    /// rows are not cells); taxes are read at the reference rate and at every Phase B shape,
    /// not at 1 or 2 req/s. A cell given noise of its own drops out of the list; a metric the
    /// report does not know lists nothing.
    #[test]
    fn the_cells_on_the_pool_are_those_without_noise_of_their_own() {
        use crate::synth::{SynthConfig, SynthSpec};
        let spec = SynthSpec {
            configs: vec![
                SynthConfig::new("plain", 1.0, 1.0),
                SynthConfig::new("mooncake_both", 1.2, 1.0),
            ],
            launches: 2,
            phase_a_rates: vec![1.0, 2.0, 4.0],
            phase_b_shapes: vec![(512, 64), (4096, 256)],
            phase_b_rate: 2.0,
            requests_per_cell: 120,
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        crate::synth::generate(&spec, dir.path()).unwrap();
        let ds = crate::ingest::load(dir.path()).unwrap();
        let opts = crate::analysis::AnalyzeOptions {
            skip_itl: true,
            ..Default::default()
        };
        let r = crate::analysis::analyze(&ds, &opts).unwrap().result;
        let mut noise = r.summary.launch_noise.clone();
        assert!(noise.cells.is_empty(), "{:?}", noise.cells);
        let rr = &r.summary.reference_rates;
        assert_eq!((rr.ref_safe, rr.ref_load), (Some(4.0), Some(4.0)));
        let (cells, taxes) = (&r.summary.cells, &r.summary.taxes);
        let on = |noise: &LaunchNoiseSummary, phase, metric| {
            cells_on_the_pool(noise, cells, taxes, phase, metric)
        };
        let owned = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
            v.iter().map(|(c, t)| (c.to_string(), *t)).collect()
        };
        assert_eq!(
            on(&noise, Phase::A, "ttft_p90"),
            owned(&[
                ("r1_i4096_o256", false),
                ("r2_i4096_o256", false),
                ("r4_i4096_o256", true)
            ])
        );
        assert_eq!(
            on(&noise, Phase::B, "tpot_p90"),
            owned(&[("r2_i4096_o256", true), ("r2_i512_o64", true)])
        );
        noise.cells.insert(
            cell_tag(Phase::A, "r2_i4096_o256"),
            [("ttft_p90".to_owned(), pv(0.01, 4))].into_iter().collect(),
        );
        assert_eq!(
            on(&noise, Phase::A, "ttft_p90"),
            owned(&[("r1_i4096_o256", false), ("r4_i4096_o256", true)])
        );
        // Its other metrics still carry the pool there.
        assert_eq!(on(&noise, Phase::A, "tpot_p90").len(), 3);
        assert!(on(&noise, Phase::A, "e2e_p90").is_empty());
    }

    /// By hand: phases A (0.0016, df 5) and B (0.0118, df 1): pool (5·0.0016 + 0.0118)/6 =
    /// 0.003300 on df 6; B against A alone is F = 7.375 on (1, 5), upper tail 0.0420 (scipy
    /// f.sf(7.375, 1, 5)); A is not noisier than B. With B at A's level nothing is flagged.
    #[test]
    fn phases_pool_by_their_df_and_a_noisier_phase_is_named() {
        let pool = combine_phases([pv(0.0016, 5), pv(0.0118, 1)].iter()).unwrap();
        assert_eq!(pool.df, 6);
        assert!((pool.var - (5.0 * 0.0016 + 0.0118) / 6.0).abs() < 1e-15);
        let mut s = LaunchNoiseSummary::default();
        s.phases.insert(
            "ttft_p90".into(),
            [(Phase::A, pv(0.0016, 5)), (Phase::B, pv(0.0118, 1))]
                .into_iter()
                .collect(),
        );
        let hits = s.noisier_phases();
        assert_eq!(hits.len(), 1, "{hits:?}");
        let h = &hits[0];
        assert_eq!(
            (h.metric.as_str(), h.phase, h.rest.df),
            ("ttft_p90", Phase::B, 5)
        );
        assert!((h.f - 7.375).abs() < 1e-12, "{}", h.f);
        assert!((h.p - 0.0420).abs() < 5e-4, "{}", h.p);
        s.phases
            .get_mut("ttft_p90")
            .unwrap()
            .insert(Phase::B, pv(0.0016, 1));
        assert!(s.noisier_phases().is_empty());
        assert!(combine_phases(std::iter::empty()).is_none());
    }
}
