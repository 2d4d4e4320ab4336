//! Verdicts on the seed's pre-registered hypotheses H1–H6 ([`hypotheses`]) and success
//! criteria SC1–SC7 ([`criteria`]).
//!
//! Every verdict carries the estimate, its CI, the falsifier threshold and one of four
//! outcomes: **supported** / **refuted** / **inconclusive** (the CI straddles the threshold) /
//! **not testable** (a needed config or measurement is missing; the reason names it).
//! The decision uses the CI, never the point estimate alone, so noise cannot produce a
//! false tax.
//!
//! This module reads the analysis ([`crate::analysis::Analysis`]: estimates, CIs and the
//! bootstrap replicates of each tax) and never the other way round: the analysis knows nothing
//! of hypotheses. Each threshold is a constant next to the rule that uses it; the report's
//! figures import them from here.

mod bench_time;
mod criteria;
pub(crate) mod hypotheses;
mod model;
pub mod sensitivity;

use ctax_schema::{Phase, ReferenceRates, SCHEMA_VERSION, fmt_rate};

pub use model::{Verdict, VerdictKind, Verdicts};

use crate::analysis::Analysis;
use crate::analysis::model::{CellStats, DatasetInfo, Estimate};
use crate::analysis::taxes::TaxEngine;
use crate::analysis::words::signed;
use crate::ingest::Dataset;

/// Evaluates H1–H6 and SC1–SC7 on an analysis of `ds` (SC6 and SC7 read the run artifacts and
/// the manifest).
pub(crate) fn evaluate(analysis: &Analysis, ds: &Dataset) -> Verdicts {
    let engine = analysis.taxes();
    let s = &analysis.result.summary;
    let ctx = Ctx {
        engine: &engine,
        refs: &s.reference_rates,
        info: &s.dataset,
        cells: &s.cells,
    };
    let hypotheses = hypotheses::all(&ctx);
    let success_criteria = criteria::all(&ctx, &hypotheses, ds);
    let mut v = Verdicts {
        schema_version: SCHEMA_VERSION,
        simulated: s.dataset.simulated,
        hypotheses,
        success_criteria,
        unstable: s.aa_taxes.iter().any(|a| a.unstable),
        without_episodes: None,
        without_holders: None,
    };
    apply_noise_rules(&mut v, s.launch_noise.ttft_known());
    note_single_launches(&mut v, &s.taxes, |id| hypotheses::configs_in(&ctx, id));
    note_same_cell(
        &mut v,
        &same_cell_at_ref_safe(&s.same_cell, &s.taxes),
        |id| hypotheses::configs_in(&ctx, id),
    );
    note_mixed_places(&mut v, &s.mixed_places, |id| {
        hypotheses::configs_in(&ctx, id)
    });
    note_noisier_phases(&mut v, s);
    note_launch_order(&mut v, &s.machines.order, |id| {
        hypotheses::configs_in(&ctx, id)
    });
    v
}

/// A tax verdict whose configs had plain on one side of their launches on every machine they
/// shared in the verdict's phase ([`crate::analysis::launch_order`]) says so: a drift of those
/// machines over their stretches is in its taxes.
fn note_launch_order(
    v: &mut Verdicts,
    order: &[crate::analysis::launch_order::OrderBalance],
    configs_of: impl Fn(&str) -> &'static [&'static str],
) {
    for x in testable_mut(v) {
        let phase = hypotheses::phase_of(&x.id);
        let configs = configs_of(&x.id);
        let sides: Vec<String> = order
            .iter()
            .filter(|o| o.phase == phase && configs.contains(&o.config.as_str()))
            .filter_map(|o| Some(format!("{} {}", o.one_sided()?, o.config)))
            .collect();
        if !sides.is_empty() {
            x.reason = format!(
                "{}; launch order one-sided: plain ran {} on every machine they shared (a \
                 machine's drift over its stretch is in the tax; see Machines)",
                x.reason,
                sides.join(", ")
            );
        }
    }
}

/// A verdict on Phase B (H5: TTFT p90, H6: TPOT p90, SC5: both) whose phase's launches spread
/// more than the pool its cells carry says so: its CI may be too narrow. Only where a tax of
/// that metric is read in a cell of the phase that carries the pool (a cell with noise of its
/// own does not).
fn note_noisier_phases(v: &mut Verdicts, s: &crate::analysis::model::AnalysisSummary) {
    use crate::analysis::launch_noise::cells_on_the_pool;
    let noise = &s.launch_noise;
    let noisier: Vec<_> = noise
        .noisier_phases()
        .into_iter()
        .filter(|n| {
            cells_on_the_pool(noise, &s.cells, &s.taxes, n.phase, &n.metric)
                .iter()
                .any(|(_, taxed)| *taxed)
        })
        .collect();
    note_noisier(v, &noisier);
}

