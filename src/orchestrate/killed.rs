//! A launch killed hard (SIGKILL, an out-of-memory kill, a GPU machine given back mid-launch)
//! never reaches its end: no manifest row, no per-cell placement in `summary.json` (its cells
//! fall back to `config.json`'s, which a resume rewrites), its raw step logs neither cut into
//! per-cell files nor compressed. [`seal`] does that part of the end for the cells it kept,
//! before a resume (perhaps on another machine, whose boot id and CLOCK_MONOTONIC differ) and
//! for `ctax archive --finish-killed`, which also writes the missing manifest row
//! ([`finish_root`]). Cells the collector never finished (no `summary.json` entry) stay as they
//! are: ingest reports and excludes them, a resume reruns them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ctax_schema::{CellHealth, ManifestRow, PlannedCell, RowStatus, RunConfig};

use super::{manifest, resume, steps};

/// What [`seal`] did in one run directory.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Sealed {
    /// Kept cells given the run's placement.
    pub placed: usize,
    /// Kept cells given their per-cell step file, and the step records read to cut them.
    pub step_files: usize,
    pub step_records: usize,
    /// Plain raw step logs compressed.
    pub logs_compressed: usize,
}

impl Sealed {
    pub fn acted(&self) -> bool {
        self.placed + self.step_files + self.logs_compressed > 0
    }
}

impl std::fmt::Display for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} kept cell(s) given the launch's placement, {} their step files ({} step records \
             read), {} raw step log(s) compressed",
            self.placed, self.step_files, self.step_records, self.logs_compressed
        )
    }
}

/// In the run directory `dir`, for each kept cell (in `summary.json`, not in `rerun`): gives it
/// the run's `config.json` placement where it has none (the one it was measured with), and its
/// per-cell step file where it has none, cut from the raw step logs there now
/// ([`steps::freeze_cells`]); then compresses the raw step logs still plain. A resumed launch's
/// log then never enters a kept cell's cut, and its own cut reads only its own log. A launch
/// that ended normally (or on Ctrl-C) did all of this already: nothing changes then.
pub(crate) fn seal(dir: &Path, rerun: &[PlannedCell]) -> anyhow::Result<Sealed> {
    let mut out = Sealed::default();
    let mut summary = resume::read_summary(dir);
    let rerun: BTreeSet<String> = rerun.iter().map(resume::key).collect();
    let kept: Vec<(String, CellHealth)> = summary
        .cells
        .iter()
        .filter(|(k, _)| !rerun.contains(*k))
        .map(|(k, h)| (k.clone(), h.clone()))
        .collect();
    if let Some(p) = resume::read_config(dir).and_then(|rc| rc.placement) {
        for (k, _) in &kept {
            if !summary.placement.contains_key(k) {
                summary.placement.insert(k.clone(), p.clone());
                out.placed += 1;
            }
        }
        if out.placed > 0 {
            crate::fsutil::write_json_atomic(&dir.join("summary.json"), &summary)?;
        }
    }
    let (streams, _) = crate::ingest::names::raw_streams(dir)?;
    // Cells a slim marker still lists (`steps::materialize` refused: the logs changed since the
    // cut was verified) are left to ingest, which refuses to cut them, rather than cut here from
    // logs that may hold another machine's steps.
    let slimmed = crate::ingest::step_slices::SlimMarker::read(dir)?;
    let uncut: Vec<CellHealth> = kept
        .into_iter()
        .map(|(_, h)| h)
        .filter(|h| {
            !steps::has_step_file(&streams, h.phase, &h.cell)
                && !slimmed.as_ref().is_some_and(|m| m.lists(h.phase, &h.cell))
        })
        .collect();
    (out.step_records, out.step_files, out.logs_compressed) = steps::freeze_cells(dir, &uncut)?;
    Ok(out)
}

/// One killed launch finished by [`finish_root`].
#[derive(Debug, Clone)]
pub struct Finished {
    pub dir: PathBuf,
    pub sealed: Sealed,
    /// Cells complete (or capped) of those planned.
    pub kept: usize,
    pub planned: usize,
    /// The manifest row written (the first attempt had none, or a resumed attempt after it).
    pub row: ManifestRow,
}

/// The run directories of `root` a launch left before its end — no manifest row names it, or
/// a raw step log is still plain (a launch's end compresses them; a resumed attempt killed
/// after an earlier attempt's row) — with their config and whether a row names them. A live
/// launch looks the same.
fn left_before_their_end(root: &Path) -> anyhow::Result<Vec<(PathBuf, RunConfig, bool)>> {
    let rows = manifest::read(root)?;
    Ok(resume::runs(root)
        .into_iter()
        .filter_map(|(dir, rc)| {
            let has_row = rows
                .iter()
                .any(|r| r.run_dir.as_deref() == Some(rc.run_dir.as_str()));
            (!has_row || !steps::raw_files(&dir).is_empty()).then_some((dir, rc, has_row))
        })
        .collect())
}

