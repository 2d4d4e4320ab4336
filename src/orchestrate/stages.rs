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
    let refs = analysis::reference_rates(&ds)?;
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
