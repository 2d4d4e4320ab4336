//! Analysis: raw runs → per-cell statistics with CIs, saturation criteria, reference rates and
//! taxes. Its output is data ([`Analysis`]): the verdicts ([`crate::verdicts`]) and the report
//! read it; nothing here knows a hypothesis.
//!
//! | question | module |
//! |---|---|
//! | what numbers does a cell have? | [`samples`] (extraction), [`cells`] (statistics) |
//! | when is a rate saturated? which are ref_safe / ref_load? | [`saturation`] |
//! | what is a tax? | [`taxes`] |
//! | do the GPUs of one host differ (plain vs plain)? | [`calibration`] |
//! | which launches ran on which machine, and do the machines differ? | [`machines`] |
//! | did plain run before, after or around each config on its machines? | [`launch_order`] |
//! | does the cell both phases measure give the same tax in both? | [`same_cell`] |
//! | which cells did launches run at different places in the launch? | [`launch_places`] |
//! | did a transient slow stretch set a launch's TTFT p90? | [`episodes`] |
//! | which conventions do the numbers follow? | [`conventions`] |
//! | how are numbers written into warnings and reasons? | [`words`] |
//! | what do the output files contain? | [`model`] |

mod calibration;
mod cells;
mod conventions;
pub mod episodes;
pub mod first_launch;
pub(crate) mod launch_noise;
pub mod launch_order;
pub mod launch_places;
pub mod machines;
pub mod model;
mod replicates;
pub mod same_cell;
pub(crate) mod samples;
pub(crate) mod saturation;
pub mod taxes;
pub(crate) mod words;

use std::collections::{BTreeMap, BTreeSet};

use ctax_schema::{Phase, ReferenceRates, SCHEMA_VERSION};
use serde::{Deserialize, Serialize};

use crate::ingest::{Dataset, gpu_model};
use crate::stats::BootstrapConfig;
use model::{
    AnalysisResult, AnalysisSummary, CANONICAL_CONFIGS, CellKey, CellStats, DataAccounting,
    DatasetInfo, config_order,
};
use replicates::Replicator;
use samples::CellSamples;
use taxes::TaxEngine;

/// Options of `ctax analyze` / `ctax report`.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    pub bootstrap: BootstrapConfig,
    /// Skip the (large) pooled ITL statistics.
    pub skip_itl: bool,
}

/// What the analysis hands on: the result as data, plus the per-cell samples and the bootstrap
/// replicates a derived quantity (a ratio or gap of taxes) must be resampled from, so that
/// every consumer pairs replicates the same way.
pub(crate) struct Analysis {
    pub result: AnalysisResult,
    samples: BTreeMap<CellKey, CellSamples>,
    rep: Replicator,
    noise: launch_noise::NoiseModel,
}

impl Analysis {
    /// The result alone; the samples and replicates are freed.
    pub(crate) fn into_result(self) -> AnalysisResult {
        self.result
    }

    /// Taxes (and their replicates) of any cell pair of this analysis; replicates already
    /// computed for `summary.taxes` are reused, not redrawn.
    pub(crate) fn taxes(&self) -> TaxEngine<'_> {
        TaxEngine::new(
            &self.rep,
            &self.samples,
            &self.result.summary.cells,
            &self.noise,
        )
    }
}

/// One launch's measured cell: what a sensitivity rerun leaves out
/// ([`crate::verdicts::sensitivity`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LaunchCell {
    /// The launch's run directory (one launch of one config).
    pub run_dir: String,
    pub phase: Phase,
    pub cell: String,
}

/// Per-cell statistics of a dataset, before saturation and taxes.
struct CellTable {
    samples: BTreeMap<CellKey, CellSamples>,
    rep: Replicator,
    /// Pooled over launches, in [`cell_order`].
    cells: Vec<CellStats>,
    per_launch: Vec<CellStats>,
}

impl CellTable {
    fn build(
        ds: &Dataset,
        opts: &AnalyzeOptions,
        leave_out: &BTreeSet<LaunchCell>,
    ) -> anyhow::Result<CellTable> {
        let samples = samples::extract(ds, !opts.skip_itl, leave_out);
        let rep = Replicator::new(opts.bootstrap);
        let mut ordered: Vec<&CellSamples> = samples.values().collect();
        ordered.sort_by(|a, b| cell_order(a, b));
        let (cells, per_launch) = cells::all_cell_stats(&rep, &ordered);
        Ok(CellTable {
            samples,
            rep,
            cells,
            per_launch,
        })
    }
}

