//! The head of the report: "At a glance", and the Degradation section (what did not run or is
//! not drawn, and why).

use crate::analysis::model::{AnalysisResult, TaxContext};
use crate::report::figures::Figure;
use crate::report::fmt;

/// Skipped configs with their reasons, canonical order.
pub(super) fn skipped(r: &AnalysisResult) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = r
        .summary
        .dataset
        .skipped
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    v.sort_by_key(|(k, _)| crate::report::config_rank(k));
    v
}

/// Degradation notes, in the order the seed lists them: step timing, dropped figures, configs
/// that did not run.
pub(super) fn degradation(
    r: &AnalysisResult,
    figures: &[Figure],
    skipped: &[(String, String)],
) -> Vec<String> {
    let step_timing = r.summary.dataset.step_timing_available;
    let mut out = Vec::new();
    if !step_timing {
        out.push(
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
    let covered = |n: u8| !step_timing && (n == 6 || n == 7);
    for f in figures
        .iter()
        .filter(|f| f.svg.is_none() && !covered(f.number))
    {
        if let Some(n) = &f.note {
            out.push(format!("Figure {}: {n}", f.number));
        }
    }
    let d = &r.summary.dataset;
    for c in &d.configs {
        if !crate::analysis::model::has_complete_phase_a(&r.summary.cells, c) {
            let deaths = d.engine_deaths(c);
            let why = if deaths.is_empty() {
                String::new()
            } else {
                format!(
                    "; its engine died: {}",
                    deaths.join("; ").trim_end_matches('.')
                )
            };
            out.push(format!(
                "{c} ran but has no complete Phase A cell{why}. It has no tax and is left out of \
                 the reference rates; the verdicts that need it are not testable."
            ));
        }
    }
    out.extend(super::coverage::gaps(r));
    if !skipped.is_empty() {
        out.push(format!(
            "{} of the seed's configs did not run and appear in no figure or table: {}.",
            skipped.len(),
            skipped
                .iter()
                .map(|(c, _)| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// "At a glance": dataset, data kind, configs, reference rates, step timing, the headline tax.
pub(super) fn glance(
    r: &AnalysisResult,
    simulated: bool,
    skipped: &[(String, String)],
) -> Vec<(String, String)> {
    let s = &r.summary;
    let d = &s.dataset;
    let measured = crate::report::all_configs(r).len();
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
    if !d.gpus.is_empty() {
        let mixed = if d.gpus.len() > 1 {
            " — MIXED GPU models (see Warnings)"
        } else {
            ""
        };
        glance.push((
            "GPU".to_owned(),
            format!("{}{mixed}", crate::ingest::gpu_model::describe(&d.gpus)),
        ));
    }
    let n = &s.launch_noise;
    glance.push((
        "Launches per config".to_owned(),
        if n.launches.is_empty() {
            "none".to_owned()
        } else {
            n.launches
                .iter()
                .map(|(phase, by)| {
                    let mut by: Vec<(&String, &u32)> = by.iter().collect();
                    by.sort_by_key(|(c, _)| crate::report::config_rank(c));
                    let list: Vec<String> = by.iter().map(|(c, k)| format!("{c} {k}")).collect();
                    format!("Phase {}: {}", phase.label(), list.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        },
    ));
    glance.push((
        "Launch-to-launch noise (sd per launch)".to_owned(),
        launch_noise_line(n),
    ));
    if s.machines.count() > 1 {
        glance.push((
            "Machines".to_owned(),
            super::machines::glance_line(&s.machines, s.reference_rates.ref_safe, r),
        ));
    }
    let unstable = s.aa_taxes.iter().filter(|a| a.unstable).count();
    if unstable > 0 {
        glance.push((
            "Noise floor (A/A)".to_owned(),
            format!(
                "UNSTABLE: {unstable} of {} A/A taxes exclude 0 (see Taxes, Warnings)",
                s.aa_taxes.len()
            ),
        ));
    } else if !s.aa_taxes.is_empty() {
        glance.push((
            "Noise floor (A/A)".to_owned(),
            format!("all {} A/A taxes straddle 0", s.aa_taxes.len()),
        ));
    } else if n.ttft_known() {
        glance.push((
            "Noise floor (A/A)".to_owned(),
            "none: no config ran two launches on one machine (see Warnings)".to_owned(),
        ));
    }
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
    glance
}

/// `pooled over cells (…): TTFT p90 ±17% (df 9), TPOT p90 ±9% (df 9); each cell with ≥ 4 carries
/// its own: A r2_i4096_o256 TTFT p90 ±11% (df 7), …`, or why it is unknown.
pub(super) fn launch_noise_line(n: &crate::analysis::launch_noise::LaunchNoiseSummary) -> String {
    use crate::analysis::launch_noise::{MIN_CELL_DF, UNKNOWN_REASON};
    if !n.ttft_known() {
        return format!("unknown: {UNKNOWN_REASON} — no tax can be detected");
    }
    let list =
        |m: &std::collections::BTreeMap<String, crate::stats::launch_noise::PooledVariance>| {
            ["ttft_p90", "tpot_p90", "step_p50", "callback_p50"]
                .iter()
                .filter_map(|k| {
                    m.get(*k).map(|pv| {
                        format!(
                            "{} ±{:.1}% (df {})",
                            crate::analysis::launch_noise::metric_label(k),
                            pv.relative_sd() * 100.0,
                            pv.df
                        )
                    })
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
    let pooled = format!(
        "pooled over cells (carried by the cells without {MIN_CELL_DF} degrees of freedom of their own): {}",
        list(&n.metrics)
    );
    let mut line = pooled;
    if !n.cells.is_empty() {
        let cells: Vec<String> = n
            .cells
            .iter()
            .map(|(tag, m)| format!("{} {}", tag.replacen('/', " ", 1), list(m)))
            .collect();
        line = format!(
            "{line}; each cell with ≥ {MIN_CELL_DF} carries its own: {}",
            cells.join("; ")
        );
    }
    if !n.own.is_empty() {
        line = format!("{line}; {}", own_noise_list(&n.own));
    }
    line
}

/// `own noise (launches that spread more than the other configs' …): lmcache_only TPOT p90 in
/// A r2_i4096_o256 ±7.1% (df 1; F 37.0 on 1, 7 df, Holm p 0.004)`.
pub(crate) fn own_noise_list(own: &[crate::analysis::launch_noise::OwnNoise]) -> String {
    use crate::analysis::launch_noise::{OWN_NOISE_ALPHA, metric_label as label};
    let items: Vec<String> = own
        .iter()
        .map(|o| {
            format!(
                "{} {} {} ±{:.1}% (df {}; F {:.1} on {}, {} df, Holm p {:.3})",
                o.config,
                label(&o.metric),
                o.cell
                    .as_deref()
                    .map(|t| format!("in {}", t.replacen('/', " ", 1)))
                    .unwrap_or_else(|| "in the cells without their own noise".into()),
                o.variance.relative_sd() * 100.0,
                o.variance.df,
                o.f,
                o.variance.df,
                o.rest_df,
                o.p_adjusted
            )
        })
        .collect();
    format!(
        "configs whose launches spread more than the other configs' (their own spread within \
         machines, or, run once per machine, their lack of fit across machines in a cell; \
         one-sided F-test against the others' pool, Holm-adjusted, {:.0}%) carry it as their \
         own and are left out of the pools: {}",
        OWN_NOISE_ALPHA * 100.0,
        items.join("; ")
    )
}
