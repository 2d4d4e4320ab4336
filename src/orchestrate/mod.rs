//! `ctax run`: the seed's stages with barriers.
//!
//! | stage | what | where |
//! |---|---|---|
//! | 0 | pre-flight (verify scripts → preflight_status.json) + step-timing plugin install | [`preflight`], [`stage0_plugin`] |
//! | 1 | Phase A over all included configs, seeded random order, launches interleaved | [`launch_run`] |
//! | 2 | reference rates (the analysis engine's saturation code, no verdicts) → reference_rates.json | [`stages::reference_rates`] |
//! | 3 | Phase B at ref_safe (+ B' at ref_load for the priority configs when they differ) | [`launch_run`] |
//! | 4 | plugin removal, then [`crate::pipeline::run`]: `analysis/` and `report/` (with `report/data/`) | [`run`] |
//!
//! Resume: run again with the same `--out`. A launch whose cells are all complete is skipped;
//! a launch with incomplete cells is relaunched in the same run directory and reruns only those
//! cells (their old files move to `superseded/<stamp>/`).

pub mod archive;
pub mod http;
pub mod manifest;
pub mod preflight;
pub mod profile;
pub mod server;
pub mod signals;
pub mod stages;
pub mod steps;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use ctax_schema::{
    Cell, CellKey, Decision, Exit, ManifestRow, Phase, PlannedCell, PreflightStatus, RowStatus,
    RunConfig, RunSummary, SCHEMA_VERSION,
};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use profile::{Profile, Timing};
use server::{Kind, Server, Spec, unix_ms};

/// Arguments of `ctax run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Profile name (launch/profiles/<name>.toml) or path to a TOML file.
    #[arg(long, default_value = "seed")]
    pub profile: String,
    /// Results root to write into; running again with the same root resumes.
    #[arg(long)]
    pub out: PathBuf,
    /// Skip a stage (0-4); repeatable.
    #[arg(long = "skip-stage")]
    pub skip_stage: Vec<u8>,
    /// Launches per config and phase (overrides the profile), interleaved across configs.
    #[arg(long)]
    pub launches: Option<u32>,
    /// Only these configs (comma-separated; overrides the profile's list; must include plain).
    #[arg(long, value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// The checkout holding launch/, tools/, patches/ (default: found from the current
    /// directory or the executable's location).
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// ctax-collect executable (default: next to this executable).
    #[arg(long)]
    pub collector: Option<PathBuf>,
    /// Use the profile at --profile even if the results root holds a different profile.toml.
    #[arg(long)]
    pub force_profile: bool,
}

/// What happened to one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    AlreadyDone,
    Incomplete,
    Failed,
    Interrupted,
}

struct Ctx {
    root: PathBuf,
    repo: PathBuf,
    profile: Profile,
    env: Vec<(String, String)>,
    collector: PathBuf,
    python: String,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    signals::install();
    let repo = resolve_repo(args.repo.as_deref())?;
    let loaded = profile::load(&args.profile, &repo)?;
    let mut p = loaded.profile;
    if let Some(l) = args.launches {
        p.launches = l;
    }
    if let Some(c) = &args.configs {
        anyhow::ensure!(
            c.iter().any(|x| x == "plain"),
            "--configs must include plain (the baseline)"
        );
        p.configs = c.clone();
    }
    let root = args.out.clone();
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let prof_path = root.join("profile.toml");
    match std::fs::read_to_string(&prof_path) {
        Ok(old) if old != loaded.text && !args.force_profile => anyhow::bail!(
            "{} holds a different profile.toml than {}: resume with the same profile, use another --out, or pass --force-profile",
            root.display(),
            loaded.path.display()
        ),
        Ok(old) if old == loaded.text => {}
        _ => crate::fsutil::write_atomic(&prof_path, loaded.text.as_bytes())?,
    }
    let collector = match &args.collector {
        Some(c) => c.clone(),
        None => std::env::current_exe()?.with_file_name("ctax-collect"),
    };
    anyhow::ensure!(
        collector.exists(),
        "collector not found at {} (build with `cargo build --release`)",
        collector.display()
    );
    let env = launch_env(&p, &repo);
    let python = p
        .server
        .python
        .as_ref()
        .map(|s| profile::expand(s, &repo))
        .unwrap_or_else(|| shebang_python(&profile::expand(&p.server.vllm, &repo)));
    let ctx = Ctx {
        root: root.clone(),
        repo,
        profile: p,
        env,
        collector,
        python,
    };
    ensure_model(&ctx)?;
    let skip = |n: u8| args.skip_stage.contains(&n);
    let t_sweep = Instant::now();
    let mut worst = Outcome::Done;
    let mut note = |o: Outcome| {
        if rank(o) > rank(worst) {
            worst = o;
        }
    };

