//! How much the verdicts rest on the launches a slow episode names
//! ([`crate::analysis::episodes`]): the whole analysis again, without those launches' cells,
//! and H1–H6 as they would read then.
//!
//! Nothing here changes a reported verdict: the taxes keep every launch as measured (a slow
//! stretch is something the server did under that config). This is a sensitivity line beside
//! them, for a reader who wants to know whether a verdict, or the UNSTABLE mark, is carried by
//! one launch's stretch. Only the named launch-cells are left out (the launch's other cells
//! stay); one pass: the rerun's own episodes are not left out in turn.
//!
//! A second rerun, [`without_holders`], asks what the verdicts read at the next rate when the
//! configs that hold `ref_safe` down ([`crate::analysis::saturation::holding_ref_safe`]) are
//! left out of Phase A: on both GPUs LMCache's configs saturate below everyone else and set
//! the rate every tax is read at.

use std::collections::BTreeSet;

use ctax_schema::ReferenceRates;
use serde::{Deserialize, Serialize};

use super::Verdict;
use crate::analysis::episodes::LaunchEpisodes;
use crate::analysis::model::{Tax, TaxContext};
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
    let r = Rerun::of(ds, opts, &set)?;
    Ok(Some(WithoutEpisodes {
        reference_rates: r.reference_rates,
        hypotheses: r.hypotheses,
        unstable: r.unstable,
        aa_detected: r.aa_detected,
        taxes: r
            .taxes
            .into_iter()
            .filter(|t| {
                left_out.iter().any(|l| {
                    l.cell.phase == t.phase
                        && l.cell.cell == t.cell
                        && (l.config == t.config || l.config == "plain")
                })
            })
            .collect(),
        left_out,
    }))
}

/// `verdicts.json` `without_holders`: H1–H6 at the rate the other configs allow, without the
/// Phase A cells of the configs that hold `ref_safe` down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WithoutHolders {
    /// The holding configs, each with why at `next` (`lmcache_only (saturated at 4 req/s)`).
    pub configs: Vec<String>,
    /// Their names alone.
    pub left_out: Vec<String>,
    /// The reported ref_safe, and the next rate measured, where the holders are not
    /// unsaturated and every other config is.
    pub ref_safe: f64,
    pub next: f64,
    /// The rerun's reference rates (its hypotheses read these): its ref_safe is the highest
    /// rate at which none of the other configs is saturated.
    pub reference_rates: ReferenceRates,
    pub hypotheses: Vec<Verdict>,
    pub unstable: bool,
    pub aa_detected: Vec<String>,
    /// The rerun's taxes at its ref_safe (Phase A).
    pub taxes: Vec<Tax>,
}

/// The rerun, when some configs (not all) hold `ref_safe` below the next measured rate;
/// `None` otherwise. Every Phase A launch-cell of those configs is left out (their Phase B
/// cells stay, and keep the rate they ran at).
pub(crate) fn without_holders(
    ds: &Dataset,
    opts: &AnalyzeOptions,
    result: &crate::analysis::model::AnalysisResult,
) -> anyhow::Result<Option<WithoutHolders>> {
    let Some(held) = crate::analysis::saturation::holding_ref_safe(
        &result.summary.cells,
        &result.summary.reference_rates,
    ) else {
        return Ok(None);
    };
    let names: Vec<String> = held.configs.iter().map(|(c, _)| c.clone()).collect();
    let set: BTreeSet<LaunchCell> = ds
        .runs
        .iter()
        .filter(|run| names.contains(&run.config))
        .flat_map(|run| {
            run.cells
                .keys()
                .filter(|(phase, _)| *phase == ctax_schema::Phase::A)
                .map(|(phase, cell)| LaunchCell {
                    run_dir: run.dir_name.clone(),
                    phase: *phase,
                    cell: cell.clone(),
                })
        })
        .collect();
    let r = Rerun::of(ds, opts, &set)?;
    Ok(Some(WithoutHolders {
        configs: held.named(),
        left_out: names,
        ref_safe: held.rate,
        next: held.next,
        hypotheses: r.hypotheses,
        unstable: r.unstable,
        aa_detected: r.aa_detected,
        taxes: r
            .taxes
            .into_iter()
            .filter(|t| t.context == TaxContext::RefSafe)
            .collect(),
        reference_rates: r.reference_rates,
    }))
}

/// What a sensitivity rerun keeps of the whole analysis and its verdicts.
struct Rerun {
    reference_rates: ReferenceRates,
    hypotheses: Vec<Verdict>,
    unstable: bool,
    /// The rerun's A/A taxes that exclude 0: `config Phase cell`.
    aa_detected: Vec<String>,
    taxes: Vec<Tax>,
}

impl Rerun {
    fn of(ds: &Dataset, opts: &AnalyzeOptions, set: &BTreeSet<LaunchCell>) -> anyhow::Result<Self> {
        // No hypothesis reads the pooled inter-token gaps (the per-cell ITL quantiles of the
        // rerun's summary, which is not kept).
        let opts = AnalyzeOptions {
            skip_itl: true,
            ..opts.clone()
        };
        let rerun = analysis::analyze_leaving_out(ds, &opts, set)?;
        let v = super::evaluate(&rerun, ds);
        let s = rerun.into_result().summary;
        Ok(Rerun {
            aa_detected: s
                .aa_taxes
                .iter()
                .filter(|a| a.unstable)
                .map(|a| format!("{} Phase {} {}", a.config, a.phase.label(), a.cell))
                .collect(),
            reference_rates: s.reference_rates,
            hypotheses: v.hypotheses,
            unstable: v.unstable,
            taxes: s.taxes,
        })
    }
}
