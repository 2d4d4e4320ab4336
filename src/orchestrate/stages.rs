//! Stage implementations. The two places `ctax run` calls the analysis are here, side by side:
//! stage 2 ([`reference_rates`]) and stage 4 ([`analyze_and_report`]).

use std::path::Path;

use anyhow::Context;
use ctax_schema::ReferenceRates;

use crate::analysis::{self, AnalyzeOptions};
use crate::fsutil::write_json_atomic;

/// Stage 2: reference rates from the Phase A data under `root` (the analysis engine's
/// saturation code on point estimates; no CIs, taxes or verdicts), written to
/// `<root>/reference_rates.json`.
pub fn reference_rates(root: &Path) -> anyhow::Result<ReferenceRates> {
    let ds = crate::ingest::load(root)?;
    crate::pipeline::eprint_warnings(&ds.warnings);
    let mut refs = analysis::reference_rates(&ds)?;
    refs.phase_a_launches = Some(super::manifest::phase_a_launches(root)?);
    let path = root.join("reference_rates.json");
    write_json_atomic(&path, &refs).with_context(|| format!("writing {}", path.display()))?;
    Ok(refs)
}

/// Stage 2 from a file (`--reference-rates`, e.g. the merged Phase A of every shard): checked
/// to parse, then written to `<root>/reference_rates.json`.
pub(crate) fn adopt_reference_rates(root: &Path, file: &Path) -> anyhow::Result<ReferenceRates> {
    let refs = read_reference_rates(file)?;
    write_json_atomic(&root.join("reference_rates.json"), &refs)?;
    Ok(refs)
}

/// A reference-rates file, parsed (errors name the file and the field).
pub(crate) fn read_reference_rates(file: &Path) -> anyhow::Result<ReferenceRates> {
    let bytes = std::fs::read(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(de)
        .map_err(|e| anyhow::anyhow!("{}: field `{}`: {}", file.display(), e.path(), e.inner()))
}

/// Whether `refs`, the root's own reference_rates.json taken as it is (stage 2 skipped), was
/// computed after every Phase A launch attempt the root's manifest names. Rates that predate
/// one (a skeleton's Phase A brought back into the root, a launch resumed in its directory
/// since) would put Phase B at a rate its Phase A did not choose: an error naming the attempts
/// it misses and the way out. A file written before the list was recorded cannot be checked:
/// `Some(warning)`.
pub(crate) fn check_rates_current(
    root: &Path,
    refs: &ReferenceRates,
) -> anyhow::Result<Option<String>> {
    let path = root.join("reference_rates.json");
    // On a skeleton the rates are recomputed on the root it was made from.
    let full = if super::skeleton::is_skeleton(root) {
        super::skeleton::source(root)
    } else {
        root.display().to_string()
    };
    let Some(seen) = &refs.phase_a_launches else {
        return Ok(Some(format!(
            "{} does not say which Phase A launches it was computed from (written before ctax \
             recorded them), so nothing checks it is current: run `ctax reference-rates {full}` \
             after new Phase A launches",
            path.display(),
        )));
    };
    let missing: Vec<String> = super::manifest::phase_a_launches(root)?
        .into_iter()
        .filter(|a| !seen.contains(a))
        .map(|a| {
            format!(
                "{} started {}",
                a.run_dir,
                crate::report::fmt::unix_ms(a.started_unix_ms)
            )
        })
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "{} predates {} of the root's Phase A launch attempts ({}): Phase B would run at rates \
         they had no say in. Run `ctax reference-rates {full}` first (on the full root), or pass \
         --reference-rates {} to keep these rates",
        path.display(),
        missing.len(),
        missing.join(", "),
        path.display()
    );
    Ok(None)
}

/// Stage 4: [`crate::pipeline::run`] — the full analysis of `root` (written to
/// `<root>/analysis/`) and the report in `<root>/report/` (with `report/data/`); returns the
/// report directory.
pub(crate) fn analyze_and_report(root: &Path) -> anyhow::Result<std::path::PathBuf> {
    let out = root.join("report");
    let done = crate::pipeline::run(
        root,
        &AnalyzeOptions::default(),
        &crate::pipeline::Outputs {
            analysis_dir: Some(root.join("analysis")),
            report_dir: Some(out.clone()),
        },
    )?;
    crate::pipeline::eprint_warnings(&done.analysis.summary.warnings);
    Ok(out)
}