/// The reference rates alone (`ctax run` stage 2): per-cell point estimates and the saturation
/// criteria, no bootstrap, no taxes. The full analysis computes the same rates from the same
/// estimates.
pub(crate) fn reference_rates(ds: &Dataset) -> anyhow::Result<ReferenceRates> {
    let opts = AnalyzeOptions {
        bootstrap: BootstrapConfig {
            resamples: 0,
            ..Default::default()
        },
        skip_itl: true,
    };
    let mut t = CellTable::build(ds, &opts, &BTreeSet::new())?;
    Ok(saturation::evaluate(&mut t.cells))
}

/// Runs the whole analysis on a loaded dataset.
pub(crate) fn analyze(ds: &Dataset, opts: &AnalyzeOptions) -> anyhow::Result<Analysis> {
    analyze_leaving_out(ds, opts, &BTreeSet::new())
}

/// [`analyze`] as if the request files of the launch-cells in `without` were absent: their
/// records reach no statistic, every other launch-cell is read as in [`analyze`]. (The launch's
/// run summary still places its other cells, so a left-out cell keeps counting in the place of
/// the cells after it, as it ran.) Such a rerun is read for
/// its verdicts ([`crate::verdicts::sensitivity`]), so it skips the launch-noise screen's
/// leave-one-machine-out pass, which only words a warning, and the taxes' (which only word the
/// Taxes section).
pub(crate) fn analyze_leaving_out(
    ds: &Dataset,
    opts: &AnalyzeOptions,
    without: &BTreeSet<LaunchCell>,
) -> anyhow::Result<Analysis> {
    let mut warnings = ds.warnings.clone();
    let CellTable {
        samples,
        rep,
        mut cells,
        mut per_launch,
    } = CellTable::build(ds, opts, without)?;
    let reference_rates = saturation::evaluate(&mut cells);
    let launch_saturation = saturation::evaluate_launches(&mut per_launch);
    saturation::evaluate_fixed_rate(&mut cells);
    saturation::evaluate_fixed_rate(&mut per_launch);
    warnings.extend(
        cells
            .iter()
            .filter(|c| c.key.phase != Phase::A && c.saturated())
            .map(fixed_rate_warning),
    );
    if let Some(archived) = &ds.reference_rates
        && (archived.ref_safe != reference_rates.ref_safe
            || archived.ref_load != reference_rates.ref_load)
    {
        warnings.push(format!(
            "reference_rates.json (chosen during the run) says ref_safe={:?}, ref_load={:?}; the data now gives ref_safe={:?}, ref_load={:?} (Phase B cells stay at the rate they ran at)",
            archived.ref_safe, archived.ref_load, reference_rates.ref_safe, reference_rates.ref_load
        ));
    }
    for c in cells.iter().filter(|c| !c.not_whole.is_empty()) {
        let (them, shows) = if c.not_whole.len() == 1 {
            ("it", "shows it")
        } else {
            ("them", "shows them")
        };
        warnings.push(format!(
            "{} {} {}: raw data not whole in {}; the pooled row, every tax, A/A and launch-noise estimate leave {them} out (the per-launch table {shows})",
            c.key.config,
            c.key.phase.label(),
            c.key.cell,
            c.not_whole.join("; ")
        ));
    }
    for c in cells.iter().filter(|c| !c.complete) {
        // A pooled row pools launches whose raw data is not whole only when none is whole
        // (`CellSamples::pooled_launches`): then every launch it lists is such a one.
        let left_out = if c.whole() {
            String::new()
        } else {
            format!(
                "; no launch's raw data is whole ({}), so every tax, A/A and launch-noise estimate leaves the cell out (the per-launch table shows it)",
                words::launch_list(&c.launches)
            )
        };
        warnings.push(format!(
            "{} {} {}: incomplete cell ({}){left_out}",
            c.key.config,
            c.key.phase.label(),
            c.key.cell,
            c.incomplete_reasons.join("; ")
        ));
    }
    // The launch-cells whose raw data is whole: one that is not (the collector killed during
    // it, a file cut short) is listed with its launch but measures a partial window, so it
    // enters no noise estimate, machine effect or tax (`TaxEngine::launch_stats` leaves it out
    // too; DESIGN.md §4.1).
    let whole: Vec<CellStats> = per_launch.iter().filter(|c| c.whole()).cloned().collect();
    let (noise, mut launch_noise) = launch_noise::NoiseModel::estimate(
        &cells,
        &whole,
        opts.bootstrap.resamples,
        opts.bootstrap.seed,
    );
    if without.is_empty() {
        launch_noise.screen_flips = launch_noise::screen_without_each_machine(
            &cells,
            &whole,
            opts.bootstrap.resamples,
            opts.bootstrap.seed,
            &launch_noise,
        );
    }
    let positions = same_cell::cell_positions(&ds.runs);
    let mut engine = TaxEngine::new(&rep, &samples, &cells, &noise).with_places(&positions);
    // A rerun without some launch-cells is read for its verdicts, which do not read the
    // leave-one-machine-out check of the taxes.
    engine.one_machine_check = without.is_empty();
    let tax_list = engine.all(&reference_rates);
    let leave_out = launch_noise::leave_one_config_out(
        &cells,
        &whole,
        opts.bootstrap.resamples,
        opts.bootstrap.seed,
    );
    let mut aa_taxes = engine.aa_all(&reference_rates, &leave_out);
    launch_order::aa_halves(&per_launch, &mut aa_taxes);
    // The machine listing and the launches' timeline read every launch-cell; the machine
    // effects inside compare only whole ones.
    let mut machines = machines::summarize(&cells, &per_launch, &launch_noise);
    machines.order = launch_order::of_taxes(&per_launch, &tax_list);
    warnings.extend(noise_warnings(&launch_noise, &aa_taxes));
    warnings.extend(launch_noise::screen_flip_warnings(
        &launch_noise.screen_flips,
    ));
    for n in launch_noise.noisier_phases() {
        // The pool is the df-weighted mean of the phases' variances: below the noisier
        // phase's own, whichever phase has more df. Only the phase's cells without noise of
        // their own carry it: none, no warning.
        let on_pool =
            launch_noise::cells_on_the_pool(&launch_noise, &cells, &tax_list, n.phase, &n.metric);
        if on_pool.is_empty() {
            continue;
        }
        let names: Vec<&str> = on_pool.iter().map(|(c, _)| c.as_str()).collect();
        let taxed: Vec<&str> = on_pool
            .iter()
            .filter(|(_, t)| *t)
            .map(|(c, _)| c.as_str())
            .collect();
        let which = match (taxed.len(), names.len()) {
            (0, 1) => format!("{}, where no tax is reported", names[0]),
            (0, _) => format!("{}; no tax is reported in them", names.join(", ")),
            (t, n) if t == n && n == 1 => format!("{}, where its taxes are reported", names[0]),
            (t, n) if t == n => format!("{}; taxes are reported in all of them", names.join(", ")),
            _ => format!(
                "{}; taxes are reported in {}",
                names.join(", "),
                taxed.join(", ")
            ),
        };
        let hyp = if n.phase == Phase::B
            && !taxed.is_empty()
            && ["ttft_p90", "tpot_p90"].contains(&n.metric.as_str())
        {
            " (and H5/H6, which read Phase B)"
        } else {
            ""
        };
        warnings.push(format!(
            "Phase {} launches spread more than the other phases' ({}): its cells without noise of their own carry the pool over every phase (±{:.1}%), below its own spread, so their CIs{hyp} may be too narrow: {which}",
            n.phase.label(),
            n.spread(),
            launch_noise
                .metrics
                .get(&n.metric)
                .map_or(f64::NAN, |pv| pv.relative_sd() * 100.0)
        ));
    }
    if aa_taxes.is_empty() && launch_noise.ttft_known() {
        warnings.push(
            "no A/A noise floor: no config ran two launches on one machine in a tax cell, so no config is checked against its own repeat (an A/A compares launches on one machine); run >= 2 launches of plain per machine"
                .to_owned(),
        );
    }
    warnings.extend(pairing_warnings(&tax_list));
    warnings.extend(order_warning(&machines.order));
    warnings.extend(first_launch::warnings(&machines.first_launch));
    let mixed_places = launch_places::mixed(&positions);
    warnings.extend(launch_places::warnings(&mixed_places));
    let same_cell = same_cell::checks(&engine);
    warnings.extend(same_cell.iter().filter(|c| c.disagrees()).map(|c| {
        let ((a_up, a_n), (b_up, b_n)) = (c.signs(Phase::A), c.signs(Phase::B));
        let place = c.place_summary().map_or(String::new(), |p| {
            format!(" By the cell's place in the launches of both configs on a machine, both phases together: {p}.")
        });
        format!(
            "{} {} {}: Phase A and Phase B measured the same cell and disagree: tax {} in Phase A, {} in Phase B (Phase B / Phase A: {}; the tax is above 0 on {a_up} of Phase A's {a_n} machines with both configs and on {b_up} of Phase B's {b_n}). The tax depends on something a phase may hold fixed (the cell's place in its launch, the machines each phase ran on).{place} Verdicts reading one phase (H1-H4: Phase A) do not speak for the other",
            c.config,
            c.cell,
            launch_noise::metric_label(&c.metric),
            c.phase_a.value.pct_ci(),
            c.phase_b.value.pct_ci(),
            c.difference.value.pct_ci()
        )
    }));
    let dataset = dataset_info(ds, &cells);
    if dataset.gpus.len() > 1 {
        warnings.push(format!(
            "this root mixes GPU models ({}): each tax compares launches on one machine, but the reference rates, the pooled cells and the figures, the launch-noise pool and the verdicts pool the models, whose capacity differs; keep one GPU model per results root (`ctax run`, `ctax rejoin` and `ctax merge` refuse to add another; DESIGN.md §4.3 \"GPU model\")",
            gpu_model::describe(&dataset.gpus)
        ));
    }
    let mut episodes = episodes::find(&samples, &cells);
    episodes::attach_stores(&mut episodes, &dataset.engine, &dataset.environments);
    warnings.extend(episodes::warning(&episodes));
    warnings.extend(saturation_warnings(
        &launch_saturation,
        &cells,
        &per_launch,
        &reference_rates,
        &episodes,
    ));
    let step_ecdf = step_ecdf(&samples, reference_rates.ref_safe);
    let (calibration, cal_warnings) = calibration::compare(&rep, &ds.runs, |cs| {
        model::pooled_saturated(&cells, &cs.key) == Some(true)
    });
    warnings.extend(cal_warnings);
    let summary = AnalysisSummary {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        conventions: conventions::conventions(&opts.bootstrap),
        dataset,
        cells,
        per_launch,
        launch_saturation,
        reference_rates,
        taxes: tax_list,
        calibration,
        launch_noise,
        machines,
        same_cell,
        mixed_places,
        episodes,
        aa_taxes,
        accounting: DataAccounting {
            cells: ds.accounting.clone(),
            not_loaded: ds.not_loaded.clone(),
        },
        warnings,
    };
    Ok(Analysis {
        result: AnalysisResult { summary, step_ecdf },
        samples,
        rep,
        noise,
    })
}

