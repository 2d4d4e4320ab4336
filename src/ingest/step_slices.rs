//! The step-timing plugin's raw per-process logs (`engine_step_raw.<pid>.jsonl[.zst|.cols]`,
//! one per vLLM process for the whole launch) → the step records of each cell, cut by the cell's time
//! window from `summary.json` (one clock: CLOCK_MONOTONIC). One cutting rule for everyone:
//! `ctax run` writes the cut as per-cell `engine_step_<phase>_<cell>.jsonl` files after each
//! launch (`orchestrate::steps`), ingest cuts the raw log itself for a cell whose per-cell file
//! is absent (`ctax archive --slim-steps` removes the per-cell files it has verified to equal
//! this cut: they duplicate the raw log, ~15% of an archived launch), and the archive's check
//! uses the same function, so a slimmed run ingests to exactly the records it held before.
//!
//! When the worker runs in its own process (vLLM on CPU, or TP > 1) its file carries only the
//! worker-side fields (`get_finished_us`, `start_load_kv_us`); each such record is merged into
//! the scheduler step whose [t_ns, t_ns + step_duration] contains it. Unmatched worker records
//! are counted and dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctax_schema::{Cell, CellHealth, CellKey, Phase, StepRecord};

use super::jsonl;

/// File-name prefix of the plugin's raw logs: `engine_step_raw.<pid>.jsonl`.
pub(crate) const RAW_PREFIX: &str = "engine_step_raw";

/// The process's log stem (`engine_step_raw.<pid>.jsonl`) of a raw log's file name, plain,
/// zstd-compressed or number columns (`.cols`, `ctax archive --columns`); `None` for any other
/// name.
pub(crate) fn raw_stem(name: &str) -> Option<&str> {
    let stem = ctax_schema::plain_name(name);
    (stem.ends_with(".jsonl") && stem.starts_with(&format!("{RAW_PREFIX}."))).then_some(stem)
}

/// The raw logs of `run_dir` by process (stem), each with its files (plain and/or compressed),
/// sorted by name. `plain_only`: only the uncompressed `.jsonl` files (`ctax run`'s view, before
/// it compresses them).
pub(crate) fn raw_logs(run_dir: &Path, plain_only: bool) -> BTreeMap<String, Vec<PathBuf>> {
    let mut by: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(run_dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = raw_stem(&name)
            && (!plain_only || stem == name)
        {
            by.entry(stem.to_owned()).or_default().push(e.path());
        }
    }
    for v in by.values_mut() {
        v.sort();
    }
    by
}

/// The scheduler steps of one launch, worker records merged in, sorted by time.
#[derive(Debug, Default)]
pub(crate) struct LaunchSteps {
    pub steps: Vec<StepRecord>,
    /// Records read (scheduler and worker).
    pub records: usize,
    pub worker_merged: usize,
    pub worker_unmatched: usize,
    /// Records read per process log (stem `engine_step_raw.<pid>.jsonl`).
    pub per_log: BTreeMap<String, usize>,
    /// Problems met reading the raw logs (a truncated last line, a file spelled twice).
    pub warnings: Vec<String>,
}

