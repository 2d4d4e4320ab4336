//! Calibration of the tax CIs by simulation (`ctax calibrate-noise`; DESIGN.md §4.3): synthetic
//! archives ([`crate::synth`]) with a known TTFT tax, a per-launch random effect (lognormal sd
//! `launch_sd` on every latency of a launch), AR(1)-correlated request latencies inside each
//! cell, and 1–5 launches per config, analysed by the real pipeline. For each setting it counts
//! how often the TTFT p90 tax at ref_safe is called detected (CI above 0): with a true 0% tax
//! that is the false-detection rate (nominal ≤ 2.5% one-sided, ≤ 5% two-sided), with a true 10%
//! or 20% tax it is the power.

use std::path::Path;

use rayon::prelude::*;

use crate::analysis::model::{Detection, TaxContext};
use crate::analysis::{AnalyzeOptions, analyze};
use crate::stats::BootstrapConfig;
use crate::synth::{SynthConfig, SynthSpec, generate};

/// One setting of the simulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// True TTFT tax of the non-plain config (0.10 = +10%).
    pub true_tax: f64,
    /// Lognormal sd of the per-launch level (0.05 ≈ 5% on p90).
    pub launch_sd: f64,
    pub launches: u32,
    /// AR(1) coefficient of the request latencies in send order.
    pub ar_rho: f64,
    /// Extra configs identical to plain (no tax, same launch noise) beside plain and
    /// mooncake_both: more configs in every pool and more for the own-noise screen to test.
    pub null_configs: u32,
    /// Machines the launches run on (0 or 1: one machine): launch l of every config runs on
    /// machine `l % machines`, so every config meets plain on every machine (the design
    /// `ctax run` keeps with `plain_on_every_machine`), each machine with its own lognormal level
    /// of sd `machine_sd`, drawn per seed (DESIGN.md §4.3 "Machines").
    pub machines: u32,
    pub machine_sd: f64,
}

/// How often a setting's tax was detected.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub setting: Setting,
    pub seeds: u32,
    /// CI entirely above 0.
    pub detected: u32,
    /// CI entirely below 0 (a tax of the wrong sign).
    pub negative: u32,
    /// CI covers the true tax.
    pub covered: u32,
    /// Seeds in which the own-noise screen gave some config its own launch noise (any cell or
    /// metric): with every config's launches alike, each is a false flag.
    pub screened: u32,
}

impl Outcome {
    fn rate(&self) -> f64 {
        f64::from(self.detected) / f64::from(self.seeds.max(1))
    }
}

/// The configs `Setting::null_configs` adds, in order.
const NULL_CONFIGS: [&str; 6] = [
    "nixl_both",
    "noop_connector",
    "mooncake_producer",
    "mooncake_consumer",
    "mooncake_both_nhd",
    "lmcache_only",
];

/// The synthetic design of one seed: plain and `mooncake_both` (TTFT × (1 + tax)), and
/// `null_configs` more like plain, three Phase A rates well below capacity, 150 measured
/// requests per cell, lognormal σ = 0.25 per request.
fn spec(s: &Setting, seed: u64) -> SynthSpec {
    let mut configs = vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.0 + s.true_tax, 1.0),
    ];
    configs.extend(
        NULL_CONFIGS
            .iter()
            .take(s.null_configs as usize)
            .map(|n| SynthConfig::new(n, 1.0, 1.0)),
    );
    let machine_levels: Vec<f64> = if s.machines > 1 {
        (0..s.machines)
            .map(|m| (s.machine_sd * normal(seed, m)).exp())
            .collect()
    } else {
        Vec::new()
    };
    if s.machines > 1 {
        for c in &mut configs {
            c.machines = (0..s.launches).map(|l| l % s.machines).collect();
        }
    }
    SynthSpec {
        machine_levels,
        configs,
        launches: s.launches,
        phase_a_rates: vec![1.0, 2.0, 4.0],
        requests_per_cell: 150,
        warmup_requests: 5,
        launch_sigma: s.launch_sd,
        ar_rho: s.ar_rho,
        with_metrics: true,
        with_steps: false,
        seed,
        ..Default::default()
    }
}

/// A standard normal draw for machine `m` of seed `seed` (Box–Muller on a stream of its own, so
/// the requests and launches stay as without machines).
fn normal(seed: u64, m: u32) -> f64 {
    use rand::SeedableRng;
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(crate::stats::stable_seed(
        seed,
        "machine-level",
        f64::from(m),
    ));
    crate::stats::launch_noise::standard_normal(&mut rng)
}

