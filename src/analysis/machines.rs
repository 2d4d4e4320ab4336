//! Machines: which launches ran on which machine, and whether the machines differ (DESIGN.md
//! §4.3 "Machines"). Taxes already compare launches on the same machine ([`super::taxes`]) and
//! the launch noise is estimated within machines ([`super::launch_noise`]); this is the
//! evidence for doing so, reported with the data: per cell and metric, an F-test of the
//! machines on the log per-launch estimates, config + machine against config alone.

use std::collections::BTreeMap;

use ctax_schema::Phase;
use serde::{Deserialize, Serialize};

use super::first_launch::{self, FirstLaunchEffect};
use super::launch_noise::LaunchNoiseSummary;
use super::launch_order::{self, OrderBalance};
use super::model::CellStats;
use super::taxes::Metric;
use crate::ingest::machine::UNRECORDED;
use crate::stats::launch_noise::{LaunchObs, additive_residual};

/// The metrics the machine effect is tested on.
const METRICS: [(Metric, &str); 2] = [(Metric::TtftP90, "ttft_p90"), (Metric::TpotP90, "tpot_p90")];

/// What the summary reports about machines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct MachinesSummary {
    /// Per machine, per phase (`A`, `B`, `Bp`), its launches as `config lN`, in the order
    /// they started (launches without a recorded start last, in config order).
    pub launches: BTreeMap<String, BTreeMap<Phase, Vec<String>>>,
    /// Per phase and non-plain config: on how many machines plain ran before, after or around
    /// its launches ([`super::launch_order`]).
    #[serde(default)]
    pub order: Vec<OrderBalance>,
    /// Per cell with launches on ≥ 2 machines and metric: the F-test of the machines.
    pub effects: Vec<MachineEffect>,
    /// Per cell and metric, on the same launches: the first launch on a machine against the
    /// same config's later ones there ([`super::first_launch`]).
    #[serde(default)]
    pub first_launch: Vec<FirstLaunchEffect>,
    /// The method in one sentence (also in the conventions).
    pub method: String,
}

impl MachinesSummary {
    /// How many machines the dataset's launches ran on.
    pub fn count(&self) -> usize {
        self.launches.len()
    }
}

/// The machine effect in one cell for one metric: do launches on different machines differ by
/// more than launches of the same config on one machine?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineEffect {
    pub phase: Phase,
    pub cell: String,
    /// `ttft_p90` or `tpot_p90`.
    pub metric: String,
    pub machines: u32,
    pub launches: u32,
    /// `((RSS_config − RSS_config+machine) / df1) / (RSS_config+machine / df2)` on the log
    /// per-launch estimates.
    pub f: f64,
    pub df1: u32,
    pub df2: u32,
    /// Upper tail of F(df1, df2) at `f`.
    pub p: f64,
    /// The residual sd per launch as a relative sd (`exp(s) − 1`): ignoring the machines
    /// (config alone, df `df1 + df2`) and within machines (config + machine, df `df2`).
    pub sd_ignoring_machines: f64,
    pub sd_within_machines: f64,
}

pub(crate) const METHOD: &str = "machine effect: per cell and metric, an F-test of the machines \
     on the log per-launch estimates of the unsaturated configs in the launch-noise pool the cell \
     carries (a config the noise screen gives its own noise there, e.g. one whose tax changes \
     between machines, is left out: a selection on large residuals, so F reads slightly high) \
     (ordinary least squares, config + machine dummies against config dummies alone); a machine is one boot of one host \
     (placement.machine_id), else the host's GPU UUIDs in env.txt; taxes and launch noise \
     compare launches on the same machine only";

