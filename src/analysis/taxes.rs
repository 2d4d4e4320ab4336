//! Substrate taxes, as the seed defines them, each with a bootstrap CI:
//!
//! ```text
//! tax_TTFT_p90(X)  = TTFT_p90(X) / TTFT_p90(plain) − 1
//! tax_TPOT_p90(X)  = TPOT_p90(X) / TPOT_p90(plain) − 1
//! tax_step_p50(X)  = step_duration p50(X) − step_duration p50(plain)          [µs]
//! tax_callback_p50 = connector_total p50(X)                                   [µs]
//! step − callback  = tax_step_p50 − tax_callback_p50                           [µs]
//! ```
//!
//! **Within machines** (DESIGN.md §4.3 "Machines"): machines differ more than launches do (on
//! the H200, ~20% in TTFT p90 between GPU sessions, ~5% between launches on one), so a tax
//! compares X's launches with plain's launches **on the same machine**: on each machine both
//! ran on, the mean of X's per-launch log estimates minus plain's, weighted over the machines by
//! `k_X·k_plain/(k_X + k_plain)`; X's launches on machines without plain are left out (the tax
//! lists them). A launch's estimate is its own requests' quantile; its replicates carry the
//! launch noise ([`NoiseModel::widen`] for one launch), and the same arithmetic on every
//! replicate gives the tax's. A launch's replicates are seeded by its own key, so plain's are
//! the same in every tax (gaps and ratios of taxes stay paired). The connector-callback time is
//! X's alone (plain has none) and stays pooled over X's launches.

use std::collections::BTreeMap;

use ctax_schema::{Phase, ReferenceRates};

use super::cells::rep_key;
use super::launch_noise::{NoiseModel, detection_without_noise};
use super::model::{
    AaLeaveOneOut, AaTax, AaWithout, CellKey, CellStats, Detection, Estimate, OneMachine, Tax,
    TaxContext, TaxValue, config_order,
};
use super::replicates::{Replicator, Reps, combine2, combine3};
use super::same_cell::CellAt;
use super::samples::{CellSamples, LaunchSamples};

pub(crate) const BASELINE: &str = "plain";

/// Picks one metric's samples out of a launch.
type Getter = fn(&LaunchSamples) -> &Vec<f64>;

/// A statistic's estimate and its replicates.
pub(crate) type Estimated = (f64, Vec<f64>);

/// Which latency statistic a tax is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metric {
    TtftP90,
    TpotP90,
    StepP50,
    CallbackP50,
}

impl Metric {
    /// The cell's point estimate of this statistic.
    pub(crate) fn point(self, c: &CellStats) -> Option<f64> {
        match self {
            Metric::TtftP90 => c.ttft_ms.p90,
            Metric::TpotP90 => c.tpot_ms.p90,
            Metric::StepP50 => c.step.as_ref().and_then(|s| s.step_duration_us.p50),
            Metric::CallbackP50 => c.step.as_ref().and_then(|s| s.connector_total_us.p50),
        }
        .map(|e| e.est)
    }

    /// This statistic's tax in `t`, if it has one.
    pub(crate) fn of_tax(self, t: &Tax) -> Option<&TaxValue> {
        match self {
            Metric::TtftP90 => t.ttft_p90.as_ref(),
            Metric::TpotP90 => t.tpot_p90.as_ref(),
            Metric::StepP50 => t.step_p50_us.as_ref(),
            Metric::CallbackP50 => t.callback_p50_us.as_ref(),
        }
    }

    /// How reports name it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Metric::TtftP90 => "TTFT p90",
            Metric::TpotP90 => "TPOT p90",
            Metric::StepP50 => "step p50",
            Metric::CallbackP50 => "callbacks p50",
        }
    }

    fn spec(self) -> (&'static str, f64, Getter) {
        match self {
            Metric::TtftP90 => ("ttft_ms", 0.9, |l| &l.ttft_ms),
            Metric::TpotP90 => ("tpot_ms", 0.9, |l| &l.tpot_ms),
            Metric::StepP50 => ("step_duration_us", 0.5, |l| &l.step_duration_us),
            Metric::CallbackP50 => ("connector_total_us", 0.5, |l| &l.connector_total_us),
        }
    }
}

/// Everything needed to compute taxes and their replicates.
#[derive(Clone)]
pub(crate) struct TaxEngine<'a> {
    pub rep: &'a Replicator,
    pub samples: &'a BTreeMap<CellKey, CellSamples>,
    pub stats: BTreeMap<CellKey, &'a CellStats>,
    /// Launch-to-launch noise carried by every statistic's replicates.
    pub noise: &'a NoiseModel,
    /// Where each launch ran each cell ([`super::same_cell::cell_positions`]); without it no
    /// comparison is blocked by place ([`Self::with_places`]).
    pub places: Option<&'a BTreeMap<CellAt, u32>>,
    /// Whether [`Self::all`] checks each detected tax without each machine
    /// ([`Tax::one_machine`]); off in the reruns read only for their verdicts.
    pub one_machine_check: bool,
}

impl<'a> TaxEngine<'a> {
    pub(crate) fn new(
        rep: &'a Replicator,
        samples: &'a BTreeMap<CellKey, CellSamples>,
        pooled: &'a [CellStats],
        noise: &'a NoiseModel,
    ) -> Self {
        let stats = pooled
            .iter()
            .filter(|c| c.launch.is_none())
            .map(|c| (c.key.clone(), c))
            .collect();
        TaxEngine {
            rep,
            samples,
            stats,
            noise,
            places: None,
            one_machine_check: true,
        }
    }

    /// The engine with the cells' places in their launches: A/A taxes and the per-place terms
    /// ([`Self::relative_by_machine_and_place`]) then compare launches at one place.
    pub(crate) fn with_places(self, places: &'a BTreeMap<CellAt, u32>) -> Self {
        TaxEngine {
            places: Some(places),
            ..self
        }
    }

