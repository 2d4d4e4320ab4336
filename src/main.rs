//! `ctax`: run KV-connector substrate-tax sweeps against vLLM, analyse them, render the report.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use connector_tax::analysis::{self, AnalyzeOptions};
use connector_tax::stats::{BootstrapConfig, Method};

#[derive(Parser)]
#[command(
    name = "ctax",
    version,
    about = "Measure the substrate tax of vLLM's KV-connector machinery"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Analyse a results root: writes <root>/analysis/{summary,verdicts}.json and Parquet tables.
    Analyze {
        root: PathBuf,
        /// Output directory (default <root>/analysis).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        stats: StatsArgs,
    },
    /// Analyse a results root and render the static report (index.html, report.md, figures/).
    Report {
        root: PathBuf,
        #[arg(long, default_value = "site")]
        out: PathBuf,
        #[command(flatten)]
        stats: StatsArgs,
    },
    /// Compute reference rates from Phase A data and write <root>/reference_rates.json.
    ReferenceRates { root: PathBuf },
    /// Run a sweep against vLLM (stages 0-4); see `ctax run --help`.
    Run(connector_tax::orchestrate::RunArgs),
    /// Merge the results roots of one sweep's shards (`ctax run --shard K/N`) into one root.
    /// Refuses roots of different profiles and overlapping launches.
    Merge {
        #[arg(required = true)]
        roots: Vec<PathBuf>,
        /// The merged root (must not exist or be empty).
        #[arg(long)]
        out: PathBuf,
    },
    /// Compress a results root's raw JSONL with zstd (ingest reads .jsonl.zst).
    Archive {
        root: PathBuf,
        /// zstd level.
        #[arg(long, default_value_t = 19)]
        level: i32,
    },
    /// Write a synthetic (simulated) results root with known taxes, for demos and benchmarks.
    Synth {
        root: PathBuf,
        /// demo: all 8 configs, Phase A + B; bench: the seed-scale benchmark archive.
        #[arg(long, default_value = "demo")]
        preset: String,
    },
}

#[derive(Args, Clone)]
struct StatsArgs {
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 10_000)]
    resamples: usize,
    /// Bootstrap seed (same seed + same input = byte-identical output).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Moving-block bootstrap over send order instead of iid; optional block length
    /// (default ceil(n^(1/3))).
    #[arg(long, num_args = 0..=1, default_missing_value = "0")]
    block: Option<usize>,
    /// Skip ITL statistics (pooled inter-token gaps are the largest table).
    #[arg(long)]
    skip_itl: bool,
}

impl StatsArgs {
    fn options(&self) -> AnalyzeOptions {
        let method = match self.block {
            None => Method::Iid,
            Some(0) => Method::MovingBlock { block_len: None },
            Some(b) => Method::MovingBlock { block_len: Some(b) },
        };
        AnalyzeOptions {
            bootstrap: BootstrapConfig {
                resamples: self.resamples,
                seed: self.seed,
                method,
                ..Default::default()
            },
            skip_itl: self.skip_itl,
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Analyze { root, out, stats } => {
            let res = analysis::run(&root, &stats.options(), out.as_deref())?;
            print_headline(&res);
        }
        Cmd::Report { root, out, stats } => {
            let ds = connector_tax::ingest::load(&root)?;
            let (res, _) = analysis::analyze(&ds, &stats.options())?;
            analysis::write_outputs(&res, &out.join("data"))?;
            let rendered = connector_tax::report::render(&res, &out)?;
            print_headline(&res);
            eprintln!(
                "report written to {} ({} files)",
                out.display(),
                rendered.files.len()
            );
        }
        Cmd::ReferenceRates { root } => {
            let refs = connector_tax::orchestrate::stages::reference_rates(&root)?;
            for n in &refs.notes {
                println!("{n}");
            }
        }
        Cmd::Run(args) => return connector_tax::orchestrate::run(args),
        Cmd::Merge { roots, out } => {
            let m = connector_tax::orchestrate::merge::merge(&roots, &out)?;
            for n in &m.notes {
                eprintln!("note: {n}");
            }
            println!(
                "merged {} run directories and {} manifest rows from {} roots into {}",
                m.runs,
                m.manifest_rows,
                roots.len(),
                out.display()
            );
        }
        Cmd::Archive { root, level } => {
            let (files, before, after) =
                connector_tax::orchestrate::archive::compress_root(&root, level)?;
            println!(
                "compressed {files} files: {:.1} MB -> {:.1} MB",
                before as f64 / 1e6,
                after as f64 / 1e6
            );
        }
        Cmd::Synth { root, preset } => {
            let spec = connector_tax::synth::preset(&preset)?;
            let dirs = connector_tax::synth::generate(&spec, &root)?;
            println!(
                "wrote {} simulated run directories under {}",
                dirs.len(),
                root.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_headline(res: &connector_tax::analysis::model::AnalysisResult) {
    let s = &res.summary;
    if s.dataset.simulated {
        eprintln!("NOTE: this dataset is SIMULATED");
    }
    eprintln!(
        "{} cells, ref_safe={:?} ref_load={:?}, {} taxes, {} warnings",
        s.cells.len(),
        s.reference_rates.ref_safe,
        s.reference_rates.ref_load,
        s.taxes.len(),
        s.warnings.len()
    );
    for v in res
        .verdicts
        .hypotheses
        .iter()
        .chain(&res.verdicts.success_criteria)
    {
        eprintln!("  {:<4} {:<13} {}", v.id, v.verdict.as_str(), v.reason);
    }
}