    // Stage 0.
    let pre_path = root.join("preflight/preflight_status.json");
    let existing: Option<PreflightStatus> = std::fs::read(&pre_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let status = if skip(0) {
        eprintln!("[ctax] stage 0 skipped");
        existing
    } else {
        eprintln!("[ctax] stage 0: pre-flight");
        let s = preflight::run(&root, &ctx.repo, &ctx.profile, &ctx.env, existing)?;
        if ctx.profile.server.step_timing && is_vllm(&ctx.profile) {
            stage0_plugin(&ctx, "install")?;
        }
        Some(s)
    };
    let included: Vec<String> = ctx
        .profile
        .configs
        .iter()
        .filter(|c| {
            status
                .as_ref()
                .and_then(|s| s.configs.get(*c))
                .is_none_or(|e| e.decision == Decision::Include)
        })
        .cloned()
        .collect();
    eprintln!("[ctax] included configs: {}", included.join(", "));
    if signals::interrupted() {
        return Ok(exit(Exit::Interrupted));
    }

    // Stage 1.
    let mut failed: BTreeSet<String> = BTreeSet::new();
    if !skip(1) {
        eprintln!("[ctax] stage 1: Phase A");
        let a = &ctx.profile.phase_a;
        let cells: Vec<PlannedCell> = a
            .rates
            .iter()
            .map(|&r| {
                planned(
                    &ctx,
                    Phase::A,
                    Cell {
                        rate: r,
                        input_len: a.shape.0,
                        output_len: a.shape.1,
                    },
                    &a.timing,
                )
            })
            .collect();
        for (config, launch) in order(&ctx.profile, &included, 1) {
            let o = launch_run(&ctx, &config, launch, "A", &cells)?;
            if o == Outcome::Failed {
                failed.insert(config.clone());
            }
            note(o);
            if o == Outcome::Interrupted {
                return Ok(exit(Exit::Interrupted));
            }
        }
    }

    // Stage 2.
    let refs = if skip(2) {
        std::fs::read(root.join("reference_rates.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    } else {
        eprintln!("[ctax] stage 2: reference rates");
        let r = stages::reference_rates(&root)?;
        for n in &r.notes {
            eprintln!("[ctax]   {n}");
        }
        Some(r)
    };

    // Stage 3.
    if !skip(3)
        && let Some(b) = &ctx.profile.phase_b
    {
        let rate = b.rate_override.or(refs.as_ref().and_then(|r| r.ref_safe));
        match rate {
            None => eprintln!(
                "[ctax] stage 3 skipped: ref_safe is undefined and no phase_b.rate_override is set"
            ),
            Some(rate) => {
                eprintln!(
                    "[ctax] stage 3: Phase B at {} req/s",
                    ctax_schema::fmt_rate(rate)
                );
                let ref_load = refs.as_ref().and_then(|r| r.ref_load);
                let configs: Vec<String> = included
                    .iter()
                    .filter(|c| !failed.contains(*c))
                    .cloned()
                    .collect();
                for (config, launch) in order(&ctx.profile, &configs, 3) {
                    let mut cells: Vec<PlannedCell> = b
                        .shapes
                        .iter()
                        .map(|&(i, o)| {
                            planned(
                                &ctx,
                                Phase::B,
                                Cell {
                                    rate,
                                    input_len: i,
                                    output_len: o,
                                },
                                &b.timing,
                            )
                        })
                        .collect();
                    if let (Some(bp), Some(rl)) = (&ctx.profile.phase_bp, ref_load)
                        && rl != rate
                        && bp.configs.contains(&config)
                    {
                        cells.extend(bp.shapes.iter().map(|&(i, o)| {
                            planned(
                                &ctx,
                                Phase::Bp,
                                Cell {
                                    rate: rl,
                                    input_len: i,
                                    output_len: o,
                                },
                                &bp.timing,
                            )
                        }));
                    }
                    let o = launch_run(&ctx, &config, launch, "B", &cells)?;
                    note(o);
                    if o == Outcome::Interrupted {
                        return Ok(exit(Exit::Interrupted));
                    }
                }
            }
        }
    }

    // Stage 4.
    if !skip(4) {
        eprintln!("[ctax] stage 4: plugin removal, analysis, report");
        if ctx.profile.server.step_timing && is_vllm(&ctx.profile) {
            stage0_plugin(&ctx, "remove")?;
        }
        let out = root.join("report");
        crate::pipeline::run(
            &root,
            &crate::analysis::AnalyzeOptions::default(),
            &crate::pipeline::Outputs {
                analysis_dir: Some(root.join("analysis")),
                report_dir: Some(out.clone()),
            },
        )?;
        eprintln!("[ctax] report: {}", out.join("index.html").display());
    }
    eprintln!(
        "[ctax] sweep finished in {:.1} min",
        t_sweep.elapsed().as_secs_f64() / 60.0
    );
    Ok(match worst {
        Outcome::Done | Outcome::AlreadyDone => ExitCode::SUCCESS,
        Outcome::Interrupted => exit(Exit::Interrupted),
        Outcome::Incomplete | Outcome::Failed => exit(Exit::Incomplete),
    })
}

/// `ctax run` exits with the collector's codes for the same outcomes.
fn exit(e: Exit) -> ExitCode {
    ExitCode::from(u8::try_from(e.code()).expect("exit codes fit in a byte"))
}

/// The `summary.json` key of a planned cell.
fn key(c: &PlannedCell) -> CellKey {
    CellKey::new(c.phase, c.cell.clone())
}

fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Done | Outcome::AlreadyDone => 0,
        Outcome::Incomplete => 1,
        Outcome::Failed => 2,
        Outcome::Interrupted => 3,
    }
}

fn is_vllm(p: &Profile) -> bool {
    p.server.kind == "vllm"
}

/// The checkout: `--repo`, else the current directory or an ancestor of the executable that
/// holds `launch/common.sh`.
fn resolve_repo(arg: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(r) = arg {
        return Ok(r.canonicalize()?);
    }
    let mut candidates = vec![std::env::current_dir()?];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().map(Path::to_path_buf));
    }
    candidates
        .into_iter()
        .find(|d| d.join("launch/common.sh").exists())
        .ok_or_else(|| anyhow::anyhow!("cannot find the checkout (launch/common.sh); pass --repo"))
}

