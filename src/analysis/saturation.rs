//! The seed's three data-driven saturation criteria, the per-config saturation rate, and the
//! reference rates `ref_safe` / `ref_load` (also called by `ctax run` between Phase A and B).
//!
//! A config is saturated at rate r if any of:
//! 1. (ok share × completion pace) < 0.95 of the requests actually scheduled in the measurement
//!    window — their completions keep the pace of their arrivals on a healthy server, whatever the
//!    arrival process (see [`throughput_criterion`]); the drain tail, outputs longer than the
//!    warm-up and a Poisson draw with fewer arrivals than nominal never count against it;
//! 2. `vllm:num_requests_waiting` p50 over the window's scrapes > 1;
//! 3. TTFT p90(r) / TTFT p90(r/2) > 1.5.
//!
//! The saturation rate is the lowest rate where ≥1 criterion fires; every rate at or above it
//! counts as saturated (so a noisy unflagged rate above the knee never becomes a reference).
//!
//! Incomplete cells: a cell whose raw data is not whole (`data_incomplete`: an empty or
//! cut-short file, no collector summary, records missing or rejected) is not evaluated (its
//! criteria say why) and is never the lower rate of criterion 3; no incomplete cell (for any
//! reason, the collector's cap included) makes its rate a candidate for `ref_safe`/`ref_load`.

use std::collections::BTreeMap;

use ctax_schema::{Phase, ReferenceRates, SCHEMA_VERSION, fmt_rate};
use serde::{Deserialize, Serialize};

use super::model::{CellStats, Criterion, Saturation, config_order, pooled_saturated};

pub(crate) const THROUGHPUT_RATIO_MIN: f64 = 0.95;
pub(crate) const WAITING_P50_MAX: f64 = 1.0;
pub(crate) const TTFT_GROWTH_MAX: f64 = 1.5;

/// (rate, saturated, complete) of one Phase A cell of a config.
type Row = (f64, bool, bool);
/// Every config's Phase A cells as [`Row`]s.
type Measured = BTreeMap<String, Vec<Row>>;

/// Evaluates the criteria on the pooled Phase A cells (in place) and returns the reference
/// rates. Cells of other phases are left untouched.
pub(crate) fn evaluate(cells: &mut [CellStats]) -> ReferenceRates {
    // Phase A ladders per (config, shape).
    let mut ladders: BTreeMap<(String, u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, c) in cells.iter().enumerate() {
        if c.key.phase == Phase::A && c.launch.is_none() {
            ladders
                .entry((c.key.config.clone(), c.input_len, c.output_len))
                .or_default()
                .push(i);
        }
    }
    let mut saturation_rate: BTreeMap<String, Option<f64>> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut shapes: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for ((config, i_len, o_len), idx) in ladders {
        *shapes.entry((i_len, o_len)).or_default() += 1;
        let (idx, sat) = evaluate_ladder(cells, idx);
        for &i in idx.iter().filter(|&&i| !cells[i].complete) {
            notes.push(format!(
                "{config} at {} req/s: incomplete cell, not a reference-rate candidate",
                fmt_rate(cells[i].rate)
            ));
        }
        // With several Phase A shapes a config keeps its lowest saturation rate.
        let e = saturation_rate.entry(config).or_insert(sat);
        *e = lowest(*e, sat);
    }
    let measured = measured_of(cells);
    if shapes.len() > 1 {
        notes.push(format!(
            "Phase A ran {} shapes; reference rates use all of them",
            shapes.len()
        ));
    }
    // A config none of whose Phase A cells is complete (its server died in the first cell, say)
    // has nothing to compare at any rate: it cannot hold ref_safe down for the others. It is
    // left out of the reference rates, loudly; its verdicts are "not testable" for lack of data.
    let mut configs: Vec<String> = measured
        .iter()
        .filter(|(_, m)| m.iter().any(|(.., complete)| *complete))
        .map(|(c, _)| c.clone())
        .collect();
    let no_data: Vec<String> = measured
        .keys()
        .filter(|c| !configs.contains(c))
        .cloned()
        .collect();
    configs.sort_by_key(|c| config_order(c));
    for c in &no_data {
        notes.push(format!(
            "{c}: no complete Phase A cell; left out of the reference rates (nothing to compare)"
        ));
        saturation_rate.remove(c);
    }

    // A candidate: measured by the config, and every cell at that rate complete and unsaturated.
    let unsaturated_everywhere = |config: &str, r: f64| {
        let m = &measured[config];
        m.iter().any(|(x, ..)| *x == r)
            && m.iter()
                .filter(|(x, ..)| *x == r)
                .all(|(_, s, complete)| !s && *complete)
    };
    let mut all_rates: Vec<f64> = measured.values().flatten().map(|(r, ..)| *r).collect();
    all_rates.sort_by(f64::total_cmp);
    all_rates.dedup();
    let ref_safe = all_rates
        .iter()
        .rev()
        .copied()
        .find(|&r| configs.iter().all(|c| unsaturated_everywhere(c, r)));
    let ref_load = if measured.contains_key("plain") {
        all_rates
            .iter()
            .rev()
            .copied()
            .find(|&r| unsaturated_everywhere("plain", r))
    } else {
        notes.push("plain has no Phase A data: ref_load undefined".into());
        None
    };
    match ref_safe {
        Some(r) => {
            notes.push(format!(
                "ref_safe = {} req/s: the highest rate measured by all {} configs with Phase A data at which none is saturated",
                fmt_rate(r),
                configs.len()
            ));
            notes.extend(held_by(&measured, &configs, r).map(|h| h.note()));
        }
        None if !configs.is_empty() => notes
            .push("ref_safe undefined: no rate was measured unsaturated by every config".into()),
        None => notes.push("no Phase A data".into()),
    }
    if let Some(r) = ref_load {
        notes.push(format!(
            "ref_load = {} req/s: the highest rate at which plain is not saturated",
            fmt_rate(r)
        ));
    }
    for c in &configs {
        match saturation_rate.get(c).copied().flatten() {
            Some(r) => notes.push(format!("{c}: saturates at {} req/s", fmt_rate(r))),
            None => notes.push(format!("{c}: no criterion fired at any measured rate")),
        }
    }
    ReferenceRates {
        schema_version: SCHEMA_VERSION,
        ref_safe,
        ref_load,
        configs_considered: configs,
        saturation_rate,
        notes,
        // The manifest's view, filled in by the stage that writes the file.
        phase_a_launches: None,
    }
}

