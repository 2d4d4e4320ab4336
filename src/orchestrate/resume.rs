//! Resume: the results root is the state. A launch is identified by (config, launch index,
//! stage) in its run directory's `config.json`; its cells are done when `summary.json` says
//! they are complete, or that `max_cell_s` stopped them (an overload, which a rerun would
//! reproduce at the same cost; `--rerun-capped` reruns them too). A launch with cells left is
//! relaunched in the same run directory and reruns only those cells; their old files move to
//! `superseded/<stamp>/` (kept, not ingested). Cells left are those of the sweep's plan that the
//! launch's own `config.json` planned: a plan that grew since (rates or shapes added to the
//! profile) never extends a launch that exists; new launches run the new cells.

use std::path::{Path, PathBuf};

use ctax_schema::{PlannedCell, RunConfig, RunSummary};

use super::manifest;
use super::server::unix_ms;

/// What is left of one launch.
#[derive(Debug)]
pub(crate) enum Todo {
    /// Every planned cell is complete, or capped and kept (how many were capped, of how many of
    /// the sweep's cells the launch's own plan holds).
    Done { capped: usize, of: usize },
    /// The launch exists and its own plan holds none of the sweep's cells (a plan that grew
    /// since it ran, or `--phase-a-rates`): nothing to run in it.
    Outside,
    /// A new run directory (nothing ran yet).
    Fresh(Vec<PlannedCell>),
    /// Rerun these cells in an existing run directory.
    Resume(PathBuf, Vec<PlannedCell>),
}

/// Every run directory of `root` (a directory with a readable `config.json`), sorted by name.
pub(crate) fn runs(root: &Path) -> Vec<(PathBuf, RunConfig)> {
    run_dir_candidates(root)
        .into_iter()
        .filter_map(|d| read_config(&d).map(|rc| (d, rc)))
        .collect()
}

/// The directories of `root` that may be run directories, sorted: every visible one (hidden
/// directories are never runs: an interrupted `ctax rejoin` leaves `.rejoin-*`). [`runs`] keeps
/// those whose `config.json` parses.
pub(crate) fn run_dir_candidates(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    dirs.sort();
    dirs
}

/// The run directory's `config.json`, if readable.
pub(crate) fn read_config(dir: &Path) -> Option<RunConfig> {
    serde_json::from_slice(&std::fs::read(dir.join("config.json")).ok()?).ok()
}

/// The run directory of (config, launch, stage) among `runs` (the first by name), if any.
fn find_run<'a>(
    runs: &'a [(PathBuf, RunConfig)],
    config: &str,
    launch: u32,
    stage: &str,
) -> Option<&'a (PathBuf, RunConfig)> {
    runs.iter()
        .find(|(_, rc)| rc.config == config && rc.launch == launch && run_stage(rc) == stage)
}

