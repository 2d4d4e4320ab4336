//! The `ctax` command line (parsed here, in the library, so that its rules are unit-tested;
//! `src/main.rs` only dispatches).

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand};

use crate::analysis::AnalyzeOptions;
use crate::stats::{BootstrapConfig, Method};

/// Fewest bootstrap resamples `--resamples` accepts: below this the 2.5% / 97.5% percentiles
/// of the replicates rest on a handful of values.
const MIN_RESAMPLES: u64 = 200;
/// Most bootstrap resamples `--resamples` accepts (memory: one f64 per resample per statistic).
const MAX_RESAMPLES: u64 = 1_000_000;

#[derive(Debug, Parser)]
#[command(
    name = "ctax",
    version,
    about = "Measure the substrate tax of vLLM's KV-connector machinery"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Analyse a results root: writes <root>/analysis/{summary,verdicts}.json and Parquet tables.
    Analyze {
        root: PathBuf,
        /// Output directory (default <root>/analysis).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        stats: StatsArgs,
    },
    /// Analyse a results root and render the static report (index.html, report.md, figures/,
    /// data/).
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
    Run(Box<crate::orchestrate::RunArgs>),
    /// Merge the results roots of one sweep's shards (`ctax run --shard K/N`) into one root.
    /// Refuses roots of different profiles and overlapping launches.
    Merge {
        #[arg(required = true)]
        roots: Vec<PathBuf>,
        /// The merged root (must not exist or be empty).
        #[arg(long)]
        out: PathBuf,
    },
    /// Copy what `ctax run` reads to resume ROOT into DEST, without the raw records of its
    /// finished launches (~3% of the bytes): the root to carry to a GPU host. Unfinished
    /// launches travel whole. `ctax run` on DEST needs --skip-stage 2 (or --reference-rates)
    /// and --skip-stage 4 and runs one phase (--skip-stage 1 or 3); it refuses to resume a
    /// launch whose records stayed behind, and nothing analyses DEST. What comes back joins
    /// ROOT with `ctax rejoin` (DESIGN.md §7.1).
    Skeleton {
        root: PathBuf,
        /// The skeleton (must not exist or be empty).
        dest: PathBuf,
    },
    /// Join into ROOT what a sweep on a skeleton of ROOT wrote (BACK: what `tools/gpu_run.sh`
    /// brought back, or the skeleton itself): new run directories copied in, resumed ones
    /// replacing ROOT's whole, untouched ones left alone, plans, pre-flight and sweep logs
    /// copied, the manifest continued. Refused before anything is written when BACK's manifest
    /// does not continue ROOT's or a resumed directory lacks a file of ROOT's copy.
    Rejoin { back: PathBuf, root: PathBuf },
    /// Compress a results root's raw JSONL with zstd (ingest reads .jsonl.zst).
    Archive {
        root: PathBuf,
        /// zstd level.
        #[arg(long, default_value_t = 19)]
        level: i32,
        /// Re-encode the archives already there (`*.jsonl.zst`, `*.log.zst`) at --level where
        /// that makes them smaller, verified by decoding the new file from disk.
        #[arg(long)]
        recompress: bool,
        /// Then remove each per-cell step file (`engine_step_<phase>_<cell>.jsonl[.zst]`) whose
        /// records equal what ingest cuts from the run's raw step log (verified file by file;
        /// ingest then cuts it): the raw log is stored once (~15% of an archived launch).
        #[arg(long)]
        slim_steps: bool,
        /// Then re-encode each zstd request file (`requests_*.jsonl.zst`) as request columns and
        /// each zstd raw step log (`engine_step_raw.<pid>.jsonl.zst`) as number columns, both
        /// `….jsonl.cols` (values as byte-plane deltas, DESIGN.md §2.7; ~26% and ~41%
        /// smaller), verified by decoding the new file from disk to the same bytes. Ingest,
        /// rejoin and skeleton read every form; `ctax cat FILE` prints the JSONL.
        #[arg(long)]
        columns: bool,
        /// First finish the launches a hard kill (SIGKILL, a GPU machine given back) left
        /// before their end: a run directory without a manifest row, or with a raw step log still
        /// plain, gets what the launch's end writes for the cells it completed (their placement,
        /// their step files, the logs compressed) and an `incomplete` manifest row saying so.
        /// Every pass is refused while a `ctax run` sweep holds ROOT (a live launch looks the
        /// same as a killed one).
        #[arg(long)]
        finish_killed: bool,
    },
    /// Print a raw file's records as the collector wrote them (JSONL), whatever its stored
    /// form: `X.jsonl`, `X.jsonl.zst`, request columns `X.jsonl.cols`.
    Cat { file: PathBuf },
    /// Print the evidence behind the statistical defaults: autocorrelation by send order,
    /// block lengths and within-cell drift of every run cell (Markdown).
    Diagnose { root: PathBuf },
    /// Calibrate the tax CIs by simulation: false-detection rate (true tax 0) and power (10%,
    /// 20%) of the TTFT p90 tax for 1/2/3/5 /8 launches per config and launch sd 5%/10% (Markdown).
    CalibrateNoise {
        /// Seeds per setting.
        #[arg(long, default_value_t = 200)]
        seeds: u32,
        /// Bootstrap resamples per analysis.
        #[arg(long, default_value_t = 2000)]
        resamples: usize,
        /// Only the settings with this true tax (e.g. 0 for the false-detection rows).
        #[arg(long)]
        true_tax: Option<f64>,
        /// Extra configs like plain beside plain and mooncake_both (0 to 6): more configs in
        /// every pool and more for the own-noise screen to test (DESIGN.md §4.3).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=6))]
        null_configs: u32,
        /// Only these launch counts (comma-separated; default every row of the grid).
        #[arg(long, value_delimiter = ',')]
        launches: Vec<u32>,
        /// Machines the launches run on: launch l of every config on machine l % N (every
        /// config meets plain on every machine), each with a lognormal level of sd
        /// `--machine-sd` (DESIGN.md §4.3 "Machines"); 0 or 1: one machine.
        #[arg(long, default_value_t = 0)]
        machines: u32,
        #[arg(long, default_value_t = 0.15)]
        machine_sd: f64,
    },
    /// Compare ctax-collect with `vllm bench serve` (the output of tools/instrument_check.sh):
    /// writes DIR/instrument_check.{md,json} and prints the table.
    InstrumentCheck {
        dir: PathBuf,
        #[command(flatten)]
        stats: StatsArgs,
    },
    /// Write a synthetic (simulated) results root with known taxes, for demos and benchmarks.
    Synth {
        root: PathBuf,
        #[arg(long, value_enum, default_value_t = crate::synth::Preset::Demo)]
        preset: crate::synth::Preset,
    },
}