/// Every config's pooled Phase A cells as (rate, saturated, complete), once [`evaluate_ladder`]
/// has set their saturation: what [`evaluate`] and [`holding_ref_safe`] read.
fn measured_of(cells: &[CellStats]) -> Measured {
    let mut measured: Measured = BTreeMap::new();
    for c in cells
        .iter()
        .filter(|c| c.key.phase == Phase::A && c.launch.is_none())
    {
        measured
            .entry(c.key.config.clone())
            .or_default()
            .push((c.rate, c.saturated(), c.complete));
    }
    measured
}

/// The configs that hold `ref_safe` below the next measured rate ([`held_by`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Held {
    /// `ref_safe`.
    pub rate: f64,
    /// The next measured rate above it, where every other config is unsaturated.
    pub next: f64,
    /// Each holding config with why (`saturated`, `incomplete`, `not measured`) at `next`.
    pub configs: Vec<(String, &'static str)>,
}

impl Held {
    /// Whether leaving the holders out still leaves plain and a config to compare with it (of
    /// `considered` configs): a rerun without plain, or with plain alone, reads nothing.
    pub(crate) fn leaves_a_comparison(&self, considered: usize) -> bool {
        !self
            .configs
            .iter()
            .any(|(c, _)| c == crate::analysis::taxes::BASELINE)
            && considered >= self.configs.len() + 2
    }

    /// Each holding config with why: `lmcache_only (saturated at 4 req/s)`.
    pub(crate) fn named(&self) -> Vec<String> {
        self.configs
            .iter()
            .map(|(c, w)| format!("{c} ({w} at {} req/s)", fmt_rate(self.next)))
            .collect()
    }

    /// The reference-rates note.
    pub(crate) fn note(&self) -> String {
        format!(
            "ref_safe is held at {} req/s by {}: every other config is unsaturated at {} req/s",
            fmt_rate(self.rate),
            self.named().join(", "),
            fmt_rate(self.next)
        )
    }
}

