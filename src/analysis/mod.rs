//! Analysis: raw runs → per-cell statistics with CIs, saturation criteria, reference rates,
//! taxes, and (through [`crate::verdicts`]) H1–H6 and the success criteria.
//!
//! | question | module |
//! |---|---|
//! | what numbers does a cell have? | [`samples`] (extraction), [`cells`] (statistics) |
//! | when is a rate saturated? which are ref_safe / ref_load? | [`saturation`] |
//! | what is a tax? | [`taxes`] |
//! | do the GPUs of one host differ (plain vs plain)? | [`calibration`] |
//! | what do the output files contain? | [`model`] |

pub mod calibration;
pub mod cells;
pub mod conventions;
pub mod model;
pub mod replicates;
pub mod samples;
pub mod saturation;
pub mod taxes;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Context;
use ctax_schema::{Phase, SCHEMA_VERSION};
use polars::prelude::*;

use crate::fsutil::write_json_atomic;
use crate::ingest::{self, Dataset, frames};
use crate::stats::BootstrapConfig;
use model::{
    AnalysisResult, AnalysisSummary, CANONICAL_CONFIGS, CellStats, DatasetInfo, Verdicts,
    config_order,
};
use replicates::Replicator;

/// Options of `ctax analyze` / `ctax report`.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    pub bootstrap: BootstrapConfig,
    /// Skip the (large) pooled ITL statistics.
    pub skip_itl: bool,
}

/// Runs the whole analysis on a loaded dataset.
pub fn analyze(ds: &Dataset, opts: &AnalyzeOptions) -> anyhow::Result<(AnalysisResult, DataFrame)> {
    let mut warnings = ds.warnings.clone();
    let samples = samples::extract(ds, !opts.skip_itl);
    let requests = frames::requests_frame(ds, false)
        .map_err(|e| anyhow::anyhow!("building the requests table: {e}"))?;
    let points = point_table(&requests)?;
    let rep = Replicator::new(opts.bootstrap);
    let ordered: Vec<&samples::CellSamples> = {
        let mut v: Vec<_> = samples.values().collect();
        v.sort_by(|a, b| cell_order(a, b));
        v
    };
    let (mut cells, per_launch) = cells::all_cell_stats(&rep, &ordered, &points);
    let reference_rates = saturation::evaluate(&mut cells);
    if let Some(archived) = &ds.reference_rates
        && (archived.ref_safe != reference_rates.ref_safe
            || archived.ref_load != reference_rates.ref_load)
    {
        warnings.push(format!(
            "reference_rates.json (chosen during the run) says ref_safe={:?}, ref_load={:?}; the data now gives ref_safe={:?}, ref_load={:?} (Phase B cells stay at the rate they ran at)",
            archived.ref_safe, archived.ref_load, reference_rates.ref_safe, reference_rates.ref_load
        ));
    }
    for c in cells.iter().filter(|c| !c.complete) {
        warnings.push(format!(
            "{} {} {}: incomplete cell ({})",
            c.key.config,
            c.key.phase,
            c.key.cell,
            c.incomplete_reasons.join("; ")
        ));
    }
    let engine = taxes::TaxEngine::new(&rep, &samples, &cells);
    let tax_list = engine.all(&reference_rates);
    let dataset = dataset_info(ds, &cells);
    let (hypotheses, success_criteria) =
        crate::verdicts::evaluate(&engine, &reference_rates, &dataset, &cells, ds);
    let step_ecdf = step_ecdf(&samples, reference_rates.ref_safe);
    let (calibration, cal_warnings) = calibration::compare(&rep, &ds.calibration);
    warnings.extend(cal_warnings);
    let summary = AnalysisSummary {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        conventions: conventions::conventions(&opts.bootstrap),
        dataset,
        cells,
        per_launch,
        reference_rates,
        taxes: tax_list,
        calibration,
        warnings,
    };
    let verdicts = Verdicts {
        schema_version: SCHEMA_VERSION,
        simulated: summary.dataset.simulated,
        hypotheses,
        success_criteria,
    };
    Ok((
        AnalysisResult {
            summary,
            verdicts,
            step_ecdf,
        },
        requests,
    ))
}

/// Loads `root`, analyses it, writes `<root>/analysis/{summary,verdicts}.json` and the Parquet
/// tables (`requests`, `metrics`, `steps`, `cells`).
pub fn run(
    root: &Path,
    opts: &AnalyzeOptions,
    out_dir: Option<&Path>,
) -> anyhow::Result<AnalysisResult> {
    let ds = ingest::load(root)?;
    let (result, _) = analyze(&ds, opts)?;
    let out = out_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join("analysis"));
    write_outputs(&result, &out)?;
    frames::export_parquet(&ds, &out)?;
    Ok(result)
}

/// Writes summary.json and verdicts.json atomically.
pub fn write_outputs(result: &AnalysisResult, out: &Path) -> anyhow::Result<()> {
    write_json_atomic(&out.join("summary.json"), &result.summary)
        .with_context(|| format!("writing {}", out.join("summary.json").display()))?;
    write_json_atomic(&out.join("verdicts.json"), &result.verdicts)
        .with_context(|| format!("writing {}", out.join("verdicts.json").display()))?;
    Ok(())
}

