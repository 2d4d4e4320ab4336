//! The view-model both exporters render: every number already formatted (units, CIs,
//! percentages), every list already in its display order. Strings are *raw* text; each exporter
//! escapes for its own format (askama's HTML autoescape, the Markdown `md` filter).

use std::collections::BTreeMap;

use ctax_schema::Phase;

use super::figures::Figure;
use super::fmt;
use super::prose::Texts;
use crate::analysis::model::{
    AnalysisResult, CellStats, Detection, Quantiles, TaxContext, TaxValue, Verdict, VerdictKind,
};

/// The anchors every report has, in order, whatever the verdict data holds.
pub const HYPOTHESES: [&str; 6] = ["h1", "h2", "h3", "h4", "h5", "h6"];
pub const CRITERIA: [&str; 7] = ["sc1", "sc2", "sc3", "sc4", "sc5", "sc6", "sc7"];

#[derive(Debug, Clone, PartialEq)]
pub struct ReportView {
    pub title: String,
    pub simulated: bool,
    /// Step-timing columns are shown only when the plugin produced data.
    pub step_timing: bool,
    pub glance: Vec<(String, String)>,
    pub texts: Texts,
    pub hypotheses: Vec<VerdictRow>,
    pub criteria: Vec<VerdictRow>,
    pub figures: Vec<FigureView>,
    /// Degradation notes (step timing, missing configs), in the order the seed lists them.
    pub degradation: Vec<String>,
    /// Skipped configs with their reasons.
    pub skipped: Vec<(String, String)>,
    /// Taxes at ref_safe / ref_load, one row per non-plain config.
    pub ref_taxes: Vec<RefTaxRow>,
    /// Shape taxes (Phase B and B').
    pub shape_taxes: Vec<ShapeTaxRow>,
    pub cell_groups: Vec<CellGroup>,
    /// The Cells table has a GPU column (some launch recorded its GPU slot).
    pub show_gpus: bool,
    /// GPU-to-GPU calibration rows (plain vs plain between GPUs); empty without a calibration
    /// round.
    pub calibration: Vec<CalibrationView>,
    pub conventions: Vec<(String, String)>,
    pub warnings: Vec<String>,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VerdictRow {
    /// Anchor, e.g. `h1`.
    pub anchor: String,
    /// Display id, e.g. `H1`.
    pub id: String,
    pub title: String,
    pub statement: String,
    pub estimate: String,
    pub threshold: String,
    pub verdict: String,
    /// CSS class of the badge: `supported`, `refuted`, `inconclusive`, `not-testable`.
    pub badge: String,
    pub reason: String,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FigureView {
    pub number: u8,
    pub anchor: String,
    pub title: String,
    pub caption: String,
    /// Relative path from the report, e.g. `figures/fig1_ttft_vs_rate.svg`.
    pub file: String,
    /// The SVG to inline (HTML); `None` when dropped.
    pub svg: Option<String>,
    pub note: Option<String>,
}

/// One tax value as displayed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaxCell {
    /// `+12.3% [+8.1%, +16.0%]`, or `n/a`.
    pub text: String,
    /// CSS class: `tax` (CI above 0), `faster` (below 0), `nd` (CI includes 0), or empty.
    pub class: String,
    /// Short marker for Markdown: empty, or ` (n.d.)` / ` (faster)`.
    pub mark: String,
}

/// One GPU-to-GPU calibration row as displayed.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationView {
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

#[derive(Debug, Clone, PartialEq)]
pub struct RefTaxRow {
    pub config: String,
    pub ttft_safe: TaxCell,
    pub ttft_load: TaxCell,
    pub tpot_safe: TaxCell,
    pub tpot_load: TaxCell,
    pub step: TaxCell,
    pub callback: TaxCell,
    pub unexplained: TaxCell,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShapeTaxRow {
    pub config: String,
    pub phase: String,
    pub rate: String,
    pub shape: String,
    pub ttft: TaxCell,
    pub tpot: TaxCell,
    pub step: TaxCell,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellGroup {
    pub config: String,
    pub anchor: String,
    pub rows: Vec<CellRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellRow {
    pub phase: String,
    pub rate: String,
    pub shape: String,
    pub n: String,
    pub ttft_p50: String,
    pub ttft_p90: String,
    pub tpot_p50: String,
    pub tpot_p90: String,
    pub e2e_p90: String,
    pub throughput: String,
    pub waiting: String,
    pub saturation: String,
    /// Send lateness p99 (µs).
    pub lateness: String,
    /// Problems only: incomplete, errors, dropped.
    pub health: String,
    /// True when the cell is incomplete or had errors (highlighted).
    pub flagged: bool,
    /// Where the launches ran: `GPU 1 (3f2a9c1e)` (nvidia-smi index and the UUID's first 8 hex
    /// digits), or `slot 1, device 1` without nvidia-smi; distinct values joined.
    pub gpu: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    pub root: String,
    pub tool_version: String,
    pub schema_version: String,
    pub command: String,
    pub dates: String,
    pub hosts: String,
    pub manifest: Vec<ManifestView>,
    pub environments: Vec<Group>,
    pub run_configs: Vec<Group>,
    pub profile: Option<String>,
    pub preflight: Vec<[String; 4]>,
    pub step_timing: String,
    pub reference: Vec<(String, String)>,
    pub reference_notes: Vec<String>,
    pub saturation_rates: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ManifestView {
    pub date: String,
    pub stage: String,
    pub config: String,
    pub launch: String,
    pub status: String,
    pub reason: String,
    pub run_dir: String,
    pub vllm: String,
    pub connectors: String,
    pub gpu: String,
    pub step_timing: String,
    pub duration: String,
    pub command: String,
}

/// Runs that share identical facts, shown once.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub runs: Vec<String>,
    pub facts: Vec<(String, String)>,
    /// Pretty JSON (run configs), when the facts are a document rather than key/values.
    pub text: Option<String>,
}

impl ReportView {
    pub fn build(r: &AnalysisResult, figures: &[Figure]) -> ReportView {
        let s = &r.summary;
        let d = &s.dataset;
        let simulated = d.simulated || r.verdicts.simulated;
        let title = "KV-connector substrate tax".to_owned();

        let skipped: Vec<(String, String)> = {
            let mut v: Vec<(String, String)> = d
                .skipped
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            v.sort_by_key(|(k, _)| super::config_rank(k));
            v
        };
        let mut degradation = Vec::new();
        if !d.step_timing_available {
            degradation.push(
                figures
                    .iter()
                    .find(|f| f.number == 6)
                    .and_then(|f| f.note.clone())
                    .unwrap_or_else(|| {
                        "Step timing unavailable: Figures 6 and 7 are not drawn.".to_owned()
                    }),
            );
        }
        // Figures 6 and 7 are covered by the step-timing note above when it applies.
        let covered = |n: u8| !d.step_timing_available && (n == 6 || n == 7);
        for f in figures
            .iter()
            .filter(|f| f.svg.is_none() && !covered(f.number))
        {
            if let Some(n) = &f.note {
                degradation.push(format!("Figure {}: {n}", f.number));
            }
        }
        if !skipped.is_empty() {
            degradation.push(format!(
                "{} of the seed's configs did not run and appear in no figure or table: {}.",
                skipped.len(),
                skipped
                    .iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }

        let measured = super::all_configs(r).len();
        let mut glance = vec![
            ("Dataset".to_owned(), d.root.clone()),
            (
                "Data".to_owned(),
                if simulated {
                    "SIMULATED (ctax-sim), not vLLM".to_owned()
                } else {
                    "real vLLM runs".to_owned()
                },
            ),
            (
                "Configs measured".to_owned(),
                format!("{measured} ({} skipped)", skipped.len()),
            ),
            (
                "ref_safe".to_owned(),
                fmt::opt(s.reference_rates.ref_safe, "rps"),
            ),
            (
                "ref_load".to_owned(),
                fmt::opt(s.reference_rates.ref_load, "rps"),
            ),
            (
                "Step timing".to_owned(),
                if d.step_timing_available {
                    "available".to_owned()
                } else {
                    "unavailable".to_owned()
                },
            ),
        ];
        if let Some(t) = s
            .taxes
            .iter()
            .find(|t| t.config == "mooncake_both" && t.context == TaxContext::RefSafe)
            .and_then(|t| t.ttft_p90.as_ref())
        {
            glance.push((
                "mooncake_both TTFT p90 tax at ref_safe".to_owned(),
                fmt::estimate(&t.value, &t.unit),
            ));
        }

        ReportView {
            title,
            simulated,
            step_timing: d.step_timing_available,
            glance,
            texts: Texts::load(),
            hypotheses: verdict_rows(&r.verdicts.hypotheses, &HYPOTHESES),
            criteria: verdict_rows(&r.verdicts.success_criteria, &CRITERIA),
            figures: figures
                .iter()
                .map(|f| FigureView {
                    number: f.number,
                    anchor: f.anchor(),
                    title: f.title.clone(),
                    caption: f.caption.clone(),
                    file: format!("figures/{}", f.file_name()),
                    svg: f.svg.as_ref().map(|s| inline_svg(s, &f.title)),
                    note: f.note.clone(),
                })
                .collect(),
            degradation,
            skipped,
            ref_taxes: ref_tax_rows(r),
            shape_taxes: shape_tax_rows(r),
            cell_groups: cell_groups(r),
            show_gpus: s.cells.iter().any(|c| !c.gpus.is_empty()),
            calibration: s.calibration.iter().map(calibration_view).collect(),
            conventions: vec![
                (
                    "Percentile estimator".to_owned(),
                    s.conventions.percentile_estimator.clone(),
                ),
                ("CI method".to_owned(), s.conventions.ci_method.clone()),
                (
                    "Bootstrap settings".to_owned(),
                    format!(
                        "{} resamples, {} confidence, seed {}, {}",
                        s.conventions.bootstrap.resamples,
                        fmt::share(s.conventions.bootstrap.confidence),
                        s.conventions.bootstrap.seed,
                        bootstrap_method(&s.conventions.bootstrap)
                    ),
                ),
                ("TTFT".to_owned(), s.conventions.ttft.clone()),
                ("TPOT".to_owned(), s.conventions.tpot.clone()),
                ("ITL".to_owned(), s.conventions.itl.clone()),
                ("E2E".to_owned(), s.conventions.e2e.clone()),
                ("Warm-up".to_owned(), s.conventions.warmup.clone()),
                (
                    "Token source".to_owned(),
                    s.conventions.token_source.clone(),
                ),
                (
                    "Effective throughput".to_owned(),
                    s.conventions.effective_throughput.clone(),
                ),
                ("Saturation".to_owned(), s.conventions.saturation.clone()),
            ],
            warnings: s.warnings.clone(),
            provenance: provenance(r),
        }
    }
}

fn bootstrap_method(b: &crate::stats::BootstrapConfig) -> String {
    // Serialised through serde so this view does not depend on the enum's variants.
    match serde_json::to_value(b.method) {
        Ok(serde_json::Value::Object(m)) => {
            let kind = m
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or("?")
                .replace('_', " ");
            let rest: Vec<String> = m
                .iter()
                .filter(|(k, _)| *k != "kind")
                .map(|(k, v)| {
                    format!(
                        "{} = {}",
                        k.replace('_', " "),
                        if v.is_null() {
                            "auto".to_owned()
                        } else {
                            v.to_string()
                        }
                    )
                })
                .collect();
            if rest.is_empty() {
                kind
            } else {
                format!("{kind} ({})", rest.join(", "))
            }
        }
        Ok(v) => v.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// Adds accessibility attributes to a plotters SVG so it can be inlined.
fn inline_svg(svg: &str, title: &str) -> String {
    let t: String = title
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '&' | '"'))
        .collect();
    match svg.find("<svg ") {
        Some(i) => format!(
            "{}<svg role=\"img\" aria-label=\"{t}\" {}",
            &svg[..i],
            &svg[i + 5..]
        ),
        None => svg.to_owned(),
    }
}

fn anchor_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 16
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn verdict_rows(vs: &[Verdict], expected: &[&str]) -> Vec<VerdictRow> {
    let mut rows: Vec<VerdictRow> = Vec::new();
    for id in expected {
        match vs.iter().find(|v| v.id.eq_ignore_ascii_case(id)) {
            Some(v) => rows.push(verdict_row(v, id)),
            None => rows.push(VerdictRow {
                anchor: (*id).to_owned(),
                id: id.to_uppercase(),
                title: "(not reported)".to_owned(),
                statement: String::new(),
                estimate: fmt::NA.to_owned(),
                threshold: String::new(),
                verdict: VerdictKind::NotTestable.as_str().to_owned(),
                badge: "not-testable".to_owned(),
                reason: "the analysis produced no verdict for this id".to_owned(),
                label: String::new(),
            }),
        }
    }
    // Anything beyond the seed's ids, with a safe anchor.
    for (i, v) in vs.iter().enumerate() {
        if expected.iter().any(|id| v.id.eq_ignore_ascii_case(id)) {
            continue;
        }
        let anchor = if anchor_ok(&v.id) && !rows.iter().any(|r| r.anchor == v.id) {
            v.id.clone()
        } else {
            format!("extra-{i}")
        };
        rows.push(verdict_row(v, &anchor));
    }
    rows
}

fn verdict_row(v: &Verdict, anchor: &str) -> VerdictRow {
    let id = v.id.to_uppercase();
    // Titles may repeat the id ("H2: ..."); the ID column already shows it.
    let title = match v.title.strip_prefix(&format!("{id}:")).map(str::trim_start) {
        Some(t) => {
            let mut c = t.chars();
            c.next()
                .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
        }
        None => v.title.clone(),
    };
    VerdictRow {
        anchor: anchor.to_owned(),
        id,
        title,
        statement: v.statement.clone(),
        estimate: fmt::opt_estimate(v.estimate.as_ref(), &v.unit),
        threshold: v.threshold.clone(),
        verdict: v.verdict.as_str().to_owned(),
        badge: v.verdict.as_str().replace(' ', "-"),
        reason: v.reason.clone(),
        label: v.label.clone().unwrap_or_default(),
    }
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
    };
    TaxCell {
        text: fmt::estimate(&t.value, &t.unit),
        class: class.to_owned(),
        mark: mark.to_owned(),
    }
}

fn calibration_view(c: &crate::analysis::model::CalibrationRow) -> CalibrationView {
    let names = |g: &[crate::analysis::model::LaunchGpu]| {
        let mut v: Vec<String> = g.iter().map(gpu_label).collect();
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
        detectable: if c.detectable { "yes" } else { "no" }.to_owned(),
    }
}

fn ref_tax_rows(r: &AnalysisResult) -> Vec<RefTaxRow> {
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
    configs.sort_by_key(|c| super::config_rank(c));
    configs.dedup();
    configs
        .into_iter()
        .map(|c| {
            let safe = find(&c, TaxContext::RefSafe);
            let load = find(&c, TaxContext::RefLoad);
            RefTaxRow {
                ttft_safe: tax_cell(safe.and_then(|t| t.ttft_p90.as_ref())),
                ttft_load: tax_cell(load.and_then(|t| t.ttft_p90.as_ref())),
                tpot_safe: tax_cell(safe.and_then(|t| t.tpot_p90.as_ref())),
                tpot_load: tax_cell(load.and_then(|t| t.tpot_p90.as_ref())),
                step: tax_cell(safe.and_then(|t| t.step_p50_us.as_ref())),
                callback: tax_cell(safe.and_then(|t| t.callback_p50_us.as_ref())),
                unexplained: tax_cell(safe.and_then(|t| t.step_minus_callback_us.as_ref())),
                config: c,
            }
        })
        .collect()
}

fn shape_tax_rows(r: &AnalysisResult) -> Vec<ShapeTaxRow> {
    let mut taxes: Vec<_> = r
        .summary
        .taxes
        .iter()
        .filter(|t| matches!(t.context, TaxContext::ShapeB | TaxContext::ShapeBp))
        .collect();
    taxes.sort_by(|a, b| {
        (
            super::config_rank(&a.config),
            a.context,
            a.input_len,
            a.output_len,
        )
            .cmp(&(
                super::config_rank(&b.config),
                b.context,
                b.input_len,
                b.output_len,
            ))
            .then(a.rate.total_cmp(&b.rate))
    });
    taxes
        .into_iter()
        .map(|t| ShapeTaxRow {
            config: t.config.clone(),
            phase: phase_name(t.phase).to_owned(),
            rate: fmt::rate(t.rate),
            shape: format!("{}/{}", t.input_len, t.output_len),
            ttft: tax_cell(t.ttft_p90.as_ref()),
            tpot: tax_cell(t.tpot_p90.as_ref()),
            step: tax_cell(t.step_p50_us.as_ref()),
        })
        .collect()
}

fn q(qs: &Quantiles, which: u8, unit: &str) -> String {
    let e = match which {
        50 => qs.p50.as_ref(),
        90 => qs.p90.as_ref(),
        _ => qs.p99.as_ref(),
    };
    fmt::opt_estimate(e, unit)
}

/// A point estimate without its CI (secondary columns).
fn point(e: Option<&crate::analysis::model::Estimate>) -> String {
    e.map_or_else(|| fmt::NA.to_owned(), |e| fmt::num(e.est))
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::A => "A",
        Phase::B => "B",
        Phase::Bp => "B'",
        Phase::Preflight => "pre-flight",
    }
}

/// `GPU 1 (3f2a9c1e)` or `slot 1, device 1` for one launch's GPU.
pub fn gpu_label(g: &crate::analysis::model::LaunchGpu) -> String {
    g.to_string()
}

fn cell_row(c: &CellStats) -> CellRow {
    let sat = match &c.saturation {
        None => String::new(),
        Some(s) => {
            let mut t = String::new();
            for (fired, code) in [
                (s.throughput.fired, 'T'),
                (s.queue.fired, 'Q'),
                (s.ttft_growth.fired, 'G'),
            ] {
                if fired {
                    t.push(code);
                }
            }
            if t.is_empty() {
                t.push('-');
            }
            if s.saturated {
                t.push_str(" *");
            }
            t
        }
    };
    let mut health = Vec::new();
    if !c.complete {
        health.push(if c.incomplete_reasons.is_empty() {
            "incomplete".to_owned()
        } else {
            format!("incomplete: {}", c.incomplete_reasons.join("; "))
        });
    }
    if c.counts.errors > 0 {
        health.push(format!("{} errors", c.counts.errors));
    }
    if c.counts.dropped > 0 {
        health.push(format!("{} dropped", c.counts.dropped));
    }
    let flagged = !c.complete || c.counts.errors > 0;
    let throughput = match c.effective_rps {
        Some(e) if c.offered_rps > 0.0 => {
            format!("{} ({})", fmt::num(e), fmt::share(e / c.offered_rps))
        }
        Some(e) => fmt::num(e),
        None => fmt::NA.to_owned(),
    };
    CellRow {
        phase: phase_name(c.key.phase).to_owned(),
        rate: fmt::rate(c.rate),
        shape: format!("{}/{}", c.input_len, c.output_len),
        n: format!("{} / {}", c.counts.measured_ok, c.counts.scheduled),
        ttft_p50: point(c.ttft_ms.p50.as_ref()),
        ttft_p90: q(&c.ttft_ms, 90, ""),
        tpot_p50: point(c.tpot_ms.p50.as_ref()),
        tpot_p90: q(&c.tpot_ms, 90, ""),
        e2e_p90: point(c.e2e_ms.p90.as_ref()),
        lateness: fmt::opt(c.lateness_us_p99, ""),
        throughput,
        waiting: c
            .waiting_p50
            .map_or_else(|| fmt::NA.to_owned(), |w| fmt::fixed(w, 1)),
        saturation: sat,
        health: health.join("; "),
        flagged,
        gpu: {
            let mut labels: Vec<String> = c.gpus.iter().map(gpu_label).collect();
            labels.sort();
            labels.dedup();
            labels.join(", ")
        },
    }
}

fn cell_groups(r: &AnalysisResult) -> Vec<CellGroup> {
    let mut by: BTreeMap<(usize, String), Vec<&CellStats>> = BTreeMap::new();
    for c in r.summary.cells.iter().filter(|c| c.launch.is_none()) {
        by.entry(super::config_rank(&c.key.config))
            .or_default()
            .push(c);
    }
    by.into_iter()
        .enumerate()
        .map(|(i, ((_, config), mut cells))| {
            cells.sort_by(|a, b| {
                (a.key.phase, a.input_len, a.output_len)
                    .cmp(&(b.key.phase, b.input_len, b.output_len))
                    .then(a.rate.total_cmp(&b.rate))
            });
            // With several launches, each launch's own row follows its pooled row, so the
            // launch-to-launch variation is visible next to the pooled CI.
            let mut rows = Vec::new();
            for c in cells {
                rows.push(cell_row(c));
                if c.launches.len() > 1 {
                    for l in r.summary.per_launch.iter().filter(|p| p.key == c.key) {
                        let mut row = cell_row(l);
                        row.phase = format!("{} l{}", l.key.phase, l.launch.unwrap_or_default());
                        rows.push(row);
                    }
                }
            }
            CellGroup {
                anchor: format!("cells-{i}"),
                config,
                rows,
            }
        })
        .collect()
}

fn provenance(r: &AnalysisResult) -> Provenance {
    let s = &r.summary;
    let d = &s.dataset;
    let mut manifest: Vec<&ctax_schema::ManifestRow> = d.manifest.iter().collect();
    manifest.sort_by(|a, b| {
        a.started_unix_ms
            .cmp(&b.started_unix_ms)
            .then(a.stage.cmp(&b.stage))
            .then(a.config.cmp(&b.config))
    });
    let first = manifest
        .iter()
        .map(|m| m.started_unix_ms)
        .filter(|t| *t > 0)
        .min();
    let last = manifest
        .iter()
        .map(|m| m.started_unix_ms + (m.duration_s.max(0.0) * 1000.0) as u64)
        .filter(|t| *t > 0)
        .max();
    let dates = match (first, last) {
        (Some(a), Some(b)) => format!("{} to {}", fmt::unix_ms(a), fmt::unix_ms(b)),
        _ => fmt::NA.to_owned(),
    };
    let mut hosts: Vec<String> = manifest.iter().filter_map(|m| m.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    let manifest_rows = manifest
        .iter()
        .map(|m| ManifestView {
            date: m.date_utc.clone(),
            stage: m.stage.clone(),
            config: m.config.clone(),
            launch: m.launch.to_string(),
            status: m.status.clone(),
            reason: m.reason.clone().unwrap_or_default(),
            run_dir: m.run_dir.clone().unwrap_or_default(),
            vllm: match (&m.vllm_version, &m.vllm_git_sha) {
                (Some(v), Some(s)) => format!("{v} ({s})"),
                (Some(v), None) => v.clone(),
                (None, Some(s)) => s.clone(),
                (None, None) => String::new(),
            },
            connectors: m
                .connector_versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            gpu: m.gpu.clone().unwrap_or_default(),
            step_timing: match m.step_timing_active {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => String::new(),
            },
            duration: format!("{} s", fmt::fixed(m.duration_s, 0)),
            command: m.launch_command.clone().unwrap_or_default(),
        })
        .collect();

    // Group runs with identical environments / configs.
    let mut env_groups: Vec<Group> = Vec::new();
    for (run, facts) in &d.environments {
        let facts: Vec<(String, String)> =
            facts.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        match env_groups.iter_mut().find(|g| g.facts == facts) {
            Some(g) => g.runs.push(run.clone()),
            None => env_groups.push(Group {
                runs: vec![run.clone()],
                facts,
                text: None,
            }),
        }
    }
    let mut cfg_groups: Vec<Group> = Vec::new();
    for (run, v) in &d.run_configs {
        let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        match cfg_groups
            .iter_mut()
            .find(|g| g.text.as_deref() == Some(text.as_str()))
        {
            Some(g) => g.runs.push(run.clone()),
            None => cfg_groups.push(Group {
                runs: vec![run.clone()],
                facts: vec![],
                text: Some(text),
            }),
        }
    }

    let preflight: Vec<[String; 4]> = d
        .preflight
        .as_ref()
        .map(|p| {
            let mut v: Vec<[String; 4]> = p
                .configs
                .iter()
                .map(|(c, e)| {
                    [
                        c.clone(),
                        e.decision.clone(),
                        e.reason.clone().unwrap_or_default(),
                        e.log.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            v.sort_by_key(|row| super::config_rank(&row[0]));
            v
        })
        .unwrap_or_default();
    let step_timing = match (
        d.step_timing_available,
        d.preflight
            .as_ref()
            .and_then(|p| p.step_timing_reason.clone()),
    ) {
        (true, _) => "available (step-timing plugin records present)".to_owned(),
        (false, Some(r)) => format!("unavailable: {r}"),
        (false, None) => "unavailable".to_owned(),
    };
    let rr = &s.reference_rates;
    let mut saturation_rates: Vec<(String, String)> = rr
        .saturation_rate
        .iter()
        .map(|(c, v)| {
            (
                c.clone(),
                v.map_or_else(
                    || "not saturated at any rate".to_owned(),
                    |v| fmt::with_unit(v, "rps"),
                ),
            )
        })
        .collect();
    saturation_rates.sort_by_key(|(c, _)| super::config_rank(c));
    let root = d.root.clone();
    Provenance {
        command: format!("ctax report {} --out site/", shell_word(&root)),
        root,
        tool_version: s.tool_version.clone(),
        schema_version: format!(
            "summary {}, verdicts {}",
            s.schema_version, r.verdicts.schema_version
        ),
        dates,
        hosts: if hosts.is_empty() {
            fmt::NA.to_owned()
        } else {
            hosts.join(", ")
        },
        manifest: manifest_rows,
        environments: env_groups,
        run_configs: cfg_groups,
        profile: d.profile.clone(),
        preflight,
        step_timing,
        reference: vec![
            ("ref_safe".to_owned(), fmt::opt(rr.ref_safe, "rps")),
            ("ref_load".to_owned(), fmt::opt(rr.ref_load, "rps")),
            (
                "configs considered".to_owned(),
                rr.configs_considered.join(", "),
            ),
        ],
        reference_notes: rr.notes.clone(),
        saturation_rates,
    }
}

/// Quotes a path for a copy-pasteable command line when it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::LaunchGpu;

    #[test]
    fn gpu_labels() {
        let g = |gpu_index, gpu_uuid: Option<&str>, device: Option<&str>| LaunchGpu {
            launch: 0,
            slot: 1,
            device: device.map(str::to_owned),
            gpu_index,
            gpu_uuid: gpu_uuid.map(str::to_owned),
        };
        assert_eq!(
            gpu_label(&g(
                Some(1),
                Some("GPU-3f2a9c1e-77aa-4b1c-9d00-0123456789ab"),
                Some("1")
            )),
            "GPU 1 (3f2a9c1e)"
        );
        assert_eq!(gpu_label(&g(Some(0), None, None)), "GPU 0");
        assert_eq!(gpu_label(&g(None, None, Some("1"))), "slot 1, device 1");
        assert_eq!(gpu_label(&g(None, None, None)), "slot 1");
    }
}
