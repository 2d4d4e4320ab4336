//! How much the verdicts rest on the launches a slow episode names
//! ([`crate::analysis::episodes`]): the whole analysis again, without those launches' cells,
//! and H1–H6 as they would read then.
//!
//! Nothing here changes a reported verdict: the taxes keep every launch as measured (a slow
//! stretch is something the server did under that config). This is a sensitivity line beside
//! them, for a reader who wants to know whether a verdict, or the UNSTABLE mark, is carried by
//! one launch's stretch. Only the named launch-cells are left out (the launch's other cells
//! stay); one pass: the rerun's own episodes are not left out in turn.

use std::collections::BTreeSet;

use ctax_schema::ReferenceRates;
use serde::{Deserialize, Serialize};

use super::Verdict;
use crate::analysis::episodes::LaunchEpisodes;
use crate::analysis::model::Tax;
use crate::analysis::{self, AnalyzeOptions, LaunchCell};
use crate::ingest::Dataset;

/// One launch-cell left out, as the report names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    pub config: String,
    pub launch: u32,
    #[serde(flatten)]
    pub cell: LaunchCell,
}

/// `verdicts.json` `without_episodes`: H1–H6 without the launch-cells that slow episodes name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WithoutEpisodes {
    pub left_out: Vec<LeftOut>,
    /// The rerun's reference rates (its hypotheses read these).
    pub reference_rates: ReferenceRates,
    pub hypotheses: Vec<Verdict>,
    /// An A/A tax of the rerun excludes 0.
    pub unstable: bool,
    /// The rerun's A/A taxes that exclude 0: `config Phase cell`.
    pub aa_detected: Vec<String>,
    /// The rerun's taxes of the configs whose launch-cells were left out, in those cells (every
    /// config's, where a plain launch-cell was): the taxes themselves without the episodes.
    #[serde(default)]
    pub taxes: Vec<Tax>,
}

/// The rerun, when the analysis names at least one launch-cell; `None` otherwise.
pub(crate) fn without_episodes(
    ds: &Dataset,
    opts: &AnalyzeOptions,
    named: &[LaunchEpisodes],
) -> anyhow::Result<Option<WithoutEpisodes>> {
    if named.is_empty() {
        return Ok(None);
    }
    let left_out: Vec<LeftOut> = named
        .iter()
        .map(|e| LeftOut {
            config: e.config.clone(),
            launch: e.launch,
            cell: LaunchCell {
                run_dir: e.run_dir.clone(),
                phase: e.phase,
                cell: e.cell.clone(),
            },
        })
        .collect();
    let set: BTreeSet<LaunchCell> = left_out.iter().map(|l| l.cell.clone()).collect();
    // No hypothesis reads the pooled inter-token gaps (the per-cell ITL quantiles of the
    // rerun's summary, which is not kept).
    let opts = AnalyzeOptions {
        skip_itl: true,
        ..opts.clone()
    };
    let rerun = analysis::analyze_leaving_out(ds, &opts, &set)?;
    let v = super::evaluate(&rerun, ds);
    let s = &rerun.result.summary;
    Ok(Some(WithoutEpisodes {
        reference_rates: s.reference_rates.clone(),
        hypotheses: v.hypotheses,
        unstable: v.unstable,
        aa_detected: s
            .aa_taxes
            .iter()
            .filter(|a| a.unstable)
            .map(|a| format!("{} Phase {} {}", a.config, a.phase.label(), a.cell))
            .collect(),
        taxes: s
            .taxes
            .iter()
            .filter(|t| {
                left_out.iter().any(|l| {
                    l.cell.phase == t.phase
                        && l.cell.cell == t.cell
                        && (l.config == t.config || l.config == "plain")
                })
            })
            .cloned()
            .collect(),
        left_out,
    }))
}