/// The machine listing and the machine-effect tests. `pooled` must carry the saturation flags;
/// `noise` is the launch-noise summary: a config out of the pool a cell carries for a metric
/// (flagged in that cell; or flagged over every cell when the cell has no pool of its own,
/// [`LaunchNoiseSummary::own_at`]'s lookup) is left out of that cell's test.
pub(crate) fn summarize(
    pooled: &[CellStats],
    per_launch: &[CellStats],
    noise: &LaunchNoiseSummary,
) -> MachinesSummary {
    // Each launch's start per phase and machine: its cells' earliest.
    let mut started: BTreeMap<(Phase, &str, u32, &str), u64> = BTreeMap::new();
    for s in launch_order::cell_spans(per_launch) {
        let t = started
            .entry((s.phase, s.config, s.launch, s.machine))
            .or_insert(s.start_ms);
        *t = (*t).min(s.start_ms);
    }
    let start_of = |phase: Phase, config: &str, l: u32, m: &str| -> u64 {
        started
            .get(&(phase, config, l, m))
            .copied()
            .unwrap_or(u64::MAX)
    };
    type Entry = (u64, (usize, String), u32, String);
    let mut launches: BTreeMap<String, BTreeMap<Phase, Vec<Entry>>> = BTreeMap::new();
    for c in per_launch {
        let (Some(l), Some(m)) = (c.launch, c.machine.as_deref()) else {
            continue;
        };
        let entry = (
            start_of(c.key.phase, &c.key.config, l, m),
            super::model::config_order(&c.key.config),
            l,
            c.key.config.clone(),
        );
        let list = launches
            .entry(m.to_owned())
            .or_default()
            .entry(c.key.phase)
            .or_default();
        if !list.contains(&entry) {
            list.push(entry);
        }
    }
    let launches = launches
        .into_iter()
        .map(|(m, by_phase)| {
            let by_phase = by_phase
                .into_iter()
                .map(|(p, mut v)| {
                    v.sort();
                    (
                        p,
                        v.into_iter()
                            .map(|(_, _, l, c)| format!("{c} l{l}"))
                            .collect(),
                    )
                })
                .collect();
            (m, by_phase)
        })
        .collect();
    let first = first_launch::first_on_machine(&launch_order::cell_spans(per_launch));
    let mut effects = Vec::new();
    let mut first_effects = Vec::new();
    // In the report's order: phase, then rate, input and output length.
    let mut cells: Vec<(Phase, u64, u32, u32, &str)> = pooled
        .iter()
        .filter(|c| c.launch.is_none())
        .map(|c| {
            (
                c.key.phase,
                c.rate.to_bits(),
                c.input_len,
                c.output_len,
                c.key.cell.as_str(),
            )
        })
        .collect();
    cells.sort();
    cells.dedup();
    for (phase, _, _, _, cell) in cells {
        let unsaturated: Vec<&str> = pooled
            .iter()
            .filter(|c| c.launch.is_none() && c.key.phase == phase && c.key.cell == cell)
            .filter(|c| !c.saturated())
            .map(|c| c.key.config.as_str())
            .collect();
        for (m, name) in METRICS {
            // Launch-cells whose raw data is not whole are listed and timed above but
            // compared nowhere (DESIGN.md §4.1).
            let with_first: Vec<(LaunchObs, bool)> = per_launch
                .iter()
                .filter(|c| c.key.phase == phase && c.key.cell == cell)
                .filter(|c| c.whole())
                .filter(|c| unsaturated.contains(&c.key.config.as_str()))
                .filter(|c| noise.own_at(name, phase, cell, &c.key.config).is_none())
                .filter_map(|c| {
                    let launch = c.launch?;
                    let value = m.point(c).filter(|v| *v > 0.0 && v.is_finite())?;
                    let machine = c.machine.as_deref().unwrap_or(UNRECORDED);
                    let config = c.key.config.as_str();
                    let is_first = first.contains(&(machine, phase, config, launch));
                    Some((
                        LaunchObs {
                            config,
                            machine,
                            value,
                        },
                        is_first,
                    ))
                })
                .collect();
            let rows: Vec<LaunchObs> = with_first.iter().map(|(o, _)| *o).collect();
            effects.extend(effect(phase, cell, name, &rows));
            first_effects.extend(first_launch::effect(phase, cell, name, &with_first));
        }
    }
    MachinesSummary {
        launches,
        // Filled by the analysis once the taxes are known ([`launch_order::of_taxes`]).
        order: Vec::new(),
        effects,
        first_launch: first_effects,
        method: METHOD.into(),
    }
}