/// The interpreter named in a script's `#!` line (python scripts installed by pip), else python3.
fn shebang_python(vllm: &str) -> String {
    std::fs::read_to_string(vllm)
        .ok()
        .and_then(|t| {
            t.lines()
                .next()
                .and_then(|l| l.strip_prefix("#!"))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| s.contains("python") && !s.contains(' '))
        .unwrap_or_else(|| "python3".into())
}

/// Environment for launch and verify scripts: the contract's CTAX_* plus the profile's env.
fn launch_env(p: &Profile, repo: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("CTAX_VLLM".into(), profile::expand(&p.server.vllm, repo)),
        ("CTAX_MODEL".into(), profile::expand(&p.server.model, repo)),
        ("CTAX_SERVED_NAME".into(), p.server.served_name.clone()),
        ("CTAX_DEVICE".into(), p.server.device.clone()),
        ("CTAX_HOST".into(), p.server.host.clone()),
        ("CTAX_PORT".into(), p.server.port.to_string()),
    ];
    for (k, v) in &p.server.env {
        env.push((k.clone(), profile::expand(v, repo)));
    }
    env
}

fn ensure_model(ctx: &Ctx) -> anyhow::Result<()> {
    let model = profile::expand(&ctx.profile.server.model, &ctx.repo);
    if !is_vllm(&ctx.profile) || Path::new(&model).join("config.json").exists() {
        return Ok(());
    }
    let Some(make) = &ctx.profile.server.make_model else {
        anyhow::bail!(
            "model directory {model} has no config.json and the profile has no server.make_model"
        );
    };
    let cmd = profile::expand(make, &ctx.repo)
        .replace("{model}", &model)
        .replace("{python}", &ctx.python);
    eprintln!("[ctax] writing the model directory: {cmd}");
    let st = Command::new("bash")
        .arg("-c")
        .arg(&cmd)
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .status()?;
    anyhow::ensure!(st.success(), "`{cmd}` failed ({st})");
    Ok(())
}

fn stage0_plugin(ctx: &Ctx, action: &str) -> anyhow::Result<()> {
    let mut cmd = Command::new("bash");
    cmd.arg(ctx.repo.join("patches/apply.sh"))
        .arg(action)
        .arg(&ctx.python);
    if let Some(t) = &ctx.profile.server.plugin_target {
        cmd.arg("--target").arg(profile::expand(t, &ctx.repo));
    }
    let st = cmd.envs(ctx.env.iter().map(|(k, v)| (k, v))).status()?;
    anyhow::ensure!(st.success(), "patches/apply.sh {action} failed ({st})");
    Ok(())
}