impl LaunchSteps {
    /// Reads and merges the raw logs (`raw_logs`' output). A process with both a plain and a
    /// compressed log (a run interrupted between writing the archive and removing the plain
    /// file) is resolved like any stream spelled twice (`names::choose`).
    pub(crate) fn read(logs: &BTreeMap<String, Vec<PathBuf>>) -> anyhow::Result<LaunchSteps> {
        let mut out = LaunchSteps::default();
        let mut sched: Vec<StepRecord> = Vec::new();
        let mut worker: Vec<StepRecord> = Vec::new();
        for (stem, files) in logs {
            let parsed = files
                .iter()
                .map(|p| Ok((p.clone(), jsonl::read_jsonl::<StepRecord>(p)?)))
                .collect::<Result<Vec<_>, jsonl::IngestError>>()?;
            let (_, lines, chosen) = super::names::choose(parsed)?;
            out.warnings.extend(lines.warnings);
            out.warnings.extend(chosen);
            out.per_log.insert(stem.clone(), lines.rows.len());
            for r in lines.rows {
                out.records += 1;
                // Worker-only records have no scheduler-side fields.
                if r.schedule_us.is_none()
                    && r.step_duration_us.is_none()
                    && r.num_running.is_none()
                {
                    worker.push(r);
                } else {
                    sched.push(r);
                }
            }
        }
        sched.sort_by_key(|r| (r.t_ns, r.pid, r.step_id));
        worker.sort_by_key(|r| r.t_ns);
        for w in worker {
            let i = sched.partition_point(|s| s.t_ns <= w.t_ns);
            let hit = i.checked_sub(1).map(|j| &mut sched[j]).filter(|s| {
                let end = s.t_ns + (s.step_duration_us.unwrap_or(0.0) * 1000.0) as u64;
                w.t_ns <= end
            });
            match hit {
                Some(s) => {
                    s.get_finished_us = s.get_finished_us.or(w.get_finished_us);
                    s.start_load_kv_us = s.start_load_kv_us.or(w.start_load_kv_us);
                    out.worker_merged += 1;
                }
                None => out.worker_unmatched += 1,
            }
        }
        out.steps = sched;
        Ok(out)
    }

    /// The steps of one cell: those that started inside its window [t_start, t_end].
    /// (`steps` is sorted by start time.)
    pub(crate) fn of_cell(&self, h: &CellHealth) -> &[StepRecord] {
        let lo = self.steps.partition_point(|s| s.t_ns < h.t_start_ns);
        let hi = self.steps.partition_point(|s| s.t_ns <= h.t_end_ns);
        &self.steps[lo..hi.max(lo)]
    }
}

/// `steps_slimmed.json` in a run directory: which cells' per-cell step files `ctax archive
/// --slim-steps` removed, and the raw logs (records per process log) their cut was verified
/// against. Ingest cuts **only these cells**, and only while the raw logs still hold exactly
/// those records: a log that grew (a launch still running when the archive ran) or a new log (a
/// launch resumed in the directory, whose clock may overlap the old windows) makes it refuse,
/// with a warning, instead of cutting foreign steps into a cell.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SlimMarker {
    /// Cell keys (`<phase>/<cell>`, canonical).
    pub cells: std::collections::BTreeSet<String>,
    /// Records per raw log (`engine_step_raw.<pid>.jsonl`, compressed or not).
    pub raw_logs: BTreeMap<String, usize>,
}

/// The marker's file name.
pub(crate) const SLIM_MARKER: &str = "steps_slimmed.json";

impl SlimMarker {
    /// The marker of `run_dir`: `Ok(None)` when there is none.
    pub(crate) fn read(run_dir: &Path) -> anyhow::Result<Option<SlimMarker>> {
        let p = run_dir.join(SLIM_MARKER);
        match std::fs::read(&p) {
            Ok(b) => Ok(Some(serde_json::from_slice(&b).map_err(|e| {
                anyhow::anyhow!("{}: not a {SLIM_MARKER}: {e}", p.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::anyhow!("{}: {e}", p.display())),
        }
    }

    /// The raw logs of `run_dir`, read, if they still hold exactly the records the cut was
    /// verified against; else why not.
    pub(crate) fn verified_logs(&self, run_dir: &Path) -> Result<LaunchSteps, String> {
        let now = LaunchSteps::read(&raw_logs(run_dir, false))
            .map_err(|e| format!("the raw step logs cannot be read ({e:#})"))?;
        match self.mismatch(&now) {
            Some(why) => Err(why),
            None => Ok(now),
        }
    }

    /// Does the marker list the cell (`phase`, canonical cell name)?
    pub(crate) fn lists(&self, phase: Phase, cell: &str) -> bool {
        Cell::parse(cell).is_some_and(|c| self.cells.contains(&CellKey::new(phase, c).to_string()))
    }

    /// Why the raw logs read now are not the ones the cut was verified against, if they are not.
    pub(crate) fn mismatch(&self, now: &LaunchSteps) -> Option<String> {
        (self.raw_logs != now.per_log).then(|| {
            format!(
                "the raw step logs changed since the per-cell step files were slimmed (records \
                 per log then {:?}, now {:?})",
                self.raw_logs, now.per_log
            )
        })
    }
}
