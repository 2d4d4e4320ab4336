//! connector-tax: measures the substrate tax of vLLM's KV-connector machinery.
//!
//! Module map (a newcomer finds any figure, criterion or hypothesis in one step). Data flows one
//! way, top to bottom; a module only imports the ones above it (checked by
//! `module_graph::tests`):
//! - [`stats`] — percentiles and seeded bootstrap CIs (pure).
//! - [`fsutil`] — the one atomic (fsync'ed) file write.
//! - [`ingest`] — raw JSONL (plain, zstd or the archive's columns) → typed rows + polars
//!   frames, Parquet export.
//! - [`analysis`] — per-cell statistics, throughput, saturation criteria, reference rates, taxes.
//! - [`diagnose`] — autocorrelation, block length and drift per run cell (evidence for the
//!   statistical defaults).
//! - [`instrument_check`] — ctax-collect against `vllm bench serve` on one server (A-B-B-A).
//! - [`verdicts`] — hypotheses H1–H6 and success criteria SC1–SC7, read from the analysis.
//! - [`report`] — the eight figures and the HTML/Markdown report.
//! - [`pipeline`] — ingest → analysis → verdicts → outputs: the one path behind `ctax analyze`,
//!   `ctax report` and `ctax run` stage 4.
//! - [`synth`] — synthetic results roots with known truth (tests, benchmark, demos).
//! - [`orchestrate`] — `ctax run`: pre-flight, Phase A, reference rates, Phase B, pipeline.
//! - [`cli`] — the `ctax` command line.

// `pub` = used by `ctax` (src/main.rs), tests/, benches/ or named in such an item's signature or
// pub fields; everything else is `pub(crate)` or private (DESIGN.md §1). The lint (an error under
// clippy `-D warnings`) flags a `pub` item that no path from the crate root reaches.
#![warn(unreachable_pub)]

pub mod analysis;
pub mod cli;
pub mod diagnose;
pub mod fsutil;
pub mod ingest;
pub mod instrument_check;
pub mod noise_calibration;
pub mod orchestrate;
pub mod pipeline;
pub mod report;
pub mod stats;
pub mod synth;
pub mod verdicts;

#[cfg(test)]
mod module_graph;