/// The F-test of the machines over `rows` (estimates > 0, the models on their log): the
/// additive config + machine model ([`additive_residual`], what the launch noise uses) against
/// config alone (the same with every launch on one machine). `None` with fewer than 2 machines
/// or no degrees of freedom left for either mean square.
fn effect(phase: Phase, cell: &str, metric: &str, rows: &[LaunchObs]) -> Option<MachineEffect> {
    let mut machines: Vec<&str> = rows.iter().map(|r| r.machine).collect();
    machines.sort_unstable();
    machines.dedup();
    let machines = machines.len();
    if machines < 2 {
        return None;
    }
    let one_machine: Vec<LaunchObs> = rows
        .iter()
        .map(|r| LaunchObs { machine: "", ..*r })
        .collect();
    let (rss1, df_all) = additive_residual(&one_machine);
    let (rss2, df2) = additive_residual(rows);
    let (df_all, df2) = (df_all as usize, df2 as usize);
    let n = rows.len();
    let df1 = df_all.checked_sub(df2)?;
    if df1 == 0 || df2 == 0 {
        return None;
    }
    let ms2 = rss2 / df2 as f64;
    // An exact fit (to rounding) leaves no within-machine variance to test against: no test,
    // rather than an infinite F.
    if rss2 <= 1e-12 * rss1 {
        return None;
    }
    let f = ((rss1 - rss2).max(0.0) / df1 as f64) / ms2;
    let p = {
        use statrs::distribution::{ContinuousCDF, FisherSnedecor};
        FisherSnedecor::new(df1 as f64, df2 as f64)
            .map(|d| d.sf(f))
            .unwrap_or(f64::NAN)
    };
    Some(MachineEffect {
        phase,
        cell: cell.to_owned(),
        metric: metric.to_owned(),
        machines: machines as u32,
        launches: n as u32,
        f,
        df1: df1 as u32,
        df2: df2 as u32,
        p,
        sd_ignoring_machines: (rss1 / df_all as f64).sqrt().exp_m1(),
        sd_within_machines: ms2.sqrt().exp_m1(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of (config, machine, log estimate) as launch observations (the estimate itself).
    fn obs<'a>(rows: &[(&'a str, &'a str, f64)]) -> Vec<LaunchObs<'a>> {
        rows.iter()
            .map(|&(config, machine, log)| LaunchObs {
                config,
                machine,
                value: log.exp(),
            })
            .collect()
    }

    /// Five launches on two machines, machine m2 about exp(0.2) slower for both configs. The
    /// residual sums of squares are numpy's (`np.linalg.lstsq` on config dummies: 0.048916…,
    /// rank 2, so df 3; on config + machine dummies: 0.000228571…, rank 3, df 2), so
    /// F = (RSS₁ − RSS₂) / 1 ÷ (RSS₂ / 2) on (1, 2) df.
    #[test]
    fn f_test_of_the_machines_against_numpy() {
        let rows = [
            ("plain", "m1", 0.00),
            ("plain", "m1", 0.02),
            ("plain", "m2", 0.21),
            ("x", "m1", 0.10),
            ("x", "m2", 0.31),
        ];
        let e = effect(Phase::A, "c", "ttft_p90", &obs(&rows)).expect("two machines");
        assert_eq!((e.machines, e.launches, e.df1, e.df2), (2, 5, 1, 2));
        let (rss1, rss2) = (0.048_916_666_666_666_66, 0.000_228_571_428_571_428_65);
        let f = (rss1 - rss2) / (rss2 / 2.0);
        assert!((e.f - f).abs() / f < 1e-9, "{} vs {f}", e.f);
        // F(1, 2) is t² with 2 df: upper tail 1 − √(F / (F + 2)) (closed form).
        let p = 1.0 - (f / (f + 2.0)).sqrt();
        assert!((e.p - p).abs() < 1e-9, "{} vs {p}", e.p);
        assert!((e.sd_within_machines - (rss2 / 2.0f64).sqrt().exp_m1()).abs() < 1e-12);
        assert!((e.sd_ignoring_machines - (rss1 / 3.0f64).sqrt().exp_m1()).abs() < 1e-12);
    }

    #[test]
    fn one_machine_or_an_exact_fit_has_no_machine_test() {
        let rows = [("plain", "m1", 0.0), ("plain", "m1", 0.1), ("x", "m1", 0.2)];
        assert!(effect(Phase::A, "c", "ttft_p90", &obs(&rows)).is_none());
        // Two machines, both configs shifted by exactly 0.2: nothing left within machines.
        let exact = [
            ("plain", "m1", 0.0),
            ("plain", "m2", 0.2),
            ("x", "m1", 0.1),
            ("x", "m2", 0.3),
            ("y", "m1", 0.5),
            ("y", "m2", 0.7),
        ];
        assert!(effect(Phase::A, "c", "ttft_p90", &obs(&exact)).is_none());
    }
}