/// Which configs hold `ref_safe` at `r`: those not unsaturated at the next measured rate above
/// it (saturated there, an incomplete cell there, or not measured there), named only when the
/// others are all unsaturated there, so one config's knee visibly sets the rate every tax is
/// read at (LMCache's store path on the H100 moved it from 3 to 2 req/s). `None` when every
/// config stops at that rate, or nothing was measured above `r`.
fn held_by(measured: &Measured, configs: &[String], r: f64) -> Option<Held> {
    // The next rate any considered config measured (a config left out for lack of a complete
    // cell does not make a rate "next" that no considered config ran).
    let next = configs
        .iter()
        .flat_map(|c| measured[c].iter().map(|(x, ..)| *x))
        .filter(|&x| x > r)
        .min_by(f64::total_cmp)?;
    let why = |c: &str| -> Option<&'static str> {
        let at: Vec<_> = measured[c].iter().filter(|(x, ..)| *x == next).collect();
        if at.is_empty() {
            Some("not measured")
        } else if at.iter().any(|(.., complete)| !complete) {
            Some("incomplete")
        } else if at.iter().any(|(_, saturated, _)| *saturated) {
            Some("saturated")
        } else {
            None
        }
    };
    let held: Vec<(String, &'static str)> = configs
        .iter()
        .filter_map(|c| why(c).map(|w| (c.clone(), w)))
        .collect();
    if held.is_empty() || held.len() == configs.len() {
        return None;
    }
    Some(Held {
        rate: r,
        next,
        configs: held,
    })
}

/// [`held_by`] read back from evaluated pooled cells and their reference rates (what
/// [`evaluate`] left): the configs whose Phase A cells a rerun leaves out to read the verdicts
/// at the rate the others allow ([`crate::verdicts::sensitivity::without_holders`]); `None`
/// also where that rerun would have no comparison ([`Held::leaves_a_comparison`]).
pub(crate) fn holding_ref_safe(cells: &[CellStats], refs: &ReferenceRates) -> Option<Held> {
    let r = refs.ref_safe?;
    let measured = measured_of(cells);
    let configs: Vec<String> = refs
        .configs_considered
        .iter()
        .filter(|c| measured.contains_key(*c))
        .cloned()
        .collect();
    held_by(&measured, &configs, r).filter(|h| h.leaves_a_comparison(configs.len()))
}

/// Evaluates one ladder (the cells of one config and shape, pooled or of one launch) in rate
/// order: sets each cell's criteria and `saturated` (at or above the lowest rate where one
/// fired) and returns the cells sorted by rate with that saturation rate.
fn evaluate_ladder(cells: &mut [CellStats], mut idx: Vec<usize>) -> (Vec<usize>, Option<f64>) {
    idx.sort_by(|a, b| cells[*a].rate.total_cmp(&cells[*b].rate));
    let mut sat: Option<f64> = None;
    for (pos, &i) in idx.iter().enumerate() {
        if !cells[i].whole() {
            cells[i].saturation = Some(not_evaluated(&cells[i]));
            continue;
        }
        let evaluable: Vec<usize> = idx[..pos]
            .iter()
            .copied()
            .filter(|&j| cells[j].whole())
            .collect();
        let lower = lower_reference(&evaluable, cells, cells[i].rate);
        let crit = criteria(&cells[i], lower.map(|j| &cells[j]));
        if crit.any && sat.is_none() {
            sat = Some(cells[i].rate);
        }
        cells[i].saturation = Some(crit);
    }
    for &i in &idx {
        let saturated = sat.is_some_and(|r| cells[i].rate >= r);
        cells[i].saturation.as_mut().expect("set above").saturated = saturated;
    }
    (idx, sat)
}

/// Phase B and B' cells (pooled and per launch, in place): they run one rate per shape, so
/// criterion 3 has no lower rate; criteria 1 (throughput) and 2 (queue) are evaluated as in
/// Phase A, and a cell where one fires counts as saturated: it measures a queue. Phase A
/// cells are left to [`evaluate`] and [`evaluate_launches`].
pub(crate) fn evaluate_fixed_rate(cells: &mut [CellStats]) {
    for c in cells.iter_mut().filter(|c| c.key.phase != Phase::A) {
        if !c.whole() {
            c.saturation = Some(not_evaluated(c));
            continue;
        }
        let mut s = criteria(c, None);
        s.ttft_growth.note = Some(format!(
            "Phase {} runs one rate per shape: no lower rate to compare with",
            c.key.phase.label()
        ));
        c.saturation = Some(s);
    }
}