/// [`note_noisier_phases`]' note, given the noisier phases whose pool a tax is read on.
fn note_noisier(v: &mut Verdicts, noisier: &[crate::analysis::launch_noise::NoisierPhase]) {
    for x in testable_mut(v) {
        let phase = hypotheses::phase_of(&x.id);
        let metrics: &[&str] = match x.id.as_str() {
            "h5" => &["ttft_p90"],
            "h6" => &["tpot_p90"],
            "sc5" => &["ttft_p90", "tpot_p90"],
            _ => &[],
        };
        let hits: Vec<String> = noisier
            .iter()
            .filter(|n| n.phase == phase && metrics.contains(&n.metric.as_str()))
            .map(|n| n.spread())
            .collect();
        if !hits.is_empty() {
            x.reason = format!(
                "{}; Phase {}'s launches spread more than the pool its CIs carry ({}), so the CI may be too narrow (see Warnings)",
                x.reason,
                phase.label(),
                hits.join("; ")
            );
        }
    }
}

/// Every hypothesis and success criterion that is not *not testable*.
fn testable_mut(v: &mut Verdicts) -> impl Iterator<Item = &mut Verdict> {
    v.hypotheses
        .iter_mut()
        .chain(v.success_criteria.iter_mut())
        .filter(|x| x.verdict != VerdictKind::NotTestable)
}

/// The same-cell comparisons of the cells a Phase A verdict reads, its ref_safe cells: one of
/// another cell (Phase B's, where ref_safe moved after Phase B ran, or in the rerun without the
/// configs that hold ref_safe down, `sensitivity::without_holders`) is not its.
fn same_cell_at_ref_safe(
    same: &[crate::analysis::same_cell::SameCell],
    taxes: &[crate::analysis::model::Tax],
) -> Vec<crate::analysis::same_cell::SameCell> {
    same.iter()
        .filter(|c| {
            taxes.iter().any(|t| {
                t.context == crate::analysis::model::TaxContext::RefSafe && t.cell == c.cell
            })
        })
        .cloned()
        .collect()
}

/// A Phase A verdict (H1–H4, SC1–SC4 read TTFT p90 at ref_safe) whose config Phase B measured
/// in the same cell with a tax its CI tells apart says so: the other phase's number is part of
/// what the verdict can be cited for.
fn note_same_cell(
    v: &mut Verdicts,
    same: &[crate::analysis::same_cell::SameCell],
    configs_of: impl Fn(&str) -> &'static [&'static str],
) {
    for x in testable_mut(v).filter(|x| hypotheses::phase_of(&x.id) == Phase::A) {
        let notes: Vec<String> = same
            .iter()
            .filter(|c| c.metric == "ttft_p90" && c.disagrees())
            .filter(|c| configs_of(&x.id).contains(&c.config.as_str()))
            .map(|c| {
                let ((a_up, a_n), (b_up, b_n)) = (c.signs(Phase::A), c.signs(Phase::B));
                let place = c
                    .place_summary()
                    .map_or(String::new(), |p| format!("; by the cell's place in the launch: {p}"));
                format!(
                    "{} {} in Phase B's measurement of the same cell ({}), against {} in Phase A (above 0 on {b_up} of Phase B's {b_n} machines, {a_up} of Phase A's {a_n}{place})",
                    c.config,
                    c.phase_b.value.pct_ci(),
                    c.cell,
                    c.phase_a.value.pct_ci()
                )
            })
            .collect();
        if !notes.is_empty() {
            x.reason = format!(
                "{}; the phases disagree: {} (see Warnings)",
                x.reason,
                notes.join("; ")
            );
        }
    }
}

/// A verdict whose phase has cells that its configs' (or plain's) launches ran at different
/// places in the launch ([`crate::analysis::launch_places`]) says which: its taxes pool the
/// places, and a place can move a tax.
fn note_mixed_places(
    v: &mut Verdicts,
    mixed: &[crate::analysis::launch_places::MixedPlaces],
    configs_of: impl Fn(&str) -> &'static [&'static str],
) {
    for x in testable_mut(v) {
        let phase = hypotheses::phase_of(&x.id);
        let mut configs = configs_of(&x.id).to_vec();
        // SC6 (artifacts) and SC7 (time) compare no config with plain: no tax to note.
        if configs.is_empty() {
            continue;
        }
        configs.push(crate::analysis::taxes::BASELINE);
        let cells: Vec<&str> = mixed
            .iter()
            .filter(|m| m.phase == phase && m.involves(&configs))
            .map(|m| m.cell.as_str())
            .collect();
        if !cells.is_empty() {
            x.reason = format!(
                "{}; Phase {} taxes pool launches that ran a cell at different places in the launch ({}; see Warnings)",
                x.reason,
                phase.label(),
                cells.join(", ")
            );
        }
    }
}