/// A Phase B or B' cell where criterion 1 or 2 fired: it measures a queue.
fn fixed_rate_warning(c: &CellStats) -> String {
    let codes = c
        .saturation
        .as_ref()
        .map_or_else(String::new, model::Saturation::codes);
    format!(
        "{} Phase {} {}: {} {codes} fired at the phase's one rate ({} req/s): the cell measures a queue, and the taxes there (H5/H6 read mooncake_both's) with it",
        c.key.config,
        c.key.phase.label(),
        c.key.cell,
        if codes.len() == 1 {
            "criterion"
        } else {
            "criteria"
        },
        ctax_schema::fmt_rate(c.rate),
    )
}

/// A launch saturated on its own at a tax rate where its config's pooled cells are not: the
/// taxes there pool it with launches that kept up (one warning per launch and rate).
fn saturation_warnings(
    launches: &[saturation::LaunchSaturation],
    pooled: &[CellStats],
    per_launch: &[CellStats],
    refs: &ctax_schema::ReferenceRates,
    episodes: &[episodes::LaunchEpisodes],
) -> Vec<String> {
    saturation::saturated_alone(launches, pooled, per_launch, refs)
        .into_iter()
        .map(|(l, r)| {
            let which = [(refs.ref_safe, "ref_safe"), (refs.ref_load, "ref_load")]
                .into_iter()
                .filter(|(x, _)| *x == Some(r))
                .map(|(_, n)| n)
                .collect::<Vec<_>>()
                .join(" and ");
            let pool_rate = refs
                .saturation_rate
                .get(&l.config)
                .copied()
                .flatten()
                .map_or_else(
                    || "at no rate measured".to_owned(),
                    |p| format!("from {} req/s", ctax_schema::fmt_rate(p)),
                );
            let episode = episodes.iter().any(|e| {
                e.config == l.config
                    && e.launch == l.launch
                    && e.phase == Phase::A
                    && e.cell == l.cell
            });
            let why = if episode && l.criteria == "G" {
                "; G alone, in a launch-cell that Slow episodes names: a transient slow stretch raises the TTFT p90 that G reads, so it may be that and not a queue"
            } else {
                ""
            };
            format!(
                "{} l{} is saturated on its own from {} req/s ({} {} fired there{why}), where {}'s pooled cells saturate {pool_rate}: its taxes at {which} ({} req/s) pool this launch with launches that kept up",
                l.config,
                l.launch,
                ctax_schema::fmt_rate(l.rate.expect("saturated_alone keeps saturated launches")),
                if l.criteria.len() == 1 { "criterion" } else { "criteria" },
                l.criteria,
                l.config,
                ctax_schema::fmt_rate(r),
            )
        })
        .collect()
}