    /// Splits each machine whose launches (of all `sets`, `(config, launches)`) ran `cell` at
    /// more than one place into one block per place ([`block_by_place`]); returns each block's
    /// label with its machine. Nothing changes without places.
    fn block_by_place(
        &self,
        phase: Phase,
        cell: &str,
        sets: &mut [(&str, &mut Vec<LaunchStat>)],
    ) -> BTreeMap<String, String> {
        let Some(places) = self.places else {
            return BTreeMap::new();
        };
        let at = |config: &str, launch: u32| {
            places
                .get(&(config.to_owned(), phase, launch, cell.to_owned()))
                .copied()
                .unwrap_or(0)
        };
        let mut flat: Vec<(&mut LaunchStat, u32)> = Vec::new();
        for (config, set) in sets.iter_mut() {
            for l in set.iter_mut() {
                let p = at(config, l.launch);
                flat.push((l, p));
            }
        }
        block_by_place(&mut flat)
    }

    /// Replicates of the linear `q`-quantile of `groups` (launches) carrying the launch noise of
    /// `m` (request-level alone when it is unknown).
    fn replicates(
        &self,
        m: Metric,
        (phase, cell): (Phase, &str),
        config: &str,
        est: f64,
        key: &str,
        groups: &[&[f64]],
    ) -> Option<Reps> {
        let (_, q, _) = m.spec();
        let request = self.rep.quantile(key, groups, q)?;
        let k = groups.iter().filter(|g| !g.is_empty()).count() as u32;
        Some(
            match self.noise.widen(
                m,
                (phase, cell),
                config,
                est,
                k,
                &request,
                &format!("{key}|launch"),
            ) {
                Some(w) => std::sync::Arc::new(w),
                None => request,
            },
        )
    }

    /// Detection of a value whose CI comes from metric(s) `ms`.
    fn detect(&self, e: &Estimate, ms: &[Metric]) -> Detection {
        let d = detection(e);
        if ms.iter().all(|m| self.noise.known(*m)) {
            d
        } else {
            detection_without_noise(d)
        }
    }

