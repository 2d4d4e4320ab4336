//! After a launch: cuts the step-timing plugin's raw per-process logs into the per-cell
//! `engine_step_<phase>_<cell>.jsonl` files by each cell's time window, with the one cutting
//! rule of [`crate::ingest::step_slices`] (which ingest also uses for a cell whose per-cell file
//! is absent), then compresses the raw logs (`.jsonl.zst`, kept as artifacts).

use std::io::Write;
use std::path::{Path, PathBuf};

use ctax_schema::{CellHealth, CellKey, FileKind, StepRecord, file_name};

use crate::ingest::step_slices::{self, LaunchSteps, SlimMarker};

pub(crate) use step_slices::RAW_PREFIX;

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

/// Uncompressed raw step files in `run_dir` (what the plugin wrote during the launch).
pub(crate) fn raw_files(run_dir: &Path) -> Vec<PathBuf> {
    step_slices::raw_logs(run_dir, true)
        .into_values()
        .flatten()
        .collect()
}

/// Splits the raw files of `run_dir` into per-cell files for `cells`, then compresses the raw
/// files (`.jsonl.zst`, kept as artifacts).
pub(crate) fn split(run_dir: &Path, cells: &[CellHealth]) -> anyhow::Result<SplitReport> {
    let logs = step_slices::raw_logs(run_dir, true);
    let launch = LaunchSteps::read(&logs)?;
    let mut rep = SplitReport {
        raw_files: logs.into_values().flatten().collect(),
        records: launch.records,
        worker_merged: launch.worker_merged,
        worker_unmatched: launch.worker_unmatched,
        warnings: launch.warnings.clone(),
        ..Default::default()
    };
    for c in cells {
        let name = file_name(FileKind::EngineStep, c.phase, &c.cell);
        let n = write_cell(run_dir, &name, launch.of_cell(c))?;
        rep.cells.push((name, n));
    }
    compress_raw(&rep.raw_files)?;
    Ok(rep)
}

/// Compresses raw step logs (`X.jsonl` → `X.jsonl.zst`, zstd 9, source removed). The archive
/// is written atomically, so a launch killed while compressing leaves the plain log and at most
/// a hidden temp file (removed by the next pass), never a cut `.zst`; killed between the
/// archive's rename and the source's removal, it leaves an archive of exactly this log, which
/// the next pass recognises and keeps (no `.r1` copy of the same records).
fn compress_raw(files: &[PathBuf]) -> anyhow::Result<()> {
    for f in files {
        let raw = std::fs::read(f)?;
        let holds_raw = |p: &Path| crate::ingest::jsonl::read_decoded(p).is_ok_and(|d| d == raw);
        // `X.jsonl.zst`'s other stored form, `X.jsonl.cols` (`ctax archive --columns` made it
        // here, and a skeleton carried it): the name is taken by either.
        let cols = crate::ingest::columns::path_of;
        // The first free name, unless an archive before it already holds this log.
        let dst = archive_names(f)
            .find(|p| (!p.exists() && !cols(p).exists()) || holds_raw(p) || holds_raw(&cols(p)))
            .expect("an unused name");
        if !dst.exists() && !cols(&dst).exists() {
            crate::fsutil::write_atomic_with(&dst, |file| -> anyhow::Result<()> {
                let mut enc = zstd::Encoder::new(file, 9)?;
                enc.write_all(&raw)?;
                enc.finish()?;
                Ok(())
            })?;
        }
        crate::fsutil::remove_stale_temps(&dst);
        std::fs::remove_file(f)?;
    }
    Ok(())
}