/// One warning naming every (phase, config) whose machines all ran plain on one side of its
/// launches ([`launch_order`]): a drift of a machine over its stretch is then read as tax.
fn order_warning(order: &[launch_order::OrderBalance]) -> Option<String> {
    let one_sided: Vec<String> = order
        .iter()
        .filter_map(|o| {
            let side = o.one_sided()?;
            let n = o.machines();
            let on = match n {
                1 => "the one machine they shared".to_owned(),
                2 => "both machines they shared".to_owned(),
                _ => format!("all {n} machines they shared"),
            };
            Some(format!(
                "{} Phase {} (plain {side} it on {on})",
                o.config,
                o.phase.label()
            ))
        })
        .collect();
    (!one_sided.is_empty()).then(|| {
        format!(
            "launch order: plain never ran on both sides of these configs' launches on a machine they shared: {}. A machine that drifts over a stretch (the server keeps getting faster for minutes, the host and GPU warm) moves their taxes by the drift, and the data cannot tell it from a tax; `ctax run --plain-last` brackets a machine's launches with plain",
            one_sided.join("; ")
        )
    })
}

/// Launches a tax could not compare with plain on their machine: per (config, phase), the
/// launches left out, or that the config has no tax at all (it never shared a machine with
/// plain). Taxes compare launches on the same machine (DESIGN.md §4.3 "Machines").
fn pairing_warnings(taxes: &[model::Tax]) -> Vec<String> {
    let mut left_out: BTreeMap<(usize, String, Phase), (Vec<u32>, bool)> = BTreeMap::new();
    for t in taxes {
        let e = left_out
            .entry((config_order(&t.config).0, t.config.clone(), t.phase))
            .or_default();
        e.0.extend(t.unpaired_launches.iter().copied());
        e.1 |= t.machines.is_empty();
    }
    left_out
        .into_iter()
        // A config with no launch data in a cell (an engine that died) lists no launches.
        .filter(|(_, (l, _))| !l.is_empty())
        .map(|((_, config, phase), (mut l, none))| {
            l.sort_unstable();
            l.dedup();
            let ls = words::launch_list(&l);
            let (launches, ran, are) = if l.len() == 1 {
                ("launch", "ran on a machine", "is")
            } else {
                ("launches", "ran on machines", "are")
            };
            if none {
                format!(
                    "{config}: no plain launch of Phase {} ran on its machines ({launches} {}), so it has no tax against plain in some or all of its cells: taxes compare launches on the same machine, as machines differ more than launches; `ctax run` now adds a plain launch on every machine (profile `plain_on_every_machine`)",
                    phase.label(),
                    ls
                )
            } else {
                format!(
                    "{config}: Phase {} {launches} {} {ran} without a plain launch of that phase and {are} left out of its taxes (taxes compare launches on the same machine)",
                    phase.label(),
                    ls
                )
            }
        })
        .collect()
}