    /// Point estimate and replicates of one statistic of one (config, phase, cell).
    fn stat(&self, config: &str, phase: Phase, cell: &str, m: Metric) -> Option<(f64, Reps)> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        let cs = self.samples.get(&key)?;
        let st = self.stats.get(&key)?;
        // A pooled row with data that is not whole pools launches none of which is whole: no
        // comparison reads it. Needed, not only clear: `groups` below would be empty, but the
        // replicate cache already holds this key's replicates from the pooled row's cut data.
        if !st.whole() {
            return None;
        }
        let (name, _, f) = m.spec();
        let est = m.point(st)?;
        let groups = cs.groups(f);
        let reps = self.replicates(
            m,
            (phase, cell),
            config,
            est,
            &rep_key(cs, None, name),
            &groups,
        )?;
        Some((est, reps))
    }

    /// Every launch of `config` in (`phase`, `cell`) with data for `m`: its own estimate and
    /// replicates carrying the launch noise of one launch.
    fn launch_stats(&self, config: &str, phase: Phase, cell: &str, m: Metric) -> Vec<LaunchStat> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        let Some(cs) = self.samples.get(&key) else {
            return Vec::new();
        };
        let (name, q, f) = m.spec();
        cs.launches
            .iter()
            // A launch whose data in the cell is not whole (the collector killed during it,
            // records missing) is shown in the per-launch table but compared nowhere: its p90
            // is of a cut window, the cell's first part.
            .filter(|l| l.whole())
            .filter_map(|l| {
                let data = f(l).as_slice();
                // A launch noise is a factor on the estimate: a launch whose estimate is not
                // positive cannot carry it, and is left out rather than kept request-level.
                let est = crate::stats::quantile(data, q).filter(|e| *e > 0.0 && e.is_finite())?;
                let reps = self.replicates(
                    m,
                    (phase, cell),
                    config,
                    est,
                    &rep_key(cs, Some(l.launch), name),
                    &[data],
                )?;
                Some(LaunchStat {
                    launch: l.launch,
                    machine: l.machine.clone(),
                    est,
                    reps,
                })
            })
            .collect()
    }

    /// X against plain within machines ([`paired`]) on `f` of the per-launch estimates;
    /// `Err` names why there is no comparison.
    fn against_plain(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        m: Metric,
        f: fn(f64) -> f64,
    ) -> Result<Paired, String> {
        let x = self.launch_stats(config, phase, cell, m);
        let p = self.launch_stats(BASELINE, phase, cell, m);
        if x.is_empty() || p.is_empty() {
            return Err(format!("{config} or plain has no {} in {cell}", m.label()));
        }
        let pair = paired(&x, &p, f);
        if pair.machines.is_empty() {
            let mut mine: Vec<&str> = x.iter().map(|l| l.machine.as_str()).collect();
            mine.sort();
            mine.dedup();
            let mut theirs: Vec<&str> = p.iter().map(|l| l.machine.as_str()).collect();
            theirs.sort();
            theirs.dedup();
            return Err(format!(
                "no plain launch of Phase {} ran on the machine of {config} in {cell} ({}; plain ran on {}): \
                 a tax compares launches on the same machine, as machines differ more than launches",
                phase.label(),
                mine.join(", "),
                theirs.join(", ")
            ));
        }
        Ok(pair)
    }

    /// Relative tax `X/plain − 1` of a latency quantile within machines: estimate and
    /// replicates, or why there is none.
    pub(crate) fn relative(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        m: Metric,
    ) -> Result<(f64, Vec<f64>), String> {
        Ok(self
            .against_plain(config, phase, cell, m, f64::ln)?
            .relative())
    }

    /// [`Self::relative`] with its terms: the relative tax `X/plain − 1` on each machine both
    /// ran on (point estimates, what the weighted mean combines), from the one comparison.
    pub(crate) fn relative_by_machine(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        m: Metric,
    ) -> Result<(Estimated, Vec<MachineDiff>), String> {
        let pair = self.against_plain(config, phase, cell, m, f64::ln)?;
        let terms = pair
            .per_machine
            .iter()
            .map(|d| MachineDiff {
                est: d.est.exp_m1(),
                ..d.clone()
            })
            .collect();
        Ok((pair.relative(), terms))
    }

    /// [`Self::relative_by_machine`]'s terms with each machine whose launches of the two ran
    /// `cell` at different places split by place ([`block_by_place`]): one term per place with
    /// launches of both there (labelled by its machine, as the unsplit terms are). Only the
    /// split machines' terms; empty without places.
    pub(crate) fn relative_by_machine_and_place(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        m: Metric,
    ) -> Vec<MachineDiff> {
        let mut x = self.launch_stats(config, phase, cell, m);
        let mut p = self.launch_stats(BASELINE, phase, cell, m);
        let blocks = self.block_by_place(phase, cell, &mut [(config, &mut x), (BASELINE, &mut p)]);
        paired(&x, &p, f64::ln)
            .per_machine
            .into_iter()
            .filter_map(|d| {
                let machine = blocks.get(&d.machine)?.clone();
                Some(MachineDiff {
                    machine,
                    est: d.est.exp_m1(),
                    ..d
                })
            })
            .collect()
    }

    /// A tax value from `ms`' replicates: its CI and whether the CI detects anything.
    pub(crate) fn value(&self, est: f64, reps: &[f64], unit: &str, ms: &[Metric]) -> TaxValue {
        let value = self.rep.estimate(est, reps);
        TaxValue {
            value,
            unit: unit.into(),
            detection: self.detect(&value, ms),
        }
    }

    /// All taxes of `config` in one cell.
    fn tax(&self, config: &str, context: TaxContext, phase: Phase, cell: &str) -> Option<Tax> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        let st = self.stats.get(&key)?;
        let rel = |p: Result<Paired, String>, m| {
            p.ok().map(|p| {
                let (e, r) = p.relative();
                self.value(e, &r, "fraction", &[m])
            })
        };
        // TTFT's comparison names the machines and launches the tax used (the launches without
        // plain on their machine, all of them when there is no comparison).
        let ttft = self.against_plain(config, phase, cell, Metric::TtftP90, f64::ln);
        let pairing = match &ttft {
            Ok(p) => p.clone(),
            Err(_) => Paired {
                unpaired: self
                    .launch_stats(config, phase, cell, Metric::TtftP90)
                    .iter()
                    .map(|l| l.launch)
                    .collect(),
                ..Paired::default()
            },
        };
        let tpot = self.against_plain(config, phase, cell, Metric::TpotP90, f64::ln);
        // One set of step statistics for the step tax and for step − callbacks.
        let x_step = self.launch_stats(config, phase, cell, Metric::StepP50);
        let p_step = self.launch_stats(BASELINE, phase, cell, Metric::StepP50);
        let step_value = paired(&x_step, &p_step, |v| v)
            .compared()
            .map(|(e, r)| self.value(e, &r, "us", &[Metric::StepP50]));
        let ttft_value = rel(ttft, Metric::TtftP90);
        let tpot_value = rel(tpot, Metric::TpotP90);
        let cb = self.stat(config, phase, cell, Metric::CallbackP50);
        let both = [Metric::StepP50, Metric::CallbackP50];
        let rest = self
            .step_minus_callbacks(config, phase, cell, x_step, &p_step)
            .map(|(e, r)| self.value(e, &r, "us", &both));
        // Step p50 is reported at ref_safe and the shapes only (the reference table's step
        // columns): a ref_load step tax nobody sees is not checked.
        let step_shown = context != TaxContext::RefLoad;
        let one_machine = if self.one_machine_check {
            [
                (Metric::TtftP90, ttft_value.as_ref()),
                (Metric::TpotP90, tpot_value.as_ref()),
                (Metric::StepP50, step_value.as_ref().filter(|_| step_shown)),
            ]
            .into_iter()
            .flat_map(|(m, v)| {
                v.map_or_else(Vec::new, |v| self.one_machine(config, phase, cell, m, v))
            })
            .collect()
        } else {
            Vec::new()
        };
        Some(Tax {
            config: config.to_owned(),
            context,
            phase,
            cell: cell.to_owned(),
            rate: st.rate,
            input_len: st.input_len,
            output_len: st.output_len,
            ttft_p90: ttft_value,
            tpot_p90: tpot_value,
            step_p50_us: step_value,
            callback_p50_us: cb
                .as_ref()
                .map(|(e, r)| self.value(*e, r, "us", &[Metric::CallbackP50])),
            step_minus_callback_us: rest,
            one_machine,
            machines: pairing.machines,
            unpaired_launches: pairing.unpaired,
            paired_launches: pairing.a_used,
            plain_launches: pairing.b_used,
            not_whole: [config, BASELINE]
                .iter()
                .flat_map(|c| self.not_whole(c, phase, cell))
                .collect(),
        })
    }

    /// The machines that decide whether the detected tax `v` of `m` is detected: the only
    /// machine `config` shared with plain while the dataset holds launches of other machines,
    /// or, leaving each shared machine's launches (of both) out in turn ([`without_each_machine`],
    /// the launch noise not re-estimated), those without which it is no longer detected as it
    /// was ([`decisive_machines`]). Empty when `v` is not detected, and in a dataset made on one
    /// machine.
    fn one_machine(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        m: Metric,
        v: &TaxValue,
    ) -> Vec<OneMachine> {
        if !matches!(v.detection, Detection::Tax | Detection::Negative) {
            return Vec::new();
        }
        let relative = m != Metric::StepP50;
        let f: fn(f64) -> f64 = if relative { f64::ln } else { |v| v };
        let x = self.launch_stats(config, phase, cell, m);
        let p = self.launch_stats(BASELINE, phase, cell, m);
        let all = paired(&x, &p, f);
        if let [only] = all.machines.as_slice() {
            // A dataset made on one machine (a user's own host) has every tax there: nothing
            // to set apart. Only where other machines ran launches is one machine a caveat.
            let in_data: std::collections::BTreeSet<&str> = self
                .samples
                .values()
                .flat_map(|c| c.launches.iter().map(|l| l.machine.as_str()))
                .collect();
            if in_data.len() < 2 {
                return Vec::new();
            }
            return vec![OneMachine {
                metric: m.label().to_owned(),
                machine: only.clone(),
                without: None,
                shared: 1,
                borderline: false,
            }];
        }
        let unit = if relative { "fraction" } else { "us" };
        let without: Vec<(String, TaxValue)> = without_each_machine(&x, &p, f)
            .into_iter()
            .filter_map(|(gone, rest)| {
                let (e, r) = if relative {
                    (!rest.machines.is_empty()).then(|| rest.relative())?
                } else {
                    rest.compared()?
                };
                Some((gone, self.value(e, &r, unit, &[m])))
            })
            .collect();
        decisive_machines(m.label(), v, without, all.machines.len() as u32)
    }

    /// `config`'s launches whose data in the cell is not whole, as `config lN`: what
    /// [`Self::launch_stats`] leaves out.
    fn not_whole(&self, config: &str, phase: Phase, cell: &str) -> Vec<String> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        self.samples.get(&key).map_or_else(Vec::new, |cs| {
            cs.launches
                .iter()
                .filter(|l| !l.whole())
                .map(|l| format!("{config} l{}", l.launch))
                .collect()
        })
    }

    /// Step tax minus the callbacks within machines: per launch of X its step p50 (`x_step`)
    /// minus its callback p50, against plain's step p50 (`p_step`) on the same machine
    /// ([`paired`], µs), so both terms come from the same (paired) launches.
    fn step_minus_callbacks(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        x_step: Vec<LaunchStat>,
        p_step: &[LaunchStat],
    ) -> Option<(f64, Vec<f64>)> {
        let cb = self.launch_stats(config, phase, cell, Metric::CallbackP50);
        let x: Vec<LaunchStat> = x_step
            .into_iter()
            .filter_map(|s| {
                let c = cb.iter().find(|c| c.launch == s.launch)?;
                Some(LaunchStat {
                    est: s.est - c.est,
                    reps: std::sync::Arc::new(combine2(&s.reps, &c.reps, |a, b| a - b)),
                    ..s
                })
            })
            .collect();
        paired(&x, p_step, |v| v).compared()
    }

    /// Phase A cells of `config` at `rate` (one per Phase A shape).
    fn phase_a_cells_at(&self, config: &str, rate: f64) -> Vec<String> {
        self.stats
            .iter()
            .filter(|(k, s)| {
                k.config == config && k.phase == Phase::A && (s.rate - rate).abs() < 1e-9
            })
            .map(|(k, _)| k.cell.clone())
            .collect()
    }

    /// Configs with data, in canonical order (plain included or not).
    fn configs(&self, with_plain: bool) -> Vec<&str> {
        let mut configs: Vec<&str> = self
            .stats
            .keys()
            .map(|k| k.config.as_str())
            .filter(|c| with_plain || *c != BASELINE)
            .collect();
        configs.sort_by_key(|c| config_order(c));
        configs.dedup();
        configs
    }

    /// The cells a tax of `config` is reported in: Phase A at ref_safe and ref_load (a cell
    /// twice when the two rates are equal) and every Phase B / B' shape.
    fn tax_cells(&self, config: &str, refs: &ReferenceRates) -> Vec<(TaxContext, Phase, String)> {
        let mut out = Vec::new();
        for (ctx, rate) in [
            (TaxContext::RefSafe, refs.ref_safe),
            (TaxContext::RefLoad, refs.ref_load),
        ] {
            let Some(rate) = rate else { continue };
            for cell in self.phase_a_cells_at(config, rate) {
                out.push((ctx, Phase::A, cell));
            }
        }
        for (ctx, phase) in [
            (TaxContext::ShapeB, Phase::B),
            (TaxContext::ShapeBp, Phase::Bp),
        ] {
            for k in self
                .stats
                .keys()
                .filter(|k| k.config == config && k.phase == phase)
            {
                out.push((ctx, phase, k.cell.clone()));
            }
        }
        out
    }

    /// Every tax the seed asks for: at ref_safe and ref_load (Phase A) and per Phase B / B'
    /// shape, for every non-plain config that has the cell (plain must have it too).
    pub(crate) fn all(&self, refs: &ReferenceRates) -> Vec<Tax> {
        let mut out = Vec::new();
        for config in self.configs(false) {
            for (ctx, phase, cell) in self.tax_cells(config, refs) {
                out.extend(self.tax(config, ctx, phase, &cell));
            }
        }
        out
    }
}

