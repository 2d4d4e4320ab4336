//! The seed's success criteria SC1–SC7 ("Success Criteria (revised)").

use ctax_schema::{Decision, FileKind, RowStatus, file_name};

use super::bench_time;
use super::hypotheses::{
    H2_MAX_GAP, H2_MIN_GAP, H3_IMPLEMENTATION_RATIO, H3_MAX_RATIO, H4_MAX_DEVIATION, h3_label,
    h3_point_label, h3_ratio, h4_additive, h4_deviation,
};
use super::{Ctx, Draft, Verdict, VerdictKind, num, pct, pp, within};
use crate::analysis::model::{CANONICAL_CONFIGS, Estimate};
use crate::ingest::Dataset;

const SC1_PRIOR: (f64, f64) = (0.25, 0.60);
const SC7_MAX_HOURS: f64 = 6.0;

pub(crate) fn all(ctx: &Ctx, h: &[Verdict], ds: &Dataset) -> Vec<Verdict> {
    let by = |id: &str| {
        h.iter()
            .find(|v| v.id == id)
            .expect("all hypotheses evaluated")
    };
    vec![
        sc1(by("h1")),
        sc2(by("h2")),
        sc3(ctx),
        sc4(ctx),
        sc5(by("h5"), by("h6")),
        sc6(ctx, ds),
        sc7(ds),
    ]
}

fn sc1(h1: &Verdict) -> Verdict {
    let d = Draft {
        id: "sc1",
        title: "SC1: H1 falsifiable — tax_TTFT_p90(mooncake_both) at ref_safe reported",
        statement: "We accept the prior (~45%) if the measurement is in [25%, 60%]; we revise the prior if outside.",
        unit: "fraction",
        threshold: format!("tax in [{:.2}, {:.2}]", SC1_PRIOR.0, SC1_PRIOR.1),
    };
    let Some(e) = h1.estimate else {
        return d.not_testable(h1.reason.clone());
    };
    let v = within(&e, SC1_PRIOR.0, SC1_PRIOR.1);
    let band = format!("[{:.0}%, {:.0}%]", SC1_PRIOR.0 * 100.0, SC1_PRIOR.1 * 100.0);
    let reason = match v {
        VerdictKind::Supported => format!("tax {} inside {band}: prior accepted", pct(&e)),
        VerdictKind::Refuted => format!("tax {} outside {band}: revise the prior", pct(&e)),
        _ => format!("tax {} overlaps the edge of {band}", pct(&e)),
    };
    d.finish(Some(e), v, reason, None)
}

fn sc2(h2: &Verdict) -> Verdict {
    let d = Draft {
        id: "sc2",
        title: "SC2: H2 testable — NIXL-vs-Mooncake gap at ref_safe reported",
        statement: "The trace-replay difference was ~7 pp; we document agreement (gap within 5-10 pp) or disagreement.",
        unit: "pp",
        threshold: format!("gap in [{H2_MIN_GAP:.2}, {H2_MAX_GAP:.2}]"),
    };
    let Some(e) = h2.estimate else {
        return d.not_testable(h2.reason.clone());
    };
    let v = within(&e, H2_MIN_GAP, H2_MAX_GAP);
    let band = format!("{:.0}-{:.0} pp", H2_MIN_GAP * 100.0, H2_MAX_GAP * 100.0);
    let reason = match v {
        VerdictKind::Supported => {
            format!("gap agrees with the trace-replay ~7 pp (CI inside {band})")
        }
        VerdictKind::Refuted => {
            format!("gap disagrees with the trace-replay ~7 pp (CI outside {band})")
        }
        _ => format!("gap CI overlaps the {band} band only partly"),
    } + &format!(": {}", pp(&e));
    d.finish(Some(e), v, reason, None)
}

fn sc3(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "sc3",
        title: "SC3: H3 disambiguated — tax(noop_connector) at ref_safe reported and labelled",
        statement: "Label the substrate tax framework-cost-dominated if noop >= 50% of mooncake_both's tax, \
                    implementation-cost-dominated if < 30%.",
        unit: "ratio",
        threshold: format!(
            "ratio >= {H3_MAX_RATIO} (framework) or < {H3_IMPLEMENTATION_RATIO} (implementation)"
        ),
    };
    match h3_ratio(ctx) {
        Err((VerdictKind::NotTestable, r)) => d.not_testable(r),
        Err((v, r)) => d.finish(None, v, r, None),
        Ok((e, cell)) => {
            let decided =
                e.lo.zip(e.hi)
                    .is_some_and(|(lo, hi)| lo >= H3_MAX_RATIO || hi < H3_IMPLEMENTATION_RATIO);
            let v = if decided {
                VerdictKind::Supported
            } else {
                VerdictKind::Inconclusive
            };
            let label = h3_label(&e);
            let reason = if decided {
                format!("ratio {} at {cell}: {label}", num(&e))
            } else {
                format!(
                    "ratio {} at {cell}: the CI does not decide the label (point estimate: {})",
                    num(&e),
                    h3_point_label(&e)
                )
            };
            d.finish(Some(e), v, reason, Some(label))
        }
    }
}