/// After a launch: per-cell statistics of this run alone into its summary.json `stats`
/// (1,000 resamples, no ITL: a quick look; `ctax analyze` gives the full statistics).
pub(crate) fn write_run_stats(run_dir: &Path) -> anyhow::Result<()> {
    let (run, warnings) = crate::ingest::load_run(run_dir)?;
    let ds = crate::ingest::Dataset::of_runs(run_dir, vec![run], warnings);
    let opts = AnalyzeOptions {
        bootstrap: crate::stats::BootstrapConfig {
            resamples: 1000,
            ..Default::default()
        },
        skip_itl: true,
    };
    let cells = analysis::analyze(&ds, &opts)?.result.summary.cells;
    let path = run_dir.join("summary.json");
    let mut summary: ctax_schema::RunSummary = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    summary.schema_version = ctax_schema::SCHEMA_VERSION;
    for c in cells {
        let q = |x: &crate::analysis::model::Quantiles| serde_json::json!({"n": x.n, "p50": x.p50, "p90": x.p90, "p99": x.p99, "mean": x.mean});
        let key = ctax_schema::CellKey::new(
            c.key.phase,
            ctax_schema::Cell {
                rate: c.rate,
                input_len: c.input_len,
                output_len: c.output_len,
            },
        );
        summary.stats.insert(
            key.to_string(),
            serde_json::json!({
                "counts": c.counts,
                "ttft_ms": q(&c.ttft_ms),
                "tpot_ms": q(&c.tpot_ms),
                "e2e_ms": q(&c.e2e_ms),
                "offered_rps": c.offered_rps,
                "effective_rps": c.effective_rps,
                "waiting_p50": c.waiting_p50,
                "step_duration_us_p50": c.step.as_ref().and_then(|s| s.step_duration_us.p50),
                "note": "quick per-run statistics (1,000 resamples); see analysis/summary.json",
            }),
        );
    }
    write_json_atomic(&path, &summary).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrate::manifest;
    use ctax_schema::LaunchAttempt;

    fn refs(seen: Option<&[(&str, u64)]>) -> ReferenceRates {
        ReferenceRates {
            schema_version: ctax_schema::SCHEMA_VERSION,
            ref_safe: Some(2.0),
            ref_load: Some(6.0),
            configs_considered: vec!["plain".into()],
            saturation_rate: Default::default(),
            notes: Vec::new(),
            phase_a_launches: seen.map(|v| {
                v.iter()
                    .map(|(d, ms)| LaunchAttempt {
                        run_dir: d.to_string(),
                        started_unix_ms: *ms,
                    })
                    .collect()
            }),
        }
    }

    /// Appends a manifest row of `stage` for `dir` started at `ms` (the directory created).
    fn row(root: &Path, stage: &str, dir: &str, ms: u64) {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        let mut r = manifest::row(stage, "plain", 0, ms);
        r.run_dir = Some(dir.into());
        manifest::append(root, &r).unwrap();
    }

    #[test]
    fn rates_must_have_seen_every_phase_a_launch_attempt_of_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        row(root, "1 Phase A", "a_plain_l0", 1_000);
        row(root, "1 Phase A", "a_noop_l0", 2_000);
        row(root, "3 Phase B", "b_plain_l0", 3_000);
        // A row whose directory is gone is not a launch of the root.
        let mut gone = manifest::row("1 Phase A", "plain", 9, 4_000);
        gone.run_dir = Some("20990101-000000_plain_l9".into());
        manifest::append(root, &gone).unwrap();

        // Seen both (order and extra attempts, e.g. a merged root's other shards, do not
        // matter; Phase B rows are not Phase A launches).
        let both = [
            ("a_noop_l0", 2_000),
            ("a_plain_l0", 1_000),
            ("shard2_l0", 5),
        ];
        assert_eq!(check_rates_current(root, &refs(Some(&both))).unwrap(), None);

        // A new launch since, and a resumed attempt of a_noop_l0 in its directory.
        row(root, "1 Phase A", "a_plain_l1", 6_000);
        row(root, "1 Phase A", "a_noop_l0", 7_000);
        let e = check_rates_current(root, &refs(Some(&both)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("predates 2 of the root's Phase A launch attempts (a_noop_l0 started 1970-01-01 00:00:07 UTC, a_plain_l1 started 1970-01-01 00:00:06 UTC)"),
            "{e}"
        );
        assert!(
            e.contains(&format!("ctax reference-rates {}", root.display())),
            "{e}"
        );
        // Recorded with no Phase A launch at all is not "not recorded".
        assert!(check_rates_current(root, &refs(Some(&[]))).is_err());
        // A file from before the list existed: a warning, not a refusal.
        let w = check_rates_current(root, &refs(None)).unwrap().unwrap();
        assert!(w.contains("nothing checks it is current"), "{w}");
    }

    /// The rates a stage writes record the attempts; a file without them still parses.
    #[test]
    fn the_recorded_attempts_round_trip_and_old_files_parse() {
        let r = refs(Some(&[("a", 1)]));
        let back: ReferenceRates =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let empty = refs(Some(&[]));
        let back: ReferenceRates =
            serde_json::from_str(&serde_json::to_string(&empty).unwrap()).unwrap();
        assert_eq!(
            back.phase_a_launches,
            Some(Vec::new()),
            "empty is kept as recorded"
        );
        let old = r#"{"schema_version":1,"ref_safe":2.0,"ref_load":null,"configs_considered":[],"saturation_rate":{},"notes":[]}"#;
        let old: ReferenceRates = serde_json::from_str(old).unwrap();
        assert_eq!(old.phase_a_launches, None);
    }
}