impl TaxEngine<'_> {
    /// The A/A tax of `config` in one cell: on each machine with ≥ 2 of its launches, those at
    /// even positions (A, in launch order on that machine) against those at odd positions (B),
    /// a machine whose launches ran the cell at different places split by place first
    /// ([`block_by_place`]: an A/A compares launches that ran the same sequence of cells),
    /// combined over the machines as a tax is ([`paired`]), with the replicates a tax gets.
    /// `None` when no machine ran two of its launches: launches on different machines differ by
    /// the machines as well, which the machine effect (not an A/A) reports.
    fn aa(&self, config: &str, context: TaxContext, phase: Phase, cell: &str) -> Option<AaTax> {
        let mut aa = self.aa_without(config, context, phase, cell, None)?;
        if aa.unstable {
            // Which single launch, left out, brings the A/A back to straddling 0 (the rest
            // split again by launch order on each machine): a reader then knows whether one
            // launch or the launches at large disagree. The mark itself stays.
            let mut launches: Vec<u32> = aa
                .launches_a
                .iter()
                .chain(&aa.launches_b)
                .copied()
                .collect();
            launches.sort_unstable();
            let (mut tried, mut straddling) = (Vec::new(), Vec::new());
            for l in launches {
                let Some(rest) = self.aa_without(config, context, phase, cell, Some(l)) else {
                    continue;
                };
                tried.push(l);
                if !rest.unstable {
                    straddling.push(AaWithout {
                        launch: l,
                        launches_a: rest.launches_a,
                        launches_b: rest.launches_b,
                        ttft_p90: rest.ttft_p90,
                        tpot_p90: rest.tpot_p90,
                    });
                }
            }
            aa.without_one = (!tried.is_empty()).then_some(AaLeaveOneOut { tried, straddling });
        }
        Some(aa)
    }

    /// The A/A of `config`'s launches in the cell, `without` one of them.
    fn aa_without(
        &self,
        config: &str,
        context: TaxContext,
        phase: Phase,
        cell: &str,
        without: Option<u32>,
    ) -> Option<AaTax> {
        let split = |m: Metric| -> (Vec<LaunchStat>, Vec<LaunchStat>) {
            let mut by: BTreeMap<String, Vec<LaunchStat>> = BTreeMap::new();
            let mut ls = self.launch_stats(config, phase, cell, m);
            ls.retain(|l| Some(l.launch) != without);
            self.block_by_place(phase, cell, &mut [(config, &mut ls)]);
            for l in ls {
                by.entry(l.machine.clone()).or_default().push(l);
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for (_, mut ls) in by.into_iter().filter(|(_, ls)| ls.len() >= 2) {
                ls.sort_by_key(|l| l.launch);
                for (i, l) in ls.into_iter().enumerate() {
                    if i % 2 == 0 { a.push(l) } else { b.push(l) }
                }
            }
            (a, b)
        };
        let rel = |m: Metric| -> Option<(TaxValue, Paired)> {
            let (a, b) = split(m);
            let p = paired(&a, &b, f64::ln);
            (!p.machines.is_empty()).then(|| {
                let (e, r) = p.relative();
                (self.value(e, &r, "fraction", &[m]), p)
            })
        };
        let (ttft_p90, pairing) = match rel(Metric::TtftP90) {
            Some((v, p)) => (Some(v), p),
            None => return None,
        };
        let tpot_p90 = rel(Metric::TpotP90).map(|(v, _)| v);
        let unstable = [&ttft_p90, &tpot_p90].iter().any(|t| {
            t.as_ref()
                .is_some_and(|t| matches!(t.detection, Detection::Tax | Detection::Negative))
        });
        Some(AaTax {
            config: config.to_owned(),
            context,
            phase,
            cell: cell.to_owned(),
            launches_a: pairing.a_used,
            launches_b: pairing.b_used,
            machines: pairing.machines,
            ttft_p90,
            tpot_p90,
            unstable,
            in_time: None,
            without_one: None,
        })
    }

    /// A/A taxes of every config with ≥ 2 launches, in the cells taxes are reported at (Phase A
    /// at ref_safe and ref_load, every Phase B / B' shape).
    ///
    /// The launch noise is the one estimated without `config`'s own cells when the other
    /// configs give one (`leave_out`): a config whose launches disagree would otherwise inflate
    /// the very noise its A/A is judged against.
    pub(crate) fn aa_all(
        &self,
        refs: &ReferenceRates,
        leave_out: &BTreeMap<String, NoiseModel>,
    ) -> Vec<AaTax> {
        let mut out = Vec::new();
        for config in self.configs(true) {
            let own;
            let engine = match leave_out.get(config) {
                Some(noise) => {
                    own = TaxEngine {
                        noise,
                        ..self.clone()
                    };
                    &own
                }
                None => self,
            };
            let mut seen = std::collections::BTreeSet::new();
            for (ctx, phase, cell) in self.tax_cells(config, refs) {
                // ref_safe = ref_load gives the same Phase A cell twice: one A/A is enough.
                if seen.insert((phase, cell.clone())) {
                    out.extend(engine.aa(config, ctx, phase, &cell));
                }
            }
        }
        out
    }
}