/// Loud warnings: taxes without launch noise, and an A/A tax that detects something.
fn noise_warnings(noise: &launch_noise::LaunchNoiseSummary, aa: &[model::AaTax]) -> Vec<String> {
    let mut out = Vec::new();
    if !noise.ttft_known() {
        out.push(format!(
            "{}: every config ran one launch per cell, so no tax can be told from launch-to-launch noise (on the H200, TTFT p90 moves 5-20% between launches); run >= 2 launches per config (profile `launches`)",
            launch_noise::UNKNOWN_REASON
        ));
    }
    for a in aa.iter().filter(|a| a.unstable) {
        let show =
            |t: &Option<model::TaxValue>| t.as_ref().map_or("n/a".into(), |t| t.value.pct_ci());
        let own: Vec<String> = ["ttft_p90", "tpot_p90"]
            .iter()
            .filter_map(|m| noise.own_at(m, a.phase, &a.cell, &a.config))
            .map(|o| {
                format!(
                    "{} (F {:.1} on {}, {} df)",
                    launch_noise::metric_label(&o.metric),
                    o.f,
                    o.variance.df,
                    o.rest_df
                )
            })
            .collect();
        let own = if own.is_empty() {
            String::new()
        } else {
            format!(
                ". Its taxes there carry its own launch noise for {}, so the other configs' quieter launches do not narrow them; the mark stays, as its launches disagree beyond what the other configs' launches show",
                own.join(", ")
            )
        };
        out.push(format!(
            "UNSTABLE DATASET: the A/A tax of {} in {} {} (launches {:?} vs {:?}) excludes 0: TTFT p90 {}, TPOT p90 {}. Identical configs differ by more than the CIs allow, so every verdict of this dataset is marked unstable{own}{}{}",
            a.config,
            a.phase.label(),
            a.cell,
            a.launches_a,
            a.launches_b,
            show(&a.ttft_p90),
            show(&a.tpot_p90),
            aa_drift(a),
            aa_without_one(a, show)
        ));
    }
    out
}

