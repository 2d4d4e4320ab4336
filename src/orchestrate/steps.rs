//! Cuts the step-timing plugin's raw per-process logs (`engine_step_raw.<pid>.jsonl`, one per
//! vLLM process for the whole launch) into the per-cell `engine_step_<phase>_<cell>.jsonl`
//! files by each cell's time window (one clock: CLOCK_MONOTONIC).
//!
//! When the worker runs in its own process (vLLM on CPU, or TP > 1) its file carries only the
//! worker-side fields (`get_finished_us`, `start_load_kv_us`); each such record is merged into
//! the scheduler step whose [t_ns, t_ns + step_duration] contains it. Unmatched worker records
//! are counted and dropped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use ctax_schema::{CellHealth, FileKind, StepRecord, file_name};

use crate::ingest::jsonl;

pub(crate) const RAW_PREFIX: &str = "engine_step_raw";

/// Result of a split.
#[derive(Debug, Default)]
pub(crate) struct SplitReport {
    pub raw_files: Vec<PathBuf>,
    pub records: usize,
    pub worker_merged: usize,
    pub worker_unmatched: usize,
    /// (phase/cell, records written)
    pub cells: Vec<(String, usize)>,
    pub warnings: Vec<String>,
}

/// Raw step files in `run_dir`.
pub(crate) fn raw_files(run_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(run_dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let n = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    n.starts_with(&format!("{RAW_PREFIX}.")) && n.ends_with(".jsonl")
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Splits the raw files of `run_dir` into per-cell files for `cells`, then compresses the raw
/// files (`.jsonl.zst`, kept as artifacts).
pub(crate) fn split(run_dir: &Path, cells: &[CellHealth]) -> anyhow::Result<SplitReport> {
    let mut rep = SplitReport {
        raw_files: raw_files(run_dir),
        ..Default::default()
    };
    let mut sched: Vec<StepRecord> = Vec::new();
    let mut worker: Vec<StepRecord> = Vec::new();
    for f in &rep.raw_files {
        let lines = jsonl::read_jsonl::<StepRecord>(f)?;
        rep.warnings.extend(lines.warnings);
        for r in lines.rows {
            rep.records += 1;
            // Worker-only records have no scheduler-side fields.
            if r.schedule_us.is_none() && r.step_duration_us.is_none() && r.num_running.is_none() {
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
                rep.worker_merged += 1;
            }
            None => rep.worker_unmatched += 1,
        }
    }
    let mut by_cell: BTreeMap<String, Vec<&StepRecord>> = BTreeMap::new();
    for c in cells {
        let name = file_name(FileKind::EngineStep, c.phase, &c.cell);
        let v: Vec<&StepRecord> = sched
            .iter()
            .filter(|s| s.t_ns >= c.t_start_ns && s.t_ns <= c.t_end_ns)
            .collect();
        by_cell.insert(name, v);
    }
    for (name, recs) in &by_cell {
        let mut body = Vec::new();
        for r in recs {
            serde_json::to_writer(&mut body, r)?;
            body.push(b'\n');
        }
        crate::fsutil::write_atomic(&run_dir.join(name), &body)?;
        rep.cells.push((name.clone(), recs.len()));
    }
    for f in &rep.raw_files {
        let raw = std::fs::read(f)?;
        let dst = PathBuf::from(format!("{}.zst", f.display()));
        let mut enc = zstd::Encoder::new(std::fs::File::create(&dst)?, 9)?;
        enc.write_all(&raw)?;
        enc.finish()?.sync_all()?;
        std::fs::remove_file(f)?;
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctax_schema::{Arrival, Phase};

    fn rec(t: u64, pid: u32, dur: Option<f64>, gf: Option<f64>) -> StepRecord {
        StepRecord {
            t_ns: t,
            step_id: t,
            pid,
            step_duration_us: dur,
            schedule_us: dur.map(|d| d / 10.0),
            build_meta_us: dur.map(|_| 1.0),
            get_finished_us: gf,
            start_load_kv_us: gf,
            num_running: dur.map(|_| 1),
            num_waiting: dur.map(|_| 0),
            prefill_tokens: None,
            decode_tokens: None,
        }
    }

    fn health(phase: Phase, cell: &str, a: u64, b: u64) -> CellHealth {
        CellHealth {
            phase,
            cell: cell.into(),
            rate: 1.0,
            input_len: 8,
            output_len: 8,
            arrival: Arrival::Fixed,
            seed: 0,
            t_start_ns: a,
            t_warmup_end_ns: a,
            t_last_send_ns: b,
            t_end_ns: b,
            wall_start_unix_ms: 0,
            scheduled: 0,
            sent: 0,
            dropped: 0,
            ok: 0,
            errors: 0,
            cancelled: 0,
            completed_measured: 0,
            complete: true,
            incomplete_reason: None,
            lateness_us_p50: 0.0,
            lateness_us_p99: 0.0,
            lateness_us_max: 0.0,
            client_cpu_pct: 0.0,
            scrapes: 0,
            scrape_failures: 0,
        }
    }

    #[test]
    fn splits_by_window_and_merges_worker_records() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, recs: &[StepRecord]| {
            let mut s = String::new();
            for r in recs {
                s.push_str(&serde_json::to_string(r).unwrap());
                s.push('\n');
            }
            std::fs::write(d.path().join(name), s).unwrap();
        };
        // Scheduler steps at t=1000, 2000 (µs-long steps: 500 µs = 500_000 ns), 9000.
        write(
            "engine_step_raw.10.jsonl",
            &[
                rec(1_000_000, 10, Some(500.0), None),
                rec(2_000_000, 10, Some(500.0), None),
                rec(9_000_000, 10, Some(100.0), None),
            ],
        );
        // Worker records: one inside step 2000, one between steps (unmatched).
        write(
            "engine_step_raw.11.jsonl",
            &[
                rec(2_100_000, 11, None, Some(7.0)),
                rec(5_000_000, 11, None, Some(9.0)),
            ],
        );
        let cells = [
            health(Phase::A, "r1_i8_o8", 0, 3_000_000),
            health(Phase::A, "r2_i8_o8", 8_000_000, 10_000_000),
        ];
        let rep = split(d.path(), &cells).unwrap();
        assert_eq!(
            (rep.records, rep.worker_merged, rep.worker_unmatched),
            (5, 1, 1)
        );
        let a: Vec<StepRecord> = jsonl::read_jsonl(&d.path().join("engine_step_A_r1_i8_o8.jsonl"))
            .unwrap()
            .rows;
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].get_finished_us, Some(7.0));
        assert_eq!(a[0].get_finished_us, None);
        let b: Vec<StepRecord> = jsonl::read_jsonl(&d.path().join("engine_step_A_r2_i8_o8.jsonl"))
            .unwrap()
            .rows;
        assert_eq!(b.len(), 1);
        assert!(raw_files(d.path()).is_empty(), "raw files compressed away");
        assert!(d.path().join("engine_step_raw.10.jsonl.zst").exists());
    }
}
