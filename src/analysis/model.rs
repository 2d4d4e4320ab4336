//! The analysis output: everything `analysis/summary.json` holds, and what the verdicts and the
//! report read. Serde types only; no computation here. (`verdicts.json` is
//! [`crate::verdicts::Verdicts`].)

use std::collections::BTreeMap;

use ctax_schema::{ManifestRow, Phase, PreflightStatus, ReferenceRates};
use serde::{Deserialize, Serialize};

use crate::stats::BootstrapConfig;

/// A point estimate with its bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub est: f64,
    /// Lower / upper end of the CI; `None` when the bootstrap could not give one (one sample,
    /// or a ratio over zero).
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Estimate {
    /// `+12.3% [+8.1%, +16.0%]` (a fraction as percent with its CI), for warnings.
    pub(crate) fn pct_ci(&self) -> String {
        let p = |x: f64| format!("{}%", super::words::signed(x * 100.0, 1));
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) => format!("{} [{}, {}]", p(self.est), p(lo), p(hi)),
            _ => p(self.est),
        }
    }

    /// True when the CI lies entirely above `t`.
    pub(crate) fn above(&self, t: f64) -> bool {
        self.lo.is_some_and(|lo| lo > t)
    }
    /// True when the CI lies entirely below `t`.
    pub(crate) fn below(&self, t: f64) -> bool {
        self.hi.is_some_and(|hi| hi < t)
    }
    /// True when the estimate lies inside its CI (ends included), or there is no CI.
    pub fn ci_contains_estimate(&self) -> bool {
        self.lo.is_none_or(|lo| lo <= self.est) && self.hi.is_none_or(|hi| self.est <= hi)
    }
}

/// p50/p90/p99 (each with CI), mean and sample size of one latency metric in one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Quantiles {
    pub n: u64,
    pub mean: Option<f64>,
    pub p50: Option<Estimate>,
    pub p90: Option<Estimate>,
    pub p99: Option<Estimate>,
}

/// Identity of a cell of the sweep.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellKey {
    pub config: String,
    pub phase: Phase,
    /// `r<rate>_i<in>_o<out>`.
    pub cell: String,
}

/// Request counts of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Counts {
    /// Records kept by ingest (every record of the file(s) but the rejected ones).
    pub scheduled: u64,
    /// Flagged warm-up (excluded from every statistic).
    pub warmup: u64,
    /// Non-warm-up requests that ended ok (the statistics' n).
    pub measured_ok: u64,
    pub dropped: u64,
    /// http_error + connect_error + timeout + stream_error.
    pub errors: u64,
    pub cancelled: u64,
    /// Records read but not used: rejected by a rule, duplicates, identity mismatches (see
    /// the accounting).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rejected: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Engine-step statistics of a cell (from the step-timing plugin), µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StepStats {
    pub n_steps: u64,
    pub step_duration_us: Quantiles,
    pub schedule_us: Quantiles,
    pub build_meta_us: Quantiles,
    pub get_finished_us: Quantiles,
    pub start_load_kv_us: Quantiles,
    /// Sum of the three callbacks per step (steps where at least one was observed).
    pub connector_total_us: Quantiles,
}

/// One saturation criterion evaluated at one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// `None` when it could not be evaluated (say why in `note`).
    pub value: Option<f64>,
    pub threshold: f64,
    pub fired: bool,
    pub note: Option<String>,
}

/// The seed's three data-driven saturation criteria at one Phase A rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// 1: effective_throughput / offered < 0.95.
    pub throughput: Criterion,
    /// 2: num_requests_waiting p50 (over the measurement window's scrapes) > 1.
    pub queue: Criterion,
    /// 3: TTFT p90(r) / TTFT p90(r/2) > 1.5 (`note` names the lower rate used).
    pub ttft_growth: Criterion,
    /// At least one criterion fired at this rate.
    pub any: bool,
    /// This rate is at or above the config's saturation rate (the lowest rate that fired).
    pub saturated: bool,
}