/// For an unstable A/A: which single launch, left out, leaves the rest's A/A straddling 0
/// ([`model::AaTax::without_one`]), or that none does. Empty where it was not worked out.
fn aa_without_one(a: &model::AaTax, show: impl Fn(&Option<model::TaxValue>) -> String) -> String {
    let Some(w) = &a.without_one else {
        return String::new();
    };
    if w.straddling.is_empty() {
        return format!(
            ". No single launch of {} explains it: without any one of {} the A/A of the rest still excludes 0",
            a.config,
            words::launch_list(&w.tried)
        );
    }
    // Launches whose absence leaves the same rest (one of a machine's two) share one clause.
    let mut rests: Vec<(Vec<u32>, &model::AaWithout)> = Vec::new();
    for x in &w.straddling {
        match rests
            .iter_mut()
            .find(|(_, r)| (&r.launches_a, &r.launches_b) == (&x.launches_a, &x.launches_b))
        {
            Some((ls, _)) => ls.push(x.launch),
            None => rests.push((vec![x.launch], x)),
        }
    }
    let each: Vec<String> = rests
        .iter()
        .map(|(ls, x)| {
            let who: Vec<String> = ls.iter().map(|l| format!("l{l}")).collect();
            format!(
                "without {} {} alone (the rest: {} vs {}) it straddles 0 (TTFT p90 {}, TPOT p90 {})",
                a.config,
                who.join(" or "),
                words::launch_list(&x.launches_a),
                words::launch_list(&x.launches_b),
                show(&x.ttft_p90),
                show(&x.tpot_p90)
            )
        })
        .collect();
    // Each item starts "without": the sentence starts "Without".
    format!(
        ". W{}; no launch is dropped after the fact, and the Cells table has each launch's own rows",
        &each.join("; ")[1..]
    )
}

/// For an A/A whose halves ran the cell one after the other on every machine
/// ([`model::AaTax::in_time`]): a sentence saying that it is then earlier against later, and
/// which way the later launches moved in each metric whose A/A excludes 0. Empty otherwise.
fn aa_drift(a: &model::AaTax) -> String {
    let Some(order) = a.in_time else {
        return String::new();
    };
    let (earlier, later) = match order {
        model::AaHalvesInTime::AFirst => (&a.launches_a, &a.launches_b),
        model::AaHalvesInTime::BFirst => (&a.launches_b, &a.launches_a),
        model::AaHalvesInTime::Mixed => return String::new(),
    };
    let moved: Vec<String> = [("TTFT p90", &a.ttft_p90), ("TPOT p90", &a.tpot_p90)]
        .into_iter()
        .filter_map(|(name, t)| {
            // A/A = p90(A)/p90(B) - 1: above 0 means A is slower.
            let a_slower = match t.as_ref()?.detection {
                model::Detection::Tax => true,
                model::Detection::Negative => false,
                _ => return None,
            };
            let later_faster = a_slower == (order == model::AaHalvesInTime::AFirst);
            Some(format!(
                "{name} {}",
                if later_faster { "lower" } else { "higher" }
            ))
        })
        .collect();
    format!(
        ". On each of its machines {} ran the cell before {}, so this A/A compares earlier launches with later ones and also measures how the machines drifted over their stretches (the later launches: {}). A tax whose plain launches ran on both sides of the config's (Launch order; `ctax run --plain-last`) cancels a steady drift; one with plain on one side carries it",
        words::launch_list(earlier),
        words::launch_list(later),
        moved.join(", ")
    )
}

fn cell_order(a: &CellSamples, b: &CellSamples) -> std::cmp::Ordering {
    (
        config_order(&a.key.config),
        a.key.phase,
        a.shape.rate.to_bits(),
        a.shape.input_len,
        a.shape.output_len,
    )
        .cmp(&(
            config_order(&b.key.config),
            b.key.phase,
            b.shape.rate.to_bits(),
            b.shape.input_len,
            b.shape.output_len,
        ))
}