/// The run directories of `root` that [`finish_root`] would finish, by name: launches killed
/// there (or still running).
pub fn unfinished(root: &Path) -> anyhow::Result<Vec<String>> {
    Ok(left_before_their_end(root)?
        .into_iter()
        .map(|(_, rc, _)| rc.run_dir)
        .collect())
}

/// `ctax archive --finish-killed`: every run directory of `root` that a launch left before its
/// end — no manifest row, or a raw step log still plain — is [`seal`]ed, gets its per-cell
/// statistics in `summary.json` as a launch's end writes them, and a manifest row
/// if it has none: status `incomplete`, the reason saying what was found, the start from the
/// directory's stamp, the duration to the last cell's end (wall clock), the vLLM/GPU facts from
/// its `env.txt`. **The caller asserts that no sweep is running in `root`**: a live launch looks
/// exactly like a killed one.
pub fn finish_root(root: &Path) -> anyhow::Result<Vec<Finished>> {
    let unfinished = left_before_their_end(root)?;
    // Whether the root's profile asked for step timing (the launches' rows say the same); a
    // profile this version cannot read leaves it unknown rather than stopping the command.
    let prof = root.join("profile.toml");
    let step_timing = prof.exists()
        && match super::profile::load(&prof.to_string_lossy(), root) {
            Ok(l) => l.profile.server.step_timing,
            Err(e) => {
                eprintln!(
                    "[ctax] warning: {e:#}: step timing of the killed launches' rows left blank"
                );
                false
            }
        };
    let mut out = Vec::new();
    for (dir, rc, has_row) in unfinished {
        let sealed = seal(&dir, &[])?;
        if let Err(e) = super::stages::write_run_stats(&dir) {
            eprintln!(
                "[ctax] warning: per-cell statistics for {}: {e:#}",
                dir.display()
            );
        }
        let summary = resume::read_summary(&dir);
        let planned = rc.cells.len();
        let kept = rc
            .cells
            .iter()
            .filter(|c| {
                summary
                    .cells
                    .get(&resume::key(c))
                    .is_some_and(|h| h.complete || h.capped())
            })
            .count();
        // No row: the launch's first attempt was killed (it started at the directory's stamp).
        // A row and a plain raw step log: an attempt resumed after that row was killed; it
        // started when it rewrote config.json.
        let started = if has_row {
            Some(attempt_start(&dir)?)
        } else {
            None
        };
        let row = killed_row(
            &dir,
            &rc,
            &summary,
            kept,
            started,
            step_timing && !rc.simulated,
        )?;
        manifest::append(root, &row)?;
        out.push(Finished {
            dir,
            sealed,
            kept,
            planned,
            row,
        });
    }
    Ok(out)
}

/// When a resumed attempt began: the modification time of `config.json`, which every launch
/// (a resume too) writes as it starts.
fn attempt_start(dir: &Path) -> anyhow::Result<u64> {
    let t = std::fs::metadata(dir.join("config.json"))
        .and_then(|m| m.modified())
        .with_context(|| format!("{}: the time of config.json", dir.display()))?;
    Ok(t.duration_since(std::time::UNIX_EPOCH)?.as_millis() as u64)
}