/// All statistics of one cell. `launch = None` pools the config's launches (hierarchical
/// CIs): every one whose raw data in the cell is whole, or all of them when none is
/// (`not_whole` names the ones left out); `Some(k)` is one launch alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellStats {
    pub key: CellKey,
    pub launch: Option<u32>,
    /// Launch indices whose data is in this cell (in a pooled row, the launches it pools).
    pub launches: Vec<u32>,
    pub rate: f64,
    pub input_len: u32,
    pub output_len: u32,
    pub counts: Counts,
    /// Every launch this row reads reached its duration and min-completed targets, and its raw
    /// data is whole (see `data_incomplete`; a pooled row's left-out launches: `not_whole`).
    pub complete: bool,
    pub incomplete_reasons: Vec<String>,
    /// Why the raw data of a launch of this cell is not whole (an empty or cut-short file, no
    /// collector summary, records missing or rejected), prefixed with the run directory. Such
    /// a cell's saturation criteria are not evaluated, and it never defines a reference rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_incomplete: Vec<String>,
    /// A pooled row's launches left out because their raw data in the cell is not whole (a
    /// collector killed during it, a file cut short, records missing) while others' is
    /// (`lN (reason)`): the row pools the whole ones only (DESIGN.md §4.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_whole: Vec<String>,
    pub ttft_ms: Quantiles,
    pub tpot_ms: Quantiles,
    pub e2e_ms: Quantiles,
    pub itl_ms: Quantiles,
    /// Offered rate (req/s).
    pub offered_rps: f64,
    /// Completions (any request, warm-up included) inside the measurement window shifted by the
    /// median E2E latency, ÷ the window length (see Conventions).
    pub effective_rps: Option<f64>,
    /// Sends ÷ send-window length (did the client send at the offered rate?).
    pub achieved_send_rps: Option<f64>,
    /// Requests whose intended send time lies in the measurement window (any outcome): what
    /// was actually offered. Saturation criterion 1 divides the window's completions by it, so
    /// a Poisson draw with fewer arrivals than `rate × window` is not mistaken for a shortfall.
    #[serde(default)]
    pub scheduled_in_window: Option<u64>,
    /// Completions inside the (shifted) measurement window.
    #[serde(default)]
    pub completions_in_window: Option<u64>,
    /// Of the requests scheduled in the window, those that ended ok.
    #[serde(default)]
    pub ok_of_scheduled: Option<u64>,
    /// Completion pace of the window's own requests (scheduled-weighted over launches):
    /// `1 / slope` of their completion times on their intended send times.
    #[serde(default)]
    pub completion_pace: Option<f64>,
    /// p50 over the window's scrapes of `vllm:num_requests_waiting` / `_running` (all engines).
    pub waiting_p50: Option<f64>,
    pub running_p50: Option<f64>,
    /// Client health (worst launch).
    pub lateness_us_p99: Option<f64>,
    pub lateness_us_max: Option<f64>,
    pub client_cpu_pct: Option<f64>,
    pub step: Option<StepStats>,
    /// Phase A only (pooled cells).
    pub saturation: Option<Saturation>,
    /// Where each launch of this cell ran (`ctax run --gpus`); empty before slots existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<LaunchGpu>,
    /// The machine of a per-launch row ([`crate::ingest::machine::machine_key`]); `None` in a
    /// row pooled over launches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// When a per-launch row's cell started (the collector's `wall_start_unix_ms`); `None` in a
    /// row pooled over launches or where the collector recorded no start. The launch order on
    /// each machine ([`super::launch_order`]) reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<u64>,
    /// When that cell ended (its start plus the collector's `t_end_ns − t_start_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix_ms: Option<u64>,
}

impl Saturation {
    /// The criteria that fired, as the report's codes: T throughput, Q queue, G TTFT growth.
    pub fn codes(&self) -> String {
        [
            (self.throughput.fired, 'T'),
            (self.queue.fired, 'Q'),
            (self.ttft_growth.fired, 'G'),
        ]
        .into_iter()
        .filter_map(|(fired, code)| fired.then_some(code))
        .collect()
    }
}