/// Relabels the launches `(launch, its place in it)` of each machine that ran the cell at
/// more than one place (0, unknown, counts as a place of its own) as `"{machine} (cell 1st)"`
/// (`"… (cell at an unknown place)"`), so that [`paired`] compares launches within a place on
/// such a machine; machines at one place keep their labels. Returns each new label with its
/// machine.
pub(crate) fn block_by_place(launches: &mut [(&mut LaunchStat, u32)]) -> BTreeMap<String, String> {
    let mut places: BTreeMap<String, std::collections::BTreeSet<u32>> = BTreeMap::new();
    for (l, p) in launches.iter() {
        places.entry(l.machine.clone()).or_default().insert(*p);
    }
    let mut blocks = BTreeMap::new();
    for (l, p) in launches.iter_mut() {
        if places[&l.machine].len() < 2 {
            continue;
        }
        let label = match *p {
            0 => format!("{} (cell at an unknown place)", l.machine),
            p => format!("{} (cell {})", l.machine, super::words::ordinal(p)),
        };
        blocks.insert(label.clone(), l.machine.clone());
        l.machine = label;
    }
    blocks
}

/// One launch's estimate of one statistic in one cell, with replicates that carry the launch
/// noise: the unit the within-machine comparisons are made of.
#[derive(Clone)]
pub(crate) struct LaunchStat {
    pub launch: u32,
    pub machine: String,
    pub est: f64,
    pub reps: Reps,
}

/// The within-machine comparison of two sets of launches (DESIGN.md §4.3 "Machines").
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Paired {
    /// Weighted mean over the shared machines of `mean f(a) − mean f(b)`; NaN without one.
    pub est: f64,
    /// The same on every replicate index.
    pub reps: Vec<f64>,
    /// The machines both sets ran on, sorted.
    pub machines: Vec<String>,
    /// Launches of `a` on machines where `b` has none (not used).
    pub unpaired: Vec<u32>,
    /// The launches of `a` and of `b` the comparison used (on the shared machines), sorted.
    pub a_used: Vec<u32>,
    pub b_used: Vec<u32>,
    /// Each shared machine's own difference (in `machines`' order): what the weighted mean
    /// combines, so a reader sees whether the machines agree.
    pub per_machine: Vec<MachineDiff>,
}

/// One machine's `mean f(a) − mean f(b)` in a within-machine comparison ([`paired`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MachineDiff {
    pub machine: String,
    pub est: f64,
    /// The launches of `a` and of `b` on that machine.
    pub a: Vec<u32>,
    pub b: Vec<u32>,
}

impl Paired {
    /// A comparison of log estimates as a relative tax: `exp(θ) − 1` and its replicates.
    fn relative(&self) -> (f64, Vec<f64>) {
        (
            self.est.exp_m1(),
            self.reps.iter().map(|r| r.exp_m1()).collect(),
        )
    }

    /// The estimate and replicates, when the two sets shared a machine.
    fn compared(self) -> Option<(f64, Vec<f64>)> {
        (!self.machines.is_empty()).then_some((self.est, self.reps))
    }
}