/// One launch's own saturation rate: the three criteria on that launch's Phase A cells alone
/// (criterion 3 against the same launch's lower rate), the knee rule as for the pooled cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchSaturation {
    pub config: String,
    pub launch: u32,
    /// The lowest rate where a criterion fired in this launch (over its shapes); `None`: none
    /// fired at any rate it measured.
    pub rate: Option<f64>,
    /// The cell at `rate` where they fired (its name, e.g. `r6_i4096_o256`).
    pub cell: String,
    /// The criteria that fired at `rate` (T throughput, Q queue, G TTFT growth).
    pub criteria: String,
    /// The rates this launch measured with whole data (the others were not evaluated).
    pub rates: Vec<f64>,
}

/// Evaluates the criteria on every launch's own Phase A cells (`per_launch`, in place: each
/// row's `saturation` is then the launch's own), and returns each launch's saturation rate,
/// in config order, then launch. A config with one launch reads as its pooled cells do.
pub(crate) fn evaluate_launches(per_launch: &mut [CellStats]) -> Vec<LaunchSaturation> {
    let mut ladders: BTreeMap<(String, u32, u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, c) in per_launch.iter().enumerate() {
        if let (Phase::A, Some(l)) = (c.key.phase, c.launch) {
            ladders
                .entry((c.key.config.clone(), l, c.input_len, c.output_len))
                .or_default()
                .push(i);
        }
    }
    let mut out: BTreeMap<(String, u32), LaunchSaturation> = BTreeMap::new();
    for ((config, launch, ..), idx) in ladders {
        let (idx, sat) = evaluate_ladder(per_launch, idx);
        let e = out
            .entry((config.clone(), launch))
            .or_insert_with(|| LaunchSaturation {
                config,
                launch,
                rate: None,
                cell: String::new(),
                criteria: String::new(),
                rates: Vec::new(),
            });
        if let Some(r) = sat.filter(|&r| e.rate.is_none_or(|own| r < own)) {
            let at = idx
                .iter()
                .map(|&i| &per_launch[i])
                .find(|c| c.rate == r)
                .expect("the saturation rate is a rate of the ladder");
            e.rate = Some(r);
            e.cell = at.key.cell.clone();
            e.criteria = at
                .saturation
                .as_ref()
                .map_or_else(String::new, Saturation::codes);
        }
        e.rates.extend(
            idx.iter()
                .filter(|&&i| per_launch[i].whole())
                .map(|&i| per_launch[i].rate),
        );
    }
    let mut v: Vec<LaunchSaturation> = out.into_values().collect();
    for l in &mut v {
        l.rates.sort_by(f64::total_cmp);
        l.rates.dedup();
    }
    v.sort_by_key(|l| (config_order(&l.config), l.launch));
    v
}