impl CellStats {
    /// Its raw data is whole (`data_incomplete` is empty): only such a row is compared with
    /// another; a pooled row is not whole only when none of its launches is (DESIGN.md §4.1).
    pub(crate) fn whole(&self) -> bool {
        self.data_incomplete.is_empty()
    }

    /// At or above its config's saturation rate (false while not yet evaluated).
    pub(crate) fn saturated(&self) -> bool {
        self.saturation.as_ref().is_some_and(|s| s.saturated)
    }
}

/// Whether the pooled cell of `key` in `cells` is saturated; `None` when there is none.
pub(crate) fn pooled_saturated(cells: &[CellStats], key: &CellKey) -> Option<bool> {
    cells
        .iter()
        .find(|c| c.launch.is_none() && &c.key == key)
        .map(CellStats::saturated)
}

/// The GPU slot one launch of a cell ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchGpu {
    pub launch: u32,
    pub slot: u32,
    /// `CUDA_VISIBLE_DEVICES` given to the server.
    pub device: Option<String>,
    /// As `nvidia-smi --query-gpu=index,uuid` reports them (null without nvidia-smi).
    pub gpu_index: Option<u32>,
    pub gpu_uuid: Option<String>,
}

/// `GPU 1 (3f2a9c1e)` (nvidia-smi index and the UUID's first 8 hex digits), `GPU 1`, or
/// `slot 1, device 1` where nvidia-smi was absent.
impl std::fmt::Display for LaunchGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.gpu_index, &self.gpu_uuid) {
            (Some(i), Some(u)) => {
                let short: String = u
                    .trim_start_matches("GPU-")
                    .chars()
                    .filter(|c| c.is_ascii_hexdigit())
                    .take(8)
                    .collect();
                write!(f, "GPU {i} ({short})")
            }
            (Some(i), None) => write!(f, "GPU {i}"),
            _ => match &self.device {
                Some(d) => write!(f, "slot {}, device {d}", self.slot),
                None => write!(f, "slot {}", self.slot),
            },
        }
    }
}

/// Plain against plain on two GPUs of one host in one Phase A cell, from the calibration round
/// (plain on every GPU at once): `p90(other)/p90(reference) − 1` with 95% CIs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRow {
    pub phase: Phase,
    pub cell: String,
    pub rate: f64,
    pub input_len: u32,
    pub output_len: u32,
    pub host: Option<String>,
    /// The host's lowest GPU slot, and the GPU compared with it (their launches).
    pub reference: Vec<LaunchGpu>,
    pub other: Vec<LaunchGpu>,
    /// Measured requests on each side.
    pub n_reference: u64,
    pub n_other: u64,
    pub ttft_p90: TaxValue,
    pub tpot_p90: TaxValue,
    /// Either CI excludes 0 (a warning says so).
    pub detectable: bool,
    /// plain is saturated at this rate (the queue, not the GPU, sets the difference): shown,
    /// never warned about.
    #[serde(default)]
    pub saturated: bool,
}

/// Whether a tax's CI excludes zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detection {
    /// CI entirely above 0.
    Tax,
    /// CI entirely below 0 (the config is faster than plain).
    Negative,
    /// CI straddles 0: no tax detectable at this sample size.
    Inconclusive,
    /// No CI, or a CI that does not contain its own estimate (too few resamples).
    Unknown,
    /// A CI from the requests alone: no (config, cell) had two launches, so the
    /// launch-to-launch variance — the size of the taxes on real GPUs — is unknown and no tax is
    /// called detected, whatever the request-level CI says.
    NoLaunchNoise,
}

/// One tax figure: estimate, CI, unit, and whether the CI excludes zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaxValue {
    pub value: Estimate,
    /// "fraction" (0.20 = +20%) or "us".
    pub unit: String,
    pub detection: Detection,
}

/// Where a tax was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaxContext {
    /// Phase A cell at `ref_safe`.
    RefSafe,
    /// Phase A cell at `ref_load`.
    RefLoad,
    /// Phase B shape cell (at `ref_safe`).
    ShapeB,
    /// Phase B' shape cell (at `ref_load`).
    ShapeBp,
}