fn dataset_info(ds: &Dataset, cells: &[CellStats]) -> DatasetInfo {
    let mut configs: Vec<String> = ds.runs.iter().map(|r| r.config.clone()).collect();
    configs.sort_by_key(|c| config_order(c));
    configs.dedup();
    let mut skipped = BTreeMap::new();
    for c in CANONICAL_CONFIGS {
        if configs.iter().any(|x| x == c) {
            continue;
        }
        let reason = ds
            .preflight
            .as_ref()
            .and_then(|p| p.configs.get(c))
            .filter(|e| e.decision == ctax_schema::Decision::Skip)
            .map(|e| {
                format!(
                    "pre-flight SKIP: {}",
                    e.reason
                        .clone()
                        .unwrap_or_else(|| "no reason recorded".into())
                )
            })
            .unwrap_or_else(|| "not run (no data in this results root)".into());
        skipped.insert(c.to_owned(), reason);
    }
    let step_timing_available = cells.iter().any(|c| c.step.is_some())
        && ds
            .preflight
            .as_ref()
            .and_then(|p| p.step_timing_available)
            .unwrap_or(true);
    DatasetInfo {
        root: ds.root.display().to_string(),
        simulated: ds.runs.iter().any(|r| r.simulated()),
        configs,
        skipped,
        step_timing_available,
        preflight: ds.preflight.clone(),
        manifest: ds.manifest.clone(),
        environments: ds
            .runs
            .iter()
            .map(|r| (r.dir_name.clone(), r.env.clone()))
            .collect(),
        profile: ds.profile.clone(),
        engine: ds.engine_facts().clone(),
        // Launches that measured something (a run directory a dead engine left without a
        // cell is no launch in the tables), and no simulated ones (their env.txt lists the
        // host's GPUs, which the simulator never used).
        gpus: gpu_model::tally(
            ds.runs
                .iter()
                .filter(|r| !r.simulated() && !r.cells.is_empty())
                .map(|r| {
                    (
                        gpu_model::of_launch(r.placement(), &r.env),
                        crate::ingest::machine::machine_key(r.placement(), &r.env),
                    )
                }),
        ),
        run_configs: ds
            .runs
            .iter()
            .filter_map(|r| {
                r.run_config
                    .as_ref()
                    .map(|c| (r.dir_name.clone(), run_config_view(c)))
            })
            .collect(),
    }
}

fn run_config_view(c: &ctax_schema::RunConfig) -> serde_json::Value {
    serde_json::json!({
        "config": c.config,
        "launch": c.launch,
        "model": c.model,
        "served_model_name": c.served_model_name,
        "phases": c.phases.iter().map(|p| p.tag()).collect::<Vec<_>>(),
        "cells": c.cells.len(),
        "simulated": c.simulated,
        "extra": c.extra,
    })
}

/// Figure 6's data: sorted step durations of each config's Phase A cell at ref_safe.
fn step_ecdf(
    samples: &BTreeMap<CellKey, CellSamples>,
    ref_safe: Option<f64>,
) -> BTreeMap<String, Vec<f64>> {
    let mut out = BTreeMap::new();
    let Some(r) = ref_safe else { return out };
    for (k, cs) in samples {
        if k.phase != Phase::A || (cs.shape.rate - r).abs() > 1e-9 {
            continue;
        }
        let mut v: Vec<f64> = cs
            .pooled_launches()
            .into_iter()
            .flat_map(|l| l.step_duration_us.iter().copied())
            .collect();
        if v.is_empty() {
            continue;
        }
        crate::stats::percentile::sort(&mut v);
        out.entry(k.config.clone()).or_insert(v);
    }
    out
}

#[cfg(test)]
mod aa_drift_tests {
    use super::model::{AaHalvesInTime, AaTax, Detection, Estimate, TaxContext, TaxValue};
    use super::*;

    fn value(est: f64, lo: f64, hi: f64, detection: Detection) -> Option<TaxValue> {
        Some(TaxValue {
            value: Estimate {
                est,
                lo: Some(lo),
                hi: Some(hi),
            },
            unit: "fraction".into(),
            detection,
        })
    }

