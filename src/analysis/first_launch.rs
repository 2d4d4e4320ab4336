//! First launch on a machine: were the launches that ran first on their machine slower or
//! faster than the same config's later launches on the same machine? (DESIGN.md §4.3 "First
//! launch on a machine".)
//!
//! On the H200 each stretch is a fresh machine, and its first server start is the slowest
//! (ready after 170–175 s where later ones take 80–145 s: caches and the host are cold). Since
//! `ctax run` anchors a machine new to a Phase B sweep with a plain launch, plain is often that
//! first launch; if a first launch serves slower, every tax read on such a machine comes out low.
//! This module measures it with the data the machine test uses ([`super::machines`]): per cell
//! and metric, the log per-launch estimates on config + machine + one column that is 1 for a
//! launch that ran first on its machine, whose coefficient is the first launch's effect (the
//! same config, the same machine, first against later). A launch is *first* when it started before any
//! launch on its machine had ended, so both launches of a two-GPU machine's first round count.

use std::collections::{BTreeMap, BTreeSet};

use ctax_schema::Phase;
use serde::{Deserialize, Serialize};

use super::launch_order::CellSpan;
use super::model::Estimate;
use crate::stats::launch_noise::LaunchObs;
use crate::stats::linear::{added_column, two_way_dummies};

/// The first-launch effect in one cell for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstLaunchEffect {
    pub phase: Phase,
    pub cell: String,
    /// `ttft_p90` or `tpot_p90`.
    pub metric: String,
    /// Launches in the model, and how many of them ran first on their machine.
    pub launches: u32,
    pub first: u32,
    /// Machines with both a first and a later launch among them (the ones the estimate reads).
    pub machines: u32,
    /// `exp(β) − 1`: how much slower (> 0) a first launch was than the same config's later
    /// launches on its machine, with the 95% t interval of β (residual df).
    pub effect: f64,
    pub lo: f64,
    pub hi: f64,
    pub df: u32,
    /// Two-sided p of β = 0 (t test on `df`).
    pub p: f64,
}

impl FirstLaunchEffect {
    /// Whether the interval excludes 0.
    pub fn detected(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }

    /// The effect with its interval, written as every tax is ([`Estimate::pct_ci`]).
    pub fn estimate(&self) -> Estimate {
        Estimate {
            est: self.effect,
            lo: Some(self.lo),
            hi: Some(self.hi),
        }
    }
}

/// One launch on one machine: (machine, phase, config, launch index).
pub(crate) type LaunchAt<'a> = (&'a str, Phase, &'a str, u32);

/// The launches that ran first on their machine: started before any launch on that machine
/// had ended (a launch's span: its cells' earliest start to their latest end).
pub(crate) fn first_on_machine<'a>(spans: &[CellSpan<'a>]) -> BTreeSet<LaunchAt<'a>> {
    let mut launches: BTreeMap<LaunchAt, (u64, u64)> = BTreeMap::new();
    for s in spans {
        let e = launches
            .entry((s.machine, s.phase, s.config, s.launch))
            .or_insert((s.start_ms, s.end_ms));
        e.0 = e.0.min(s.start_ms);
        e.1 = e.1.max(s.end_ms);
    }
    let mut first_end: BTreeMap<&str, u64> = BTreeMap::new();
    for (k, (_, end)) in &launches {
        let e = first_end.entry(k.0).or_insert(*end);
        *e = (*e).min(*end);
    }
    launches
        .into_iter()
        .filter(|(k, (start, _))| *start < first_end[k.0])
        .map(|(k, _)| k)
        .collect()
}

/// The effect over `rows` (each launch's estimate and whether it ran first on its machine).
/// `None` when no machine has both a first and a later launch, when the configs and machines
/// explain the column (nothing left to compare) or no degree of freedom is left.
pub(crate) fn effect(
    phase: Phase,
    cell: &str,
    metric: &str,
    rows: &[(LaunchObs, bool)],
) -> Option<FirstLaunchEffect> {
    let rows: Vec<&(LaunchObs, bool)> = rows
        .iter()
        .filter(|(o, _)| o.value.is_finite() && o.value > 0.0)
        .collect();
    let mut seen: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for (o, first) in &rows {
        let e = seen.entry(o.machine).or_default();
        if *first {
            e.0 = true;
        } else {
            e.1 = true;
        }
    }
    let machines = seen.values().filter(|(a, b)| *a && *b).count();
    if machines == 0 {
        return None;
    }
    let keys: Vec<(&str, &str)> = rows.iter().map(|(o, _)| (o.config, o.machine)).collect();
    let f: Vec<f64> = rows
        .iter()
        .map(|(_, first)| f64::from(u8::from(*first)))
        .collect();
    let y: Vec<f64> = rows.iter().map(|(o, _)| o.value.ln()).collect();
    let a = added_column(&two_way_dummies(&keys, true), &f, &y)?;
    if a.se.is_nan() || a.se <= 0.0 {
        return None;
    }
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let t = StudentsT::new(0.0, 1.0, a.df as f64).ok()?;
    let q = t.inverse_cdf(0.975);
    Some(FirstLaunchEffect {
        phase,
        cell: cell.to_owned(),
        metric: metric.to_owned(),
        launches: rows.len() as u32,
        first: f.iter().filter(|v| **v > 0.0).count() as u32,
        machines: machines as u32,
        effect: a.beta.exp_m1(),
        lo: (a.beta - q * a.se).exp_m1(),
        hi: (a.beta + q * a.se).exp_m1(),
        df: a.df as u32,
        p: 2.0 * t.sf((a.beta / a.se).abs()),
    })
}

