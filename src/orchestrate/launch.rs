//! One server launch on one slot: `config.json` and `env.txt`, the server in its own process
//! group (pinned to the slot's CPUs, on the slot's GPU and ports), `/v1/models` 200, the
//! collector (pinned to the same CPUs), the server stopped, the step logs cut per cell, quick
//! per-cell statistics, where each cell ran, and a manifest row; on a GPU, nvidia-smi samples
//! the GPU beside it all (`gpu_telemetry`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use ctax_schema::{Exit, ManifestRow, PlannedCell, RowStatus, RunConfig, SCHEMA_VERSION};

use super::plan::Unit;
use super::resume::{self, Todo};
use super::server::{self, Kind, Server, Spec, unix_ms};
use super::slots::Slot;
use super::{Ctx, Outcome, gpu_telemetry, is_vllm, manifest, profile, signals, stages, steps};

/// Runs `unit` (the cells of `cells` not already complete) on `slot`.
pub(crate) fn run(
    ctx: &Ctx,
    slot: &Slot,
    unit: &Unit,
    stage: &str,
    cells: &[PlannedCell],
) -> anyhow::Result<Outcome> {
    let (config, launch) = (unit.config.as_str(), unit.launch);
    let started = unix_ms();
    // The run directory it resumes (None: a fresh one) and the cells left.
    let (resumed, todo) = match resume::todo(
        &ctx.root,
        config,
        launch,
        stage,
        cells,
        ctx.rerun_capped,
    ) {
        Todo::Done { capped: 0, of } => {
            eprintln!("[ctax] {config} l{launch} stage {stage}: all {of} cells complete, skipped");
            return Ok(Outcome::AlreadyDone);
        }
        Todo::Outside => {
            eprintln!(
                "[ctax] {config} l{launch} stage {stage}: skipped: its own plan holds none of this \
                 sweep's {} cells (a launch that exists is never extended: raise --launches to \
                 run them in new launches)",
                cells.len()
            );
            return Ok(Outcome::AlreadyDone);
        }
        Todo::Done { capped, of } => {
            eprintln!(
                "[ctax] {config} l{launch} stage {stage}: skipped: {} of {of} cells complete, {capped} \
                 stopped by max_cell_s (an overload; kept: a rerun would reproduce it, \
                 --rerun-capped measures them again)",
                of - capped,
            );
            return Ok(Outcome::AlreadyDone);
        }
        Todo::Resume(dir, todo) => (Some(dir), todo),
        Todo::Fresh(todo) => (None, todo),
    };
    // Weighed before anything is written or moved.
    if super::end_by::hold_back(ctx, &format!("{config} l{launch} stage {stage}"), &todo) {
        return Ok(Outcome::NotStarted);
    }
    let dir = match resumed {
        Some(dir) => {
            resume::supersede(&dir, &todo)?;
            eprintln!(
                "[ctax] {config} l{launch} stage {stage}: resuming {} of {} cells in {} on {}",
                todo.len(),
                cells.len(),
                dir.display(),
                slot.label()
            );
            dir
        }
        None => ctx
            .root
            .join(format!("{}_{config}_l{launch}", manifest::stamp(started))),
    };
    // The server about to start is cold whatever cell comes first: that cell's warm-up covers
    // the profile's launch warm-up too (a rerun cell after a resume included).
    let mut todo = todo;
    if let Some(first) = todo.first_mut() {
        first.warmup_s = first.warmup_s.max(ctx.profile.launch_warmup_s);
    }
    std::fs::create_dir_all(&dir)?;
    // config.json keeps the launch's own plan: a resume writes the cells the launch started
    // with, not the sweep's (wider or narrower) plan, so later sweeps resume exactly what it
    // still owes (resume::todo_in reads it).
    let plan: Vec<PlannedCell> = resume::read_config(&dir)
        .map(|rc| rc.cells)
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| cells.to_vec());
    let placement = slot.placement(unit.calibration);
    let rc = RunConfig {
        schema_version: SCHEMA_VERSION,
        config: config.into(),
        launch,
        run_dir: dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        phases: plan
            .iter()
            .map(|c| c.phase)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        cells: plan,
        model: profile::expand(&ctx.profile.server.model, &ctx.repo),
        served_model_name: ctx.profile.server.served_name.clone(),
        port: slot.api_port(),
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
        placement: Some(placement.clone()),
    };
    crate::fsutil::write_json_atomic(&dir.join("config.json"), &rc)?;
    let env = ctx.slot_env(slot);
    let _ = Command::new("bash")
        .arg(ctx.repo.join("tools/capture_env.sh"))
        .arg(dir.join("env.txt"))
        .arg(&ctx.python)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();

    let spec = server_spec(ctx, slot, config, &dir);
    // The GPU's clocks, power and temperature beside the launch (a GPU slot only), until the
    // server has stopped: dropped below, or with this function on an early return.
    let telemetry = slot.gpu_uuid.as_deref().and_then(|gpu| {
        gpu_telemetry::start(
            Path::new("nvidia-smi"),
            &dir,
            gpu,
            &manifest::stamp(started),
            &format!("{config} l{launch}"),
        )
    });
    let t0 = Instant::now();
    eprintln!(
        "[ctax] {config} l{launch} stage {stage}: launching ({} cells) on {} -> {}",
        todo.len(),
        slot.label(),
        dir.display()
    );
    let mut row = ManifestRow {
        // An anchor says why it ran ([`finish`] keeps it beside the outcome's reason).
        reason: unit.anchor.clone(),
        ..manifest::launch_row(
            &dir,
            stage,
            config,
            launch,
            started,
            Some(placement.clone()),
        )
    };

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
    let plan = plan_dir.join(plan_file(&rc.run_dir));
    crate::fsutil::write_json_atomic(&plan, &serde_json::json!({ "cells": todo }))?;
    let code = run_collector(ctx, slot, config, launch, &plan, &dir)?;
    let stop_s = srv.stop(&spec);
    drop(telemetry);
    eprintln!("[ctax] {config} l{launch}: collector exit {code}, server stopped in {stop_s:.1} s");

    let mut summary = resume::read_summary(&dir);
    let planned_health: Vec<_> = todo
        .iter()
        .filter_map(|c| summary.cells.get(&resume::key(c)).cloned())
        .collect();
    // Where each of this launch's cells was measured.
    for c in &todo {
        if summary.cells.contains_key(&resume::key(c)) {
            summary.placement.insert(resume::key(c), placement.clone());
        }
    }
    if dir.join("summary.json").exists() {
        crate::fsutil::write_json_atomic(&dir.join("summary.json"), &summary)?;
    }
    if !steps::raw_files(&dir).is_empty() {
        let rep = steps::split(&dir, &planned_health)?;
        row.step_timing_active = Some(rep.records > 0);
        eprintln!(
            "[ctax] {config} l{launch}: {} step records ({} worker records merged, {} unmatched)",
            rep.records, rep.worker_merged, rep.worker_unmatched
        );
        for w in &rep.warnings {
            eprintln!("[ctax] warning: {config} l{launch}: step log: {w}");
        }
    } else if ctx.profile.server.step_timing && is_vllm(&ctx.profile) {
        row.step_timing_active = Some(false);
    }
    if let Err(e) = stages::write_run_stats(&dir) {
        eprintln!(
            "[ctax] warning: per-cell statistics for {}: {e:#}",
            dir.display()
        );
    }
    let all_complete = todo.iter().all(|c| {
        summary
            .cells
            .get(&resume::key(c))
            .is_some_and(|h| h.complete)
    });
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
    row.reason = match (reason, row.reason.take()) {
        (Some(r), Some(note)) => Some(format!("{r} ({note})")),
        (r, note) => r.or(note),
    };
    row.duration_s = t0.elapsed().as_secs_f64();
    manifest::append(&ctx.root, &row)?;
    Ok(o)
}