    /// The H100 root's plain A/A at 3 req/s (stop 53): l6, l8 (each machine's opening plain)
    /// against l7, l9 (its closing plain), TTFT straddling 0 and TPOT +3.7% [+0.4, +7.1].
    fn aa(in_time: Option<AaHalvesInTime>) -> AaTax {
        AaTax {
            config: "plain".into(),
            context: TaxContext::RefSafe,
            phase: Phase::A,
            cell: "r3_i4096_o256".into(),
            launches_a: vec![6, 8],
            launches_b: vec![7, 9],
            machines: vec!["boot 495943f8".into(), "boot 4b472e51".into()],
            ttft_p90: value(0.052, -0.002, 0.109, Detection::Inconclusive),
            tpot_p90: value(0.037, 0.004, 0.071, Detection::Tax),
            unstable: true,
            in_time,
            without_one: None,
        }
    }

    /// A before B and A slower (A/A above 0): the later launches are faster, so TPOT is
    /// lower in them; TTFT, whose A/A straddles 0, is not named. B first with the same sign:
    /// the later (A) launches are slower. Interleaved halves, or halves of unknown order, add
    /// nothing.
    #[test]
    fn an_earlier_against_later_aa_says_which_way_the_later_launches_moved() {
        let noise = launch_noise::LaunchNoiseSummary::default();
        let w = noise_warnings(&noise, &[aa(Some(AaHalvesInTime::AFirst))]);
        let w = w
            .iter()
            .find(|w| w.starts_with("UNSTABLE DATASET"))
            .unwrap();
        assert!(
            w.contains("On each of its machines l6, l8 ran the cell before l7, l9")
                && w.contains("(the later launches: TPOT p90 lower)")
                && !w.contains("TTFT p90 lower"),
            "{w}"
        );
        let w = aa_drift(&aa(Some(AaHalvesInTime::BFirst)));
        assert!(
            w.contains("l7, l9 ran the cell before l6, l8")
                && w.contains("(the later launches: TPOT p90 higher)"),
            "{w}"
        );
        assert_eq!(aa_drift(&aa(Some(AaHalvesInTime::Mixed))), "");
        assert_eq!(aa_drift(&aa(None)), "");
    }

    /// The warning names the launch whose absence lets the rest's A/A straddle 0, with the
    /// rest's halves and numbers (two launches leaving the same rest share a clause: one of a
    /// machine's two launches takes the machine out), or says that none does among the launches
    /// tried; nothing where the leave-one-out was not worked out (too few launches).
    #[test]
    fn an_unstable_aa_names_the_launch_without_which_it_straddles_0() {
        use super::model::{AaLeaveOneOut, AaWithout};
        let noise = launch_noise::LaunchNoiseSummary::default();
        let mut a = aa(None);
        a.without_one = Some(AaLeaveOneOut {
            tried: vec![6, 7, 8, 9],
            straddling: vec![
                AaWithout {
                    launch: 6,
                    launches_a: vec![8],
                    launches_b: vec![9],
                    ttft_p90: value(0.02, -0.03, 0.07, Detection::Inconclusive),
                    tpot_p90: value(0.01, -0.01, 0.03, Detection::Inconclusive),
                },
                AaWithout {
                    launch: 7,
                    launches_a: vec![8],
                    launches_b: vec![9],
                    ttft_p90: value(0.02, -0.03, 0.07, Detection::Inconclusive),
                    tpot_p90: value(0.01, -0.01, 0.03, Detection::Inconclusive),
                },
                AaWithout {
                    launch: 9,
                    launches_a: vec![6, 8],
                    launches_b: vec![7],
                    ttft_p90: value(0.04, -0.01, 0.09, Detection::Inconclusive),
                    tpot_p90: value(0.02, -0.01, 0.05, Detection::Inconclusive),
                },
            ],
        });
        let w = noise_warnings(&noise, std::slice::from_ref(&a));
        let w = w
            .iter()
            .find(|w| w.starts_with("UNSTABLE DATASET"))
            .unwrap();
        assert!(
            w.ends_with(
                ". Without plain l6 or l7 alone (the rest: l8 vs l9) it straddles 0 (TTFT p90 +2.0% [-3.0%, +7.0%], TPOT p90 +1.0% [-1.0%, +3.0%]); without plain l9 alone (the rest: l6, l8 vs l7) it straddles 0 (TTFT p90 +4.0% [-1.0%, +9.0%], TPOT p90 +2.0% [-1.0%, +5.0%]); no launch is dropped after the fact, and the Cells table has each launch's own rows"
            ),
            "{w}"
        );
        a.without_one.as_mut().unwrap().straddling.clear();
        assert!(
            aa_without_one(&a, |_| String::new()).ends_with(
                "No single launch of plain explains it: without any one of l6, l7, l8, l9 the A/A of the rest still excludes 0"
            )
        );
        a.without_one = None;
        assert_eq!(aa_without_one(&a, |_| String::new()), "");
    }
}
