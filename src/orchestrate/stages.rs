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
    refs.phase_a_runs = super::manifest::phase_a_runs(root)?;
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
/// computed after every Phase A launch the root's manifest names. Rates that predate one (a
/// skeleton's Phase A brought back into the root, a Phase A resumed with --skip-stage 2) would
/// put Phase B at a rate its Phase A did not choose: an error naming the launches it misses.
/// A file written before the list was recorded cannot be checked: `Some(warning)`.
pub(crate) fn check_rates_current(
    root: &Path,
    refs: &ReferenceRates,
) -> anyhow::Result<Option<String>> {
    let path = root.join("reference_rates.json");
    if refs.phase_a_runs.is_empty() {
        return Ok(Some(format!(
            "{} does not say which Phase A launches it was computed from (written before ctax \
             recorded them), so nothing checks it is current: run `ctax reference-rates {}` after \
             new Phase A launches",
            path.display(),
            root.display()
        )));
    }
    let missing: Vec<String> = super::manifest::phase_a_runs(root)?
        .into_iter()
        .filter(|d| !refs.phase_a_runs.contains(d))
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "{} predates {} of the root's Phase A launches ({}): Phase B would run at rates they \
         had no say in. Run `ctax reference-rates {}` (on the full root, not a skeleton) first, \
         or pass --reference-rates {} to keep these rates",
        path.display(),
        missing.len(),
        missing.join(", "),
        root.display(),
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

    fn refs(runs: &[&str]) -> ReferenceRates {
        ReferenceRates {
            schema_version: ctax_schema::SCHEMA_VERSION,
            ref_safe: Some(2.0),
            ref_load: Some(6.0),
            configs_considered: vec!["plain".into()],
            saturation_rate: Default::default(),
            notes: Vec::new(),
            phase_a_runs: runs.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A root whose manifest has Phase A rows for `a` and a Phase B row for `b` (run
    /// directories created), plus a Phase A row whose directory is gone.
    fn root_with(a: &[&str], b: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let mut rows: Vec<(&str, &str)> = a.iter().map(|d| ("1 Phase A", *d)).collect();
        rows.push(("3 Phase B", b));
        for (stage, d) in rows {
            std::fs::create_dir(t.path().join(d)).unwrap();
            let mut r = manifest::row(stage, "plain", 0, 0);
            r.run_dir = Some(d.into());
            manifest::append(t.path(), &r).unwrap();
        }
        let mut gone = manifest::row("1 Phase A", "plain", 9, 0);
        gone.run_dir = Some("20990101-000000_plain_l9".into());
        manifest::append(t.path(), &gone).unwrap();
        t
    }

    #[test]
    fn rates_must_have_seen_every_phase_a_launch_of_the_root() {
        let t = root_with(&["a_plain_l0", "a_noop_l0", "a_plain_l1"], "b_plain_l0");
        // Seen all three (order and extra names, e.g. a merged root's other shards, do not
        // matter; Phase B rows and missing directories are not Phase A launches of the root).
        let all = refs(&["a_plain_l1", "a_noop_l0", "a_plain_l0", "other_shard_l0"]);
        assert_eq!(check_rates_current(t.path(), &all).unwrap(), None);
        // Computed before a_plain_l1 joined the root.
        let e = check_rates_current(t.path(), &refs(&["a_plain_l0", "a_noop_l0"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("predates 1 of the root's Phase A launches (a_plain_l1)"),
            "{e}"
        );
        assert!(e.contains("ctax reference-rates"), "{e}");
        // A file from before the list existed: a warning, not a refusal.
        let w = check_rates_current(t.path(), &refs(&[])).unwrap().unwrap();
        assert!(w.contains("nothing checks it is current"), "{w}");
    }
}