/// A tax verdict that rests on a single launch of a config says so: the tax compares the
/// config's launches with plain's on the machines they share, and when only one launch of
/// either takes part its CI carries the launch noise of the other launches, not its own. The
/// launches that count are those the taxes of the verdict's phase compared (at ref_safe for
/// Phase A, any Phase B shape for Phase B), not every launch the config ran.
fn note_single_launches(
    v: &mut Verdicts,
    taxes: &[crate::analysis::model::Tax],
    configs_of: impl Fn(&str) -> &'static [&'static str],
) {
    use crate::analysis::model::TaxContext;
    for x in testable_mut(v) {
        let phase = hypotheses::phase_of(&x.id);
        let context = if phase == Phase::A {
            TaxContext::RefSafe
        } else {
            TaxContext::ShapeB
        };
        let configs = configs_of(&x.id);
        let compared: Vec<&crate::analysis::model::Tax> = taxes
            .iter()
            .filter(|t| t.context == context && !t.machines.is_empty())
            .filter(|t| configs.contains(&t.config.as_str()))
            .collect();
        let plain_once = compared.iter().any(|t| t.plain_launches.len() == 1);
        let once: Vec<&str> = plain_once
            .then_some("plain")
            .into_iter()
            .chain(configs.iter().copied().filter(|c| {
                compared
                    .iter()
                    .any(|t| t.config == *c && t.paired_launches.len() == 1)
            }))
            .collect();
        if !once.is_empty() {
            let phase = if phase == Phase::A {
                String::new()
            } else {
                format!(" in Phase {}", phase.label())
            };
            x.reason = format!(
                "{}; rests on a single launch{phase} of {} among the launches its taxes compare \
                 within machines (its CI carries the launch noise of the other launches, not its \
                 own)",
                x.reason,
                once.join(" and ")
            );
        }
    }
}

/// Verdicts about taxes (H1–H6, SC1–SC5; SC6/SC7 are about artifacts and time) cannot be
/// decided without launch-to-launch noise: supported/refuted become inconclusive with the
/// reason. An unstable dataset (an A/A tax that detects something) marks every such verdict.
fn apply_noise_rules(v: &mut Verdicts, noise_known: bool) {
    let unstable = v.unstable;
    for x in v
        .hypotheses
        .iter_mut()
        .chain(v.success_criteria.iter_mut())
        .filter(|x| !matches!(x.id.as_str(), "sc6" | "sc7"))
    {
        if !noise_known && matches!(x.verdict, VerdictKind::Supported | VerdictKind::Refuted) {
            x.reason = format!(
                "{}; the request-level CI alone would say {}: {}",
                crate::analysis::launch_noise::UNKNOWN_REASON,
                x.verdict.as_str(),
                x.reason
            );
            x.verdict = VerdictKind::Inconclusive;
        }
        if unstable && x.verdict != VerdictKind::NotTestable {
            x.reason = format!(
                "UNSTABLE DATASET (an A/A tax excludes 0, see Warnings): {}",
                x.reason
            );
        }
    }
}

/// What every verdict needs.
pub(crate) struct Ctx<'a> {
    pub engine: &'a TaxEngine<'a>,
    pub refs: &'a ReferenceRates,
    pub info: &'a DatasetInfo,
    pub cells: &'a [CellStats],
}

/// The seed's Phase A shape; used to pick the reference cell when Phase A ran several shapes.
const SEED_SHAPE: (u32, u32) = (4096, 256);