/// The seed's taxes for one non-plain config in one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tax {
    pub config: String,
    pub context: TaxContext,
    pub phase: Phase,
    pub cell: String,
    pub rate: f64,
    pub input_len: u32,
    pub output_len: u32,
    /// TTFT_p90(X) / TTFT_p90(plain) − 1.
    pub ttft_p90: Option<TaxValue>,
    /// TPOT_p90(X) / TPOT_p90(plain) − 1.
    pub tpot_p90: Option<TaxValue>,
    /// step_duration p50(X) − p50(plain), µs.
    pub step_p50_us: Option<TaxValue>,
    /// connector_total p50(X), µs (plain has no callbacks).
    pub callback_p50_us: Option<TaxValue>,
    /// step tax − callback tax, µs: step time not explained by the instrumented callbacks.
    pub step_minus_callback_us: Option<TaxValue>,
    /// The machines on which both this config and plain ran a launch of this cell: the taxes
    /// compare the two there and only there (DESIGN.md §4.3 "Machines"). Empty when they share
    /// none: then every tax against plain is absent (`callback_p50_us`, this config's alone,
    /// stays).
    #[serde(default)]
    pub machines: Vec<String>,
    /// This config's launches of the cell on machines where plain ran none: left out of the
    /// taxes against plain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpaired_launches: Vec<u32>,
    /// The launches of this config and of plain that the TTFT tax compared (on `machines`).
    #[serde(default)]
    pub paired_launches: Vec<u32>,
    #[serde(default)]
    pub plain_launches: Vec<u32>,
    /// Launches of this config and of plain whose raw data in the cell is not whole (the
    /// collector killed during it, a file cut short, records missing;
    /// `CellStats::data_incomplete`), as `config lN`: shown in the per-launch table, left out of
    /// this tax.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_whole: Vec<String>,
    /// The detected TTFT p90, TPOT p90 and step p50 (at ref_safe and the shapes) taxes whose
    /// detection one machine decides ([`OneMachine`]; DESIGN.md §4.3 "Machines", leave one
    /// machine out). A diagnostic beside the tax: no verdict reads it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_machine: Vec<OneMachine>,
}

/// A machine that decides whether a tax is detected ([`Tax::one_machine`]): the only machine
/// the config shared with plain (in a dataset with launches on other machines), or one without
/// whose launches (of both) the tax is no longer detected as it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneMachine {
    /// "TTFT p90", "TPOT p90" or "step p50".
    pub metric: String,
    /// The machine (as the Machines table names it).
    pub machine: String,
    /// The tax on the other machines shared with plain, the launch noise not re-estimated;
    /// `None` when this machine is the only one.
    pub without: Option<TaxValue>,
    /// How many machines the config shared with plain in this comparison.
    #[serde(default)]
    pub shared: u32,
    /// Several machines each undo the detection when left out: the tax sits near the edge of
    /// detection (fewer launches give a wider CI) rather than on one machine.
    #[serde(default)]
    pub borderline: bool,
}

/// An A/A tax of one config in one cell: its launches at even positions (A) against those at
/// odd positions (B) on the same machine, combined over the machines with ≥ 2 of its launches
/// as a tax is, with the same launch-noise CIs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AaTax {
    pub config: String,
    pub context: TaxContext,
    pub phase: Phase,
    pub cell: String,
    pub launches_a: Vec<u32>,
    pub launches_b: Vec<u32>,
    /// The machines whose launches were split (each with ≥ 2 launches of this config).
    #[serde(default)]
    pub machines: Vec<String>,
    pub ttft_p90: Option<TaxValue>,
    pub tpot_p90: Option<TaxValue>,
    /// Either CI excludes 0: the dataset is unstable (a loud warning; verdicts are marked).
    pub unstable: bool,
    /// Whether, on every machine it split, one half's launches ran the cell before the other
    /// half's ([`crate::analysis::launch_order::aa_halves`]): such an A/A is also an
    /// earlier-against-later comparison, so it measures the machines' drift over their
    /// stretches as well as launch noise. `Mixed`: interleaved, overlapping, or in different
    /// orders on different machines. `None`: no machine with launches of both halves has
    /// recorded cell times (nothing is known about their order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_time: Option<AaHalvesInTime>,
    /// Only for an unstable A/A, and only where leaving a launch out still leaves an A/A (a
    /// machine with two launches of the config): which single launch, left out, lets the rest's
    /// A/A straddle 0. It names; it never lifts the mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_one: Option<AaLeaveOneOut>,
}