/// `a` against `b` within machines: on each machine with launches of both, the mean of `f`
/// over `a`'s launch estimates minus the mean over `b`'s, weighted over the machines by
/// `k_a·k_b/(k_a + k_b)` — the inverse of that difference's variance in units of one launch's,
/// so with one machine this is the plain difference of means, and with one launch of each on
/// every machine the mean of the per-machine differences. Each replicate index gets the same
/// arithmetic on the launches' replicates, which carry each launch's noise independently, so
/// the replicates' spread is that of the estimate: `σ²_L · Σ_h w_h (1/k_a,h + 1/k_b,h) / (Σ w)²`
/// = `σ²_L / Σ_h w_h`. Launches of `a` on machines without `b` are listed, not used; `b`'s
/// other machines are ignored.
pub(crate) fn paired(a: &[LaunchStat], b: &[LaunchStat], f: impl Fn(f64) -> f64) -> Paired {
    let by = |set: &[LaunchStat]| {
        let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, l) in set.iter().enumerate() {
            out.entry(l.machine.clone()).or_default().push(i);
        }
        out
    };
    let (ga, gb) = (by(a), by(b));
    let nrep = a.iter().chain(b).map(|l| l.reps.len()).min().unwrap_or(0);
    let mean = |set: &[LaunchStat], idx: &[usize], g: &dyn Fn(&LaunchStat) -> f64| {
        idx.iter().map(|&i| g(&set[i])).sum::<f64>() / idx.len() as f64
    };
    let (mut num, mut wsum) = (0.0, 0.0);
    let mut reps = vec![0.0; nrep];
    let mut machines = Vec::new();
    let (mut unpaired, mut a_used, mut b_used) = (Vec::new(), Vec::new(), Vec::new());
    let mut per_machine = Vec::new();
    for (machine, ia) in &ga {
        let Some(ib) = gb.get(machine) else {
            unpaired.extend(ia.iter().map(|&i| a[i].launch));
            continue;
        };
        a_used.extend(ia.iter().map(|&i| a[i].launch));
        b_used.extend(ib.iter().map(|&i| b[i].launch));
        let (ka, kb) = (ia.len() as f64, ib.len() as f64);
        let w = ka * kb / (ka + kb);
        let d = mean(a, ia, &|l| f(l.est)) - mean(b, ib, &|l| f(l.est));
        per_machine.push(MachineDiff {
            machine: machine.clone(),
            est: d,
            a: ia.iter().map(|&i| a[i].launch).collect(),
            b: ib.iter().map(|&i| b[i].launch).collect(),
        });
        num += w * d;
        wsum += w;
        for (r, out) in reps.iter_mut().enumerate() {
            *out += w * (mean(a, ia, &|l| f(l.reps[r])) - mean(b, ib, &|l| f(l.reps[r])));
        }
        machines.push(machine.clone());
    }
    unpaired.sort_unstable();
    a_used.sort_unstable();
    b_used.sort_unstable();
    if wsum > 0.0 {
        reps.iter_mut().for_each(|r| *r /= wsum);
    } else {
        reps.clear();
    }
    Paired {
        est: if wsum > 0.0 { num / wsum } else { f64::NAN },
        reps,
        machines,
        unpaired,
        a_used,
        b_used,
        per_machine,
    }
}

/// [`paired`] of `a` against `b` once without each machine they share (the launches of both
/// there left out): `(machine left out, comparison on the rest)`, in the machines' order. Empty
/// when they share fewer than two machines (nothing would be left).
pub(crate) fn without_each_machine(
    a: &[LaunchStat],
    b: &[LaunchStat],
    f: impl Fn(f64) -> f64 + Copy,
) -> Vec<(String, Paired)> {
    let shared = paired(a, b, f).machines;
    if shared.len() < 2 {
        return Vec::new();
    }
    shared
        .into_iter()
        .map(|gone| {
            let keep = |set: &[LaunchStat]| -> Vec<LaunchStat> {
                set.iter().filter(|l| l.machine != gone).cloned().collect()
            };
            let rest = paired(&keep(a), &keep(b), f);
            (gone, rest)
        })
        .collect()
}

/// Of a detected tax `v` of `metric` and its value without each of its `shared` machines in
/// turn (`without`), the machines without which it is no longer detected as it was; when
/// several are, each is marked borderline (the tax sits near the edge of detection rather
/// than on one machine).
pub(crate) fn decisive_machines(
    metric: &str,
    v: &TaxValue,
    without: Vec<(String, TaxValue)>,
    shared: u32,
) -> Vec<OneMachine> {
    let flips: Vec<(String, TaxValue)> = without
        .into_iter()
        .filter(|(_, w)| w.detection != v.detection)
        .collect();
    let borderline = flips.len() > 1;
    flips
        .into_iter()
        .map(|(machine, w)| OneMachine {
            metric: metric.to_owned(),
            machine,
            without: Some(w),
            shared,
            borderline,
        })
        .collect()
}

/// Whether the CI excludes zero. A CI that does not contain its own estimate (e.g. from a
/// handful of resamples) is no evidence either way: `Unknown`, never a detected tax.
pub fn detection(e: &Estimate) -> Detection {
    if !e.ci_contains_estimate() {
        return Detection::Unknown;
    }
    match (e.lo, e.hi) {
        (Some(lo), _) if lo > 0.0 => Detection::Tax,
        (_, Some(hi)) if hi < 0.0 => Detection::Negative,
        (Some(_), Some(_)) => Detection::Inconclusive,
        _ => Detection::Unknown,
    }
}

/// `a − b` of two (estimate, replicates) pairs.
pub(crate) fn diff(a: &(f64, Vec<f64>), b: &(f64, Vec<f64>)) -> (f64, Vec<f64>) {
    (a.0 - b.0, combine2(&a.1, &b.1, |x, y| x - y))
}

/// `a / b` of two (estimate, replicates) pairs.
pub(crate) fn ratio(a: &(f64, Vec<f64>), b: &(f64, Vec<f64>)) -> (f64, Vec<f64>) {
    (a.0 / b.0, combine2(&a.1, &b.1, |x, y| x / y))
}