/// The stage (`A` or `B`) a run directory was made for.
pub(crate) fn run_stage(rc: &RunConfig) -> String {
    rc.extra
        .get("stage")
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn read_summary(dir: &Path) -> RunSummary {
    std::fs::read(dir.join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The `summary.json` key of a planned cell (`<phase>/<cell>`, [`ctax_schema::CellKey`]).
pub(crate) fn key(c: &PlannedCell) -> String {
    ctax_schema::CellKey::new(c.phase, c.cell.clone()).to_string()
}

/// What remains of (config, launch, stage) with `cells` planned. A cell that `max_cell_s`
/// stopped is kept unless `rerun_capped`.
pub(crate) fn todo(
    root: &Path,
    config: &str,
    launch: u32,
    stage: &str,
    cells: &[PlannedCell],
    rerun_capped: bool,
) -> Todo {
    todo_in(&runs(root), config, launch, stage, cells, rerun_capped)
}

/// [`todo`] over run directories already listed with [`runs`] (one listing for many launches).
pub(crate) fn todo_in(
    runs: &[(PathBuf, RunConfig)],
    config: &str,
    launch: u32,
    stage: &str,
    cells: &[PlannedCell],
    rerun_capped: bool,
) -> Todo {
    let Some((dir, rc)) = find_run(runs, config, launch, stage) else {
        return Todo::Fresh(cells.to_vec());
    };
    let dir = dir.clone();
    // A launch keeps the plan it started with: cells a later plan adds (a rate added to the
    // profile, `--phase-a-rates`) are not run in it, so its cells stay where they ran (one
    // server, its own order: what is left runs in the order its config.json lists, whatever
    // order flags the resuming sweep has). A config.json without planned cells (none is
    // known) keeps the sweep's plan.
    let own: Vec<String> = rc.cells.iter().map(key).collect();
    let mut cells: Vec<PlannedCell> = cells
        .iter()
        .filter(|c| own.is_empty() || own.contains(&key(c)))
        .cloned()
        .collect();
    cells.sort_by_cached_key(|c| {
        let k = key(c);
        own.iter().position(|o| *o == k)
    });
    if cells.is_empty() {
        return Todo::Outside;
    }
    let cells = &cells[..];
    let summary = read_summary(&dir);
    let health = |c: &PlannedCell| summary.cells.get(&key(c));
    let kept =
        |c: &PlannedCell| health(c).is_some_and(|h| h.complete || (h.capped() && !rerun_capped));
    let left: Vec<PlannedCell> = cells.iter().filter(|c| !kept(c)).cloned().collect();
    if left.is_empty() {
        let capped = cells
            .iter()
            .filter(|c| health(c).is_some_and(|h| !h.complete))
            .count();
        Todo::Done {
            capped,
            of: cells.len(),
        }
    } else {
        Todo::Resume(dir, left)
    }
}

/// Moves the raw files of cells about to be rerun into `superseded/<stamp>/` (kept, not
/// ingested) and forgets their summary entries so the new ones replace them. Per-cell step files
/// removed by `ctax archive --slim-steps` are written back first ([`super::steps::materialize`]).
pub(crate) fn supersede(dir: &Path, todo: &[PlannedCell]) -> anyhow::Result<()> {
    // A slimmed archive's cells get their step files back first: the old attempts' steps move
    // to superseded/ with the rest, and the kept cells' cut never mixes in the new raw log.
    if let Err(e) = super::steps::materialize(dir) {
        eprintln!(
            "[ctax] warning: {e:#}: the slimmed cells' step files were not written back (their \
             step records stay in the raw logs; ingest will say it cannot cut them)"
        );
    }
    let sealed = super::killed::seal(dir, todo)?;
    if sealed.acted() {
        eprintln!(
            "[ctax] {}: an earlier attempt stopped before its end: {}; before resuming",
            dir.display(),
            sealed
        );
    }
    let dst = dir.join("superseded").join(manifest::stamp(unix_ms()));
    for c in todo {
        for kind in ctax_schema::FileKind::ALL {
            let plain = ctax_schema::file_name(kind, c.phase, &c.cell.name());
            for name in ctax_schema::stored_forms(&plain) {
                let src = dir.join(&name);
                if src.exists() {
                    std::fs::create_dir_all(&dst)?;
                    std::fs::rename(&src, dst.join(&name))?;
                }
            }
        }
    }
    let mut summary = read_summary(dir);
    for c in todo {
        summary.cells.remove(&key(c));
        summary.stats.remove(&key(c));
        summary.placement.remove(&key(c));
    }
    if dir.join("summary.json").exists() {
        crate::fsutil::write_json_atomic(&dir.join("summary.json"), &summary)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A launch resumed by a sweep whose order flags differ (`--phase-bp-first`,
    /// `--phase-a-order`, `--phase-b-first`) runs what it owes in the order its own config.json
    /// lists, and never a cell its plan lacks; a complete cell is not rerun.
    #[test]
    fn a_resumed_launch_keeps_its_own_order() {
        use super::super::steps::tests::planned;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("20261205-000000_plain_l1");
        std::fs::create_dir_all(&dir).unwrap();
        let own = ["r2_i8_o8", "r4_i8_o8", "r6_i8_o8"];
        let rc: RunConfig = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "config": "plain", "launch": 1, "run_dir": "d",
            "phases": ["A"], "cells": own.iter().map(|c| planned(c)).collect::<Vec<_>>(),
            "model": "m", "served_model_name": "m", "port": 1, "extra": {"stage": "A"}
        }))
        .unwrap();
        assert_eq!(run_stage(&rc), "A");
        let runs = vec![(dir.clone(), rc)];
        let keys = |t: Todo| -> Vec<String> {
            match t {
                Todo::Resume(p, c) => {
                    assert_eq!(p, dir);
                    c.iter().map(key).collect()
                }
                other => panic!("a resume: {other:?}"),
            }
        };
        // The sweep's order reversed, plus a cell the launch's plan lacks.
        let sweep: Vec<PlannedCell> = ["r8_i8_o8", "r6_i8_o8", "r4_i8_o8", "r2_i8_o8"]
            .iter()
            .map(|c| planned(c))
            .collect();
        let t = todo_in(&runs, "plain", 1, "A", &sweep, false);
        assert_eq!(keys(t), ["A/r2_i8_o8", "A/r4_i8_o8", "A/r6_i8_o8"]);
        // r2 complete: what is left, still in the launch's order.
        let mut summary = RunSummary::default();
        let mut h = super::super::steps::tests::health(ctax_schema::Phase::A, "r2_i8_o8", 0, 1);
        h.complete = true;
        summary.cells.insert("A/r2_i8_o8".into(), h);
        crate::fsutil::write_json_atomic(&dir.join("summary.json"), &summary).unwrap();
        let t = todo_in(&runs, "plain", 1, "A", &sweep, false);
        assert_eq!(keys(t), ["A/r4_i8_o8", "A/r6_i8_o8"]);
    }

    /// A rerun cell's raw files go to `superseded/<stamp>/` in every stored form (request
    /// columns too: left in place, ingest would read the old attempt's records beside the new
    /// ones); the other cell's stay.
    #[test]
    fn a_rerun_cell_s_files_move_aside_in_every_stored_form() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let redo = [
            "requests_A_r8_i8_o8.jsonl.cols",
            "metrics_A_r8_i8_o8.jsonl.zst",
            "engine_step_A_r8_i8_o8.jsonl",
        ];
        let keep = [
            "requests_A_r4_i8_o8.jsonl.cols",
            "metrics_A_r4_i8_o8.jsonl.zst",
        ];
        for f in redo.iter().chain(&keep) {
            std::fs::write(dir.join(f), f.as_bytes()).unwrap();
        }
        supersede(dir, &[super::super::steps::tests::planned("r8_i8_o8")]).unwrap();
        let stamps: Vec<_> = std::fs::read_dir(dir.join("superseded"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        let [aside] = &stamps[..] else {
            panic!("one superseded/<stamp>/: {stamps:?}")
        };
        for f in redo {
            assert!(!dir.join(f).exists(), "{f} left in place");
            assert_eq!(std::fs::read(aside.join(f)).unwrap(), f.as_bytes(), "{f}");
        }
        for f in keep {
            assert!(dir.join(f).is_file(), "{f} moved");
        }
    }
}
