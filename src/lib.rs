//! connector-tax: measures the substrate tax of vLLM's KV-connector machinery.
//!
//! Module map (a newcomer finds any figure, criterion or hypothesis in one step):
//! - [`stats`] — percentiles and seeded bootstrap CIs (pure).
//! - [`diagnose`] — autocorrelation, block length and drift per run cell (evidence for the defaults).
//! - [`ingest`] — raw JSONL (optionally zstd) → typed rows + polars frames, Parquet export.
//! - [`analysis`] — per-cell statistics, throughput, saturation criteria, reference rates, taxes.
//! - [`verdicts`] — hypotheses H1–H6 and success criteria SC1–SC7.
//! - [`report`] — the eight figures and the HTML/Markdown report.
//! - [`instrument_check`] — ctax-collect against `vllm bench serve` on one server (A-B-B-A).
//! - [`orchestrate`] — `ctax run`: pre-flight, Phase A, reference rates, Phase B, analysis, report.

pub mod analysis;
pub mod diagnose;
pub mod fsutil;
pub mod ingest;
pub mod instrument_check;
pub mod orchestrate;
pub mod report;
pub mod stats;
pub mod synth;
pub mod verdicts;