fn server_spec(ctx: &Ctx, slot: &Slot, config: &str, dir: &Path) -> Spec {
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
    let mut env = ctx.slot_env(slot);
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
        port: slot.api_port(),
        cpus: Some(slot.cpus.clone()),
        gpu: slot.gpu_uuid.clone().or_else(|| slot.cuda.clone()),
        startup_timeout: Duration::from_secs_f64(s.startup_timeout_s),
        stop_grace: Duration::from_secs_f64(s.stop_grace_s),
        gpu_release_wait: Duration::from_secs_f64(s.gpu_release_wait_s),
    }
}

/// Runs ctax-collect (pinned to the slot's CPUs) to completion and returns its exit code. It
/// handles Ctrl-C itself; on our interrupt flag we forward SIGINT once.
fn run_collector(
    ctx: &Ctx,
    slot: &Slot,
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
        &format!("http://{}:{}", s.host, slot.api_port()),
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
    super::slots::pin_on_exec(&mut cmd, super::slots::cpu_set(&slot.cpus));
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

/// The name, in the root's `.ctax/`, of the plan a launch attempt in `run_dir` hands the
/// collector (the cells it runs).
pub(crate) fn plan_file(run_dir: &str) -> String {
    format!("plan_{run_dir}.json")
}

/// The run directory a plan's file name ([`plan_file`]) belongs to.
pub(crate) fn plan_run_dir(file: &str) -> Option<&str> {
    file.strip_prefix("plan_")?.strip_suffix(".json")
}