/// `f(a, b, c)` of three (estimate, replicates) pairs.
pub(crate) fn map3(
    a: &(f64, Vec<f64>),
    b: &(f64, Vec<f64>),
    c: &(f64, Vec<f64>),
    f: impl Fn(f64, f64, f64) -> f64,
) -> (f64, Vec<f64>) {
    (f(a.0, b.0, c.0), combine3(&a.1, &b.1, &c.1, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ls(launch: u32, machine: &str, est: f64, reps: &[f64]) -> LaunchStat {
        LaunchStat {
            launch,
            machine: machine.to_owned(),
            est,
            reps: std::sync::Arc::new(reps.to_vec()),
        }
    }

    /// A detected tax (+20% [+2%, +40%]) and its value without each of four machines: without
    /// m1 it is no longer detected, without the others it is, so it rests on m1 alone; when m3
    /// also undoes it, both are listed as borderline. A tax faster than plain (Negative) that
    /// reads as a tax without a machine also counts: the detection changed. Nothing flips,
    /// nothing listed.
    #[test]
    fn the_machines_that_undo_a_detection_are_decisive_and_several_are_borderline() {
        let tv = |est: f64, lo: f64, hi: f64| {
            let value = Estimate {
                est,
                lo: Some(lo),
                hi: Some(hi),
            };
            TaxValue {
                detection: detection(&value),
                value,
                unit: "fraction".into(),
            }
        };
        let v = tv(0.20, 0.02, 0.40);
        let without = |m3: TaxValue| {
            vec![
                ("m1".to_owned(), tv(0.08, -0.10, 0.30)),
                ("m2".to_owned(), tv(0.22, 0.01, 0.45)),
                ("m3".to_owned(), m3),
                ("m4".to_owned(), tv(0.19, 0.03, 0.38)),
            ]
        };
        let one = decisive_machines("TTFT p90", &v, without(tv(0.21, 0.01, 0.44)), 4);
        assert_eq!(one.len(), 1, "{one:?}");
        assert_eq!(
            (one[0].machine.as_str(), one[0].shared, one[0].borderline),
            ("m1", 4, false)
        );
        assert_eq!(one[0].without.as_ref().unwrap().value.est, 0.08);
        let two = decisive_machines("TTFT p90", &v, without(tv(0.15, -0.01, 0.33)), 4);
        let names: Vec<&str> = two.iter().map(|o| o.machine.as_str()).collect();
        assert_eq!(names, ["m1", "m3"]);
        assert!(two.iter().all(|o| o.borderline && o.metric == "TTFT p90"));
        let faster = tv(-0.10, -0.18, -0.02);
        let flipped = decisive_machines(
            "TPOT p90",
            &faster,
            vec![
                ("m1".into(), tv(0.05, 0.01, 0.09)),
                ("m2".into(), tv(-0.11, -0.2, -0.03)),
            ],
            2,
        );
        assert_eq!(flipped.len(), 1);
        assert_eq!(flipped[0].machine, "m1");
        let none = decisive_machines("TTFT p90", &v, vec![("m2".into(), tv(0.22, 0.01, 0.45))], 2);
        assert!(none.is_empty());
    }

    /// Three machines, m1 with two launches of `a` against one of `b`, m2 and m3 one against
    /// one; log differences by hand: m1 (ln 3 + ln 3)/2 − ln 1 = 1.0986, m2 ln 1.1 − ln 1 =
    /// 0.0953, m3 ln 1.2 − ln 1 = 0.1823, weights 2·1/3 = 2/3, 1/2, 1/2. Without m1 the
    /// weighted mean is (0.0953 + 0.1823)/2 = 0.1388; without m2, (2/3·1.0986 +
    /// 1/2·0.1823)/(7/6) = 0.7059; without m3, (2/3·1.0986 + 1/2·0.0953)/(7/6) = 0.6686. A
    /// launch of `a` on a fourth machine without `b` stays unpaired in every comparison, and
    /// the replicate arithmetic is the estimate's.
    #[test]
    fn without_each_machine_leaves_one_shared_machine_out_at_a_time() {
        let a = [
            ls(0, "m1", 3.0, &[3.0, 3.0]),
            ls(1, "m1", 3.0, &[3.0, 3.0]),
            ls(2, "m2", 1.1, &[1.1, 1.1]),
            ls(3, "m3", 1.2, &[1.2, 1.2]),
            ls(4, "m4", 9.0, &[9.0, 9.0]),
        ];
        let b = [
            ls(0, "m1", 1.0, &[1.0, 1.0]),
            ls(1, "m2", 1.0, &[1.0, 1.0]),
            ls(2, "m3", 1.0, &[1.0, 1.0]),
        ];
        let out = without_each_machine(&a, &b, f64::ln);
        let gone: Vec<&str> = out.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(gone, ["m1", "m2", "m3"]);
        for ((g, p), want) in out.iter().zip([0.1388, 0.7059, 0.6686]) {
            assert!(
                (p.est - want).abs() < 1e-4,
                "without {g}: {} vs {want}",
                p.est
            );
            assert!(
                p.reps.iter().all(|r| (r - p.est).abs() < 1e-12),
                "without {g}"
            );
            assert!(!p.machines.contains(g), "without {g}: {:?}", p.machines);
            assert_eq!(p.machines.len(), 2);
            assert_eq!(p.unpaired, [4]);
        }
        // One shared machine: nothing is left without it.
        assert!(without_each_machine(&a[..2], &b[..1], f64::ln).is_empty());
    }

    /// The eighteenth stretch's machine: mooncake_both l5 and plain l7 ran the 2 req/s cell
    /// 1st, mooncake_both l6 and plain l8 ran it 4th (TTFT p90 134.2, 123.9, 125.9, 98.5 ms, the
    /// numpy-linear p90s by hand from the raw records); machine n ran everything 1st. Blocked by
    /// place, m gives one comparison per place: 134.2/123.9 − 1 = +8.31% and 125.9/98.5 − 1 =
    /// +27.82% (by hand), n keeps its label; an A/A of plain on m then has no pair (one launch
    /// per place), where unblocked it would set l7 (1st) against l8 (4th).
    #[test]
    fn blocks_by_place_split_only_the_machines_with_several_places() {
        let mut x = [
            ls(5, "m", 134.2, &[134.2]),
            ls(6, "m", 125.9, &[125.9]),
            ls(0, "n", 110.0, &[110.0]),
        ];
        let mut p = [
            ls(7, "m", 123.9, &[123.9]),
            ls(8, "m", 98.5, &[98.5]),
            ls(1, "n", 100.0, &[100.0]),
        ];
        let places = |l: u32| match l {
            6 | 8 => 4,
            _ => 1,
        };
        let blocks = {
            let mut all: Vec<(&mut LaunchStat, u32)> = x
                .iter_mut()
                .chain(p.iter_mut())
                .map(|l| {
                    let at = places(l.launch);
                    (l, at)
                })
                .collect();
            block_by_place(&mut all)
        };
        assert_eq!(
            blocks,
            BTreeMap::from([
                ("m (cell 1st)".to_owned(), "m".to_owned()),
                ("m (cell 4th)".to_owned(), "m".to_owned()),
            ])
        );
        let r = paired(&x, &p, f64::ln);
        let terms: Vec<(String, f64)> = r
            .per_machine
            .iter()
            .map(|d| (d.machine.clone(), d.est.exp_m1()))
            .collect();
        assert_eq!(terms.len(), 3);
        assert_eq!(terms[0].0, "m (cell 1st)");
        assert!((terms[0].1 - 0.0831).abs() < 5e-5, "{terms:?}");
        assert_eq!(terms[1].0, "m (cell 4th)");
        assert!((terms[1].1 - 0.2782).abs() < 5e-5, "{terms:?}");
        assert_eq!(terms[2].0, "n");
        assert!((terms[2].1 - 0.10).abs() < 1e-12);
        // Unknown places are a block of their own; a machine at one place is left alone.
        let mut u = [ls(0, "k", 1.0, &[1.0]), ls(1, "k", 1.0, &[1.0])];
        let (a, b) = u.split_at_mut(1);
        let blocks = block_by_place(&mut [(&mut a[0], 2), (&mut b[0], 0)]);
        assert_eq!(blocks.len(), 2);
        assert_eq!(u[1].machine, "k (cell at an unknown place)");
        assert_eq!(u[0].machine, "k (cell 2nd)");
        let mut one = [ls(0, "j", 1.0, &[1.0]), ls(1, "j", 1.0, &[1.0])];
        let (a, b) = one.split_at_mut(1);
        assert!(block_by_place(&mut [(&mut a[0], 3), (&mut b[0], 3)]).is_empty());
        assert_eq!(one[0].machine, "j");
    }

    /// By hand: X has 2 launches on m1 (log 1.0, 1.2) and 1 on m3 (no plain there); plain has
    /// 1 on m1 (log 0.9) and 2 on m2 (X never ran there). Only m1 pairs: d = 1.1 − 0.9 = 0.2,
    /// weight 2·1/3 (alone, so it cancels). Replicate 0 shifts every launch by +0.1 (d stays
    /// 0.2), replicate 1 shifts X's m1 launches by +0.3 (d = 0.5).
    #[test]
    fn paired_uses_shared_machines_only() {
        let e = f64::exp;
        let x = [
            ls(0, "m1", e(1.0), &[e(1.1), e(1.3)]),
            ls(1, "m1", e(1.2), &[e(1.3), e(1.5)]),
            ls(2, "m3", e(5.0), &[e(5.0), e(5.0)]),
        ];
        let p = [
            ls(0, "m1", e(0.9), &[e(1.0), e(0.9)]),
            ls(1, "m2", e(3.0), &[e(3.0), e(3.0)]),
            ls(2, "m2", e(3.0), &[e(3.0), e(3.0)]),
        ];
        let r = paired(&x, &p, f64::ln);
        assert_eq!(r.machines, vec!["m1".to_owned()]);
        assert_eq!(r.unpaired, vec![2]);
        assert!((r.est - 0.2).abs() < 1e-12, "{}", r.est);
        assert!((r.reps[0] - 0.2).abs() < 1e-12 && (r.reps[1] - 0.5).abs() < 1e-12);
    }

    /// By hand: two machines, m1 with 2 X and 1 plain launches (d₁ = 0.3, w₁ = 2/3), m2 with 1
    /// and 1 (d₂ = 0.0, w₂ = 1/2): (2/3 · 0.3 + 1/2 · 0) / (2/3 + 1/2) = 0.2/1.1667 = 0.171428…
    /// On the identity scale (absolute taxes) the same weights apply to plain differences.
    #[test]
    fn paired_weights_machines_by_their_launch_counts() {
        let x = [
            ls(0, "m1", 1.3, &[]),
            ls(1, "m1", 1.3, &[]),
            ls(2, "m2", 2.0, &[]),
        ];
        let p = [ls(0, "m1", 1.0, &[]), ls(1, "m2", 2.0, &[])];
        let r = paired(&x, &p, |v| v);
        assert!((r.est - 0.2 / (2.0 / 3.0 + 0.5)).abs() < 1e-12, "{}", r.est);
        assert_eq!(r.machines.len(), 2);
        assert!(r.reps.is_empty() && r.unpaired.is_empty());
        // Each machine's own term, with its launches: d₁ = 1.3 − 1.0 = 0.3 (X l0, l1 vs plain
        // l0), d₂ = 2.0 − 2.0 = 0 (X l2 vs plain l1).
        let by: Vec<(&str, f64, &[u32], &[u32])> = r
            .per_machine
            .iter()
            .map(|d| (d.machine.as_str(), d.est, &d.a[..], &d.b[..]))
            .collect();
        assert_eq!(by.len(), 2);
        assert_eq!((by[0].0, by[0].2, by[0].3), ("m1", &[0, 1][..], &[0][..]));
        assert_eq!((by[1].0, by[1].2, by[1].3), ("m2", &[2][..], &[1][..]));
        assert!((by[0].1 - 0.3).abs() < 1e-12 && by[1].1.abs() < 1e-12);
        // No shared machine: no estimate, every launch listed.
        let none = paired(&x[2..], &p[..1], |v| v);
        assert!(none.est.is_nan() && none.machines.is_empty() && none.reps.is_empty());
        assert_eq!(none.unpaired, vec![2]);
    }
}