/// One warning per cell and metric whose first-launch interval excludes 0, saying how many
/// tests there were (at 5% about one in twenty excludes 0 by chance).
pub(crate) fn warnings(effects: &[FirstLaunchEffect]) -> Vec<String> {
    let n = effects.len();
    effects
        .iter()
        .filter(|e| e.detected())
        .map(|e| {
            format!(
                "first launch on a machine: in Phase {} {} the launches that ran first on their machine had {} {} (p {:.3}; {} launches, {} first, {} machines with both; one of {n} cell-metric tests, of which about {:.1} would exclude 0 by chance) against the same config's later launches there; where plain ran first on a machine (ctax run's Phase B anchor does on a machine new to the sweep; the Machines table lists each machine's order), a config's tax there is read against a {} plain",
                e.phase.label(),
                e.cell,
                super::launch_noise::metric_label(&e.metric),
                e.estimate().pct_ci(),
                e.p,
                e.launches,
                e.first,
                e.machines,
                n as f64 * 0.05,
                if e.effect > 0.0 { "slow" } else { "fast" }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span<'a>(machine: &'a str, config: &'a str, launch: u32, s: u64, e: u64) -> CellSpan<'a> {
        CellSpan {
            phase: Phase::A,
            config,
            launch,
            machine,
            start_ms: s,
            end_ms: e,
        }
    }

    /// m1: a two-GPU first round (plain l0 and x l0 side by side), then x l1; m2: plain l1
    /// alone, then x l2 after it ended; two cells of one launch form one span.
    #[test]
    fn the_first_round_of_each_machine_is_first() {
        let spans = [
            span("m1", "plain", 0, 0, 50),
            span("m1", "plain", 0, 50, 100),
            span("m1", "x", 0, 5, 90),
            span("m1", "x", 1, 120, 200),
            span("m2", "plain", 1, 1000, 1100),
            span("m2", "x", 2, 1100, 1200),
        ];
        let first = first_on_machine(&spans);
        let want: BTreeSet<LaunchAt> = [
            ("m1", Phase::A, "plain", 0),
            ("m1", Phase::A, "x", 0),
            ("m2", Phase::A, "plain", 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(first, want);
    }

    /// The rows of `stats::linear`'s numpy check (log estimates): the coefficient 0.19625 and
    /// its se 0.0195655948 on df 3 (numpy `lstsq` on config + machine + first), so the effect
    /// is e^0.19625 − 1 and the interval e^(β ± t₀.₉₇₅,₃ se) − 1 with t₀.₉₇₅,₃ = 3.182446305
    /// (the t table); p from the closed form of the t distribution with 3 df.
    #[test]
    fn effect_against_numpy() {
        let rows = [
            ("plain", "m1", true, 0.27),
            ("x", "m1", false, 0.12),
            ("plain", "m1", false, 0.05),
            ("plain", "m2", true, 0.41),
            ("x", "m2", false, 0.25),
            ("y", "m2", false, 0.33),
            ("x", "m3", true, 0.52),
            ("plain", "m3", false, 0.30),
            ("y", "m3", false, 0.47),
        ];
        let obs: Vec<(LaunchObs, bool)> = rows
            .iter()
            .map(|&(config, machine, first, log)| {
                (
                    LaunchObs {
                        config,
                        machine,
                        value: f64::exp(log),
                    },
                    first,
                )
            })
            .collect();
        let e = effect(Phase::A, "c", "ttft_p90", &obs).expect("estimable");
        assert_eq!((e.launches, e.first, e.machines, e.df), (9, 3, 3, 3));
        let (beta, se, q) = (0.196_25_f64, 0.019_565_594_803_123_13, 3.182_446_305);
        assert!((e.effect - beta.exp_m1()).abs() < 1e-12, "{e:?}");
        assert!((e.lo - (beta - q * se).exp_m1()).abs() < 1e-8, "{e:?}");
        assert!((e.hi - (beta + q * se).exp_m1()).abs() < 1e-8, "{e:?}");
        // Two-sided p for t = β/se on 3 df, closed form:
        // P(|T| > t) = 1 − (2/π)(θ + sin θ cos θ), θ = atan(t/√3).
        let t = beta / se;
        let th = (t / 3f64.sqrt()).atan();
        let p = 1.0 - 2.0 / std::f64::consts::PI * (th + th.sin() * th.cos());
        assert!((e.p - p).abs() < 1e-9, "{} vs {p}", e.p);
        assert!(e.detected());
        let w = warnings(&[e]);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("+21.7% ["), "{}", w[0]);
        assert!(w[0].ends_with("read against a slow plain"), "{}", w[0]);
        assert!(w[0].contains("one of 1 cell-metric tests"), "{}", w[0]);
        // No machine with both a first and a later launch: no estimate.
        let only_first: Vec<(LaunchObs, bool)> = obs.iter().map(|(o, _)| (*o, true)).collect();
        assert_eq!(effect(Phase::A, "c", "ttft_p90", &only_first), None);
    }
}
