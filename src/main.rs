//! `ctax`: run KV-connector substrate-tax sweeps against vLLM, analyse them, render the report.
//! The command line is defined (and tested) in `connector_tax::cli`.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use connector_tax::analysis::model::AnalysisResult;
use connector_tax::cli::{Cli, Cmd};
use connector_tax::pipeline::{self, Outputs};
use connector_tax::verdicts::Verdicts;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            let e = format!("{e:#}");
            eprintln!("error: {}", ctax_schema::text::escape_controls(&e));
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Analyze { root, out, stats } => {
            let outputs = Outputs {
                analysis_dir: Some(out.unwrap_or_else(|| root.join("analysis"))),
                report_dir: None,
            };
            let done = pipeline::run(&root, &stats.options(), &outputs)?;
            print_headline(&done.analysis, &done.verdicts);
        }
        Cmd::Report { root, out, stats } => {
            let outputs = Outputs {
                analysis_dir: None,
                report_dir: Some(out.clone()),
            };
            let done = pipeline::run(&root, &stats.options(), &outputs)?;
            print_headline(&done.analysis, &done.verdicts);
            let files = done.report.map_or(0, |r| r.files.len());
            eprintln!("report written to {} ({files} files)", out.display());
        }
        Cmd::ReferenceRates { root } => {
            let refs = connector_tax::orchestrate::stages::reference_rates(&root)?;
            for n in &refs.notes {
                println!("{n}");
            }
        }
        Cmd::Run(args) => {
            let result = connector_tax::orchestrate::run(*args);
            // A usage error clap could not see: reported as clap does (exit 2, `ctax run`'s
            // usage), which `gpu_run.sh chain` takes as a refusal before any GPU time is spent.
            if let Some(u) = result
                .as_ref()
                .err()
                .and_then(|e| e.downcast_ref::<connector_tax::orchestrate::UsageError>())
            {
                let mut cli = Cli::command();
                cli.build();
                cli.find_subcommand_mut("run")
                    .expect("ctax has a run subcommand")
                    .error(clap::error::ErrorKind::ValueValidation, &u.0)
                    .exit();
            }
            return result;
        }
        Cmd::Merge { roots, out } => {
            let m = connector_tax::orchestrate::merge::merge(&roots, &out)?;
            for n in &m.notes {
                eprintln!("note: {}", ctax_schema::text::escape_controls(n));
            }
            println!(
                "merged {} run directories and {} manifest rows from {} roots into {}",
                m.runs,
                m.manifest_rows,
                roots.len(),
                out.display()
            );
        }
        Cmd::Rejoin { back, root } => {
            let r = connector_tax::orchestrate::rejoin::rejoin(&back, &root)?;
            println!(
                "rejoined {} into {}: {} new run directories ({}), {} replaced whole ({}), {} \
                 unchanged; {} manifest rows added; {} plan, pre-flight and log files copied",
                back.display(),
                root.display(),
                r.new_runs.len(),
                r.new_runs.join(", "),
                r.replaced_runs.len(),
                r.replaced_runs.join(", "),
                r.unchanged_runs,
                r.rows_added,
                r.other_files
            );
            if !r.ignored.is_empty() {
                println!(
                    "left as they are (not part of a results root): {}",
                    r.ignored.join(", ")
                );
            }
            if r.phase_a_rows_added > 0 {
                println!(
                    "{} Phase A rows added: run `ctax reference-rates {}` before the next Phase B",
                    r.phase_a_rows_added,
                    root.display()
                );
            }
            if r.unfinished.is_empty() {
                println!(
                    "next: `ctax archive {} --slim-steps`, then `--recompress --columns`",
                    root.display()
                );
            } else {
                println!(
                    "{} run director{} without a manifest row or with a raw step log still \
                     plain: {} — launches killed there, or still running if this was a \
                     snapshot of a live sweep\nnext, once that sweep has ended: `ctax archive \
                     {} --finish-killed`, then `--slim-steps` and `--recompress --columns`",
                    r.unfinished.len(),
                    if r.unfinished.len() == 1 { "y" } else { "ies" },
                    r.unfinished.join(", "),
                    root.display()
                );
            }
        }
        Cmd::Skeleton { root, dest } => {
            let made = connector_tax::orchestrate::skeleton::make(&root, &dest)?;
            let mk = &made.marker;
            println!(
                "skeleton of {} in {}: {} run directories without their raw records, {} whole; \
                 {} files ({:.1} MB) copied, {} raw files ({:.1} MB) left out",
                root.display(),
                dest.display(),
                mk.skeletal.len(),
                mk.whole.len(),
                made.files_copied,
                made.bytes_copied as f64 / 1e6,
                mk.files_left_out,
                mk.bytes_left_out as f64 / 1e6
            );
        }
        Cmd::Archive {
            root,
            level,
            recompress,
            slim_steps,
            columns,
            finish_killed,
        } => {
            use connector_tax::orchestrate::{archive, root_lock};
            // Exclusive: a sweep writing ROOT refuses it (a live launch looks killed, and its
            // raw files are still being appended to).
            let _lock = root_lock::lock(&root, root_lock::Holder::Archive)?;
            if finish_killed {
                for f in connector_tax::orchestrate::killed::finish_root(&root)? {
                    println!(
                        "finished {}: {} of {} cells complete; {}; manifest row added ({})",
                        f.dir.display(),
                        f.kept,
                        f.planned,
                        f.sealed,
                        f.row.reason.as_deref().unwrap_or_default()
                    );
                }
            }
            let (mut rep, what) = if recompress {
                (archive::recompress_root(&root, level)?, "recompressed")
            } else {
                (archive::compress_root(&root, level)?, "compressed")
            };
            print!(
                "{what} {} files: {:.1} MB -> {:.1} MB",
                rep.compressed,
                rep.bytes_before as f64 / 1e6,
                rep.bytes_after as f64 / 1e6
            );
            if recompress {
                println!();
            } else {
                println!(
                    "; {} plain copies of identical archives removed",
                    rep.already_archived
                );
            }
            if slim_steps {
                let slim = archive::slim_steps_root(&root)?;
                println!(
                    "slimmed {} per-cell step files ({:.1} MB): the raw step logs hold them",
                    slim.slimmed,
                    slim.slimmed_bytes as f64 / 1e6
                );
                rep.kept.extend(slim.kept);
            }
            if columns {
                let cols = archive::columns_root(&root)?;
                println!(
                    "re-encoded {} request files and raw step logs as columns: {:.1} MB -> \
                     {:.1} MB; {} zstd copies of identical columns removed",
                    cols.compressed,
                    cols.bytes_before as f64 / 1e6,
                    cols.bytes_after as f64 / 1e6,
                    cols.already_archived
                );
                rep.kept.extend(cols.kept);
            }
            for k in &rep.kept {
                eprintln!("warning: {}", ctax_schema::text::escape_controls(k));
            }
            if !rep.kept.is_empty() {
                eprintln!("{} files left as they were (above)", rep.kept.len());
                return Ok(ExitCode::FAILURE);
            }
        }
        Cmd::Cat { file } => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            connector_tax::ingest::cat(&file, &mut out)?;
            std::io::Write::flush(&mut out)?;
        }
        Cmd::Diagnose { root } => {
            let ds = connector_tax::ingest::load(&root)?;
            pipeline::eprint_warnings(&ds.warnings);
            let rows = connector_tax::diagnose::diagnose(&ds);
            print!("{}", connector_tax::diagnose::markdown(&rows));
            let (gpu, errors) = connector_tax::diagnose::gpu_cells(&ds);
            print!("{}", connector_tax::diagnose::gpu_markdown(&gpu, &errors));
        }
        Cmd::CalibrateNoise {
            seeds,
            resamples,
            true_tax,
            null_configs,
            launches,
            machines,
            machine_sd,
        } => {
            use connector_tax::noise_calibration as nc;
            let grid: Vec<nc::Setting> = nc::default_grid()
                .into_iter()
                .filter(|s| true_tax.is_none_or(|t| (s.true_tax - t).abs() < 1e-9))
                .filter(|s| launches.is_empty() || launches.contains(&s.launches))
                .map(|s| nc::Setting {
                    null_configs,
                    machines,
                    machine_sd,
                    ..s
                })
                .collect();
            let out = nc::run(&grid, seeds, resamples)?;
            print!("{}", nc::markdown(&out));
        }
        Cmd::InstrumentCheck { dir, stats } => {
            use connector_tax::instrument_check as ic;
            let cmp = ic::compare(&ic::load(&dir)?, &stats.options().bootstrap);
            let md = ic::markdown(&cmp);
            connector_tax::fsutil::write_atomic(&dir.join("instrument_check.md"), md.as_bytes())?;
            connector_tax::fsutil::write_json_atomic(&dir.join("instrument_check.json"), &cmp)?;
            print!("{md}");
        }
        Cmd::Synth { root, preset } => {
            let spec = connector_tax::synth::preset(preset);
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

fn print_headline(analysis: &AnalysisResult, verdicts: &Verdicts) {
    let s = &analysis.summary;
    pipeline::eprint_warnings(&s.warnings);
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
    for v in verdicts.all() {
        eprintln!(
            "  {:<4} {:<13} {}",
            v.id,
            v.verdict.as_str(),
            ctax_schema::text::escape_controls(&v.reason)
        );
    }
}