/// The A/A of an unstable config's launches without each one of them ([`AaTax::without_one`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AaLeaveOneOut {
    /// The launches whose absence still leaves an A/A of the rest (split again by launch order
    /// on each machine), sorted.
    pub tried: Vec<u32>,
    /// Those whose absence leaves an A/A straddling 0 in both metrics, with that A/A; empty:
    /// no single launch explains the disagreement.
    pub straddling: Vec<AaWithout>,
}

/// The A/A of a config's launches without one of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AaWithout {
    pub launch: u32,
    /// The halves of the rest's A/A (leaving out one of a machine's two launches leaves that
    /// machine out of it: two launches can leave the same rest).
    pub launches_a: Vec<u32>,
    pub launches_b: Vec<u32>,
    pub ttft_p90: Option<TaxValue>,
    pub tpot_p90: Option<TaxValue>,
}

/// Which half of an A/A ran its cell first on every machine it split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AaHalvesInTime {
    /// Every A launch ran the cell before every B launch on each machine.
    AFirst,
    /// Every B launch ran the cell before every A launch on each machine.
    BFirst,
    /// Neither: some machine interleaves or overlaps the halves, or the machines disagree.
    Mixed,
}

/// Conventions the numbers follow; printed next to them in every report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conventions {
    pub percentile_estimator: String,
    pub bootstrap: BootstrapConfig,
    pub ci_method: String,
    pub ttft: String,
    pub tpot: String,
    pub itl: String,
    pub e2e: String,
    pub warmup: String,
    pub token_source: String,
    pub effective_throughput: String,
    pub saturation: String,
}

/// What the dataset is and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    pub root: String,
    /// True if any run was served by `ctax-sim`: every output says so.
    pub simulated: bool,
    /// Configs with any data, in canonical order.
    pub configs: Vec<String>,
    /// Configs of the canonical eight with no data, with the reason (pre-flight SKIP or missing).
    pub skipped: BTreeMap<String, String>,
    pub step_timing_available: bool,
    pub preflight: Option<PreflightStatus>,
    pub manifest: Vec<ManifestRow>,
    /// Run directory → facts from env.txt (vLLM version, GPU, driver …).
    pub environments: BTreeMap<String, BTreeMap<String, String>>,
    /// profile.toml as copied into the results root.
    pub profile: Option<String>,
    /// `config.json` `extra` per run directory (engine settings, model).
    pub run_configs: BTreeMap<String, serde_json::Value>,
    /// What each launch's vLLM log says the connector changed in the engine (KV layout, hybrid
    /// KV-cache manager, missing compiled extensions, JIT while serving, warnings), per run
    /// directory; absent for runs without logs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engine: BTreeMap<String, crate::ingest::engine_log::EngineFacts>,
    /// The GPU model(s) the launches ran on, most launches first; empty where env.txt names no
    /// GPU (CPU and simulated runs). More than one: the analysis warns (DESIGN.md §4.3 "GPU
    /// model").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<crate::ingest::gpu_model::GpuUse>,
}

/// Whether `config` has at least one complete pooled Phase A cell (else it has nothing to
/// compare: its server died in the first cell, say).
pub fn has_complete_phase_a(cells: &[CellStats], config: &str) -> bool {
    cells.iter().any(|c| {
        c.launch.is_none() && c.key.phase == Phase::A && c.key.config == config && c.complete
    })
}

