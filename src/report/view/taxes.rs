//! The Taxes section: taxes at the reference rates (one row per config) and across the Phase B
//! / B' shapes, each with its CI and whether the CI excludes 0.

use crate::analysis::model::{
    AaHalvesInTime, AnalysisResult, Detection, Tax, TaxContext, TaxValue,
};
use crate::analysis::taxes::Metric;
use crate::report::fmt;
use ctax_schema::Phase;

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TaxCell {
    /// `+12.3% [+8.1%, +16.0%]`, or `n/a`.
    pub text: String,
    /// CSS class: `tax` (CI above 0), `faster` (below 0), `nd` (CI includes 0), or empty.
    pub class: String,
    /// Short marker for Markdown: empty, or ` (n.d.)` / ` (faster)`.
    pub mark: String,
}

/// One GPU-to-GPU calibration row as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CalibrationView {
    pub rate: String,
    pub shape: String,
    pub host: String,
    pub reference: String,
    pub other: String,
    /// Measured requests: reference / other.
    pub n: String,
    pub ttft: TaxCell,
    pub tpot: TaxCell,
    pub detectable: String,
}

pub(super) fn calibration_view(c: &crate::analysis::model::CalibrationRow) -> CalibrationView {
    let names = |g: &[crate::analysis::model::LaunchGpu]| {
        let mut v: Vec<String> = g.iter().map(ToString::to_string).collect();
        v.dedup();
        v.join(", ")
    };
    CalibrationView {
        rate: fmt::rate(c.rate),
        shape: format!("{}/{}", c.input_len, c.output_len),
        host: c.host.clone().unwrap_or_default(),
        reference: names(&c.reference),
        other: names(&c.other),
        n: format!("{} / {}", c.n_reference, c.n_other),
        ttft: tax_cell(Some(&c.ttft_p90)),
        tpot: tax_cell(Some(&c.tpot_p90)),
        detectable: match (c.saturated, c.detectable) {
            (true, _) => "plain saturated: not a GPU difference",
            (false, true) => "yes",
            (false, false) => "no",
        }
        .to_owned(),
    }
}

/// One A/A (noise-floor) row as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AaView {
    pub config: String,
    pub phase: String,
    pub rate: String,
    pub shape: String,
    /// `l0, l2 vs l1, l3`.
    pub split: String,
    pub ttft: TaxCell,
    pub tpot: TaxCell,
    /// `l6, l8 first` when one half ran the cell before the other on every machine
    /// ([`crate::analysis::model::AaTax::in_time`]: the A/A is then also earlier against
    /// later); `mixed` when they interleave, overlap or disagree between machines; `n/a` when
    /// no machine has both halves with recorded cell times.
    pub in_time: String,
    /// `UNSTABLE` or `ok`.
    pub status: String,
}

pub(super) fn aa_rows(r: &AnalysisResult) -> Vec<AaView> {
    let s = &r.summary;
    let ls = crate::analysis::words::launch_list;
    s.aa_taxes
        .iter()
        .map(|a| {
            let shape = s
                .cells
                .iter()
                .find(|c| c.launch.is_none() && c.key.config == a.config && c.key.cell == a.cell)
                .map(|c| {
                    (
                        fmt::rate(c.rate),
                        format!("{}/{}", c.input_len, c.output_len),
                    )
                })
                .unwrap_or_default();
            AaView {
                config: a.config.clone(),
                phase: a.phase.label().to_owned(),
                rate: shape.0,
                shape: shape.1,
                split: format!(
                    "{} vs {} ({})",
                    ls(&a.launches_a),
                    ls(&a.launches_b),
                    a.machines.join(", ")
                ),
                ttft: tax_cell(a.ttft_p90.as_ref()),
                tpot: tax_cell(a.tpot_p90.as_ref()),
                in_time: match a.in_time {
                    Some(AaHalvesInTime::AFirst) => format!("{} first", ls(&a.launches_a)),
                    Some(AaHalvesInTime::BFirst) => format!("{} first", ls(&a.launches_b)),
                    Some(AaHalvesInTime::Mixed) => "mixed".to_owned(),
                    None => fmt::NA.to_owned(),
                },
                status: if a.unstable { "UNSTABLE" } else { "ok" }.to_owned(),
            }
        })
        .collect()
}