impl Ctx<'_> {
    /// The Phase A cell name at `ref_safe` shared by plain and `config`, or why there is none.
    fn ref_safe_cell(&self, configs: &[&str]) -> Result<String, String> {
        let Some(r) = self.refs.ref_safe else {
            return Err("ref_safe is undefined (no rate unsaturated for every config)".into());
        };
        for c in std::iter::once(&"plain").chain(configs) {
            self.has_data(c)?;
        }
        let mut shared: Vec<&CellStats> = self
            .cells
            .iter()
            .filter(|c| {
                c.launch.is_none()
                    && c.key.phase == Phase::A
                    && c.key.config == "plain"
                    && c.rate == r
            })
            .filter(|p| {
                configs.iter().all(|x| {
                    self.cells.iter().any(|c| {
                        c.launch.is_none()
                            && c.key.config == *x
                            && c.key.phase == Phase::A
                            && c.key.cell == p.key.cell
                    })
                })
            })
            .collect();
        shared.sort_by_key(|c| {
            (
                (c.input_len, c.output_len) != SEED_SHAPE,
                c.input_len,
                c.output_len,
            )
        });
        shared.first().map(|c| c.key.cell.clone()).ok_or_else(|| {
            format!(
                "no Phase A cell at ref_safe = {} req/s shared by plain and {}",
                fmt_rate(r),
                configs.join(", ")
            )
        })
    }

    /// `Ok` when `config` has data, else the reason it has none (pre-flight SKIP, not run, or
    /// no complete Phase A cell — with the exception its engine died of, when its log says).
    fn has_data(&self, config: &str) -> Result<(), String> {
        if !self.info.configs.iter().any(|c| c == config) {
            return Err(match self.info.skipped.get(config) {
                Some(r) => format!("{config}: {r}"),
                None => format!("{config}: no data"),
            });
        }
        if crate::analysis::model::has_complete_phase_a(self.cells, config) {
            return Ok(());
        }
        let deaths = self.info.engine_deaths(config);
        Err(if deaths.is_empty() {
            format!("{config}: no complete Phase A cell")
        } else {
            format!(
                "{config}: no complete Phase A cell; engine died ({})",
                deaths.join("; ")
            )
        })
    }
}

/// Builds a verdict from an estimate and a decision rule.
struct Draft {
    pub id: &'static str,
    pub title: &'static str,
    pub statement: &'static str,
    pub unit: &'static str,
    pub threshold: String,
}

impl Draft {
    fn not_testable(self, reason: impl Into<String>) -> Verdict {
        self.finish(None, VerdictKind::NotTestable, reason.into(), None)
    }

    fn finish(
        self,
        estimate: Option<Estimate>,
        verdict: VerdictKind,
        reason: String,
        label: Option<String>,
    ) -> Verdict {
        Verdict {
            id: self.id.into(),
            title: self.title.into(),
            statement: self.statement.into(),
            estimate,
            unit: self.unit.into(),
            threshold: self.threshold,
            verdict,
            reason,
            label,
        }
    }
}

/// Claim "value ≥ t": supported if the whole CI is ≥ t, refuted if it is entirely below t.
fn at_least(e: &Estimate, t: f64) -> VerdictKind {
    match (e.lo, e.hi) {
        (Some(lo), _) if lo >= t => VerdictKind::Supported,
        (_, Some(hi)) if hi < t => VerdictKind::Refuted,
        (Some(_), Some(_)) => VerdictKind::Inconclusive,
        _ => VerdictKind::NotTestable,
    }
}

/// Claim "value < t": supported if the whole CI is below t, refuted if it is entirely ≥ t.
fn below(e: &Estimate, t: f64) -> VerdictKind {
    match (e.lo, e.hi) {
        (_, Some(hi)) if hi < t => VerdictKind::Supported,
        (Some(lo), _) if lo >= t => VerdictKind::Refuted,
        (Some(_), Some(_)) => VerdictKind::Inconclusive,
        _ => VerdictKind::NotTestable,
    }
}

/// Claim "value ∈ [a, b]": supported if the CI lies inside, refuted if it is disjoint.
fn within(e: &Estimate, a: f64, b: f64) -> VerdictKind {
    match (e.lo, e.hi) {
        (Some(lo), Some(hi)) if lo >= a && hi <= b => VerdictKind::Supported,
        (Some(lo), Some(hi)) if hi < a || lo > b => VerdictKind::Refuted,
        (Some(_), Some(_)) => VerdictKind::Inconclusive,
        _ => VerdictKind::NotTestable,
    }
}

/// `+12.3% [+8.1%, +16.0%]` ([`Estimate::pct_ci`]; `(no CI)` without one).
fn pct(e: &Estimate) -> String {
    match (e.lo, e.hi) {
        (Some(_), Some(_)) => e.pct_ci(),
        _ => format!("{} (no CI)", e.pct_ci()),
    }
}

/// `+7.2 pp [-50.7, +67.5]`: a difference of two taxes (both fractions) in percentage points.
fn pp(e: &Estimate) -> String {
    let points = |x: f64| signed(x * 100.0, 1);
    match (e.lo, e.hi) {
        (Some(lo), Some(hi)) => format!("{} pp [{}, {}]", points(e.est), points(lo), points(hi)),
        _ => format!("{} pp (no CI)", points(e.est)),
    }
}