fn planned(ctx: &Ctx, phase: Phase, cell: Cell, t: &Timing) -> PlannedCell {
    let seed = ctx.profile.seed
        ^ ((phase as u64) << 48)
        ^ (cell.rate.to_bits().rotate_left(17))
        ^ (u64::from(cell.input_len) << 20)
        ^ u64::from(cell.output_len);
    PlannedCell {
        phase,
        cell,
        arrival: ctx.profile.collector.arrival,
        duration_s: t.duration_s,
        warmup_s: t.warmup_s,
        min_completed: t.min_completed,
        max_cell_s: t.max_cell_s,
        inflight_cap: ctx.profile.collector.inflight_cap,
        seed,
    }
}

/// (config, launch) in run order: for each launch index, a seeded permutation of the configs,
/// so launches of one config are interleaved with the others' (drift spreads over configs).
pub fn order(p: &Profile, configs: &[String], stage: u64) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for k in 0..p.launches {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.seed ^ (stage << 40) ^ u64::from(k));
        let mut v = configs.to_vec();
        for i in (1..v.len()).rev() {
            let j = rng.random_range(0..=i);
            v.swap(i, j);
        }
        out.extend(v.into_iter().map(|c| (c, k)));
    }
    out
}

/// An existing run directory of (config, launch, stage) in `root`.
fn find_run(root: &Path, config: &str, launch: u32, stage: &str) -> Option<(PathBuf, RunConfig)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter().find_map(|d| {
        let rc: RunConfig =
            serde_json::from_slice(&std::fs::read(d.join("config.json")).ok()?).ok()?;
        let st = rc
            .extra
            .get("stage")
            .and_then(|s| s.as_str())
            .unwrap_or_default()
            .to_owned();
        (rc.config == config && rc.launch == launch && st == stage).then_some((d, rc))
    })
}