/// The `incomplete` row of a killed attempt: the first one (`resumed_at` None, started at the
/// directory's stamp) or one resumed at `resumed_at` (ms) after the directory's last row.
fn killed_row(
    dir: &Path,
    rc: &RunConfig,
    summary: &ctax_schema::RunSummary,
    kept: usize,
    resumed_at: Option<u64>,
    step_timing_asked: bool,
) -> anyhow::Result<ManifestRow> {
    // config.json's run_dir (the name ctax gave the directory, whatever it is called now) has
    // no stamp when it was not written by `ctax run`: config.json's time, which a launch writes
    // as it starts, stands in (rather than stopping every other directory's row).
    let started = match resumed_at {
        Some(ms) => ms,
        None => match manifest::stamp_ms(rc.run_dir.get(..15).unwrap_or_default()) {
            Some(ms) => ms,
            None => attempt_start(dir)?,
        },
    };
    let mut row = manifest::launch_row(
        dir,
        &resume::run_stage(rc),
        &rc.config,
        rc.launch,
        started,
        rc.placement.clone(),
    );
    // The launch's host, not this one's.
    row.host = rc.placement.as_ref().and_then(|p| p.host.clone());
    row.status = RowStatus::Incomplete;
    let unfinished: Vec<String> = rc
        .cells
        .iter()
        .map(resume::key)
        .filter(|k| !summary.cells.contains_key(k))
        .collect();
    row.reason = Some(format!(
        "{} killed before its end (no row was written; recorded by ctax archive \
         --finish-killed): {kept} of {} cells complete{}; a resume reruns the rest",
        if resumed_at.is_some() {
            "a resumed attempt,"
        } else {
            "launch"
        },
        rc.cells.len(),
        if unfinished.is_empty() {
            String::new()
        } else {
            format!(", never finished: {}", unfinished.join(", "))
        }
    ));
    let end_ms = summary
        .cells
        .values()
        .map(|h| h.wall_start_unix_ms + h.t_end_ns.saturating_sub(h.t_start_ns) / 1_000_000)
        .max();
    row.duration_s = end_ms.map_or(0.0, |e| e.saturating_sub(started) as f64 / 1000.0);
    // After the seal every raw step log is compressed. As a launch's own row says it: active
    // when its logs hold records, inactive when they hold none or there is none and the profile
    // asked for step timing, not applicable otherwise.
    let logs = crate::ingest::step_slices::raw_logs(dir, false);
    row.step_timing_active = if logs.is_empty() {
        step_timing_asked.then_some(false)
    } else {
        // A log that cannot be read, or reads with a warning (a damaged `.cols` reads as a
        // stream that ends before its first line), says nothing: not "inactive".
        Some(
            crate::ingest::step_slices::LaunchSteps::read(&logs)
                .map_or(true, |l| l.records > 0 || !l.warnings.is_empty()),
        )
    };
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(run_dir: &str) -> RunConfig {
        RunConfig {
            schema_version: ctax_schema::SCHEMA_VERSION,
            config: "plain".into(),
            launch: 0,
            run_dir: run_dir.into(),
            phases: vec![ctax_schema::Phase::A],
            cells: Vec::new(),
            model: "m".into(),
            served_model_name: "m".into(),
            port: 0,
            extra: serde_json::json!({"stage": "A"}),
            simulated: false,
            placement: None,
        }
    }

    /// A first attempt's row whose config.json names a directory without a stamp (not written
    /// by `ctax run`) starts at config.json's time instead of failing; step timing reads as the launch's own row would: active with a
    /// step log, inactive without one when the profile asked for it, not applicable otherwise.
    #[test]
    fn a_killed_row_without_a_stamp_and_its_step_timing() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("plain_renamed_by_hand");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("config.json"), b"{}").unwrap();
        let mtime = std::fs::metadata(dir.join("config.json"))
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let rc = rc("plain_renamed_by_hand");
        let summary = ctax_schema::RunSummary::default();
        let row = killed_row(&dir, &rc, &summary, 0, None, true).unwrap();
        assert_eq!(row.started_unix_ms, mtime);
        assert_eq!(row.stage, "1 Phase A");
        assert_eq!(row.step_timing_active, Some(false));
        let row = killed_row(&dir, &rc, &summary, 0, None, false).unwrap();
        assert_eq!(row.step_timing_active, None);
        // A log without records (killed before the first step) reads as inactive.
        let log = dir.join("engine_step_raw.77.jsonl.zst");
        std::fs::write(&log, zstd::encode_all(&b""[..], 3).unwrap()).unwrap();
        let row = killed_row(&dir, &rc, &summary, 0, None, false).unwrap();
        assert_eq!(row.step_timing_active, Some(false));
        let rec = br#"{"t_ns":1,"step_id":1,"pid":77,"step_duration_us":10.0}"#;
        std::fs::write(
            &log,
            zstd::encode_all(&[&rec[..], b"\n"].concat()[..], 3).unwrap(),
        )
        .unwrap();
        let row = killed_row(&dir, &rc, &summary, 0, None, false).unwrap();
        assert_eq!(row.step_timing_active, Some(true));
        // A damaged number-columns log (a stream that ends before its first line) says nothing:
        // not "inactive" (from a review).
        std::fs::remove_file(&log).unwrap();
        std::fs::write(dir.join("engine_step_raw.77.jsonl.cols"), b"CTAXNUM1 cut").unwrap();
        let row = killed_row(&dir, &rc, &summary, 0, None, false).unwrap();
        assert_eq!(row.step_timing_active, Some(true));
        // A stamped name starts at its stamp (2026-12-03 05:49:51 UTC).
        let stamped = t.path().join("20261203-054951_plain_l0");
        std::fs::create_dir(&stamped).unwrap();
        let row = killed_row(
            &stamped,
            &self::rc("20261203-054951_plain_l0"),
            &summary,
            0,
            None,
            true,
        )
        .unwrap();
        assert_eq!(row.started_unix_ms, 1_796_276_991_000);
    }
}