/// `0.41 [0.20, 0.63]`.
fn num(e: &Estimate) -> String {
    match (e.lo, e.hi) {
        (Some(lo), Some(hi)) => format!("{:.2} [{:.2}, {:.2}]", e.est, lo, hi),
        _ => format!("{:.2} (no CI)", e.est),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(est: f64, lo: f64, hi: f64) -> Estimate {
        Estimate {
            est,
            lo: Some(lo),
            hi: Some(hi),
        }
    }

    #[test]
    fn decision_rules_use_the_whole_interval() {
        assert_eq!(at_least(&e(0.2, 0.12, 0.3), 0.10), VerdictKind::Supported);
        assert_eq!(at_least(&e(0.05, 0.01, 0.09), 0.10), VerdictKind::Refuted);
        assert_eq!(
            at_least(&e(0.12, 0.08, 0.16), 0.10),
            VerdictKind::Inconclusive
        );
        assert_eq!(below(&e(0.2, 0.1, 0.4), 0.5), VerdictKind::Supported);
        assert_eq!(below(&e(0.7, 0.55, 0.9), 0.5), VerdictKind::Refuted);
        assert_eq!(below(&e(0.45, 0.3, 0.6), 0.5), VerdictKind::Inconclusive);
        assert_eq!(within(&e(0.4, 0.3, 0.5), 0.25, 0.6), VerdictKind::Supported);
        assert_eq!(within(&e(0.1, 0.05, 0.2), 0.25, 0.6), VerdictKind::Refuted);
        assert_eq!(
            within(&e(0.3, 0.2, 0.4), 0.25, 0.6),
            VerdictKind::Inconclusive
        );
        let no_ci = Estimate {
            est: 0.3,
            lo: None,
            hi: None,
        };
        assert_eq!(at_least(&no_ci, 0.1), VerdictKind::NotTestable);
    }

    /// A difference of taxes prints in percentage points, a tax in percent (by hand: 0.072 of a
    /// fraction is 7.2 points).
    #[test]
    fn differences_of_taxes_print_in_points() {
        assert_eq!(pp(&e(0.072, -0.507, 0.675)), "+7.2 pp [-50.7, +67.5]");
        assert_eq!(pct(&e(0.127, -0.313, 0.852)), "+12.7% [-31.3%, +85.2%]");
        let no_ci = Estimate {
            est: -0.069,
            lo: None,
            hi: None,
        };
        assert_eq!(pp(&no_ci), "-6.9 pp (no CI)");
    }

    /// The label column states only what the interval decides: the H200 archive's H3 ratio
    /// 0.10 [-2.59, 2.49] spans all three of SC3's ranges (< 0.3, 0.3-0.5, >= 0.5), so its label
    /// is undecided; a ratio whose whole interval lies in one range keeps that range's name.
    #[test]
    fn an_h3_label_names_a_range_only_when_the_interval_lies_in_it() {
        assert_eq!(
            hypotheses::h3_label(&e(0.10, -2.59, 2.49)),
            "undecided (point estimate: implementation-cost-dominated)"
        );
        assert_eq!(
            hypotheses::h3_label(&e(0.10, 0.02, 0.20)),
            "implementation-cost-dominated"
        );
        assert_eq!(
            hypotheses::h3_label(&e(0.7, 0.55, 0.9)),
            "framework-cost-dominated"
        );
        assert_eq!(
            hypotheses::h3_label(&e(0.4, 0.35, 0.45)),
            "mixed (ratio between 0.3 and 0.5)"
        );
        // At a boundary: 0.5 is framework (>=), 0.3 is no longer implementation (<).
        assert_eq!(
            hypotheses::h3_label(&e(0.6, 0.5, 0.8)),
            "framework-cost-dominated"
        );
        assert_eq!(
            hypotheses::h3_label(&e(0.2, 0.1, 0.3)),
            "undecided (point estimate: implementation-cost-dominated)"
        );
        assert_eq!(
            hypotheses::h3_point_label(&e(0.2, 0.1, 0.3)),
            "implementation-cost-dominated"
        );
    }

    /// H5/H6: the archive's H5 mean change -1.0 pp [-13.4, +10.6] includes 0, so the label does
    /// not say the tax shrinks; an interval on one side of 0 does.
    #[test]
    fn a_change_label_is_undecided_when_its_interval_includes_zero() {
        assert_eq!(
            hypotheses::change_label(&e(-0.010, -0.134, 0.106)),
            "undecided (point estimate: shrinks by 1.0 pp)"
        );
        assert_eq!(
            hypotheses::change_label(&e(0.05, 0.01, 0.09)),
            "grows by 5.0 pp"
        );
        assert_eq!(
            hypotheses::change_label(&e(-0.05, -0.09, -0.01)),
            "shrinks by 5.0 pp"
        );
        let no_ci = Estimate {
            est: 0.05,
            lo: None,
            hi: None,
        };
        assert_eq!(
            hypotheses::change_label(&no_ci),
            "undecided (point estimate: grows by 5.0 pp)"
        );
    }
}

#[cfg(test)]
mod same_cell_tests {
    use super::*;
    use crate::analysis::model::{Detection, Tax, TaxContext, TaxValue};
    use crate::analysis::same_cell::{self, MachineTax, SameCell};

    fn tax(est: f64, lo: f64, hi: f64, detection: Detection) -> TaxValue {
        TaxValue {
            value: Estimate {
                est,
                lo: Some(lo),
                hi: Some(hi),
            },
            unit: "fraction".into(),
            detection,
        }
    }

    /// H1 (Phase A) and H5 (Phase B), inconclusive, with the reason `base`.
    fn h1_and_h5() -> Verdicts {
        let verdict = |id: &str| Verdict {
            id: id.into(),
            title: String::new(),
            statement: String::new(),
            estimate: None,
            unit: "fraction".into(),
            threshold: String::new(),
            verdict: VerdictKind::Inconclusive,
            reason: "base".into(),
            label: None,
        };
        Verdicts {
            schema_version: SCHEMA_VERSION,
            simulated: false,
            hypotheses: vec![verdict("h1"), verdict("h5")],
            success_criteria: vec![],
            unstable: false,
            without_episodes: None,
            without_holders: None,
        }
    }

    fn machine(phase: Phase, name: &str, tax: f64, place: u32) -> MachineTax {
        MachineTax {
            phase,
            machine: name.into(),
            tax,
            launches: vec![0],
            plain_launches: vec![0],
            positions: vec![place, place],
        }
    }

    /// H1 (Phase A, mooncake_both) gets the note with the machine counts when Phase B's
    /// measurement of its cell disagrees; H5 (Phase B) and an agreeing check get none. Counts by
    /// hand: Phase A +12% and +14% (2 of 2 above 0), Phase B −16%, −9%, −15% (0 of 3). By
    /// place: 1st +12, +14, −9 (2 of 3 above 0, median +12.0%), 5th −16, −15 (median −15.5%);
    /// the rank sum of the 1st's is 3 + 4 + 5 = 12 against a mean of 3·6/2 = 9, and of the 10
    /// splits of 5 ranks only 6 ({1, 2, 3}) and 12 lie 3 from 9: p = 2/10 (by hand). Within a
    /// phase only Phase B has both sides: −9 (1st) ranks 3rd of 3, the 3 splits give 1, 2, 3
    /// around a mean of 2, and 1 and 3 lie 1 from it: p = 2/3 (by hand).
    #[test]
    fn a_disagreeing_same_cell_is_noted_with_its_machines() {
        let mut v = h1_and_h5();
        let mut same = SameCell {
            config: "mooncake_both".into(),
            cell: "r2_i4096_o256".into(),
            metric: "ttft_p90".into(),
            phase_a: tax(0.13, -0.001, 0.281, Detection::Inconclusive),
            phase_b: tax(-0.144, -0.281, 0.016, Detection::Inconclusive),
            difference: tax(-0.243, -0.387, -0.064, Detection::Negative),
            by_machine: vec![
                machine(Phase::A, "m1", 0.12, 1),
                machine(Phase::A, "m2", 0.14, 1),
                machine(Phase::B, "m3", -0.16, 5),
                machine(Phase::B, "m4", -0.09, 1),
                machine(Phase::B, "m5", -0.15, 5),
            ],
            split_by_place: vec![],
            by_place: vec![],
            place_test: None,
        };
        same.by_place = same_cell::by_place(&same.by_machine);
        same.place_test = same_cell::place_test(&same.by_machine);
        let configs = |_: &str| -> &'static [&'static str] { &["mooncake_both"] };
        note_same_cell(&mut v, std::slice::from_ref(&same), configs);
        assert!(
            v.hypotheses[0]
                .reason
                .contains("(above 0 on 0 of Phase B's 3 machines, 2 of Phase A's 2; by the cell's place in the launch: 1st on 3 machines (A 2, B 1), tax above 0 on 2, median +12.0%; 5th on 2 (B 2), above 0 on 0, median -15.5%; 1st against later: exact rank-sum p 0.200 (3 vs 2 machines); within a phase (B 1 vs 2): stratified p 0.667)"),
            "{}",
            v.hypotheses[0].reason
        );
        assert!(
            v.hypotheses[0]
                .reason
                .starts_with("base; the phases disagree: mooncake_both")
        );
        assert_eq!(v.hypotheses[1].reason, "base", "H5 reads Phase B");
        // Kept where a ref_safe tax reads its cell; dropped where ref_safe is another cell (a
        // ref_load tax in r2 does not count), so the note above would not be made.
        let at = |context: TaxContext, cell: &str| Tax {
            config: "mooncake_both".into(),
            context,
            phase: Phase::A,
            cell: cell.into(),
            rate: 0.0,
            input_len: 4096,
            output_len: 256,
            ttft_p90: None,
            tpot_p90: None,
            step_p50_us: None,
            callback_p50_us: None,
            step_minus_callback_us: None,
            machines: vec![],
            unpaired_launches: vec![],
            paired_launches: vec![],
            plain_launches: vec![],
            not_whole: vec![],
            one_machine: vec![],
        };
        let kept = same_cell_at_ref_safe(
            std::slice::from_ref(&same),
            &[at(TaxContext::RefSafe, "r2_i4096_o256")],
        );
        assert_eq!(kept, [same.clone()]);
        let other = [
            at(TaxContext::RefSafe, "r6_i4096_o256"),
            at(TaxContext::RefLoad, "r2_i4096_o256"),
        ];
        assert!(same_cell_at_ref_safe(std::slice::from_ref(&same), &other).is_empty());
        // Agreeing: no note.
        same.difference.detection = Detection::Inconclusive;
        v.hypotheses[0].reason = "base".into();
        note_same_cell(&mut v, &[same], configs);
        assert_eq!(v.hypotheses[0].reason, "base");
    }

    /// The same machines plus a Phase A machine (m6) whose launches of both configs ran the
    /// cell 1st (+8%) and 4th (+28%; +17% pooled): it counts at each place with its launches
    /// there, not as one machine at mixed places, and its two taxes are listed. By hand: 1st
    /// +12, +14, −9, +8 (3 of 4 above 0, median (8 + 12)/2 = +10.0%), 4th +28, 5th −16, −15.
    /// Rank test, 1st {+12, +14, −9, +8} against later {+28, −16, −15}: ranks 5, 6, 3, 4 (sum
    /// 18, mean 4·8/2 = 16) and 22 of the C(7, 4) = 35 splits lie ≥ 2 from 16: p 0.629; within
    /// phases (A 3 vs 1, B 1 vs 2) every one of the 4·3 joint splits lies as far: p 1.000 (both
    /// counted by a brute-force Python enumeration of all splits, independent of the
    /// convolution the test uses).
    #[test]
    fn a_machine_at_two_places_counts_at_each_place() {
        let pooled = MachineTax {
            positions: vec![1, 4, 1, 4],
            launches: vec![5, 6],
            plain_launches: vec![7, 8],
            ..machine(Phase::A, "m6", 0.17, 0)
        };
        let at = |place: u32, tax: f64, l: u32, p: u32| MachineTax {
            launches: vec![l],
            plain_launches: vec![p],
            ..machine(Phase::A, "m6", tax, place)
        };
        let by_machine = vec![
            machine(Phase::A, "m1", 0.12, 1),
            machine(Phase::A, "m2", 0.14, 1),
            machine(Phase::B, "m3", -0.16, 5),
            machine(Phase::B, "m4", -0.09, 1),
            machine(Phase::B, "m5", -0.15, 5),
            pooled,
        ];
        let split = vec![at(1, 0.08, 5, 7), at(4, 0.28, 6, 8)];
        let terms = same_cell::place_terms(&by_machine, &split);
        assert_eq!(terms.len(), 7, "m6 once per place, not pooled");
        assert!(!terms.iter().any(|t| t.machine == "m6" && t.tax == 0.17));
        let same = SameCell {
            config: "mooncake_both".into(),
            cell: "r2_i4096_o256".into(),
            metric: "ttft_p90".into(),
            phase_a: tax(0.15, 0.04, 0.27, Detection::Tax),
            phase_b: tax(-0.08, -0.19, 0.05, Detection::Inconclusive),
            difference: tax(-0.2, -0.32, -0.05, Detection::Negative),
            by_place: same_cell::by_place(&terms),
            place_test: same_cell::place_test(&terms),
            by_machine,
            split_by_place: split,
        };
        assert_eq!(
            same.signs(Phase::A),
            (3, 3),
            "signs count machines, m6 once"
        );
        assert_eq!(
            same.place_summary().unwrap(),
            "1st on 4 machines (A 3, B 1), tax above 0 on 3, median +10.0%; 4th on 1 (A 1), \
             above 0 on 1, median +28.0%; 5th on 2 (B 2), above 0 on 0, median -15.5%; 1st \
             against later: exact rank-sum p 0.629 (4 vs 3 machines); within a phase (A 3 vs 1, \
             B 1 vs 2): stratified p 1.000; on the machine that ran it at several places, its \
             launches at each place (no machine difference in these): A m6: 1st +8.0%, 4th +28.0%"
        );
    }

    /// A Phase B verdict reads the phase-noise note of its own metrics only: with Phase B's
    /// TTFT p90 and Phase A's TPOT p90 noisier than the pool, H5 (TTFT) and SC5 (both) name
    /// Phase B's TTFT spread, H6 (Phase B TPOT) and H1 (Phase A) get nothing, and a verdict that
    /// is not testable is left as it is. The spread by hand: exp(√0.0118) − 1 = 11.5%,
    /// exp(√0.0016) − 1 = 4.1%.
    #[test]
    fn a_noisier_phase_is_noted_on_the_verdicts_that_read_its_metric() {
        use crate::analysis::launch_noise::NoisierPhase;
        use crate::stats::launch_noise::PooledVariance;
        let pv = |var: f64, df: u32| PooledVariance { var, df, groups: 1 };
        let noisier = |metric: &str, phase: Phase| NoisierPhase {
            metric: metric.into(),
            phase,
            own: pv(0.0118, 1),
            rest: pv(0.0016, 5),
            f: 7.5,
            p: 0.041,
        };
        let mut v = h1_and_h5();
        let mut h6 = v.hypotheses[1].clone();
        h6.id = "h6".into();
        v.hypotheses.push(h6);
        let mut sc5 = v.hypotheses[1].clone();
        sc5.id = "sc5".into();
        v.success_criteria.push(sc5);
        let hits = [noisier("ttft_p90", Phase::B), noisier("tpot_p90", Phase::A)];
        note_noisier(&mut v, &hits);
        let note = "base; Phase B's launches spread more than the pool its CIs carry (TTFT p90 \
                    ±11.5% per launch (df 1) against ±4.1% (df 5), F 7.5, p 0.041), so the CI may \
                    be too narrow (see Warnings)";
        assert_eq!(v.hypotheses[0].reason, "base", "H1 reads Phase A's TTFT");
        assert_eq!(v.hypotheses[1].reason, note, "H5");
        assert_eq!(v.hypotheses[2].reason, "base", "H6 reads Phase B's TPOT");
        assert_eq!(v.success_criteria[0].reason, note, "SC5");
        let mut untested = h1_and_h5();
        untested.hypotheses[1].verdict = VerdictKind::NotTestable;
        note_noisier(&mut untested, &hits);
        assert_eq!(untested.hypotheses[1].reason, "base");
    }

    /// A Phase B verdict (H5) whose cells plain's or its config's launches ran at different
    /// places gets the note naming the cells; a Phase A verdict (H1) does not, and a mixed cell
    /// of another config's launches only notes nothing.
    #[test]
    fn a_verdict_over_mixed_places_names_the_cells() {
        use crate::analysis::launch_places::{LaunchRef, MixedPlaces};
        let mut v = h1_and_h5();
        let at = |config: &str, launch: u32| LaunchRef {
            config: config.into(),
            launch,
        };
        let mixed = |cell: &str, launch: LaunchRef| MixedPlaces {
            phase: Phase::B,
            cell: cell.into(),
            places: std::collections::BTreeMap::from([
                (5, vec![at("mooncake_both", 0)]),
                (1, vec![launch]),
            ]),
        };
        let configs = |_: &str| -> &'static [&'static str] { &["mooncake_both"] };
        note_mixed_places(
            &mut v,
            &[
                mixed("r2_i4096_o256", at("plain", 4)),
                mixed("r2_i512_o64", at("mooncake_both", 4)),
            ],
            configs,
        );
        assert_eq!(v.hypotheses[0].reason, "base", "H1 reads Phase A");
        assert_eq!(
            v.hypotheses[1].reason,
            "base; Phase B taxes pool launches that ran a cell at different places in the launch (r2_i4096_o256, r2_i512_o64; see Warnings)"
        );
        v.hypotheses[1].reason = "base".into();
        let mut other = mixed("r2_i4096_o256", at("nixl_both", 1));
        other.places.insert(5, vec![at("nixl_both", 0)]);
        note_mixed_places(&mut v, &[other], configs);
        assert_eq!(v.hypotheses[1].reason, "base");
        // A verdict that compares no config with plain (SC6, SC7) pools no taxes: no note,
        // also for a cell plain's own launches ran at different places.
        let none = |_: &str| -> &'static [&'static str] { &[] };
        note_mixed_places(&mut v, &[mixed("r2_i4096_o256", at("plain", 4))], none);
        assert_eq!(v.hypotheses[1].reason, "base");
    }
}
