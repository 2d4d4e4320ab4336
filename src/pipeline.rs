//! The one path from a results root to every output:
//!
//! ```text
//! ingest::load ─► analysis::analyze ─► verdicts::evaluate ─► outputs
//!   (Dataset)        (Analysis: data      (Verdicts)          analysis dir: summary.json,
//!                     + replicates)                             verdicts.json, Parquet tables
//!                                                             report dir: index.html, report.md,
//!                                                               figures/, data/*.json
//! ```
//!
//! When slow episodes name launch-cells, the analysis and H1–H6 run once more without them
//! ([`crate::verdicts::sensitivity`]); the reported verdicts are the first pass's.
//!
//! `ctax analyze`, `ctax report` and `ctax run` stage 4 differ only in the [`Outputs`] they ask
//! for, so they cannot drift apart. A later stage adds a field to [`crate::analysis::Analysis`]
//! or a module beside the verdicts; nothing here changes shape.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::analysis::model::AnalysisResult;
use crate::analysis::{self, AnalyzeOptions};
use crate::fsutil::write_json_atomic;
use crate::ingest::{self, Dataset, frames};
use crate::report::{self, RenderedReport};
use crate::verdicts::{self, Verdicts};

/// Where the results go; any combination.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// `summary.json`, `verdicts.json` and the Parquet tables (`requests`, `metrics`, `steps`).
    pub analysis_dir: Option<PathBuf>,
    /// The report (`index.html`, `report.md`, `figures/`) with its `data/{summary,verdicts}.json`.
    pub report_dir: Option<PathBuf>,
}

/// Everything one run of the pipeline produced.
#[derive(Debug)]
pub struct Evaluated {
    pub analysis: AnalysisResult,
    pub verdicts: Verdicts,
    /// Present when [`Outputs::report_dir`] was set.
    pub report: Option<RenderedReport>,
}

/// Analysis and verdicts of a loaded dataset, in memory.
pub fn evaluate(ds: &Dataset, opts: &AnalyzeOptions) -> anyhow::Result<(AnalysisResult, Verdicts)> {
    let analysis = analysis::analyze(ds, opts)?;
    let mut verdicts = verdicts::evaluate(&analysis, ds);
    // The first pass's samples go before the second pass extracts its own.
    let mut result = analysis.into_result();
    // A side line: if it cannot be computed, the report says so and the verdicts stand.
    verdicts.without_episodes = match verdicts::sensitivity::without_episodes(
        ds,
        opts,
        &result.summary.episodes,
    ) {
        Ok(w) => w,
        Err(e) => {
            result.summary.warnings.push(format!(
                    "H1-H6 without the launch-cells that slow episodes name could not be computed: {e:#}"
                ));
            None
        }
    };
    verdicts.without_holders = match verdicts::sensitivity::without_holders(ds, opts, &result) {
        Ok(w) => w,
        Err(e) => {
            result.summary.warnings.push(format!(
                "H1-H6 without the configs that hold ref_safe down could not be computed: {e:#}"
            ));
            None
        }
    };
    Ok((result, verdicts))
}

/// Loads `root`, analyses it, evaluates the verdicts and writes the requested outputs.
pub fn run(root: &Path, opts: &AnalyzeOptions, outputs: &Outputs) -> anyhow::Result<Evaluated> {
    let ds = ingest::load(root)?;
    let (analysis, verdicts) = evaluate(&ds, opts)?;
    if let Some(dir) = &outputs.analysis_dir {
        write_data(&analysis, &verdicts, dir)?;
        frames::export_parquet(&ds, dir)
            .with_context(|| format!("exporting Parquet tables into {}", dir.display()))?;
    }
    let report = match &outputs.report_dir {
        Some(dir) => {
            write_data(&analysis, &verdicts, &dir.join("data"))?;
            Some(report::render(&analysis, &verdicts, dir)?)
        }
        None => None,
    };
    Ok(Evaluated {
        analysis,
        verdicts,
        report,
    })
}

/// Prints every warning on stderr, one line each (`warning: …`, control characters escaped):
/// each names its file (and line) so that a user can find it.
pub fn eprint_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {}", ctax_schema::text::escape_controls(w));
    }
}

/// Writes `summary.json` and `verdicts.json` into `dir`, each atomically.
pub fn write_data(
    analysis: &AnalysisResult,
    verdicts: &Verdicts,
    dir: &Path,
) -> anyhow::Result<()> {
    let summary = dir.join("summary.json");
    write_json_atomic(&summary, &analysis.summary)
        .with_context(|| format!("writing {}", summary.display()))?;
    let verdicts_path = dir.join("verdicts.json");
    write_json_atomic(&verdicts_path, verdicts)
        .with_context(|| format!("writing {}", verdicts_path.display()))?;
    Ok(())
}