/// Before a launch is resumed in `run_dir`: writes the per-cell step file of each of `cells`
/// (kept cells without one: a launch killed before its end never cut them), cut from the raw
/// logs still plain — the killed launch's own (a launch that reached its end compressed its
/// logs, and `ctax archive` never compresses a plain step log), as [`split`] would have cut
/// them — then compresses those logs. The resumed launch's raw log, perhaps from another
/// machine whose CLOCK_MONOTONIC overlaps these cells' windows, then never enters their cut, and
/// its own cut reads only its own log. An earlier launch's archive of the same pid is not read
/// with them (two different streams under one name). Returns (records read, files written,
/// logs compressed).
pub(crate) fn freeze_cells(
    run_dir: &Path,
    cells: &[CellHealth],
) -> anyhow::Result<(usize, usize, usize)> {
    let logs = step_slices::raw_logs(run_dir, true);
    let mut written = 0;
    let mut records = 0;
    if !cells.is_empty() && !logs.is_empty() {
        let launch = LaunchSteps::read(&logs)?;
        records = launch.records;
        for c in cells {
            write_cell(
                run_dir,
                &file_name(FileKind::EngineStep, c.phase, &c.cell),
                launch.of_cell(c),
            )?;
            written += 1;
        }
    }
    let plain: Vec<PathBuf> = logs.into_values().flatten().collect();
    compress_raw(&plain)?;
    Ok((records, written, plain.len()))
}

/// The names an archive of the raw log `X.jsonl` may have, in the order they are taken:
/// `X.jsonl.zst`, then — when an earlier launch in this directory left an archive of that name
/// (the same pid on another machine), as `.zst` or as number columns `.cols` — `X.r1.jsonl.zst`,
/// `X.r2.jsonl.zst`, …: an earlier launch's log is never overwritten.
fn archive_names(f: &Path) -> impl Iterator<Item = PathBuf> {
    let stem = f.display().to_string();
    let first = PathBuf::from(format!("{stem}.zst"));
    let base = stem.strip_suffix(".jsonl").unwrap_or(&stem).to_owned();
    std::iter::once(first)
        .chain((1..).map(move |k| PathBuf::from(format!("{base}.r{k}.jsonl.zst"))))
}

/// Whether `streams` (a run directory's raw streams) hold a per-cell step file of (phase, cell).
pub(crate) fn has_step_file(
    streams: &[crate::ingest::names::RawStream],
    phase: ctax_schema::Phase,
    cell: &str,
) -> bool {
    streams
        .iter()
        .any(|s| s.kind == FileKind::EngineStep && s.phase == phase && s.cell.name() == cell)
}

/// Writes one per-cell step file (atomically); returns the records written.
fn write_cell(run_dir: &Path, name: &str, recs: &[StepRecord]) -> anyhow::Result<usize> {
    let mut body = Vec::new();
    for r in recs {
        serde_json::to_writer(&mut body, r)?;
        body.push(b'\n');
    }
    crate::fsutil::write_atomic(&run_dir.join(name), &body)?;
    Ok(recs.len())
}

