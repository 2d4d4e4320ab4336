//! A results root's **skeleton** (`ctax skeleton ROOT DEST`): what `ctax run` reads to resume
//! ROOT, without the raw data it does not read — the root to carry to another host (a GPU
//! machine whose transfer limit the archive outgrew, DESIGN.md §8). `ctax run` decides what is
//! left from each run directory's `config.json` and `summary.json`, the anchor from their
//! placements, Phase B's rate from `reference_rates.json`; none of it needs the request, metrics
//! or step records, which are ~97% of an archived launch.
//!
//! A run directory is copied **skeletal** (raw files left out: per-cell JSONL, raw step logs,
//! server logs, `superseded/`) only when it is finished: its last manifest row says `ok` and
//! `summary.json` has every cell complete. Anything a resume could touch (a failed, interrupted,
//! killed or capped launch) is copied whole. The marker `.ctax/skeleton.json` names the skeletal
//! directories; with it:
//! - `ctax run` refuses to resume a skeletal directory (its files are not there to supersede),
//!   and refuses stage 2 (reference rates need all of Phase A's records: pass
//!   `--reference-rates` or `--skip-stage 2`) and stage 4 (`--skip-stage 4`), before anything
//!   starts, dry run included;
//! - ingest refuses the root, so `ctax report`/`analyze` never read a skeleton as a dataset;
//! - `ctax merge` refuses it as an input.
//!
//! Files keep their modification times, so what a sweep writes on the other host is what is
//! newer there (`tools/gpu_run.sh` brings back only that).

use std::path::Path;

use anyhow::Context;
use ctax_schema::RowStatus;
use serde::{Deserialize, Serialize};

use super::{archive, manifest, resume};

/// Where the marker lives, relative to the root (ingest refuses a root holding it).
pub const MARKER: &str = crate::ingest::SKELETON_MARKER;

/// `.ctax/skeleton.json`: where the skeleton came from and which run directories lack their raw
/// files.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Marker {
    /// The root it was made from, as given.
    pub source: String,
    pub made_unix_ms: u64,
    /// Run directories copied without their raw files (finished launches).
    pub skeletal: Vec<String>,
    /// Run directories copied whole (a resume may touch them).
    pub whole: Vec<String>,
    /// The raw files left out, and their bytes.
    pub files_left_out: u64,
    pub bytes_left_out: u64,
}

/// What [`make`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Made {
    pub marker: Marker,
    pub files_copied: u64,
    pub bytes_copied: u64,
}

/// `root` holds a skeleton's marker (readable or not: every guard fails closed).
pub fn is_skeleton(root: &Path) -> bool {
    root.join(MARKER).exists()
}

/// The marker of `root`, if it is a skeleton and the marker parses.
pub fn read(root: &Path) -> Option<Marker> {
    let b = std::fs::read(root.join(MARKER)).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The root a skeleton was made from, for messages.
pub fn source(root: &Path) -> String {
    read(root).map_or_else(
        || format!("an unknown root ({MARKER} unreadable)"),
        |m| m.source,
    )
}

/// An error when `root` is a skeleton: `what` is the job that needs the raw data.
pub fn refuse(root: &Path, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !is_skeleton(root),
        "{} is a skeleton of {} (`ctax skeleton`, {MARKER}): its finished launches have no raw \
         data here, so it cannot be used for {what}; use the full root",
        root.display(),
        source(root)
    );
    Ok(())
}

/// An error when `dir` (a run directory) is skeletal, or its root's marker cannot be read: a
/// resume would supersede files that are not there and cut kept cells' steps from logs that are
/// elsewhere.
pub(crate) fn refuse_resume(dir: &Path) -> anyhow::Result<()> {
    let (Some(root), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Ok(());
    };
    if !is_skeleton(root) {
        return Ok(());
    }
    let name = name.to_string_lossy();
    let skeletal = read(root).is_none_or(|m| m.skeletal.iter().any(|s| *s == name));
    anyhow::ensure!(
        !skeletal,
        "{} is skeletal in this skeleton of {} (its raw files were left out): it cannot be \
         resumed here; resume it in the full root",
        dir.display(),
        source(root)
    );
    Ok(())
}