/// Runs one seed of a setting under `tmp` and returns the ref_safe TTFT tax's detection,
/// whether its CI covers the truth, and whether the own-noise screen flagged any config.
fn one(
    s: &Setting,
    seed: u64,
    resamples: usize,
    tmp: &Path,
) -> anyhow::Result<(Detection, bool, bool)> {
    let root = tmp.join(format!(
        "t{}_sd{}_l{}_r{}_n{}_m{}x{}_s{seed}",
        s.true_tax, s.launch_sd, s.launches, s.ar_rho, s.null_configs, s.machines, s.machine_sd
    ));
    generate(&spec(s, seed), &root)?;
    let ds = crate::ingest::load(&root)?;
    let a = analyze(
        &ds,
        &AnalyzeOptions {
            bootstrap: BootstrapConfig {
                resamples,
                seed,
                ..Default::default()
            },
            skip_itl: true,
        },
    )?;
    std::fs::remove_dir_all(&root).ok();
    let t = a
        .result
        .summary
        .taxes
        .iter()
        .find(|t| t.config == "mooncake_both" && t.context == TaxContext::RefSafe)
        .and_then(|t| t.ttft_p90.clone())
        .ok_or_else(|| anyhow::anyhow!("no TTFT tax at ref_safe (seed {seed})"))?;
    let covered = match (t.value.lo, t.value.hi) {
        (Some(lo), Some(hi)) => lo <= s.true_tax && s.true_tax <= hi,
        _ => false,
    };
    let screened = !a.result.summary.launch_noise.own.is_empty();
    Ok((t.detection, covered, screened))
}

/// Runs `seeds` seeds of every setting (in parallel) in a temporary directory.
pub fn run(settings: &[Setting], seeds: u32, resamples: usize) -> anyhow::Result<Vec<Outcome>> {
    let tmp = tempfile::tempdir()?;
    settings
        .iter()
        .map(|s| {
            let results: Vec<(Detection, bool, bool)> = (0..seeds)
                .into_par_iter()
                .map(|i| one(s, 1000 + u64::from(i), resamples, tmp.path()))
                .collect::<anyhow::Result<_>>()?;
            Ok(Outcome {
                setting: *s,
                seeds,
                detected: results.iter().filter(|r| r.0 == Detection::Tax).count() as u32,
                negative: results
                    .iter()
                    .filter(|r| r.0 == Detection::Negative)
                    .count() as u32,
                covered: results.iter().filter(|r| r.1).count() as u32,
                screened: results.iter().filter(|r| r.2).count() as u32,
            })
        })
        .collect()
}

/// The grid the issue asks for: true tax 0 / 10% / 20%, launch sd 5% / 10%, 1 / 2 / 3 / 5 / 8
/// launches, AR(1) ρ = 0.5 inside each cell; plain and mooncake_both alone.
pub fn default_grid() -> Vec<Setting> {
    let mut v = Vec::new();
    for true_tax in [0.0, 0.10, 0.20] {
        for launch_sd in [0.05, 0.10] {
            for launches in [1, 2, 3, 5, 8] {
                v.push(Setting {
                    true_tax,
                    launch_sd,
                    launches,
                    ar_rho: 0.5,
                    null_configs: 0,
                    machines: 0,
                    machine_sd: 0.0,
                });
            }
        }
    }
    v
}

/// Markdown table of outcomes.
pub fn markdown(out: &[Outcome]) -> String {
    let mut s = String::from(
        "| true TTFT tax | launch sd | configs | machines (sd) | launches/config | seeds | detected (CI > 0) | rate | CI below 0 | CI covers truth | own-noise flags |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for o in out {
        let machines = if o.setting.machines > 1 {
            format!(
                "{} ({:.0}%)",
                o.setting.machines,
                o.setting.machine_sd * 100.0
            )
        } else {
            "1".to_owned()
        };
        s.push_str(&format!(
            "| {:.0}% | {:.0}% | {} | {machines} | {} | {} | {} | {:.1}% | {} | {:.1}% | {} |\n",
            o.setting.true_tax * 100.0,
            o.setting.launch_sd * 100.0,
            2 + o.setting.null_configs,
            o.setting.launches,
            o.seeds,
            o.detected,
            o.rate() * 100.0,
            o.negative,
            f64::from(o.covered) * 100.0 / f64::from(o.seeds.max(1)),
            o.screened,
        ));
    }
    s
}