fn cell_order(a: &samples::CellSamples, b: &samples::CellSamples) -> std::cmp::Ordering {
    (
        config_order(&a.key.config),
        a.key.phase,
        a.shape.rate.to_bits(),
        a.shape.input_len,
        a.shape.output_len,
    )
        .cmp(&(
            config_order(&b.key.config),
            b.key.phase,
            b.shape.rate.to_bits(),
            b.shape.input_len,
            b.shape.output_len,
        ))
}

/// polars point estimates, pooled and per launch.
fn point_table(requests: &DataFrame) -> anyhow::Result<cells::PointTable> {
    let mut out: cells::PointTable = HashMap::new();
    for by_launch in [false, true] {
        let df = frames::request_point_estimates(requests, by_launch)?;
        let s = |name: &str| -> anyhow::Result<Vec<Option<String>>> {
            Ok(df
                .column(name)?
                .str()?
                .iter()
                .map(|v| v.map(str::to_owned))
                .collect())
        };
        let (config, phase, cell) = (s("config")?, s("phase")?, s("cell")?);
        let launch: Vec<Option<u32>> = if by_launch {
            df.column("launch")?.u32()?.iter().collect()
        } else {
            vec![None; df.height()]
        };
        let mut cols: Vec<(&'static str, Vec<Vec<Option<f64>>>)> = Vec::new();
        for m in ["ttft_ms", "tpot_ms", "e2e_ms"] {
            let mut four = Vec::new();
            for suffix in ["mean", "p50", "p90", "p99"] {
                let c = df
                    .column(&format!("{m}_{suffix}"))?
                    .cast(&DataType::Float64)?;
                four.push(c.f64()?.iter().collect::<Vec<_>>());
            }
            cols.push((m, four));
        }
        for i in 0..df.height() {
            let (Some(c), Some(p), Some(cl)) = (&config[i], &phase[i], &cell[i]) else {
                continue;
            };
            let entry = out
                .entry((c.clone(), launch[i], p.clone(), cl.clone()))
                .or_default();
            for (m, four) in &cols {
                entry.insert(m, [four[0][i], four[1][i], four[2][i], four[3][i]]);
            }
        }
    }
    Ok(out)
}

fn dataset_info(ds: &Dataset, cells: &[CellStats]) -> DatasetInfo {
    let mut configs: Vec<String> = ds.runs.iter().map(|r| r.config.clone()).collect();
    configs.sort_by_key(|c| config_order(c));
    configs.dedup();
    let mut skipped = BTreeMap::new();
    for c in CANONICAL_CONFIGS {
        if configs.iter().any(|x| x == c) {
            continue;
        }
        let reason = ds
            .preflight
            .as_ref()
            .and_then(|p| p.configs.get(c))
            .filter(|e| e.decision == "skip")
            .map(|e| {
                format!(
                    "pre-flight SKIP: {}",
                    e.reason
                        .clone()
                        .unwrap_or_else(|| "no reason recorded".into())
                )
            })
            .unwrap_or_else(|| "not run (no data in this results root)".into());
        skipped.insert(c.to_owned(), reason);
    }
    let step_timing_available = cells.iter().any(|c| c.step.is_some())
        && ds
            .preflight
            .as_ref()
            .and_then(|p| p.step_timing_available)
            .unwrap_or(true);
    DatasetInfo {
        root: ds.root.display().to_string(),
        simulated: ds.runs.iter().any(|r| r.simulated()),
        configs,
        skipped,
        step_timing_available,
        preflight: ds.preflight.clone(),
        manifest: ds.manifest.clone(),
        environments: ds
            .runs
            .iter()
            .map(|r| (r.dir_name.clone(), r.env.clone()))
            .collect(),
        profile: ds.profile.clone(),
        run_configs: ds
            .runs
            .iter()
            .filter_map(|r| {
                r.run_config
                    .as_ref()
                    .map(|c| (r.dir_name.clone(), run_config_view(c)))
            })
            .collect(),
    }
}

fn run_config_view(c: &ctax_schema::RunConfig) -> serde_json::Value {
    serde_json::json!({
        "config": c.config,
        "launch": c.launch,
        "model": c.model,
        "served_model_name": c.served_model_name,
        "phases": c.phases.iter().map(|p| p.tag()).collect::<Vec<_>>(),
        "cells": c.cells.len(),
        "simulated": c.simulated,
        "extra": c.extra,
    })
}

/// Figure 6's data: sorted step durations of each config's Phase A cell at ref_safe.
fn step_ecdf(
    samples: &BTreeMap<model::CellKey, samples::CellSamples>,
    ref_safe: Option<f64>,
) -> BTreeMap<String, Vec<f64>> {
    let mut out = BTreeMap::new();
    let Some(r) = ref_safe else { return out };
    for (k, cs) in samples {
        if k.phase != Phase::A || (cs.shape.rate - r).abs() > 1e-9 {
            continue;
        }
        let mut v: Vec<f64> = cs
            .launches
            .iter()
            .flat_map(|l| l.step_duration_us.iter().copied())
            .collect();
        if v.is_empty() {
            continue;
        }
        crate::stats::percentile::sort(&mut v);
        out.entry(k.config.clone()).or_insert(v);
    }
    out
}