fn read_summary(dir: &Path) -> RunSummary {
    std::fs::read(dir.join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// One server launch of `config` running `cells` (those not already complete).
fn launch_run(
    ctx: &Ctx,
    config: &str,
    launch: u32,
    stage: &str,
    cells: &[PlannedCell],
) -> anyhow::Result<Outcome> {
    let started = unix_ms();
    let (dir, todo) = match find_run(&ctx.root, config, launch, stage) {
        Some((dir, _)) => {
            let summary = read_summary(&dir);
            let todo: Vec<PlannedCell> = cells
                .iter()
                .filter(|c| !summary.cell(&key(c)).is_some_and(|h| h.complete))
                .cloned()
                .collect();
            if todo.is_empty() {
                eprintln!(
                    "[ctax] {config} l{launch} stage {stage}: all {} cells complete, skipped",
                    cells.len()
                );
                return Ok(Outcome::AlreadyDone);
            }
            supersede(&dir, &todo)?;
            eprintln!(
                "[ctax] {config} l{launch} stage {stage}: resuming {} of {} cells in {}",
                todo.len(),
                cells.len(),
                dir.display()
            );
            (dir, todo)
        }
        None => {
            let dir = ctx
                .root
                .join(format!("{}_{config}_l{launch}", manifest::stamp(started)));
            (dir, cells.to_vec())
        }
    };
    std::fs::create_dir_all(&dir)?;
    let rc = RunConfig {
        schema_version: SCHEMA_VERSION,
        config: config.into(),
        launch,
        run_dir: dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        phases: cells
            .iter()
            .map(|c| c.phase)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        cells: cells.to_vec(),
        model: profile::expand(&ctx.profile.server.model, &ctx.repo),
        served_model_name: ctx.profile.server.served_name.clone(),
        port: ctx.profile.server.port,
        extra: serde_json::json!({
            "stage": stage,
            "profile": ctx.profile.name,
            "device": ctx.profile.server.device,
            "server_env": ctx.profile.server.env,
            "model_config": std::fs::read(Path::new(&profile::expand(&ctx.profile.server.model, &ctx.repo)).join("config.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok()),
        }),
        simulated: !is_vllm(&ctx.profile),
    };
    crate::fsutil::write_json_atomic(&dir.join("config.json"), &rc)?;
    let _ = Command::new("bash")
        .arg(ctx.repo.join("tools/capture_env.sh"))
        .arg(dir.join("env.txt"))
        .arg(&ctx.python)
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();

    let spec = server_spec(ctx, config, &dir);
    let t0 = Instant::now();
    eprintln!(
        "[ctax] {config} l{launch} stage {stage}: launching ({} cells) -> {}",
        todo.len(),
        dir.display()
    );
    let mut row = ManifestRow {
        run_dir: Some(rc.run_dir.clone()),
        ..manifest::row(
            &format!("{} Phase {stage}", if stage == "A" { 1 } else { 3 }),
            config,
            launch,
            started,
        )
    };
    let env_map = std::fs::read_to_string(dir.join("env.txt"))
        .map(|t| crate::ingest::env::parse_env_txt(&t))
        .unwrap_or_default();
    (
        row.vllm_version,
        row.vllm_git_sha,
        row.connector_versions,
        row.gpu,
    ) = manifest::env_facts(&env_map);

    let mut srv = match Server::launch(&spec) {
        Ok(s) => s,
        Err(e @ server::LaunchError::PortBusy(..)) => return Err(e.into()),
        Err(e) => return finish_failed(ctx, row, t0, &e.to_string()),
    };
    let ready = match srv.wait_ready(&spec) {
        Ok(s) => s,
        Err(server::LaunchError::Interrupted) => {
            srv.stop(&spec);
            return finish(
                ctx,
                row,
                t0,
                RowStatus::Interrupted,
                Some("Ctrl-C during startup".into()),
                Outcome::Interrupted,
            );
        }
        Err(e) => {
            srv.stop(&spec);
            return finish_failed(ctx, row, t0, &e.to_string());
        }
    };
    row.launch_command = std::fs::read_to_string(dir.join("launch.sh"))
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| l.contains("serve") || l.starts_with("exec"))
                .map(|l| l.trim().to_owned())
        });
    eprintln!("[ctax] {config} l{launch}: ready after {ready:.0} s");

    let plan_dir = ctx.root.join(".ctax");
    std::fs::create_dir_all(&plan_dir)?;
    let plan = plan_dir.join(format!("plan_{}.json", rc.run_dir));
    crate::fsutil::write_json_atomic(&plan, &serde_json::json!({ "cells": todo }))?;
    let code = run_collector(ctx, config, launch, &plan, &dir)?;
    let stop_s = srv.stop(&spec);
    eprintln!("[ctax] {config} l{launch}: collector exit {code}, server stopped in {stop_s:.1} s");

    let summary = read_summary(&dir);
    let planned_health: Vec<_> = todo
        .iter()
        .filter_map(|c| summary.cell(&key(c)).cloned())
        .collect();
    if !steps::raw_files(&dir).is_empty() {
        let rep = steps::split(&dir, &planned_health)?;
        row.step_timing_active = Some(rep.records > 0);
        eprintln!(
            "[ctax] {config} l{launch}: {} step records ({} worker records merged, {} unmatched)",
            rep.records, rep.worker_merged, rep.worker_unmatched
        );
    } else if ctx.profile.server.step_timing && is_vllm(&ctx.profile) {
        row.step_timing_active = Some(false);
    }
    if let Err(e) = stages::write_run_stats(&dir) {
        eprintln!(
            "[ctax] warning: per-cell statistics for {}: {e:#}",
            dir.display()
        );
    }
    let all_complete = todo
        .iter()
        .all(|c| summary.cell(&key(c)).is_some_and(|h| h.complete));
    let (status, reason, outcome) = match Exit::from_code(code) {
        Some(Exit::Interrupted) => (
            RowStatus::Interrupted,
            Some("Ctrl-C during the cells".to_owned()),
            Outcome::Interrupted,
        ),
        Some(Exit::ServerDead) => (
            RowStatus::Failed,
            Some(format!(
                "server died during the cells: {}",
                server::log_tail(&spec.run_dir.join("vllm_stderr.log"), 5)
            )),
            Outcome::Failed,
        ),
        Some(Exit::Ok) if all_complete => (RowStatus::Ok, None, Outcome::Done),
        _ => (
            RowStatus::Incomplete,
            Some(format!(
                "collector exit {code}; incomplete cells are rerun on resume"
            )),
            Outcome::Incomplete,
        ),
    };
    finish(ctx, row, t0, status, reason, outcome)
}

fn finish_failed(
    ctx: &Ctx,
    row: ManifestRow,
    t0: Instant,
    reason: &str,
) -> anyhow::Result<Outcome> {
    eprintln!(
        "[ctax] {} l{}: launch FAILED, continuing with the next config:\n{reason}",
        row.config, row.launch
    );
    finish(
        ctx,
        row,
        t0,
        RowStatus::Failed,
        Some(reason.lines().take(12).collect::<Vec<_>>().join(" | ")),
        Outcome::Failed,
    )
}

fn finish(
    ctx: &Ctx,
    mut row: ManifestRow,
    t0: Instant,
    status: RowStatus,
    reason: Option<String>,
    o: Outcome,
) -> anyhow::Result<Outcome> {
    row.status = status;
    row.reason = reason;
    row.duration_s = t0.elapsed().as_secs_f64();
    manifest::append(&ctx.root, &row)?;
    Ok(o)
}

fn server_spec(ctx: &Ctx, config: &str, dir: &Path) -> Spec {
    let s = &ctx.profile.server;
    let kind = if is_vllm(&ctx.profile) {
        Kind::Vllm
    } else {
        let mut args = vec!["--model-name".to_owned(), s.served_name.clone()];
        if s.step_timing {
            args.push("--step-log".into());
            args.push(
                dir.join(format!("{}.sim.jsonl", steps::RAW_PREFIX))
                    .display()
                    .to_string(),
            );
        }
        args.extend(s.sim_args.get(config).cloned().unwrap_or_default());
        Kind::Sim {
            bin: ctx.collector.with_file_name("ctax-sim"),
            args,
        }
    };
    let mut env = ctx.env.clone();
    if s.step_timing {
        env.push((
            "CTAX_STEP_LOG".into(),
            dir.join(steps::RAW_PREFIX).display().to_string(),
        ));
    }
    Spec {
        kind,
        repo: ctx.repo.clone(),
        config: config.into(),
        run_dir: dir.to_path_buf(),
        env,
        host: s.host.clone(),
        port: s.port,
        startup_timeout: Duration::from_secs_f64(s.startup_timeout_s),
        stop_grace: Duration::from_secs_f64(s.stop_grace_s),
        gpu_release_wait: Duration::from_secs_f64(s.gpu_release_wait_s),
    }
}

/// Runs ctax-collect to completion (it handles Ctrl-C itself: we forward SIGINT if the
/// interrupt did not come from the terminal) and returns its exit code.
fn run_collector(
    ctx: &Ctx,
    config: &str,
    launch: u32,
    plan: &Path,
    dir: &Path,
) -> anyhow::Result<i32> {
    let c = &ctx.profile.collector;
    let s = &ctx.profile.server;
    let mut cmd = Command::new(&ctx.collector);
    cmd.args([
        "--url",
        &format!("http://{}:{}", s.host, s.port),
        "--model",
        &s.served_name,
        "--config",
        config,
    ])
    .args(["--launch", &launch.to_string()])
    .arg("--plan")
    .arg(plan)
    .arg("--out")
    .arg(dir)
    .args([
        "--vocab-lo",
        &c.vocab_lo.to_string(),
        "--vocab-hi",
        &c.vocab_hi.to_string(),
    ])
    .args(["--request-timeout-s", &c.request_timeout_s.to_string()])
    .args(&c.extra_args)
    .stdin(Stdio::null());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", ctx.collector.display()))?;
    let mut forwarded = false;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st.code().unwrap_or(Exit::Interrupted.code()));
        }
        if signals::interrupted() && !forwarded {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Moves the raw files of cells about to be rerun into `superseded/<stamp>/` (kept, not ingested).
fn supersede(dir: &Path, todo: &[PlannedCell]) -> anyhow::Result<()> {
    let dst = dir.join("superseded").join(manifest::stamp(unix_ms()));
    for c in todo {
        for kind in ctax_schema::FileKind::ALL {
            for ext in ["", ".zst"] {
                let name = format!(
                    "{}{ext}",
                    ctax_schema::file_name(kind, c.phase, &c.cell.name())
                );
                let src = dir.join(&name);
                if src.exists() {
                    std::fs::create_dir_all(&dst)?;
                    std::fs::rename(&src, dst.join(&name))?;
                }
            }
        }
    }
    // Forget the superseded cells' collector summaries so the new ones replace them.
    let mut summary = read_summary(dir);
    for c in todo {
        let k = key(c).to_string();
        summary.cells.remove(&k);
        summary.stats.remove(&k);
    }
    if dir.join("summary.json").exists() {
        crate::fsutil::write_json_atomic(&dir.join("summary.json"), &summary)?;
    }
    Ok(())
}