fn sc4(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "sc4",
        title: "SC4: H4 additivity",
        statement: "|tax(multi) - (tax(mooncake_both) + tax(lmcache_only))| / tax(multi) <= 0.30 -> linear.",
        unit: "ratio",
        threshold: format!("relative deviation <= {H4_MAX_DEVIATION:.2}"),
    };
    match h4_deviation(ctx) {
        Err((VerdictKind::NotTestable, r)) => d.not_testable(r),
        Err((v, r)) => d.finish(None, v, r, None),
        Ok((e, _, cell)) => {
            // H4's rule; an estimate without a CI cannot decide linearity either.
            let v = match h4_additive(&e) {
                VerdictKind::NotTestable => VerdictKind::Inconclusive,
                v => v,
            };
            let label = if v == VerdictKind::Supported {
                "linear"
            } else {
                "not shown linear"
            };
            d.finish(
                Some(e),
                v,
                format!("relative deviation {} at {cell}", num(&e)),
                Some(label.into()),
            )
        }
    }
}

fn sc5(h5: &Verdict, h6: &Verdict) -> Verdict {
    let d = Draft {
        id: "sc5",
        title: "SC5: H5 + H6 directional results reported",
        statement: "Report whether tax_TTFT_p90 grows with input and tax_TPOT_p90 grows with output (sign + magnitude).",
        unit: "",
        threshold: "both directions estimated with a CI".into(),
    };
    let part = |v: &Verdict, name: &str| match &v.estimate {
        Some(e) => Ok(format!("{name}: {} ({})", pp(e), v.verdict.as_str())),
        None => Err(format!("{name}: {}", v.reason)),
    };
    match (
        part(h5, "TTFT tax vs input"),
        part(h6, "TPOT tax vs output"),
    ) {
        (Ok(a), Ok(b)) => d.finish(None, VerdictKind::Supported, format!("{a}; {b}"), None),
        (a, b) => {
            let r = [a, b]
                .into_iter()
                .map(|x| x.unwrap_or_else(|e| e))
                .collect::<Vec<_>>()
                .join("; ");
            d.not_testable(r)
        }
    }
}

fn sc6(ctx: &Ctx, ds: &Dataset) -> Verdict {
    let d = Draft {
        id: "sc6",
        title: "SC6: all artifacts present",
        statement: "Every config that ran has every per-run artifact and the three raw files per cell; every SKIP \
                    config has a reason in preflight_status.json.",
        unit: "count",
        threshold: "0 missing artifacts".into(),
    };
    // A directory that looks like a run but was not loaded (unreadable, a copy, a link) is
    // missing data, never "complete".
    let mut missing: Vec<String> = ds
        .not_loaded
        .iter()
        .map(|n| format!("{} (not loaded: {})", n.name, n.reason))
        .collect();
    let mut not_served: Vec<String> = Vec::new();
    let step_timing = ctx.info.step_timing_available;
    for run in &ds.runs {
        // A launch whose engine died wrote no more files: say so next to what is missing.
        let died = ctx
            .info
            .engine
            .get(&run.dir_name)
            .and_then(|f| f.fatal_error.as_ref())
            .map(|e| format!(" (engine died: {e})"))
            .unwrap_or_default();
        let stopped = never_served(ds, run);
        for (f, present) in &run.artifacts {
            if *present {
                continue;
            }
            // The collector writes summary.json; a launch stopped before its server was ready
            // never ran it, so that file was never due (the manifest row says why).
            match &stopped {
                Some(why) if f == SUMMARY_FILE => {
                    not_served.push(format!("{} ({why})", run.dir_name));
                }
                _ => missing.push(format!("{}/{f}{died}", run.dir_name)),
            }
        }
        for ((phase, cell), rc) in &run.cells {
            let need = [
                (FileKind::Requests, rc.has_requests),
                (FileKind::Metrics, rc.has_metrics),
                (FileKind::EngineStep, rc.has_steps),
            ];
            // A cell whose raw data is not whole (a collector killed during it, a file cut
            // short) gives its reasons next to its missing files.
            let cut = if rc.account.incomplete.is_empty() || !died.is_empty() {
                String::new()
            } else {
                format!(" (cell incomplete: {})", rc.account.incomplete.join("; "))
            };
            for (kind, present) in need {
                if !present && (kind != FileKind::EngineStep || step_timing) {
                    missing.push(format!(
                        "{}/{}{died}{cut}",
                        run.dir_name,
                        file_name(kind, *phase, cell)
                    ));
                }
            }
        }
    }
    for c in CANONICAL_CONFIGS {
        if ctx.info.configs.iter().any(|x| x == c) {
            continue;
        }
        let has_reason = ctx
            .info
            .preflight
            .as_ref()
            .and_then(|p| p.configs.get(c))
            .is_some_and(|e| {
                e.decision == Decision::Skip && e.reason.as_ref().is_some_and(|r| !r.is_empty())
            });
        if !has_reason {
            missing.push(format!(
                "preflight_status.json: no SKIP reason for {c}, which has no data"
            ));
        }
    }
    let n = missing.len() as f64;
    let e = Some(Estimate {
        est: n,
        lo: None,
        hi: None,
    });
    let stopped_note = if not_served.is_empty() {
        String::new()
    } else {
        format!(
            "; stopped before serving, so no summary.json was due: {}",
            not_served.join(", ")
        )
    };
    if missing.is_empty() {
        d.finish(
            e,
            VerdictKind::Supported,
            format!(
                "{} run directories complete; every skipped config has a reason{stopped_note}",
                ds.runs.len()
            ),
            None,
        )
    } else {
        let shown: Vec<&str> = missing.iter().take(6).map(String::as_str).collect();
        let more = if missing.len() > 6 {
            format!(" and {} more", missing.len() - 6)
        } else {
            String::new()
        };
        d.finish(
            e,
            VerdictKind::Refuted,
            format!("missing: {}{more}{stopped_note}", shown.join(", ")),
            None,
        )
    }
}