/// Before a launch is resumed in its run directory: writes back the per-cell step file of every
/// cell that `ctax archive --slim-steps` removed (listed in `steps_slimmed.json`), cut from the
/// raw logs, i.e. exactly what ingest reads for it, then removes the marker. Without this, the
/// resumed launch's raw log would make ingest refuse the slimmed cells. Refuses (error, marker
/// kept) when the raw logs are no longer those the cut was verified against. Returns the files
/// written.
pub(crate) fn materialize(run_dir: &Path) -> anyhow::Result<usize> {
    let Some(marker) = SlimMarker::read(run_dir)? else {
        return Ok(0);
    };
    let launch = marker
        .verified_logs(run_dir)
        .map_err(|why| anyhow::anyhow!("{}: {why}", run_dir.display()))?;
    let summary = super::resume::read_summary(run_dir);
    let (streams, _) = crate::ingest::names::raw_streams(run_dir)?;
    let mut written = 0;
    for (k, h) in &summary.cells {
        let Some(key) = CellKey::parse(k).filter(|key| marker.lists(key.phase, &key.cell.name()))
        else {
            continue;
        };
        if !has_step_file(&streams, key.phase, &key.cell.name()) {
            let name = file_name(FileKind::EngineStep, key.phase, &key.cell.name());
            write_cell(run_dir, &name, launch.of_cell(h))?;
            written += 1;
        }
    }
    std::fs::remove_file(run_dir.join(step_slices::SLIM_MARKER))?;
    Ok(written)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ingest::jsonl;
    use ctax_schema::{Arrival, Phase};
    use std::collections::BTreeMap;

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

    /// The file names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A planned Phase A cell of 1 s, no warm-up.
    pub(crate) fn planned(cell: &str) -> ctax_schema::PlannedCell {
        ctax_schema::PlannedCell {
            phase: Phase::A,
            cell: ctax_schema::Cell::parse(cell).unwrap(),
            arrival: Arrival::Fixed,
            duration_s: 1.0,
            warmup_s: 0.0,
            min_completed: 1,
            max_cell_s: 10.0,
            inflight_cap: 8,
            seed: 0,
        }
    }

    pub(crate) fn health(phase: Phase, cell: &str, a: u64, b: u64) -> CellHealth {
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

    /// An earlier launch's log of the same pid stored as number columns (`ctax archive
    /// --columns` ran here and a skeleton carried the run directory back to a GPU host): the
    /// name is taken, so the new log becomes `.r1`, never a `.zst` beside the `.cols` under one
    /// name; a plain log the `.cols` already holds is just removed.
    #[test]
    fn a_columns_archive_of_the_same_name_is_never_written_beside() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let log = dir.join("engine_step_raw.10.jsonl");
        let earlier = b"{\"t_ns\":1,\"step_id\":0}\n{\"t_ns\":2,\"step_id\":1}\n";
        let cols = dir.join("engine_step_raw.10.jsonl.cols");
        std::fs::write(
            &cols,
            crate::ingest::number_columns::encode(earlier).unwrap(),
        )
        .unwrap();
        let new = b"{\"t_ns\":7,\"step_id\":0}\n";
        std::fs::write(&log, new).unwrap();
        compress_raw(std::slice::from_ref(&log)).unwrap();
        assert!(!log.exists());
        assert!(!dir.join("engine_step_raw.10.jsonl.zst").exists());
        let r1 = std::fs::read(dir.join("engine_step_raw.10.r1.jsonl.zst")).unwrap();
        assert_eq!(zstd::decode_all(&r1[..]).unwrap(), new);
        // The same log as the columns hold (a compression killed after the archive was made).
        std::fs::write(&log, earlier).unwrap();
        compress_raw(std::slice::from_ref(&log)).unwrap();
        assert!(!log.exists());
        assert_eq!(
            names(dir),
            [
                "engine_step_raw.10.jsonl.cols",
                "engine_step_raw.10.r1.jsonl.zst"
            ]
        );
    }

    /// A launch killed while compressing its step log: after the archive's rename (the archive
    /// holds the log, the plain log is still there) the next pass keeps that archive and writes
    /// no `.r1` copy, also when the archive is itself an `.r1` beside an earlier launch's; killed
    /// mid-write (a hidden temp file) the next pass writes the archive and removes the temp.
    #[test]
    fn a_compression_killed_half_way_is_finished_without_a_second_copy() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let log = dir.join("engine_step_raw.10.jsonl");
        let body = b"{\"t_ns\":1}\n{\"t_ns\":2}\n";
        let unzip = |n: &str| zstd::decode_all(&std::fs::read(dir.join(n)).unwrap()[..]).unwrap();

        // Killed after the rename.
        std::fs::write(&log, body).unwrap();
        std::fs::write(
            dir.join("engine_step_raw.10.jsonl.zst"),
            zstd::encode_all(&body[..], 3).unwrap(),
        )
        .unwrap();
        compress_raw(std::slice::from_ref(&log)).unwrap();
        assert_eq!(names(dir), ["engine_step_raw.10.jsonl.zst"]);

        // An earlier launch's archive of the same pid, this launch's `.r1` renamed, then killed.
        let other = b"{\"t_ns\":9}\n";
        std::fs::write(&log, other).unwrap();
        std::fs::write(
            dir.join("engine_step_raw.10.r1.jsonl.zst"),
            zstd::encode_all(&other[..], 3).unwrap(),
        )
        .unwrap();
        compress_raw(std::slice::from_ref(&log)).unwrap();
        assert_eq!(
            names(dir),
            [
                "engine_step_raw.10.jsonl.zst",
                "engine_step_raw.10.r1.jsonl.zst"
            ]
        );

        // Killed mid-write: the temp of the `.r2` it was writing, the plain log.
        let third = b"{\"t_ns\":5}\n";
        std::fs::write(&log, third).unwrap();
        std::fs::write(
            dir.join(".engine_step_raw.10.r2.jsonl.zst.tmp.4242"),
            b"\x28\xb5",
        )
        .unwrap();
        compress_raw(std::slice::from_ref(&log)).unwrap();
        assert_eq!(
            names(dir),
            [
                "engine_step_raw.10.jsonl.zst",
                "engine_step_raw.10.r1.jsonl.zst",
                "engine_step_raw.10.r2.jsonl.zst"
            ]
        );
        assert_eq!(unzip("engine_step_raw.10.jsonl.zst"), body);
        assert_eq!(unzip("engine_step_raw.10.r1.jsonl.zst"), other);
        assert_eq!(unzip("engine_step_raw.10.r2.jsonl.zst"), third);
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

    /// The archive's `--slim-steps` removes the per-cell step files that `split` wrote, and
    /// ingest then cuts exactly the same records from the raw logs (compressed by `split`): every
    /// cell's steps before and after are equal, worker records merged in both. A per-cell file
    /// that was edited (one record dropped) and one whose cell is not in summary.json are kept,
    /// each with its reason, and ingest still reads them as they are.
    #[test]
    fn slimmed_runs_ingest_to_the_same_steps() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("20260101-000000_noop_connector_l0");
        std::fs::create_dir_all(&d).unwrap();
        let write = |name: &str, recs: &[StepRecord]| {
            let mut s = String::new();
            for r in recs {
                s.push_str(&serde_json::to_string(r).unwrap());
                s.push('\n');
            }
            std::fs::write(d.join(name), s).unwrap();
        };
        // Scheduler steps every 100 µs from t = 1 ms to 30 ms; worker records inside some.
        let sched: Vec<StepRecord> = (0..300)
            .map(|i| rec(1_000_000 + i * 100_000, 10, Some(60.0), None))
            .collect();
        write("engine_step_raw.10.jsonl", &sched);
        let worker: Vec<StepRecord> = (0..300)
            .step_by(7)
            .map(|i| rec(1_000_000 + i * 100_000 + 20_000, 11, None, Some(i as f64)))
            .collect();
        write("engine_step_raw.11.jsonl", &worker);
        let cells = [
            health(Phase::A, "r1_i8_o8", 1_000_000, 9_000_000),
            health(Phase::A, "r2_i8_o8", 9_000_000, 20_000_000),
            health(Phase::B, "r1_i8_o64", 21_000_000, 30_000_000),
        ];
        let mut summary = ctax_schema::RunSummary::default();
        for c in &cells {
            let key =
                ctax_schema::CellKey::new(c.phase, ctax_schema::Cell::parse(&c.cell).unwrap());
            summary.cells.insert(key.to_string(), c.clone());
        }
        std::fs::write(
            d.join("summary.json"),
            serde_json::to_vec(&summary).unwrap(),
        )
        .unwrap();
        let rep = split(&d, &cells).unwrap();
        assert_eq!(rep.worker_merged, worker.len());
        let steps_of = || {
            let (run, _) = crate::ingest::load_run(&d).unwrap();
            run.cells
                .iter()
                .map(|(k, rc)| (k.clone(), (rc.has_steps, rc.steps.clone())))
                .collect::<BTreeMap<_, _>>()
        };
        let before = steps_of();
        assert_eq!(before.len(), 3);
        // Boundaries are inclusive: the step at t = 9 ms is in both A cells (as split wrote).
        assert_eq!(before[&(Phase::A, "r1_i8_o8".to_owned())].1.len(), 81);
        assert_eq!(before[&(Phase::A, "r2_i8_o8".to_owned())].1.len(), 111);
        // A file edited by hand (its last record dropped) and a file of a cell summary.json
        // does not know.
        let edited = d.join("engine_step_B_r1_i8_o64.jsonl");
        let body = std::fs::read_to_string(&edited).unwrap();
        let mut kept_lines: Vec<&str> = body.lines().collect();
        kept_lines.pop();
        std::fs::write(&edited, kept_lines.join("\n") + "\n").unwrap();
        write("engine_step_A_r4_i8_o8.jsonl", &sched[..3]);
        let before = steps_of();

        let slim = crate::orchestrate::archive::slim_steps_root(root.path()).unwrap();
        assert_eq!(slim.slimmed, 2, "{:?}", slim.kept);
        assert_eq!(slim.kept.len(), 2, "{:?}", slim.kept);
        assert!(
            slim.kept
                .iter()
                .any(|k| k.contains("engine_step_B_r1_i8_o64")
                    && k.contains("holds 90 records, the cut of the raw step logs 91"))
        );
        assert!(
            slim.kept
                .iter()
                .any(|k| k.contains("engine_step_A_r4_i8_o8") && k.contains("not in summary.json"))
        );
        assert!(!d.join("engine_step_A_r1_i8_o8.jsonl").exists());
        assert!(!d.join("engine_step_A_r2_i8_o8.jsonl").exists());
        assert!(edited.exists());
        assert_eq!(steps_of(), before, "ingest after slimming = ingest before");
        // A second pass removes nothing more.
        let again = crate::orchestrate::archive::slim_steps_root(root.path()).unwrap();
        assert_eq!(again.slimmed, 0);

        assert!(d.join(step_slices::SLIM_MARKER).exists());

        // A launch resumed here adds a raw log whose clock values fall inside the old cells'
        // windows (another machine's CLOCK_MONOTONIC). Unmaterialized, ingest must refuse to cut
        // the slimmed cells (no steps, a warning), never mix the foreign steps in.
        let foreign: Vec<StepRecord> = (0..50)
            .map(|i| rec(1_000_000 + i * 200_000 + 50_000, 77, Some(60.0), None))
            .collect();
        let foreign_log = d.join("engine_step_raw.77.jsonl.zst");
        let body: String = foreign
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        std::fs::write(&foreign_log, zstd::encode_all(body.as_bytes(), 3).unwrap()).unwrap();
        let (run, warnings) = crate::ingest::load_run(&d).unwrap();
        // (This run has no request files: a cell without steps has no entry at all.)
        let a1 = run.cells.get(&(Phase::A, "r1_i8_o8".to_owned()));
        assert!(
            a1.is_none_or(|c| !c.has_steps && c.steps.is_empty()),
            "{a1:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("raw step logs changed since")),
            "{warnings:?}"
        );
        // So a resume first writes the removed files back from the logs they were verified
        // against (`resume::supersede` calls materialize before the new launch).
        std::fs::remove_file(&foreign_log).unwrap();
        assert_eq!(materialize(&d).unwrap(), 2);
        assert!(d.join("engine_step_A_r1_i8_o8.jsonl").exists());
        assert!(!d.join(step_slices::SLIM_MARKER).exists());
        assert_eq!(materialize(&d).unwrap(), 0, "nothing left to write");
        assert_eq!(steps_of(), before);
        std::fs::write(&foreign_log, zstd::encode_all(body.as_bytes(), 3).unwrap()).unwrap();
        assert_eq!(steps_of(), before, "the kept cells read their own files");

        // A plain raw log (a launch still running) stops the archive from slimming the run.
        std::fs::write(d.join("engine_step_raw.78.jsonl"), "").unwrap();
        let busy = crate::orchestrate::archive::slim_steps_root(root.path()).unwrap();
        assert_eq!(busy.slimmed, 0);
        assert!(
            busy.kept.iter().any(|k| k.contains("not compressed yet")),
            "{:?}",
            busy.kept
        );
    }

    /// A launch killed hard (the GPU machine given back mid-launch) left a plain raw step log,
    /// a summary whose kept cell has no placement and no step file, and a cell with no summary
    /// entry. Resuming it on another machine (another boot id, a CLOCK_MONOTONIC that overlaps
    /// the old windows) must keep the kept cell's machine and steps. Expected values are the
    /// windows' contents by hand: the kept cell [1 ms, 5 ms] holds the old log's 2 and 3 ms
    /// steps; the rerun cell [6 ms, 9 ms] holds only the new log's 7.5 ms step.
    #[test]
    fn a_resume_elsewhere_keeps_a_killed_launch_s_cells_on_their_machine() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let write_log = |name: &str, recs: &[StepRecord]| {
            let mut s = String::new();
            for r in recs {
                s.push_str(&serde_json::to_string(r).unwrap());
                s.push('\n');
            }
            std::fs::write(dir.join(name), s).unwrap();
        };
        let machine = |id: &str| ctax_schema::Placement {
            machine_id: Some(id.into()),
            ..Default::default()
        };
        let rc = ctax_schema::RunConfig {
            schema_version: ctax_schema::SCHEMA_VERSION,
            config: "mooncake_both".into(),
            launch: 2,
            run_dir: "20261203-022038_mooncake_both_l2".into(),
            phases: vec![Phase::A],
            cells: vec![planned("r4_i8_o8"), planned("r8_i8_o8")],
            model: "m".into(),
            served_model_name: "m".into(),
            port: 8000,
            extra: serde_json::json!({"stage": "A"}),
            simulated: false,
            placement: Some(machine("old-machine")),
        };
        std::fs::write(dir.join("config.json"), serde_json::to_vec(&rc).unwrap()).unwrap();
        let kept = health(Phase::A, "r4_i8_o8", 1_000_000, 5_000_000);
        let mut summary = ctax_schema::RunSummary::default();
        summary.cells.insert("A/r4_i8_o8".into(), kept.clone());
        std::fs::write(
            dir.join("summary.json"),
            serde_json::to_vec(&summary).unwrap(),
        )
        .unwrap();
        write_log(
            "engine_step_raw.10.jsonl",
            &[
                rec(2_000_000, 10, Some(100.0), None),
                rec(3_000_000, 10, Some(100.0), None),
                rec(7_000_000, 10, Some(100.0), None),
            ],
        );
        std::fs::write(dir.join("requests_A_r8_i8_o8.jsonl"), "{}\n").unwrap();
        // An earlier attempt on yet another machine, same pid: its archived log (a different
        // stream under the same name) must not be read with the killed attempt's plain one.
        let earlier = serde_json::to_string(&rec(500_000, 10, Some(100.0), None)).unwrap() + "\n";
        std::fs::write(
            dir.join("engine_step_raw.10.jsonl.zst"),
            zstd::encode_all(earlier.as_bytes(), 3).unwrap(),
        )
        .unwrap();

        crate::orchestrate::resume::supersede(dir, &[planned("r8_i8_o8")]).unwrap();
        let s = crate::orchestrate::resume::read_summary(dir);
        assert_eq!(
            s.placement["A/r4_i8_o8"].machine_id.as_deref(),
            Some("old-machine"),
            "the kept cell keeps the machine it was measured on"
        );
        let steps_of = |cell: &str| -> Vec<u64> {
            jsonl::read_jsonl::<StepRecord>(&dir.join(format!("engine_step_A_{cell}.jsonl")))
                .unwrap()
                .rows
                .iter()
                .map(|r| r.t_ns)
                .collect()
        };
        assert_eq!(steps_of("r4_i8_o8"), [2_000_000, 3_000_000]);
        assert!(
            raw_files(dir).is_empty(),
            "the killed attempt's log compressed"
        );
        assert!(
            dir.join("engine_step_raw.10.r1.jsonl.zst").exists(),
            "beside the earlier one"
        );
        assert!(
            !dir.join("requests_A_r8_i8_o8.jsonl").exists(),
            "superseded"
        );

        // The resumed launch on another machine: the same pid, an overlapping clock.
        write_log(
            "engine_step_raw.10.jsonl",
            &[
                rec(2_500_000, 10, Some(100.0), None),
                rec(7_500_000, 10, Some(100.0), None),
            ],
        );
        let rerun = health(Phase::A, "r8_i8_o8", 6_000_000, 9_000_000);
        split(dir, &[rerun]).unwrap();
        assert_eq!(steps_of("r8_i8_o8"), [7_500_000], "only the new log's step");
        assert_eq!(
            steps_of("r4_i8_o8"),
            [2_000_000, 3_000_000],
            "kept cut unchanged"
        );
        assert!(dir.join("engine_step_raw.10.r2.jsonl.zst").exists());
        // What ingest would have cut for the kept cell without its file: the new machine's
        // 2.5 ms step too. The file written before the resume is what prevents it.
        let all = LaunchSteps::read(&step_slices::raw_logs(dir, false)).unwrap();
        let cut: Vec<u64> = all.of_cell(&kept).iter().map(|r| r.t_ns).collect();
        assert_eq!(cut, [2_000_000, 2_500_000, 3_000_000]);
        assert_eq!(all.per_log.len(), 3, "{:?}", all.per_log);
    }
}