/// One tax that both Phase A and Phase B measured, as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SameCellView {
    pub config: String,
    /// `2 req/s, 4096/256`.
    pub cell: String,
    pub metric: String,
    pub phase_a: TaxCell,
    pub phase_b: TaxCell,
    pub difference: TaxCell,
    /// `agree` or `DISAGREE`.
    pub status: String,
    /// `A 2/2, B 0/4`: per phase, the machines whose own tax is above 0 of those with both.
    pub above_zero: String,
    /// Each machine's own tax, Phase A's then Phase B's.
    pub machines: Vec<SameCellMachineView>,
    /// The machines by the cell's place in their launches
    /// ([`crate::analysis::same_cell::SameCell::place_summary`]); `one place` when all ran it
    /// at one.
    pub by_place: String,
}

/// One machine's point estimate of a tax both phases measured, as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SameCellMachineView {
    pub phase: String,
    pub machine: String,
    /// `l2, l3 vs l3`.
    pub launches: String,
    /// `-9.4%`.
    pub tax: String,
}

pub(super) fn same_cell_rows(r: &AnalysisResult) -> Vec<SameCellView> {
    r.summary
        .same_cell
        .iter()
        .map(|c| {
            let cell = ctax_schema::Cell::parse(&c.cell).map_or_else(
                || c.cell.clone(),
                |s| {
                    format!(
                        "{} req/s, {}/{}",
                        fmt::rate(s.rate),
                        s.input_len,
                        s.output_len
                    )
                },
            );
            let above_zero = [Phase::A, Phase::B]
                .into_iter()
                .map(|ph| {
                    let (up, n) = c.signs(ph);
                    format!("{} {up}/{n}", ph.label())
                })
                .collect::<Vec<_>>()
                .join(", ");
            let row = |t: &crate::analysis::same_cell::MachineTax, machine: String| {
                // `l3 (5th)`: where the cell ran in that launch, when known.
                let at = |ls: &[u32], pos: &[u32]| {
                    ls.iter()
                        .enumerate()
                        .map(|(i, l)| match pos.get(i).copied().unwrap_or(0) {
                            0 => format!("l{l}"),
                            p => format!("l{l} ({})", fmt::ordinal(p)),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let k = t.launches.len().min(t.positions.len());
                SameCellMachineView {
                    phase: t.phase.label().to_owned(),
                    machine,
                    launches: format!(
                        "{} vs {}",
                        at(&t.launches, &t.positions[..k]),
                        at(&t.plain_launches, &t.positions[k..])
                    ),
                    tax: fmt::pct(t.tax),
                }
            };
            // A machine that ran the cell at several places: its row, then one per place.
            let machines = c
                .by_machine
                .iter()
                .flat_map(|t| {
                    let places = c
                        .split_by_place
                        .iter()
                        .filter(|s| s.phase == t.phase && s.machine == t.machine)
                        .map(|s| {
                            let place = match s.positions.first().copied().unwrap_or(0) {
                                0 => "at an unknown place".to_owned(),
                                p => fmt::ordinal(p),
                            };
                            row(s, format!("{} (cell {place})", s.machine))
                        });
                    std::iter::once(row(t, t.machine.clone())).chain(places)
                })
                .collect();
            let by_place = c
                .place_summary()
                .unwrap_or_else(|| match c.by_place.first() {
                    Some(g) if g.place > 0 => format!("all {}", fmt::ordinal(g.place)),
                    _ => "unknown".to_owned(),
                });
            SameCellView {
                above_zero,
                machines,
                by_place,
                config: c.config.clone(),
                cell,
                metric: crate::analysis::launch_noise::metric_label(&c.metric).to_owned(),
                phase_a: tax_cell(Some(&c.phase_a)),
                phase_b: tax_cell(Some(&c.phase_b)),
                difference: tax_cell(Some(&c.difference)),
                status: if c.disagrees() { "DISAGREE" } else { "agree" }.to_owned(),
            }
        })
        .collect()
}

/// `own noise: TPOT p90 at A r2` when the screen gave `config` its own launch noise in Phase A
/// (a cell or over every cell); `None` otherwise.
fn own_noise_note(
    noise: &crate::analysis::launch_noise::LaunchNoiseSummary,
    config: &str,
) -> Option<String> {
    let items: Vec<String> = noise
        .own
        .iter()
        .filter(|o| o.config == config)
        .filter(|o| o.cell.as_ref().is_none_or(|c| c.starts_with("A/")))
        .map(|o| {
            let metric = crate::analysis::launch_noise::metric_label(&o.metric);
            match &o.cell {
                Some(c) => {
                    let rate = c.trim_start_matches("A/").split('_').next().unwrap_or(c);
                    format!("{metric} at {rate}")
                }
                None => format!("{metric} in the cells without their own noise"),
            }
        })
        .collect();
    (!items.is_empty()).then(|| format!("own noise: {}", items.join(", ")))
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefTaxRow {
    pub config: String,
    /// Launches of the config, `1 (pooled noise)` when its CIs carry the launch noise of the
    /// configs with ≥ 2 launches rather than its own.
    pub launches: String,
    /// What the config changed in the engine, from its launches' vLLM logs (each fact once,
    /// counts as ranges over the launches), or empty without logs.
    pub engine: String,
    pub ttft_safe: TaxCell,
    pub ttft_load: TaxCell,
    pub tpot_safe: TaxCell,
    pub tpot_load: TaxCell,
    pub step: TaxCell,
    pub callback: TaxCell,
    pub unexplained: TaxCell,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShapeTaxRow {
    pub config: String,
    pub phase: String,
    pub rate: String,
    pub shape: String,
    /// The config's launches the tax compared with plain, and their machines
    /// (`1 launch on 1 machine`: one pair, no replication of its own).
    pub launches: String,
    pub ttft: TaxCell,
    pub tpot: TaxCell,
    pub step: TaxCell,
}

fn tax_cell(t: Option<&TaxValue>) -> TaxCell {
    let Some(t) = t else {
        return TaxCell {
            text: fmt::NA.to_owned(),
            class: String::new(),
            mark: String::new(),
        };
    };
    let (class, mark) = match t.detection {
        Detection::Tax => ("tax", ""),
        Detection::Negative => ("faster", " (faster)"),
        Detection::Inconclusive => ("nd", " (n.d.)"),
        Detection::Unknown => ("", ""),
        Detection::NoLaunchNoise => ("nd", " (launch noise unknown)"),
    };
    TaxCell {
        text: fmt::estimate(&t.value, &t.unit),
        class: class.to_owned(),
        mark: mark.to_owned(),
    }
}

/// [`tax_cell`] of `t`'s tax of `m`, marked `(rests on one machine)` or `(borderline)` when
/// machines decide its detection ([`one_machine_lines`]).
fn tax_cell_of(t: Option<&Tax>, m: Metric) -> TaxCell {
    let mut cell = tax_cell(t.and_then(|t| m.of_tax(t)));
    let decisive: Vec<_> = t
        .map(|t| {
            t.one_machine
                .iter()
                .filter(|o| o.metric == m.label())
                .collect()
        })
        .unwrap_or_default();
    if decisive.iter().any(|o| o.borderline) {
        cell.text.push_str(" (borderline)");
    } else if !decisive.is_empty() {
        cell.text.push_str(" (rests on one machine)");
    }
    cell
}

/// The order of the Taxes tables' rows: config, context, shape, rate.
fn table_order(a: &Tax, b: &Tax) -> std::cmp::Ordering {
    let key = |t: &Tax| {
        (
            crate::report::config_rank(&t.config),
            t.context,
            t.input_len,
            t.output_len,
        )
    };
    key(a).cmp(&key(b)).then(a.rate.total_cmp(&b.rate))
}

/// One line per detected tax whose detection machines decide ([`Tax::one_machine`]): the
/// tax, then the one machine it was measured on, or the tax without the machine it rests on,
/// or, borderline, without each of the machines that undo it. A Phase A cell that is both
/// ref_safe and ref_load is listed once; lines follow the Taxes tables' order.
pub(super) fn one_machine_lines(r: &AnalysisResult) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut taxes: Vec<&Tax> = r
        .summary
        .taxes
        .iter()
        .filter(|t| !t.one_machine.is_empty())
        .filter(|t| seen.insert((t.config.clone(), t.phase, t.cell.clone())))
        .collect();
    taxes.sort_by(|a, b| table_order(a, b));
    let without_text = |w: &TaxValue| {
        let c = tax_cell(Some(w));
        let mark = match w.detection {
            Detection::Unknown => " (CI undetermined)",
            _ => c.mark.as_str(),
        };
        format!("{}{mark}", c.text)
    };
    let mut out = Vec::new();
    for t in taxes {
        for m in [Metric::TtftP90, Metric::TpotP90, Metric::StepP50] {
            let metric = m.label();
            let Some(value) = m.of_tax(t) else { continue };
            let context = match t.context {
                TaxContext::RefSafe => "Phase A at ref_safe",
                TaxContext::RefLoad => "Phase A at ref_load",
                TaxContext::ShapeB => "Phase B",
                TaxContext::ShapeBp => "Phase B'",
            };
            let os: Vec<_> = t
                .one_machine
                .iter()
                .filter(|o| o.metric == metric)
                .collect();
            let how = match os.as_slice() {
                [] => continue,
                [o] if o.without.is_none() => format!(
                    "rests on one machine, the only one it shared with plain ({})",
                    o.machine
                ),
                [o] => format!(
                    "rests on {} (of {} machines): without it {}",
                    o.machine,
                    o.shared,
                    o.without.as_ref().map_or_else(String::new, without_text)
                ),
                _ => {
                    let each: Vec<String> = os
                        .iter()
                        .map(|o| {
                            format!(
                                "without {} {}",
                                o.machine,
                                o.without.as_ref().map_or_else(String::new, without_text)
                            )
                        })
                        .collect();
                    let of = os.first().map_or(0, |o| o.shared);
                    let which = if os.len() as u32 == of {
                        format!("any one of its {of} machines")
                    } else {
                        format!("any one of {} of its {of} machines", os.len())
                    };
                    format!(
                        "borderline: not detected without {which} ({})",
                        each.join("; ")
                    )
                }
            };
            out.push(format!(
                "{}, {context} ({} req/s, {}/{}), {metric} {}: {how}",
                t.config,
                fmt::rate(t.rate),
                t.input_len,
                t.output_len,
                fmt::estimate(&value.value, &value.unit),
            ));
        }
    }
    out
}

pub(super) fn ref_tax_rows(r: &AnalysisResult) -> Vec<RefTaxRow> {
    let find = |c: &str, k: TaxContext| {
        r.summary
            .taxes
            .iter()
            .find(|t| t.config == c && t.context == k)
    };
    let mut configs: Vec<String> = r
        .summary
        .taxes
        .iter()
        .filter(|t| matches!(t.context, TaxContext::RefSafe | TaxContext::RefLoad))
        .map(|t| t.config.clone())
        .collect();
    configs.sort_by_key(|c| crate::report::config_rank(c));
    configs.dedup();
    configs
        .into_iter()
        .map(|c| {
            let safe = find(&c, TaxContext::RefSafe);
            let load = find(&c, TaxContext::RefLoad);
            let at_load = |m: Metric| {
                let mut cell = tax_cell_of(load, m);
                if load.and_then(|t| m.of_tax(t)).is_some()
                    && load.is_some_and(|t| saturated_there(r, t))
                {
                    cell.text.push_str(" (saturated)");
                }
                cell
            };
            RefTaxRow {
                ttft_safe: tax_cell_of(safe, Metric::TtftP90),
                ttft_load: at_load(Metric::TtftP90),
                tpot_safe: tax_cell_of(safe, Metric::TpotP90),
                tpot_load: at_load(Metric::TpotP90),
                step: tax_cell_of(safe, Metric::StepP50),
                callback: tax_cell(safe.and_then(|t| t.callback_p50_us.as_ref())),
                unexplained: tax_cell(safe.and_then(|t| t.step_minus_callback_us.as_ref())),
                engine: engine_of(r, &c),
                launches: {
                    let count = match r
                        .summary
                        .launch_noise
                        .launches_of(ctax_schema::Phase::A, &c)
                    {
                        Some(1) => "1 (pooled noise)".to_owned(),
                        Some(k) => own_noise_note(&r.summary.launch_noise, &c)
                            .map_or_else(|| k.to_string(), |n| format!("{k} ({n})")),
                        None => "n/a".to_owned(),
                    };
                    let count = match safe.and_then(pairing_note) {
                        Some(note) => format!("{count}; {note}"),
                        None => count,
                    };
                    // Launches at ref_safe or ref_load that a tax left out, their data not whole.
                    let mut cut: Vec<String> = [safe, load]
                        .into_iter()
                        .flatten()
                        .flat_map(|t| t.not_whole.iter().cloned())
                        .collect();
                    cut.sort();
                    cut.dedup();
                    with_not_whole(count, &cut)
                },
                config: c,
            }
        })
        .collect()
}

/// Whether the tax's config is saturated (pooled) in the tax's cell: at ref_load, a config
/// that saturates below plain's knee is measured in its queue, and its tax says so.
fn saturated_there(r: &AnalysisResult, t: &crate::analysis::model::Tax) -> bool {
    let key = crate::analysis::model::CellKey {
        config: t.config.clone(),
        phase: t.phase,
        cell: t.cell.clone(),
    };
    crate::analysis::model::pooled_saturated(&r.summary.cells, &key) == Some(true)
}

/// How a tax was paired with plain, when not every launch was: `no plain on its machine`, or
/// `l2 not paired (no plain on its machine)`.
fn pairing_note(t: &crate::analysis::model::Tax) -> Option<String> {
    if t.machines.is_empty() {
        // Without any launch data (an engine that died) there is nothing to pair.
        return (!t.unpaired_launches.is_empty())
            .then(|| "no plain launch on its machines: no tax".to_owned());
    }
    if t.unpaired_launches.is_empty() {
        return None;
    }
    Some(format!(
        "{} left out (no plain launch on {})",
        crate::analysis::words::launch_list(&t.unpaired_launches),
        if t.unpaired_launches.len() == 1 {
            "its machine"
        } else {
            "their machines"
        }
    ))
}

pub(super) fn shape_tax_rows(r: &AnalysisResult) -> Vec<ShapeTaxRow> {
    let mut taxes: Vec<_> = r
        .summary
        .taxes
        .iter()
        .filter(|t| matches!(t.context, TaxContext::ShapeB | TaxContext::ShapeBp))
        .collect();
    taxes.sort_by(|a, b| table_order(a, b));
    taxes
        .into_iter()
        .map(|t| ShapeTaxRow {
            config: t.config.clone(),
            phase: t.phase.label().to_owned(),
            rate: fmt::rate(t.rate),
            shape: format!("{}/{}", t.input_len, t.output_len),
            launches: with_not_whole(
                fmt::launches_on(t.paired_launches.len(), t.machines.len()),
                &t.not_whole,
            ),
            ttft: tax_cell_of(Some(t), Metric::TtftP90),
            tpot: tax_cell_of(Some(t), Metric::TpotP90),
            step: tax_cell_of(Some(t), Metric::StepP50),
        })
        .collect()
}

/// `launches` followed by the launches a tax left out because their raw data in the cell is
/// not whole: `0 launches on 0 machines; mooncake_both l6 left out (raw data not whole)`.
pub(super) fn with_not_whole(launches: String, cut: &[String]) -> String {
    if cut.is_empty() {
        return launches;
    }
    format!(
        "{launches}; {} left out (raw data not whole)",
        cut.join(", ")
    )
}

/// The Phase A shape(s) of the reference-rate cells (the Phase A cells when no tax was
/// computed), e.g. `input 4096, output 256`.
pub(super) fn ref_shape_text(r: &AnalysisResult) -> String {
    let s = &r.summary;
    let mut shapes: Vec<(u32, u32)> = s
        .taxes
        .iter()
        .filter(|t| matches!(t.context, TaxContext::RefSafe | TaxContext::RefLoad))
        .map(|t| (t.input_len, t.output_len))
        .collect();
    if shapes.is_empty() {
        shapes = s
            .cells
            .iter()
            .filter(|c| c.key.phase == ctax_schema::Phase::A)
            .map(|c| (c.input_len, c.output_len))
            .collect();
    }
    fmt::shapes(&shapes)
}

/// What `config`'s launches changed in the engine (from their vLLM logs), merged over the
/// launches ([`crate::ingest::engine_log::EngineFacts::summary_over`]).
pub(super) fn engine_of(r: &AnalysisResult, config: &str) -> String {
    let facts: Vec<&crate::ingest::engine_log::EngineFacts> = r
        .summary
        .dataset
        .engine_of(config)
        .map(|(_, f)| f)
        .collect();
    crate::ingest::engine_log::EngineFacts::summary_over(&facts)
}