/// The collector's per-run file, which only a launch that served writes.
const SUMMARY_FILE: &str = "summary.json";

/// Why `run` never served: its directory holds no cell and the manifest's last row for it says
/// the launch was interrupted or failed before that (`None` otherwise, also with no manifest
/// row: then a missing summary.json is missing data).
fn never_served(ds: &Dataset, run: &crate::ingest::Run) -> Option<String> {
    if !run.cells.is_empty() {
        return None;
    }
    let row = ds
        .manifest
        .iter()
        .rev()
        .find(|r| r.run_dir.as_deref() == Some(run.dir_name.as_str()))?;
    matches!(row.status, RowStatus::Interrupted | RowStatus::Failed).then(|| {
        let reason = row.reason.as_deref().unwrap_or("no reason recorded");
        format!("manifest: {}, {reason}", row.status.as_str())
    })
}

/// What SC7 reads beyond the manifest: the reference rates (Phase B' is due when ref_load
/// differs from Phase B's rate); what each launch directory planned (its Phase A rates, its
/// Phase B shapes, whether it planned B' cells); the configs that saturate at or below
/// ref_load (no B' cells).
fn plan_facts(ds: &Dataset) -> bench_time::PlanFacts {
    let refs = ds.reference_rates.as_ref();
    let load = refs.and_then(|r| r.ref_load);
    let dirs = ds
        .runs
        .iter()
        .filter_map(|r| {
            let c = r.run_config.as_ref()?;
            Some((
                r.dir_name.clone(),
                bench_time::PlannedLaunch {
                    a_rates: c
                        .cells
                        .iter()
                        .filter(|p| p.phase == ctax_schema::Phase::A)
                        .map(|p| p.cell.rate)
                        .collect(),
                    shapes: c
                        .cells
                        .iter()
                        .filter(|p| p.phase == ctax_schema::Phase::B)
                        .map(|p| (p.cell.input_len, p.cell.output_len))
                        .collect(),
                    bp: c.cells.iter().any(|p| p.phase == ctax_schema::Phase::Bp),
                },
            ))
        })
        .collect();
    let saturated = refs
        .map(|r| {
            r.saturation_rate
                .keys()
                .filter(|c| r.saturated_at_ref_load(c).is_some())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    bench_time::PlanFacts {
        ref_safe: refs.and_then(|r| r.ref_safe),
        ref_load: load,
        dirs,
        saturated,
    }
}

fn sc7(ds: &Dataset) -> Verdict {
    let d = Draft {
        id: "sc7",
        title: "SC7: the bench finishes in under 6 h",
        statement: "Phase A + Phase B + optional Phase B' finish in under 6 h wall clock.",
        unit: "hours",
        threshold: format!("< {SC7_MAX_HOURS} h"),
    };
    if ds.manifest.is_empty() {
        return d.not_testable("no manifest.jsonl: durations unknown");
    }
    // One bench, not the archive: sessions add launches beyond the profile's plan.
    let t = bench_time::one_bench(&ds.manifest, ds.profile.as_deref(), &plan_facts(ds));
    if t.stages.is_empty() {
        if t.missing_stages.is_empty() {
            return d.not_testable("no launch in manifest.jsonl: durations unknown");
        }
        return d.not_testable(format!("no launch of one bench: {}", t.missing_text()));
    }
    let hours = t.hours();
    let e = Some(Estimate {
        est: hours,
        lo: None,
        hi: None,
    });
    // `hours` runs every launch on one GPU; `packed` is the least the profile's GPUs can take.
    // What is not estimated (a planned stage without launches, or no readable profile: its
    // launches per config unknown) only adds, so it can refute but not support.
    let packed = t.packed_s / 3600.0;
    let complete = t.from_profile && t.missing_stages.is_empty();
    let v = if packed >= SC7_MAX_HOURS {
        VerdictKind::Refuted
    } else if complete && hours < SC7_MAX_HOURS {
        VerdictKind::Supported
    } else {
        VerdictKind::Inconclusive
    };
    d.finish(e, v, t.describe(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctax_schema::ManifestRow;

    fn launch(stage: &str, config: &str, dir: &str, s: f64) -> ManifestRow {
        bench_time::row(stage, config, dir, RowStatus::Ok, s)
    }

    fn ds(rows: Vec<ManifestRow>, profile: &str) -> Dataset {
        let mut d = Dataset::of_runs(std::path::Path::new("."), Vec::new(), Vec::new());
        d.manifest = rows;
        d.profile = Some(profile.into());
        d
    }

    /// SC7 judges one bench, not the archive: twelve 40-min Phase A launches of plain (8 h in
    /// the archive) are one bench of 2 x 40 min when the profile plans 2 launches and no
    /// Phase B: supported. The same profile with 10 launches planned costs 10 x 40 min =
    /// 6.67 h: refuted. A planned Phase B without a launch leaves a lower bound below 6 h:
    /// inconclusive.
    #[test]
    fn sc7_judges_one_bench_not_the_archive() {
        let rows: Vec<ManifestRow> = (0..12)
            .map(|i| launch(ctax_schema::STAGE_A, "plain", &format!("p{i}"), 2400.0))
            .collect();
        let v = sc7(&ds(rows.clone(), "configs = [\"plain\"]\nlaunches = 2\n"));
        assert_eq!(v.verdict, VerdictKind::Supported, "{}", v.reason);
        assert!((v.estimate.unwrap().est - 4800.0 / 3600.0).abs() < 1e-12);
        assert!(v.reason.contains("add up to 8.00 h"), "{}", v.reason);
        let v = sc7(&ds(rows.clone(), "configs = [\"plain\"]\nlaunches = 10\n"));
        assert_eq!(v.verdict, VerdictKind::Refuted, "{}", v.reason);
        let v = sc7(&ds(
            rows,
            "configs = [\"plain\"]\nlaunches = 2\n[phase_b]\nshapes = [[512, 64]]\n",
        ));
        assert_eq!(v.verdict, VerdictKind::Inconclusive, "{}", v.reason);
        assert!(v.reason.contains("not estimated: Phase B"), "{}", v.reason);
    }

    /// On two GPUs, 10 launches of 40 min are 6.67 h one by one but 3.33 h packed: the wall
    /// clock may be either side of 6 h, inconclusive; 20 launches are 6.67 h even packed:
    /// refuted. Without a profile (launches per config unknown) 12 launches that ran are a
    /// lower bound of 1 x 40 min: inconclusive; with only pre-flight rows: not testable.
    #[test]
    fn sc7_reads_the_gpus_and_what_it_cannot_know() {
        let rows: Vec<ManifestRow> = (0..12)
            .map(|i| launch(ctax_schema::STAGE_A, "plain", &format!("p{i}"), 2400.0))
            .collect();
        let two =
            |n: u32| format!("configs = [\"plain\"]\nlaunches = {n}\n[slots]\ngpus = [0, 1]\n");
        let v = sc7(&ds(rows.clone(), &two(10)));
        assert_eq!(v.verdict, VerdictKind::Inconclusive, "{}", v.reason);
        assert!(v.reason.contains("between 3.33 h"), "{}", v.reason);
        let v = sc7(&ds(rows.clone(), &two(20)));
        assert_eq!(v.verdict, VerdictKind::Refuted, "{}", v.reason);
        let mut no_profile = ds(rows, "");
        no_profile.profile = None;
        let v = sc7(&no_profile);
        assert_eq!(v.verdict, VerdictKind::Inconclusive, "{}", v.reason);
        assert!(v.reason.starts_with("no profile.toml"), "{}", v.reason);
        let only_preflight = vec![bench_time::row(
            ctax_schema::STAGE_PREFLIGHT,
            "plain",
            "",
            RowStatus::Include,
            5.0,
        )];
        let v = sc7(&ds(only_preflight, "configs = [\"plain\"]\n"));
        assert_eq!(v.verdict, VerdictKind::NotTestable, "{}", v.reason);
    }
}