impl DatasetInfo {
    /// (run dir, engine facts) of each launch of `config` that has a server log.
    pub(crate) fn engine_of<'a>(
        &'a self,
        config: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a crate::ingest::engine_log::EngineFacts)> {
        self.engine.iter().filter(move |(dir, _)| {
            self.run_configs
                .get(*dir)
                .and_then(|v| v.get("config"))
                .and_then(|c| c.as_str())
                == Some(config)
        })
    }

    /// `run dir: exception` for each launch of `config` whose engine died (from its log).
    pub fn engine_deaths(&self, config: &str) -> Vec<String> {
        self.engine_of(config)
            .filter_map(|(dir, f)| f.fatal_error.as_ref().map(|e| format!("{dir}: {e}")))
            .collect()
    }
}

/// `analysis/summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalysisSummary {
    pub schema_version: u32,
    pub tool_version: String,
    pub conventions: Conventions,
    pub dataset: DatasetInfo,
    /// Pooled over launches, sorted by (config, phase, rate, input, output).
    pub cells: Vec<CellStats>,
    /// One entry per (config, launch, phase, cell).
    pub per_launch: Vec<CellStats>,
    /// Each launch's own saturation rate (its `per_launch` rows carry its own criteria).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_saturation: Vec<super::saturation::LaunchSaturation>,
    pub reference_rates: ReferenceRates,
    pub taxes: Vec<Tax>,
    /// GPU-to-GPU calibration (plain vs plain between GPUs); empty without a calibration round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<CalibrationRow>,
    /// Launches per config and the pooled launch-to-launch variance every tax CI carries.
    #[serde(default)]
    pub launch_noise: super::launch_noise::LaunchNoiseSummary,
    /// The machines the launches ran on and the machine-effect tests (taxes compare launches
    /// on the same machine).
    #[serde(default)]
    pub machines: super::machines::MachinesSummary,
    /// Taxes of a cell both Phase A and Phase B measured, side by side (a replication check).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_cell: Vec<super::same_cell::SameCell>,
    /// The cells whose launches ran them at different places in the launch: their taxes pool
    /// the places.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mixed_places: Vec<super::launch_places::MixedPlaces>,
    /// Launches whose TTFT p90 in a cell below saturation is set by a transient slow stretch
    /// of their measured window, with the p90 without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episodes: Vec<super::episodes::LaunchEpisodes>,
    /// A/A taxes: a config's launches on one machine split in two (even vs odd positions) in
    /// each tax cell; the noise floor next to the taxes. Each must straddle 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aa_taxes: Vec<AaTax>,
    /// What ingest did with every record, and the run directories it did not load.
    #[serde(default)]
    pub accounting: DataAccounting,
    /// Non-fatal problems (truncated lines, missing files, incomplete cells …).
    pub warnings: Vec<String>,
}

/// Every record accounted for: one row per (run, cell) with a requests file, and every entry
/// of the results root that looks like a run but was not loaded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataAccounting {
    pub cells: Vec<crate::ingest::AccountRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_loaded: Vec<crate::ingest::NotLoaded>,
}

/// What the analysis hands on as data (to the verdicts, the report and the JSON outputs):
/// `summary.json` plus the raw samples a figure needs that summary.json does not keep.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisResult {
    pub summary: AnalysisSummary,
    /// Figure 6: per config, the step durations (µs) of the Phase A cell at ref_safe, sorted.
    pub step_ecdf: BTreeMap<String, Vec<f64>>,
}

/// The eight configs of the seed, in the order every table and legend uses.
pub(crate) const CANONICAL_CONFIGS: [&str; 8] = [
    "plain",
    "noop_connector",
    "mooncake_producer",
    "mooncake_consumer",
    "mooncake_both",
    "nixl_both",
    "lmcache_only",
    "multi_mooncake_lmcache",
];

/// Sort position of a config name: canonical order first, then others alphabetically.
pub(crate) fn config_order(name: &str) -> (usize, String) {
    let i = CANONICAL_CONFIGS
        .iter()
        .position(|c| *c == name)
        .unwrap_or(CANONICAL_CONFIGS.len());
    (i, name.to_owned())
}