/// Copies `root`'s skeleton into `dest` (new or empty): every top-level file, `.ctax/` and
/// `preflight/` whole, each run directory skeletal or whole (module doc); other directories
/// (`analysis/`, `report/`: outputs) are left out. Writes the marker first (empty lists) and
/// again at the end with what was copied.
pub fn make(root: &Path, dest: &Path) -> anyhow::Result<Made> {
    anyhow::ensure!(root.is_dir(), "{}: not a directory", root.display());
    refuse(root, "another skeleton")?;
    if dest.exists() {
        anyhow::ensure!(
            std::fs::read_dir(dest)?.next().is_none(),
            "{} exists and is not empty: make the skeleton in a new directory",
            dest.display()
        );
    }
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    if dest.canonicalize()?.starts_with(root.canonicalize()?) {
        let _ = std::fs::remove_dir(dest);
        anyhow::bail!(
            "{} is inside {}: make the skeleton outside the root",
            dest.display(),
            root.display()
        );
    }
    let rows = manifest::read(root)?;
    let last_status = |name: &str| {
        rows.iter()
            .rev()
            .find(|r| r.run_dir.as_deref() == Some(name))
            .map(|r| r.status)
    };
    let mut made = Made {
        marker: Marker {
            source: root.display().to_string(),
            made_unix_ms: super::server::unix_ms(),
            skeletal: Vec::new(),
            whole: Vec::new(),
            files_left_out: 0,
            bytes_left_out: 0,
        },
        files_copied: 0,
        bytes_copied: 0,
    };
    // The marker first (a copy that stops half way is a skeleton too), its lists at the end.
    std::fs::create_dir_all(dest.join(".ctax"))?;
    crate::fsutil::write_json_atomic(&dest.join(MARKER), &made.marker)?;
    let run_names: Vec<String> = resume::runs(root)
        .iter()
        .filter_map(|(d, _)| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for e in archive::sorted_entries(root)? {
        let name = e.file_name().to_string_lossy().into_owned();
        let (src, dst) = (e.path(), dest.join(&name));
        let ft = kind(&e)?;
        if ft.is_file() {
            copy_file(&src, &dst, &mut made)?;
        } else if !ft.is_dir() {
            continue;
        } else if run_names.contains(&name) {
            let finished = last_status(&name) == Some(RowStatus::Ok) && all_complete(&src);
            copy_tree(&src, &dst, finished, &mut made)?;
            if finished {
                made.marker.skeletal.push(name);
            } else {
                made.marker.whole.push(name);
            }
        } else if name == ".ctax" || name == "preflight" {
            copy_tree(&src, &dst, false, &mut made)?;
        }
    }
    crate::fsutil::write_json_atomic(&dest.join(MARKER), &made.marker)?;
    Ok(made)
}

/// `summary.json` readable, with at least one cell and every cell complete.
fn all_complete(dir: &Path) -> bool {
    let s = resume::read_summary(dir);
    !s.cells.is_empty() && s.cells.values().all(|h| h.complete)
}

/// A run directory's raw file (in any stored form): per-cell JSONL, raw step log, server log,
/// GPU telemetry (nothing a resume reads).
fn is_raw(name: &str) -> bool {
    archive::is_raw_name(ctax_schema::plain_name(name))
        || name.starts_with(crate::ingest::gpu_telemetry::PREFIX)
}

/// Copies `src` into `dst`; with `skeletal`, its raw files and `superseded/` are left out (and
/// counted).
pub(super) fn copy_tree(
    src: &Path,
    dst: &Path,
    skeletal: bool,
    made: &mut Made,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    for e in archive::sorted_entries(src)? {
        let name = e.file_name().to_string_lossy().into_owned();
        let (s, d) = (e.path(), dst.join(&name));
        let ft = kind(&e)?;
        let leave_out = skeletal && ((ft.is_file() && is_raw(&name)) || name == "superseded");
        if leave_out {
            let (files, bytes) = size_of(&s)?;
            made.marker.files_left_out += files;
            made.marker.bytes_left_out += bytes;
        } else if ft.is_dir() {
            copy_tree(&s, &d, false, made)?;
        } else if ft.is_file() {
            copy_file(&s, &d, made)?;
        }
    }
    Ok(())
}

/// An entry's type; a symlink is an error (`ctax run` follows it, a copy would not hold it).
fn kind(e: &std::fs::DirEntry) -> anyhow::Result<std::fs::FileType> {
    let ft = e.file_type()?;
    anyhow::ensure!(
        !ft.is_symlink(),
        "{} is a symlink: a skeleton copies files, replace it by what it points to first",
        e.path().display()
    );
    Ok(ft)
}

/// Copies one file and gives the copy the source's modification time.
fn copy_file(src: &Path, dst: &Path, made: &mut Made) -> anyhow::Result<()> {
    let n = std::fs::copy(src, dst)
        .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    let mtime = std::fs::metadata(src)?.modified()?;
    std::fs::File::open(dst)?
        .set_modified(mtime)
        .with_context(|| format!("setting the time of {}", dst.display()))?;
    made.files_copied += 1;
    made.bytes_copied += n;
    Ok(())
}

/// Files and bytes under `p` (a file or a directory).
fn size_of(p: &Path) -> anyhow::Result<(u64, u64)> {
    let md = std::fs::symlink_metadata(p)?;
    if !md.is_dir() {
        return Ok((1, md.len()));
    }
    let mut t = (0, 0);
    for e in archive::sorted_entries(p)? {
        let (f, b) = size_of(&e.path())?;
        t = (t.0 + f, t.1 + b);
    }
    Ok(t)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ctax_schema::{Phase, RunConfig, RunSummary};
    use std::path::PathBuf;

    /// A root with: a finished launch (ok row, every cell complete), a launch with a capped
    /// cell (incomplete row), a launch without a row (killed), an `analysis/` output dir.
    pub(crate) fn root(dir: &Path) -> PathBuf {
        let root = dir.join("root");
        let run = |name: &str, launch: u32, complete: bool| {
            let d = root.join(name);
            std::fs::create_dir_all(d.join("superseded/1")).unwrap();
            let rc = RunConfig {
                schema_version: 1,
                config: "plain".into(),
                launch,
                run_dir: name.into(),
                phases: vec![Phase::A],
                cells: Vec::new(),
                model: "m".into(),
                served_model_name: "m".into(),
                port: 8000,
                extra: serde_json::json!({"stage": "A"}),
                simulated: false,
                placement: None,
            };
            std::fs::write(d.join("config.json"), serde_json::to_vec(&rc).unwrap()).unwrap();
            let mut h = super::super::steps::tests::health(Phase::A, "r2_i4096_o256", 0, 1);
            h.complete = complete;
            let mut summary = RunSummary::default();
            summary.cells.insert("A/r2_i4096_o256".into(), h);
            std::fs::write(
                d.join("summary.json"),
                serde_json::to_vec(&summary).unwrap(),
            )
            .unwrap();
            for f in [
                "requests_A_r2_i4096_o256.jsonl.zst",
                "requests_A_r4_i4096_o256.jsonl.cols",
                "metrics_A_r2_i4096_o256.jsonl",
                "engine_step_raw.123.jsonl.zst",
                "vllm_stderr.log.zst",
                "vllm_stdout.log",
                "gpu_telemetry_20261201-000000.csv",
                "gpu_telemetry_20261201-000000.json",
                "superseded/1/requests_A_r2_i4096_o256.jsonl",
            ] {
                std::fs::write(d.join(f), b"0123456789").unwrap();
            }
            std::fs::write(d.join("env.txt"), b"env").unwrap();
            std::fs::write(d.join("steps_slimmed.json"), b"{}").unwrap();
        };
        run("20261201-000000_plain_l0", 0, true);
        run("20261201-000100_plain_l1", 1, false);
        run("20261201-000200_plain_l2", 2, true);
        std::fs::create_dir_all(root.join("analysis")).unwrap();
        std::fs::write(root.join("analysis/x.json"), b"big").unwrap();
        std::fs::create_dir_all(root.join(".ctax")).unwrap();
        std::fs::write(root.join(".ctax/plan_x.json"), b"{}").unwrap();
        std::fs::write(root.join("profile.toml"), b"seed = 0").unwrap();
        std::fs::write(root.join("reference_rates.json"), b"{}").unwrap();
        let row = |dir: &str, status: RowStatus| {
            let mut r = manifest::row("1 Phase A", "plain", 0, 0);
            r.run_dir = Some(dir.into());
            r.status = status;
            serde_json::to_string(&r).unwrap()
        };
        // l0: first incomplete, then resumed to ok (the last row counts); l1 capped; l2 none.
        let rows = [
            row("20261201-000000_plain_l0", RowStatus::Incomplete),
            row("20261201-000000_plain_l0", RowStatus::Ok),
            row("20261201-000100_plain_l1", RowStatus::Incomplete),
        ];
        std::fs::write(root.join("manifest.jsonl"), rows.join("\n") + "\n").unwrap();
        root
    }

    #[test]
    fn finished_launches_travel_without_raw_files_and_the_rest_whole() {
        let t = tempfile::tempdir().unwrap();
        let root = root(t.path());
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        std::fs::File::options()
            .write(true)
            .open(root.join("20261201-000000_plain_l0/summary.json"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let dest = t.path().join("sk");
        let made = make(&root, &dest).unwrap();
        let m = &made.marker;
        assert_eq!(m.skeletal, vec!["20261201-000000_plain_l0"]);
        assert_eq!(
            m.whole,
            vec!["20261201-000100_plain_l1", "20261201-000200_plain_l2"]
        );
        // l0 leaves out its 6 raw files (request columns among them), its GPU telemetry (2
        // files) and superseded/ (1 file), 10 bytes each.
        assert_eq!((m.files_left_out, m.bytes_left_out), (9, 90));
        let l0 = dest.join("20261201-000000_plain_l0");
        for kept in [
            "config.json",
            "summary.json",
            "env.txt",
            "steps_slimmed.json",
        ] {
            assert!(l0.join(kept).is_file(), "{kept} missing");
        }
        for gone in [
            "requests_A_r2_i4096_o256.jsonl.zst",
            "requests_A_r4_i4096_o256.jsonl.cols",
            "metrics_A_r2_i4096_o256.jsonl",
            "engine_step_raw.123.jsonl.zst",
            "vllm_stderr.log.zst",
            "vllm_stdout.log",
            "gpu_telemetry_20261201-000000.csv",
            "gpu_telemetry_20261201-000000.json",
            "superseded",
        ] {
            assert!(!l0.join(gone).exists(), "{gone} copied");
        }
        // Whole copies keep every file, superseded/ included.
        assert!(
            dest.join("20261201-000100_plain_l1/superseded/1/requests_A_r2_i4096_o256.jsonl")
                .is_file()
        );
        assert!(
            dest.join("20261201-000200_plain_l2/engine_step_raw.123.jsonl.zst")
                .is_file()
        );
        assert!(dest.join(".ctax/plan_x.json").is_file());
        assert!(dest.join("manifest.jsonl").is_file());
        assert!(!dest.join("analysis").exists());
        // Times are the source's.
        let mt = std::fs::metadata(l0.join("summary.json"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(mt, old);
        assert_eq!(read(&dest).as_ref(), Some(m));
        assert!(read(&root).is_none());
    }

    #[test]
    fn a_skeleton_refuses_analysis_resume_of_its_skeletal_dirs_and_a_second_skeleton() {
        let t = tempfile::tempdir().unwrap();
        let root = root(t.path());
        let dest = t.path().join("sk");
        make(&root, &dest).unwrap();
        let e = refuse(&dest, "a report").unwrap_err().to_string();
        assert!(
            e.contains("is a skeleton of") && e.contains("a report"),
            "{e}"
        );
        assert!(refuse(&root, "a report").is_ok());
        let e = refuse_resume(&dest.join("20261201-000000_plain_l0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be resumed here"), "{e}");
        assert!(refuse_resume(&dest.join("20261201-000100_plain_l1")).is_ok());
        assert!(refuse_resume(&root.join("20261201-000000_plain_l0")).is_ok());
        let e = make(&dest, &t.path().join("sk2")).unwrap_err().to_string();
        assert!(e.contains("another skeleton"), "{e}");
        // An unreadable marker still guards (fails closed).
        std::fs::write(dest.join(MARKER), b"{").unwrap();
        assert!(refuse(&dest, "a report").is_err());
        assert!(refuse_resume(&dest.join("20261201-000100_plain_l1")).is_err());
        // A destination inside the root, and a symlink in it, are refused.
        let e = make(&root, &root.join(".ctax/sk")).unwrap_err().to_string();
        assert!(e.contains("inside"), "{e}");
        assert!(!root.join(".ctax/sk").exists(), "nothing left in the root");
        std::os::unix::fs::symlink(root.join("profile.toml"), root.join("link.toml")).unwrap();
        let e = make(&root, &t.path().join("sk3")).unwrap_err().to_string();
        assert!(e.contains("is a symlink"), "{e}");
        std::fs::create_dir_all(t.path().join("full")).unwrap();
        std::fs::write(t.path().join("full/x"), b"x").unwrap();
        let e = make(&root, &t.path().join("full")).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
    }
}