/// Statistics options shared by `analyze` and `report`.
#[derive(Debug, Args, Clone)]
pub struct StatsArgs {
    /// Bootstrap resamples (200 to 1,000,000).
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = RangedU64ValueParser::<usize>::new().range(MIN_RESAMPLES..=MAX_RESAMPLES)
    )]
    pub resamples: usize,
    /// Bootstrap seed (same seed + same input = byte-identical output).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Moving-block bootstrap over send order instead of iid; optional block length (default
    /// Politis-White automatic length per launch).
    #[arg(
        long,
        num_args = 0..=1,
        value_name = "LEN",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub block: Option<Option<usize>>,
    /// Skip ITL statistics (pooled inter-token gaps are the largest table).
    #[arg(long)]
    pub skip_itl: bool,
}

impl StatsArgs {
    pub fn options(&self) -> AnalyzeOptions {
        let method = match self.block {
            None => Method::Iid,
            Some(block_len) => Method::MovingBlock { block_len },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(args: &[&str]) -> Result<AnalyzeOptions, clap::Error> {
        let argv = ["ctax", "analyze", "root"].iter().chain(args);
        match Cli::try_parse_from(argv)?.cmd {
            Cmd::Analyze { stats, .. } => Ok(stats.options()),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn resamples_are_bounded_with_a_clear_error() {
        assert_eq!(stats(&[]).unwrap().bootstrap.resamples, 10_000);
        assert_eq!(
            stats(&["--resamples", "200"]).unwrap().bootstrap.resamples,
            200
        );
        assert_eq!(
            stats(&["--resamples", "1000000"])
                .unwrap()
                .bootstrap
                .resamples,
            1_000_000
        );
        for bad in ["0", "199", "1000001"] {
            let e = stats(&["--resamples", bad]).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
            let text = e.to_string();
            assert!(
                text.contains("--resamples") && text.contains("200..=1000000"),
                "{text}"
            );
        }
    }

    #[test]
    fn block_is_absent_auto_or_a_length() {
        assert_eq!(stats(&[]).unwrap().bootstrap.method, Method::Iid);
        assert_eq!(
            stats(&["--block"]).unwrap().bootstrap.method,
            Method::MovingBlock { block_len: None }
        );
        assert_eq!(
            stats(&["--block", "8"]).unwrap().bootstrap.method,
            Method::MovingBlock { block_len: Some(8) }
        );
        // 0 was once the "auto" sentinel; now it is simply not a block length.
        assert!(stats(&["--block", "0"]).is_err());
    }

    #[test]
    fn synth_preset_is_one_of_the_named_presets() {
        let p = |name: &str| match Cli::try_parse_from(["ctax", "synth", "r", "--preset", name])
            .map(|c| c.cmd)
        {
            Ok(Cmd::Synth { preset, .. }) => Ok(preset),
            Ok(other) => panic!("parsed as {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(p("bench").unwrap(), crate::synth::Preset::Bench);
        let e = p("huge").unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(e.to_string().contains("demo"), "{e}");
    }
}