/// The lower of two saturation rates (`None`: not saturated at any rate measured).
fn lowest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The launches saturated on their own in a Phase A cell at a tax rate (`ref_safe`,
/// `ref_load`) whose pooled cell (same config and shape) is not saturated: the taxes there
/// pool them with launches that kept up. Decided cell by cell (a launch's own row against the
/// pooled row of its key), so with several shapes a launch saturated in one shape is not
/// reported for another. One entry per launch and rate, in `launches`' order.
pub(crate) fn saturated_alone(
    launches: &[LaunchSaturation],
    pooled: &[CellStats],
    per_launch: &[CellStats],
    refs: &ReferenceRates,
) -> Vec<(LaunchSaturation, f64)> {
    let tax_rates: Vec<f64> = [refs.ref_safe, refs.ref_load]
        .into_iter()
        .flatten()
        .collect();
    let mut out: Vec<(LaunchSaturation, f64)> = Vec::new();
    for l in launches {
        for c in per_launch.iter().filter(|c| {
            c.key.phase == Phase::A
                && c.key.config == l.config
                && c.launch == Some(l.launch)
                && tax_rates.contains(&c.rate)
                && c.saturated()
        }) {
            let pool_keeps_up = pooled_saturated(pooled, &c.key) == Some(false);
            if pool_keeps_up && !out.iter().any(|(o, r)| o == l && *r == c.rate) {
                out.push((l.clone(), c.rate));
            }
        }
    }
    out
}

/// The cell criterion 3 compares with: the rate r/2 if measured, else the highest measured
/// rate below r.
fn lower_reference(below: &[usize], cells: &[CellStats], r: f64) -> Option<usize> {
    let half = below
        .iter()
        .copied()
        .find(|&j| (cells[j].rate - r / 2.0).abs() < 1e-9);
    half.or_else(|| below.last().copied())
}

fn criteria(c: &CellStats, lower: Option<&CellStats>) -> Saturation {
    let throughput = throughput_criterion(c);
    let queue = match c.waiting_p50 {
        Some(w) => Criterion {
            value: Some(w),
            threshold: WAITING_P50_MAX,
            fired: w > WAITING_P50_MAX,
            note: None,
        },
        None => Criterion {
            value: None,
            threshold: WAITING_P50_MAX,
            fired: false,
            note: Some("no /metrics scrape inside the window".into()),
        },
    };
    let p90 = |x: &CellStats| x.ttft_ms.p90.map(|e| e.est);
    let ttft_growth = match (lower, p90(c)) {
        (Some(l), Some(hi)) => match p90(l) {
            Some(lo) if lo > 0.0 => {
                let v = hi / lo;
                let exact_half = (l.rate - c.rate / 2.0).abs() < 1e-9;
                Criterion {
                    value: Some(v),
                    threshold: TTFT_GROWTH_MAX,
                    fired: v > TTFT_GROWTH_MAX,
                    note: Some(if exact_half {
                        format!("vs {} req/s", fmt_rate(l.rate))
                    } else {
                        format!("vs {} req/s (r/2 not measured)", fmt_rate(l.rate))
                    }),
                }
            }
            _ => Criterion {
                value: None,
                threshold: TTFT_GROWTH_MAX,
                fired: false,
                note: Some("lower rate has no TTFT".into()),
            },
        },
        _ => Criterion {
            value: None,
            threshold: TTFT_GROWTH_MAX,
            fired: false,
            note: Some("lowest measured rate: nothing to compare with".into()),
        },
    };
    let any = throughput.fired || queue.fired || ttft_growth.fired;
    Saturation {
        throughput,
        queue,
        ttft_growth,
        any,
        saturated: any,
    }
}

/// Criterion 1 on what was actually offered (fixed and Poisson arrivals alike): of the
/// requests scheduled inside the measurement window, the share that ended ok × their completion
/// pace (`1 / slope` of their completion times on their intended send times, least squares).
/// A server that keeps up completes its window's requests at the pace they arrived (≈ 1, however
/// the Poisson draw bunched them); an overloaded one completes them at capacity/offered. The
/// nominal ratio (effective ÷ offered rate, the seed's) stays in the note: with Poisson arrivals
/// it moves with the draw alone. Cells without the pace fall back to the nominal ratio.
fn throughput_criterion(c: &CellStats) -> Criterion {
    let nominal = c.effective_rps.map(|eff| eff / c.offered_rps);
    let actual = match (c.ok_of_scheduled, c.scheduled_in_window, c.completion_pace) {
        (Some(ok), Some(sched), Some(pace)) if sched > 0 => {
            Some((ok as f64 / sched as f64 * pace.min(1.0), ok, sched, pace))
        }
        _ => None,
    };
    match (actual, nominal) {
        (Some((v, ok, sched, pace)), _) => Criterion {
            value: Some(v),
            threshold: THROUGHPUT_RATIO_MIN,
            fired: v < THROUGHPUT_RATIO_MIN,
            note: Some(format!(
                "{ok} of {sched} scheduled in the window ok, completion pace {pace:.3}; effective/offered (nominal): {}",
                nominal.map_or("n/a".into(), |n| format!("{n:.3}"))
            )),
        },
        (None, Some(v)) => Criterion {
            value: Some(v),
            threshold: THROUGHPUT_RATIO_MIN,
            fired: v < THROUGHPUT_RATIO_MIN,
            note: Some("effective/offered (no completion pace)".into()),
        },
        (None, None) => Criterion {
            value: None,
            threshold: THROUGHPUT_RATIO_MIN,
            fired: false,
            note: Some("no measurement window".into()),
        },
    }
}

/// The criteria of a cell whose raw data is not whole: none evaluated, each saying why.
fn not_evaluated(c: &CellStats) -> Saturation {
    let note = format!(
        "not evaluated: the cell's data is incomplete ({})",
        c.data_incomplete.join("; ")
    );
    let none = |threshold: f64| Criterion {
        value: None,
        threshold,
        fired: false,
        note: Some(note.clone()),
    };
    Saturation {
        throughput: none(THROUGHPUT_RATIO_MIN),
        queue: none(WAITING_P50_MAX),
        ttft_growth: none(TTFT_GROWTH_MAX),
        any: false,
        saturated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-launch rows of a synthetic plain (Phase A at 1, 2 and 4 req/s, 4096/256, far
    /// below its capacity: nothing saturates) with `launches` launches, as the analysis makes
    /// them.
    fn per_launch(launches: u32) -> Vec<CellStats> {
        let dir = tempfile::tempdir().unwrap();
        let spec = crate::synth::SynthSpec {
            launches,
            requests_per_cell: 120,
            with_steps: false,
            ..Default::default()
        };
        crate::synth::generate(&spec, dir.path()).unwrap();
        let ds = crate::ingest::load(dir.path()).unwrap();
        let opts = crate::analysis::AnalyzeOptions {
            skip_itl: true,
            ..Default::default()
        };
        let rows = crate::analysis::analyze(&ds, &opts)
            .unwrap()
            .result
            .summary
            .per_launch;
        assert!(
            evaluate_launches(&mut rows.clone())
                .iter()
                .all(|l| l.rate.is_none()),
            "the synthetic plain keeps up at every rate"
        );
        rows
    }

    /// Makes criterion Q fire in the Phase A row of `launch` at `rate` with `input_len`.
    fn queue_at(rows: &mut [CellStats], launch: u32, rate: f64, input_len: u32) {
        for c in rows.iter_mut().filter(|c| {
            c.key.phase == Phase::A
                && c.launch == Some(launch)
                && c.rate == rate
                && c.input_len == input_len
        }) {
            c.waiting_p50 = Some(5.0);
        }
    }

    /// With two Phase A shapes a launch's own rate is the lower of its shapes' (the one where a
    /// criterion fired first), named by that cell; each shape's rows are flagged from its own
    /// knee; the other launch stays unsaturated.
    #[test]
    fn a_launch_s_rate_is_the_lowest_over_its_shapes() {
        // The synthetic plain's rows plus a second Phase A shape, 512/64, cloned from them.
        let one_shape = per_launch(2);
        let two_shapes = || {
            let mut rows = one_shape.clone();
            rows.extend(
                one_shape
                    .iter()
                    .filter(|c| c.key.phase == Phase::A)
                    .cloned()
                    .map(|mut c| {
                        c.input_len = 512;
                        c.output_len = 64;
                        c.key.cell = c.key.cell.replace("_i4096_o256", "_i512_o64");
                        c
                    }),
            );
            rows
        };
        let mut rows = two_shapes();
        queue_at(&mut rows, 0, 4.0, 4096);
        queue_at(&mut rows, 0, 2.0, 512);
        let out = evaluate_launches(&mut rows);
        assert_eq!(out.len(), 2, "{out:?}");
        let l0 = &out[0];
        assert_eq!(
            (l0.launch, l0.rate, l0.cell.as_str(), l0.criteria.as_str()),
            (0, Some(2.0), "r2_i512_o64", "Q")
        );
        assert_eq!(l0.rates, vec![1.0, 2.0, 4.0]);
        assert_eq!((out[1].launch, out[1].rate), (1, None));
        for c in rows.iter().filter(|c| c.launch == Some(0)) {
            let knee = if c.input_len == 512 { 2.0 } else { 4.0 };
            let s = c.saturation.as_ref().unwrap();
            assert_eq!(s.saturated, c.rate >= knee, "{}", c.key.cell);
        }
        // The order of the shapes does not matter: the other shape lower gives its cell.
        let mut rows = two_shapes();
        queue_at(&mut rows, 0, 2.0, 4096);
        queue_at(&mut rows, 0, 4.0, 512);
        let l0 = evaluate_launches(&mut rows).remove(0);
        assert_eq!((l0.rate, l0.cell.as_str()), (Some(2.0), "r2_i4096_o256"));
    }

    /// A config with one launch has one entry, read from its one row per cell (a copy of the
    /// pooled cell): the launch's rate is where that row's criteria fire.
    #[test]
    fn a_single_launch_config_has_one_entry_read_from_its_own_rows() {
        let mut rows = per_launch(1);
        assert!(rows.iter().all(|c| c.launch == Some(0)));
        queue_at(&mut rows, 0, 2.0, 4096);
        let out = evaluate_launches(&mut rows);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (
                out[0].config.as_str(),
                out[0].rate,
                out[0].cell.as_str(),
                out[0].criteria.as_str()
            ),
            ("plain", Some(2.0), "r2_i4096_o256", "Q")
        );
    }

    /// `held_by` names the configs that stop ref_safe below the next measured rate, and only
    /// when the others are unsaturated there (cases worked by hand from the definition).
    #[test]
    fn held_by_names_the_configs_that_stop_ref_safe() {
        let m = |rows: &[(&str, &[Row])]| -> Measured {
            rows.iter()
                .map(|(c, v)| ((*c).to_owned(), v.to_vec()))
                .collect()
        };
        let configs = |v: &[&str]| -> Vec<String> { v.iter().map(|c| (*c).to_owned()).collect() };
        // lmcache_only saturated at 3, plain unsaturated there: lmcache_only holds it.
        let measured = m(&[
            (
                "plain",
                &[(2.0, false, true), (3.0, false, true), (4.0, true, true)],
            ),
            (
                "lmcache_only",
                &[(2.0, false, true), (3.0, true, true), (4.0, true, true)],
            ),
        ]);
        assert_eq!(
            held_by(&measured, &configs(&["plain", "lmcache_only"]), 2.0)
                .map(|h| h.note())
                .as_deref(),
            Some(
                "ref_safe is held at 2 req/s by lmcache_only (saturated at 3 req/s): every other config is unsaturated at 3 req/s"
            )
        );
        // A config that never ran the next rate holds it too, and says so.
        let measured = m(&[
            ("plain", &[(2.0, false, true), (3.0, false, true)]),
            ("noop_connector", &[(2.0, false, true)]),
        ]);
        assert_eq!(
            held_by(&measured, &configs(&["plain", "noop_connector"]), 2.0)
                .map(|h| h.note())
                .as_deref(),
            Some(
                "ref_safe is held at 2 req/s by noop_connector (not measured at 3 req/s): every other config is unsaturated at 3 req/s"
            )
        );
        // Everyone stops at the next rate: nothing to name. Nothing above ref_safe: the same.
        let measured = m(&[
            ("plain", &[(2.0, false, true), (3.0, true, true)]),
            ("lmcache_only", &[(2.0, false, true), (3.0, false, false)]),
        ]);
        assert_eq!(
            held_by(&measured, &configs(&["plain", "lmcache_only"]), 2.0),
            None
        );
        assert_eq!(
            held_by(&measured, &configs(&["plain", "lmcache_only"]), 4.0),
            None
        );
        // Two holders, listed in the configs' order; a rate only a config outside `configs`
        // ran (2.5) is not the next one. A rerun without both leaves plain and nixl_both.
        let measured = m(&[
            ("plain", &[(2.0, false, true), (4.0, false, true)]),
            ("nixl_both", &[(2.0, false, true), (4.0, false, true)]),
            ("lmcache_only", &[(2.0, false, true), (4.0, true, true)]),
            (
                "multi_mooncake_lmcache",
                &[(2.0, false, true), (4.0, false, false)],
            ),
            ("mooncake_producer", &[(2.5, false, false)]),
        ]);
        let all = configs(&[
            "plain",
            "nixl_both",
            "lmcache_only",
            "multi_mooncake_lmcache",
        ]);
        let held = held_by(&measured, &all, 2.0).unwrap();
        assert_eq!(
            held.note(),
            "ref_safe is held at 2 req/s by lmcache_only (saturated at 4 req/s), multi_mooncake_lmcache (incomplete at 4 req/s): every other config is unsaturated at 4 req/s"
        );
        assert!(held.leaves_a_comparison(all.len()));
        // Plain holding it: the note stands, but a rerun without plain compares nothing. One
        // config besides the holders (plain alone) leaves nothing to compare either.
        let measured = m(&[
            ("plain", &[(2.0, false, true), (4.0, true, true)]),
            ("nixl_both", &[(2.0, false, true), (4.0, false, true)]),
            ("lmcache_only", &[(2.0, false, true), (4.0, false, true)]),
        ]);
        let all = configs(&["plain", "nixl_both", "lmcache_only"]);
        let held = held_by(&measured, &all, 2.0).unwrap();
        assert_eq!(held.configs, [("plain".to_owned(), "saturated")]);
        assert!(!held.leaves_a_comparison(all.len()));
        let measured = m(&[
            ("plain", &[(2.0, false, true), (4.0, false, true)]),
            ("lmcache_only", &[(2.0, false, true), (4.0, true, true)]),
        ]);
        let all = configs(&["plain", "lmcache_only"]);
        assert!(
            !held_by(&measured, &all, 2.0)
                .unwrap()
                .leaves_a_comparison(all.len())
        );
    }
}
