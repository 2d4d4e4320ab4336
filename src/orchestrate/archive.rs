//! `ctax archive`: compress a results root's raw JSONL with zstd so it fits in a repository.
//!
//! Each `X.jsonl` becomes `X.jsonl.zst`; ingest reads both forms. A server log
//! (`vllm_stdout.log`, `vllm_stderr.log`) of at least [`SERVER_LOG_MIN_BYTES`] becomes
//! `X.log.zst` too (smaller logs stay plain, readable in a browser); the engine-log reader reads
//! both forms (one LMCache launch logged 210 MB, 0.86 MB compressed). Nothing is ever lost:
//! - the archive is written atomically (temp file + rename), then **read back from disk and
//!   decoded**, and the source is removed only if the decoded stream equals the source bytes
//!   exactly and the source did not change meanwhile;
//! - an existing `X.jsonl.zst` is replaced only when it is a strict prefix of `X.jsonl` (the
//!   plain file holds everything the archive holds, and more); when it holds the same bytes the
//!   plain copy is just removed; any other pair (a partial `.jsonl` beside a complete archive,
//!   or two different streams) is **reported and both are kept**;
//! - symlinks are never followed or removed (a symlinked run directory or raw file is reported
//!   and left alone), so the walk never leaves the root; FIFOs, devices and sockets named like
//!   raw files are reported and left alone.
//!
//! `--recompress` ([`recompress_root`]) re-encodes the archives already there (`X.jsonl.zst`,
//! the step plugin's `engine_step_raw.<pid>.jsonl.zst`, which `ctax run` writes at zstd 9 to keep
//! the GPU idle for less than a second, and `X.log.zst`) at the given level, and keeps the new
//! encoding only when it is smaller and, read back from disk, decodes to exactly the bytes the
//! old one decodes to (else the old file stays and the reason is reported).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::ingest::{number_columns, request_columns, step_slices};

/// What `ctax archive` did.
#[derive(Debug, Default)]
pub struct ArchiveReport {
    /// Raw files compressed (source removed).
    pub compressed: usize,
    /// Plain copies removed because an identical archive was already there.
    pub already_archived: usize,
    /// Bytes of the sources compressed, and of their archives.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// One line per file left as it was, with the reason.
    pub kept: Vec<String>,
    /// `--slim-steps`: per-cell step files removed (their records equal the cut of the raw step
    /// logs, which ingest then reads) and their bytes.
    pub slimmed: usize,
    pub slimmed_bytes: u64,
}

/// Server logs at least this large are compressed.
pub const SERVER_LOG_MIN_BYTES: u64 = 1 << 20;

/// Compresses every raw `*.jsonl` (and every large server log) under `root` (run directories only; `manifest.jsonl` and
/// `analysis/` stay plain).
pub fn compress_root(root: &Path, level: i32) -> anyhow::Result<ArchiveReport> {
    let mut rep = ArchiveReport::default();
    let mut files = Vec::new();
    collect(root, Walk::Plain, &mut files, &mut rep.kept)?;
    for f in &files {
        archive_one(f, level, &mut rep)?;
    }
    Ok(rep)
}

/// Re-encodes every archived raw file under `root` at `level` where that makes it smaller
/// (`compressed` counts the files replaced; `bytes_before`/`bytes_after` their sizes).
pub fn recompress_root(root: &Path, level: i32) -> anyhow::Result<ArchiveReport> {
    let mut rep = ArchiveReport::default();
    let mut files = Vec::new();
    collect(root, Walk::Archived, &mut files, &mut rep.kept)?;
    for f in &files {
        recompress_one(f, level, &mut rep)?;
    }
    Ok(rep)
}

/// `--columns`: re-encodes every zstd request file (`requests_<phase>_<cell>.jsonl.zst`) under
/// `root` as request columns and every zstd raw step log (`engine_step_raw.<pid>.jsonl.zst`) as
/// number columns, `….jsonl.cols` ([`request_columns`], [`number_columns`]: −26% and −41% on
/// the H200 archive), where that is smaller. The new file is written atomically, read back from
/// disk and decoded; the `.zst` is removed only if that gives back exactly its decoded bytes and
/// it did not change meanwhile. A file the encoding cannot reproduce (a record not in the
/// collector's form) or whose stream is damaged is kept, with the reason; so is a pair whose
/// `.cols` already holds other records. `compressed` counts the files replaced,
/// `already_archived` the `.zst` removed beside an identical `.cols`.
pub fn columns_root(root: &Path) -> anyhow::Result<ArchiveReport> {
    let mut rep = ArchiveReport::default();
    let mut files = Vec::new();
    collect(root, Walk::Columns, &mut files, &mut rep.kept)?;
    for f in &files {
        columns_one(f, &mut rep)?;
    }
    Ok(rep)
}

fn columns_one(src: &Path, rep: &mut ArchiveReport) -> anyhow::Result<()> {
    let meta0 = std::fs::symlink_metadata(src)?;
    let Some(raw) = decode_intact(src, rep, "re-encoded as columns")? else {
        return Ok(());
    };
    let name = src.file_name().unwrap_or_default().to_string_lossy();
    let dst = crate::ingest::columns::path_of(src);
    let read_cols = crate::ingest::jsonl::read_decoded;
    match std::fs::symlink_metadata(&dst) {
        Ok(m) => {
            let same = m.file_type().is_file() && read_cols(&dst).is_ok_and(|old| old == raw);
            if same {
                if remove_if_unchanged(src, &meta0, rep, "identical columns exist")? {
                    rep.already_archived += 1;
                }
            } else {
                rep.kept.push(format!(
                    "{}: NOT re-encoded: {} exists and does not hold the same records (or \
                     cannot be read); both kept, decide by hand",
                    src.display(),
                    dst.display()
                ));
            }
            return Ok(());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", dst.display())),
    }
    let encode = if is_step_raw(ctax_schema::plain_name(&name)) {
        number_columns::encode
    } else {
        request_columns::encode
    };
    let packed = match encode(&raw) {
        Ok(p) => p,
        Err(e) => {
            rep.kept.push(format!(
                "{}: NOT re-encoded as columns: {e:#}",
                src.display()
            ));
            return Ok(());
        }
    };
    if packed.len() as u64 >= meta0.len() {
        return Ok(());
    }
    crate::fsutil::write_atomic(&dst, &packed)
        .with_context(|| format!("writing {}", dst.display()))?;
    // Verify what is on disk, not what is in memory.
    if !read_cols(&dst).is_ok_and(|back| back == raw) {
        std::fs::remove_file(&dst)?;
        rep.kept.push(format!(
            "{}: NOT re-encoded: {} read back from disk did not decode to the same bytes",
            src.display(),
            dst.display()
        ));
        return Ok(());
    }
    if remove_if_unchanged(src, &meta0, rep, "re-encoded as columns")? {
        rep.compressed += 1;
        rep.bytes_before += meta0.len();
        rep.bytes_after += packed.len() as u64;
    } else {
        std::fs::remove_file(&dst)?;
    }
    Ok(())
}

/// Removes every per-cell step file (`engine_step_<phase>_<cell>.jsonl[.zst]`) under `root`
/// whose records equal what ingest cuts from the run's raw step logs for that cell
/// ([`crate::ingest::step_slices`]), so the raw log is stored once; the run's
/// `steps_slimmed.json` lists the cells and the raw logs (records per log) they were verified
/// against, and ingest cuts only those cells, only while the logs are unchanged. A file is
/// kept, with the reason, when a raw log is still plain (a launch running), when the run has
/// no `summary.json` entry for the cell, when the raw logs read with any warning or changed
/// since an earlier pass, when the file is not the cell's only, canonically named file or
/// cannot be read cleanly, or when its records differ.
pub fn slim_steps_root(root: &Path) -> anyhow::Result<ArchiveReport> {
    let mut rep = ArchiveReport::default();
    let mut dirs = Vec::new();
    run_dirs_with_step_logs(root, &mut dirs, &mut rep.kept)?;
    for d in &dirs {
        slim_run(d, &mut rep)?;
    }
    Ok(rep)
}

/// Directories under `dir` (symlinks not followed, `analysis/` skipped) holding raw step logs.
fn run_dirs_with_step_logs(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    kept: &mut Vec<String>,
) -> anyhow::Result<()> {
    if !step_slices::raw_logs(dir, false).is_empty() {
        out.push(dir.to_path_buf());
    }
    for e in sorted_entries(dir)? {
        let ft = e.file_type()?;
        if ft.is_symlink() && std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()) {
            kept.push(format!(
                "{}: a symbolic link; not followed",
                e.path().display()
            ));
        } else if ft.is_dir() && e.file_name() != "analysis" {
            run_dirs_with_step_logs(&e.path(), out, kept)?;
        }
    }
    Ok(())
}

fn slim_run(dir: &Path, rep: &mut ArchiveReport) -> anyhow::Result<()> {
    use ctax_schema::{CellKey, FileKind, RunSummary, StepRecord, file_name};
    let kept_all = |rep: &mut ArchiveReport, why: String| {
        rep.kept.push(format!(
            "{}: per-cell step files kept: {why}",
            dir.display()
        ));
    };
    // A plain raw log belongs to a launch still running (or killed before its split): its
    // records are still coming, so no cut can be verified yet.
    if let Some(p) = step_slices::raw_logs(dir, true).values().flatten().next() {
        kept_all(
            rep,
            format!(
                "{} is not compressed yet (a launch running, or killed before it cut its steps)",
                p.display()
            ),
        );
        return Ok(());
    }
    let summary: RunSummary = match std::fs::read(dir.join("summary.json"))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            kept_all(
                rep,
                format!("summary.json cannot be read ({e}): no cell windows"),
            );
            return Ok(());
        }
    };
    let launch = match step_slices::LaunchSteps::read(&step_slices::raw_logs(dir, false)) {
        Ok(l) => l,
        Err(e) => {
            kept_all(rep, format!("the raw step logs cannot be read ({e:#})"));
            return Ok(());
        }
    };
    if let Some(w) = launch.warnings.first() {
        kept_all(
            rep,
            format!(
                "the raw step logs read with {} warning(s), first: {w}",
                launch.warnings.len()
            ),
        );
        return Ok(());
    }
    let mut marker = match step_slices::SlimMarker::read(dir) {
        Ok(m) => m.unwrap_or_default(),
        Err(e) => {
            kept_all(rep, format!("{e:#}"));
            return Ok(());
        }
    };
    if !marker.cells.is_empty()
        && let Some(why) = marker.mismatch(&launch)
    {
        kept_all(rep, why);
        return Ok(());
    }
    let windows: std::collections::BTreeMap<String, _> = summary
        .cells
        .iter()
        .filter_map(|(k, h)| CellKey::parse(k).map(|key| (key.to_string(), h)))
        .collect();
    let (streams, _) = crate::ingest::names::raw_streams(dir)?;
    let mut verified = Vec::new();
    for s in streams.iter().filter(|s| s.kind == FileKind::EngineStep) {
        let key = CellKey::new(s.phase, s.cell.clone()).to_string();
        let canonical = file_name(FileKind::EngineStep, s.phase, &s.cell_name());
        let shown = s
            .files
            .first()
            .map_or_else(String::new, |f| f.display().to_string());
        let Some(h) = windows.get(&key) else {
            rep.kept
                .push(format!("{shown}: kept: its cell is not in summary.json"));
            continue;
        };
        let [f] = &s.files[..] else {
            rep.kept.push(format!(
                "{shown}: kept: {} files hold this cell's steps",
                s.files.len()
            ));
            continue;
        };
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        if name
            .as_deref()
            .and_then(|n| n.strip_suffix(".zst").or(Some(n)))
            != Some(&canonical)
        {
            rep.kept
                .push(format!("{shown}: kept: not named `{canonical}[.zst]`"));
            continue;
        }
        let meta0 = std::fs::symlink_metadata(f)?;
        if !meta0.file_type().is_file() {
            rep.kept.push(format!("{shown}: kept: not a regular file"));
            continue;
        }
        let lines = match crate::ingest::jsonl::read_jsonl::<StepRecord>(f) {
            Ok(l) => l,
            Err(e) => {
                rep.kept
                    .push(format!("{shown}: kept: it cannot be read ({e})"));
                continue;
            }
        };
        if let Some(w) = lines.warnings.first() {
            rep.kept
                .push(format!("{shown}: kept: it reads with a warning: {w}"));
            continue;
        }
        let cut = launch.of_cell(h);
        if lines.rows != cut {
            let first = lines.rows.iter().zip(cut).position(|(a, b)| a != b);
            rep.kept.push(format!(
                "{shown}: kept: it holds {} records, the cut of the raw step logs {}{}",
                lines.rows.len(),
                cut.len(),
                first
                    .map(|k| format!(" (first difference at record {})", k + 1))
                    .unwrap_or_default()
            ));
            continue;
        }
        verified.push((f.clone(), meta0, key));
    }
    if verified.is_empty() {
        return Ok(());
    }
    // The marker first (atomically): a file it lists that is still there is read as before.
    marker.raw_logs = launch.per_log.clone();
    marker
        .cells
        .extend(verified.iter().map(|(_, _, k)| k.clone()));
    crate::fsutil::write_json_atomic(&dir.join(step_slices::SLIM_MARKER), &marker)?;
    for (f, meta0, _) in &verified {
        if remove_if_unchanged(f, meta0, rep, "slimmed")? {
            rep.slimmed += 1;
            rep.slimmed_bytes += meta0.len();
        }
    }
    if let Ok(d) = std::fs::File::open(dir) {
        d.sync_all()?;
    }
    Ok(())
}

fn recompress_one(path: &Path, level: i32, rep: &mut ArchiveReport) -> anyhow::Result<()> {
    let old_len = std::fs::symlink_metadata(path)?.len();
    let Some(raw) = decode_intact(path, rep, "recompressed")? else {
        return Ok(());
    };
    let packed = zstd::encode_all(&raw[..], level)
        .with_context(|| format!("compressing {}", path.display()))?;
    if packed.len() as u64 >= old_len {
        return Ok(());
    }
    let tmp = PathBuf::from(format!("{}.recompress-tmp", path.display()));
    {
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        std::io::Write::write_all(&mut f, &packed)?;
        f.sync_all()?;
    }
    let (back, damaged) = decode_file(&tmp)?;
    if back != raw || damaged.is_some() {
        std::fs::remove_file(&tmp)?;
        rep.kept.push(format!(
            "{}: NOT recompressed: the new encoding read back from disk did not decode to the \
             same bytes",
            path.display()
        ));
        return Ok(());
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    if let Some(d) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
        d.sync_all()?;
    }
    rep.compressed += 1;
    rep.bytes_before += old_len;
    rep.bytes_after += packed.len() as u64;
    Ok(())
}

/// Which files the walk collects: plain raw files to compress, archives to recompress, or
/// zstd request files and raw step logs to re-encode as columns.
#[derive(Clone, Copy, PartialEq)]
enum Walk {
    Plain,
    Archived,
    Columns,
}

fn is_server_log(name: &str) -> bool {
    matches!(name, "vllm_stdout.log" | "vllm_stderr.log")
}

fn is_step_raw(name: &str) -> bool {
    step_slices::raw_stem(name) == Some(name)
}

/// A raw file's name (plain form): a per-cell JSONL file, a step plugin's raw log, or a server
/// log.
pub(crate) fn is_raw_name(name: &str) -> bool {
    (name.ends_with(".jsonl") && ctax_schema::parse_file_name(name).is_some())
        || is_step_raw(name)
        || is_server_log(name)
}

/// The entries of `dir`, sorted by name.
pub(crate) fn sorted_entries(dir: &Path) -> anyhow::Result<Vec<std::fs::DirEntry>> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}

fn collect(
    dir: &Path,
    walk: Walk,
    out: &mut Vec<PathBuf>,
    kept: &mut Vec<String>,
) -> anyhow::Result<()> {
    for e in sorted_entries(dir)? {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        // The entry's own type: a symlink is a symlink here, never what it points to.
        let ft = e
            .file_type()
            .with_context(|| format!("reading {}", p.display()))?;
        let raw_name = match walk {
            // Plain step-plugin logs are compressed by `ctax run` itself (steps.rs).
            Walk::Plain => is_raw_name(&name) && !is_step_raw(&name),
            Walk::Archived => name.strip_suffix(".zst").is_some_and(is_raw_name),
            Walk::Columns => name.strip_suffix(".zst").is_some_and(|plain| {
                is_step_raw(plain)
                    || plain.ends_with(".jsonl")
                        && ctax_schema::parse_file_name(plain)
                            .is_some_and(|(k, ..)| k == ctax_schema::FileKind::Requests)
            }),
        };
        if ft.is_symlink() {
            if raw_name || std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
                kept.push(format!(
                    "{}: a symbolic link; not followed, not compressed, not removed",
                    p.display()
                ));
            }
        } else if ft.is_dir() {
            if name != "analysis" {
                collect(&p, walk, out, kept)?;
            }
        } else if raw_name {
            if ft.is_file() {
                let small_log = walk == Walk::Plain
                    && is_server_log(&name)
                    && e.metadata().is_ok_and(|m| m.len() < SERVER_LOG_MIN_BYTES);
                if !small_log {
                    out.push(p);
                }
            } else {
                kept.push(format!(
                    "{}: not a regular file (a FIFO, device or socket); left alone",
                    p.display()
                ));
            }
        }
    }
    Ok(())
}

/// Decodes a zstd file as far as it goes: (bytes, `Some(error)` if the stream is damaged or cut).
fn decode_file(path: &Path) -> anyhow::Result<(Vec<u8>, Option<String>)> {
    let f = crate::ingest::jsonl::open_regular(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut out = Vec::new();
    let err = match zstd::stream::read::Decoder::new(f) {
        Ok(mut d) => d.read_to_end(&mut out).err().map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    };
    Ok((out, err))
}

/// [`decode_file`] for a pass that rewrites the archive: `None`, with "`path`: NOT `verb`: the
/// stream is damaged" in `rep.kept`, when the stream is damaged or cut.
fn decode_intact(
    path: &Path,
    rep: &mut ArchiveReport,
    verb: &str,
) -> anyhow::Result<Option<Vec<u8>>> {
    let (raw, damaged) = decode_file(path)?;
    Ok(match damaged {
        Some(e) => {
            rep.kept.push(format!(
                "{}: NOT {verb}: the stream is damaged ({e})",
                path.display()
            ));
            None
        }
        None => Some(raw),
    })
}

fn lines(b: &[u8]) -> usize {
    b.iter().filter(|&&c| c == b'\n').count() + usize::from(b.last().is_some_and(|&c| c != b'\n'))
}

fn archive_one(src: &Path, level: i32, rep: &mut ArchiveReport) -> anyhow::Result<()> {
    let dst = PathBuf::from(format!("{}.zst", src.display()));
    let f = crate::ingest::jsonl::open_regular(src)
        .with_context(|| format!("opening {}", src.display()))?;
    let meta0 = f.metadata()?;
    let mut raw = Vec::with_capacity(meta0.len() as usize);
    { f }
        .read_to_end(&mut raw)
        .with_context(|| format!("reading {}", src.display()))?;

    // An archive already there: only a strict prefix of the source may be replaced.
    match std::fs::symlink_metadata(&dst) {
        Ok(m) if !m.file_type().is_file() => {
            rep.kept.push(format!(
                "{}: {} exists and is not a regular file; both left as they are",
                src.display(),
                dst.display()
            ));
            return Ok(());
        }
        Ok(_) => {
            let (old, damaged) = decode_file(&dst)?;
            if old == raw && damaged.is_none() {
                if remove_if_unchanged(src, &meta0, rep, "an identical archive exists")? {
                    rep.already_archived += 1;
                }
                return Ok(());
            }
            let prefix = old.len() < raw.len() && raw.starts_with(&old);
            if !prefix {
                let relation = if old.starts_with(&raw) {
                    "is a partial copy of the archive (its beginning)"
                } else {
                    "differs from the archive"
                };
                rep.kept.push(format!(
                    "{}: NOT archived: {} already holds {} lines ({} bytes{}) and the plain file \
                     {} lines ({} bytes), which {relation}; a .jsonl only replaces an archive \
                     it continues: both kept, decide by hand",
                    src.display(),
                    dst.display(),
                    lines(&old),
                    old.len(),
                    damaged
                        .map(|e| format!(", stream damaged: {e}"))
                        .unwrap_or_default(),
                    lines(&raw),
                    raw.len()
                ));
                return Ok(());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", dst.display())),
    }

    let packed = zstd::encode_all(&raw[..], level)
        .with_context(|| format!("compressing {}", src.display()))?;
    crate::fsutil::write_atomic(&dst, &packed)
        .with_context(|| format!("writing {}", dst.display()))?;
    // Verify what is on disk, not what is in memory.
    let (back, damaged) = decode_file(&dst)?;
    if back != raw || damaged.is_some() {
        rep.kept.push(format!(
            "{}: NOT removed: {} read back from disk decodes to {} bytes{} instead of the \
             source's {} bytes",
            src.display(),
            dst.display(),
            back.len(),
            damaged.map(|e| format!(" ({e})")).unwrap_or_default(),
            raw.len()
        ));
        return Ok(());
    }
    if remove_if_unchanged(src, &meta0, rep, "archived")? {
        rep.compressed += 1;
        rep.bytes_before += raw.len() as u64;
        rep.bytes_after += packed.len() as u64;
    }
    Ok(())
}

/// Removes `src` unless it changed since it was read (a writer still appending to it);
/// returns whether it was removed.
fn remove_if_unchanged(
    src: &Path,
    before: &std::fs::Metadata,
    rep: &mut ArchiveReport,
    why: &str,
) -> anyhow::Result<bool> {
    let now = std::fs::symlink_metadata(src)?;
    if !now.file_type().is_file()
        || now.len() != before.len()
        || now.mtime() != before.mtime()
        || now.mtime_nsec() != before.mtime_nsec()
        || now.ino() != before.ino()
    {
        rep.kept.push(format!(
            "{}: changed while it was being archived ({why}); kept",
            src.display()
        ));
        return Ok(false);
    }
    std::fs::remove_file(src).with_context(|| format!("removing {}", src.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(root: &Path) -> PathBuf {
        let run = root.join("20260101-000000_plain_l0");
        std::fs::create_dir_all(&run).unwrap();
        run
    }

    fn zst(body: &[u8]) -> Vec<u8> {
        zstd::encode_all(body, 3).unwrap()
    }

    /// Archives made at zstd 1 shrink at 19 and decode to the same bytes; a damaged archive is
    /// reported and left as it is; files not named like raw data are not touched; a second
    /// pass finds nothing smaller to write.
    #[test]
    fn recompress_shrinks_archives_losslessly_and_keeps_damaged_ones() {
        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        // Compressible but not trivial: numbered records, as a step log is.
        let body: String = (0..20_000)
            .map(|i| {
                format!(
                    "{{\"t_ns\":{},\"step_id\":{i},\"us\":{}.5}}\n",
                    1_000_000 + i * 7919,
                    i % 97
                )
            })
            .collect();
        let l1 = zstd::encode_all(body.as_bytes(), 1).unwrap();
        for name in [
            "engine_step_raw.42.jsonl.zst",
            "requests_A_r1_i8_o8.jsonl.zst",
            "notes.jsonl.zst",
        ] {
            std::fs::write(run.join(name), &l1).unwrap();
        }
        let cut = &l1[..l1.len() / 2];
        std::fs::write(run.join("metrics_A_r1_i8_o8.jsonl.zst"), cut).unwrap();
        let rep = recompress_root(d.path(), 19).unwrap();
        assert_eq!(rep.compressed, 2, "{:?}", rep.kept);
        assert!(rep.bytes_after < rep.bytes_before, "{rep:?}");
        for name in [
            "engine_step_raw.42.jsonl.zst",
            "requests_A_r1_i8_o8.jsonl.zst",
        ] {
            let now = std::fs::read(run.join(name)).unwrap();
            assert!(now.len() < l1.len(), "{name}");
            assert_eq!(
                zstd::decode_all(&now[..]).unwrap(),
                body.as_bytes(),
                "{name}"
            );
        }
        assert_eq!(std::fs::read(run.join("notes.jsonl.zst")).unwrap(), l1);
        assert_eq!(
            std::fs::read(run.join("metrics_A_r1_i8_o8.jsonl.zst")).unwrap(),
            cut
        );
        assert_eq!(rep.kept.len(), 1, "{:?}", rep.kept);
        assert!(
            rep.kept[0]
                .contains("metrics_A_r1_i8_o8.jsonl.zst: NOT recompressed: the stream is damaged")
        );
        let leftovers: Vec<_> = std::fs::read_dir(&run)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("recompress-tmp"))
            .collect();
        assert!(leftovers.is_empty());
        let again = recompress_root(d.path(), 19).unwrap();
        assert_eq!(again.compressed, 0);
    }

    /// (run directory, `<phase>/<cell>`) and the cell's request records.
    type CellRecords = Vec<((String, String), Vec<ctax_schema::RequestRecord>)>;

    /// The request records of every run and cell of `root`, as ingest reads them, and the
    /// names of its request files.
    fn requests_of(root: &Path) -> (CellRecords, Vec<String>) {
        let ds = crate::ingest::load(root).unwrap();
        let records = ds
            .runs
            .iter()
            .flat_map(|r| {
                r.cells.iter().map(|((ph, cell), c)| {
                    (
                        (r.dir_name.clone(), format!("{}/{cell}", ph.tag())),
                        c.requests.clone(),
                    )
                })
            })
            .collect();
        let mut names = Vec::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if e.path().is_dir() {
                    todo.push(e.path());
                } else if n.starts_with("requests_") {
                    names.push(n);
                }
            }
        }
        names.sort();
        (records, names)
    }

    /// `--columns` on a synthetic root: every zstd request file becomes `.cols`, ingest reads
    /// the same records from them, and a second pass has nothing to do; a cut file, a damaged
    /// stream and a `.cols` with other records are kept with their reasons, and a `.zst` beside
    /// identical columns goes.
    #[test]
    fn request_columns_replace_zstd_request_files_without_changing_a_record() {
        let d = tempfile::tempdir().unwrap();
        let spec = crate::synth::SynthSpec {
            launches: 2,
            requests_per_cell: 60,
            with_steps: false,
            ..Default::default()
        };
        crate::synth::generate(&spec, d.path()).unwrap();
        compress_root(d.path(), 3).unwrap();
        let (before, zst_names) = requests_of(d.path());
        assert!(zst_names.len() >= 6 && zst_names.iter().all(|n| n.ends_with(".jsonl.zst")));
        let rep = columns_root(d.path()).unwrap();
        assert_eq!(rep.compressed, zst_names.len(), "{:?}", rep.kept);
        assert!(rep.kept.is_empty(), "{:?}", rep.kept);
        assert!(rep.bytes_after < rep.bytes_before, "{rep:?}");
        let (after, names) = requests_of(d.path());
        assert_eq!(
            names,
            zst_names
                .iter()
                .map(|n| n.replace(".zst", ".cols"))
                .collect::<Vec<_>>()
        );
        assert_eq!(before.len(), after.len());
        assert!(
            before == after,
            "ingest reads other records from the columns"
        );
        let again = columns_root(d.path()).unwrap();
        assert_eq!((again.compressed, again.kept.len()), (0, 0));

        // The cases left as they are, and a cut file (re-encoded, its last line as it was), in
        // a run of their own.
        let run = run_dir(d.path());
        let line = |seq: u64| {
            format!(
                "{{\"request_id\":\"x/{seq}\",\"t_send_ns\":{},\"t_first_token_ns\":null,\
                 \"events\":[[{},1],[{},2]],\"error\":null}}\n",
                1_000 + seq,
                5_000 + seq * 37,
                9_000 + seq * 41
            )
        };
        let body: String = (0..400).map(line).collect();
        let cut = &body[..body.len() - 30];
        std::fs::write(
            run.join("requests_A_r5_i8_o8.jsonl.zst"),
            zst(cut.as_bytes()),
        )
        .unwrap();
        std::fs::write(
            run.join("requests_A_r1_i8_o8.jsonl.zst"),
            zst(body.replace("],[", "], [").as_bytes()),
        )
        .unwrap();
        let damaged = zst(body.as_bytes());
        std::fs::write(
            run.join("requests_A_r2_i8_o8.jsonl.zst"),
            &damaged[..damaged.len() / 2],
        )
        .unwrap();
        let cols = request_columns::encode(body.as_bytes()).unwrap();
        std::fs::write(
            run.join("requests_A_r3_i8_o8.jsonl.zst"),
            zst(body.as_bytes()),
        )
        .unwrap();
        std::fs::write(run.join("requests_A_r3_i8_o8.jsonl.cols"), &cols).unwrap();
        let other: String = (1..400).map(line).collect();
        std::fs::write(
            run.join("requests_A_r4_i8_o8.jsonl.zst"),
            zst(other.as_bytes()),
        )
        .unwrap();
        std::fs::write(run.join("requests_A_r4_i8_o8.jsonl.cols"), &cols).unwrap();
        // A raw step log, as the step plugin writes it: number columns.
        let steps: String = (0..500u64)
            .map(|i| {
                format!(
                    "{{\"t_ns\":{},\"step_id\":{i},\"pid\":42,\"step_duration_us\":{}.{:03},\
                     \"schedule_us\":null,\"num_running\":{}}}\n",
                    335_041_635_606 + i * 4_445_394 + i * i % 977,
                    7_000 + i * 31 % 1_500,
                    i * 7 % 1_000,
                    i % 9
                )
            })
            .collect();
        let raw_log = run.join("engine_step_raw.42.jsonl.zst");
        std::fs::write(&raw_log, zst(steps.as_bytes())).unwrap();
        let logs = || step_slices::raw_logs(&run, false);
        let steps_before = step_slices::LaunchSteps::read(&logs()).unwrap().steps;
        let rep = columns_root(d.path()).unwrap();
        assert!(!raw_log.exists());
        let log_cols = std::fs::read(run.join("engine_step_raw.42.jsonl.cols")).unwrap();
        assert!(log_cols.starts_with(number_columns::MAGIC));
        assert_eq!(number_columns::decode(&log_cols).unwrap(), steps.as_bytes());
        assert_eq!(
            step_slices::LaunchSteps::read(&logs()).unwrap().steps,
            steps_before
        );
        assert_eq!(
            (rep.compressed, rep.already_archived),
            (2, 1),
            "{:?}",
            rep.kept
        );
        let r5 = std::fs::read(run.join("requests_A_r5_i8_o8.jsonl.cols")).unwrap();
        assert_eq!(request_columns::decode(&r5).unwrap(), cut.as_bytes());
        assert!(!run.join("requests_A_r3_i8_o8.jsonl.zst").exists());
        assert_eq!(
            std::fs::read(run.join("requests_A_r3_i8_o8.jsonl.cols")).unwrap(),
            cols
        );
        let kept = rep.kept.join("\n");
        assert_eq!(rep.kept.len(), 3, "{kept}");
        assert!(
            kept.contains(
                "r1_i8_o8.jsonl.zst: NOT re-encoded as columns: line 1: `events` is not the \
                 collector's compact"
            ),
            "{kept}"
        );
        assert!(
            kept.contains("r2_i8_o8.jsonl.zst: NOT re-encoded as columns: the stream is damaged"),
            "{kept}"
        );
        assert!(
            kept.contains("r4_i8_o8.jsonl.zst: NOT re-encoded: "),
            "{kept}"
        );
        for c in ["r1", "r2", "r4"] {
            assert!(
                run.join(format!("requests_A_{c}_i8_o8.jsonl.zst")).exists(),
                "{c}"
            );
        }
        assert!(!run.join("requests_A_r1_i8_o8.jsonl.cols").exists());
    }

    #[test]
    fn compresses_raw_files_and_ingest_reads_them() {
        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        let body = "{\"x\":1}\n".repeat(1000);
        std::fs::write(run.join("metrics_A_r1_i8_o8.jsonl"), &body).unwrap();
        std::fs::write(d.path().join("manifest.jsonl"), "{}\n").unwrap();
        let rep = compress_root(d.path(), 3).unwrap();
        assert_eq!(rep.compressed, 1);
        assert!(rep.kept.is_empty(), "{:?}", rep.kept);
        assert!(
            rep.bytes_after < rep.bytes_before / 10,
            "{} -> {}",
            rep.bytes_before,
            rep.bytes_after
        );
        assert!(d.path().join("manifest.jsonl").exists());
        assert!(!run.join("metrics_A_r1_i8_o8.jsonl").exists());
        let packed = std::fs::read(run.join("metrics_A_r1_i8_o8.jsonl.zst")).unwrap();
        assert_eq!(
            String::from_utf8(zstd::decode_all(&packed[..]).unwrap()).unwrap(),
            body
        );
        let lines = crate::ingest::jsonl::read_jsonl::<serde_json::Value>(
            &run.join("metrics_A_r1_i8_o8.jsonl.zst"),
        )
        .unwrap();
        assert_eq!(lines.rows.len(), 1000);
        assert!(lines.warnings.is_empty());
    }

    /// A large server log is compressed and its engine facts still read; a small one and a
    /// log of another name stay plain.
    #[test]
    fn large_server_logs_are_compressed_small_ones_stay_plain() {
        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        let line = "(EngineCore pid=1) INFO 12-01 00:28:08 [utils.py:49] Connectors do not specify a kv cache layout, defaulting to NHD.\n";
        let big = line.repeat((SERVER_LOG_MIN_BYTES as usize).div_ceil(line.len()));
        std::fs::write(run.join("vllm_stderr.log"), &big).unwrap();
        std::fs::write(run.join("vllm_stdout.log"), "ready\n").unwrap();
        std::fs::write(run.join("other.log"), &big).unwrap();
        let rep = compress_root(d.path(), 3).unwrap();
        assert_eq!(rep.compressed, 1, "{:?}", rep.kept);
        assert!(!run.join("vllm_stderr.log").exists());
        let packed = std::fs::read(run.join("vllm_stderr.log.zst")).unwrap();
        assert_eq!(zstd::decode_all(&packed[..]).unwrap(), big.as_bytes());
        assert!(run.join("vllm_stdout.log").exists() && run.join("other.log").exists());
        let facts = crate::ingest::engine_log::read_run(&run).unwrap();
        assert_eq!(facts.kv_cache_layout.as_deref(), Some("NHD"));
        assert_eq!(facts.log_lines, 1 + (big.len() / line.len()) as u64);
    }

    #[test]
    fn a_partial_jsonl_never_replaces_a_complete_archive() {
        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        let full = "{\"seq\":0}\n{\"seq\":1}\n{\"seq\":2}\n";
        let partial = "{\"seq\":0}\n";
        let packed = zst(full.as_bytes());
        std::fs::write(run.join("requests_A_r1_i8_o8.jsonl.zst"), &packed).unwrap();
        std::fs::write(run.join("requests_A_r1_i8_o8.jsonl"), partial).unwrap();
        let rep = compress_root(d.path(), 3).unwrap();
        assert_eq!(rep.compressed, 0);
        assert_eq!(rep.kept.len(), 1, "{:?}", rep.kept);
        assert!(
            rep.kept[0].contains("already holds 3 lines")
                && rep.kept[0].contains("1 lines")
                && rep.kept[0].contains("a partial copy of the archive"),
            "{}",
            rep.kept[0]
        );
        assert_eq!(
            std::fs::read(run.join("requests_A_r1_i8_o8.jsonl.zst")).unwrap(),
            packed
        );
        assert_eq!(
            std::fs::read_to_string(run.join("requests_A_r1_i8_o8.jsonl")).unwrap(),
            partial
        );
        // A different stream of the same length is kept too (not a continuation).
        std::fs::write(
            run.join("requests_A_r1_i8_o8.jsonl"),
            full.replace('2', "9"),
        )
        .unwrap();
        let rep = compress_root(d.path(), 3).unwrap();
        assert_eq!((rep.compressed, rep.kept.len()), (0, 1), "{:?}", rep.kept);
        assert!(
            rep.kept[0].contains("differs from the archive"),
            "{}",
            rep.kept[0]
        );
    }

    #[test]
    fn an_archive_is_replaced_only_by_its_continuation_and_identical_copies_go() {
        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        // The archive is a prefix of the plain file (the plain one grew): replaced.
        std::fs::write(
            run.join("requests_A_r1_i8_o8.jsonl.zst"),
            zst(b"{\"a\":1}\n"),
        )
        .unwrap();
        std::fs::write(
            run.join("requests_A_r1_i8_o8.jsonl"),
            "{\"a\":1}\n{\"a\":2}\n",
        )
        .unwrap();
        // The archive holds the same bytes: the plain copy is removed.
        std::fs::write(
            run.join("metrics_A_r1_i8_o8.jsonl.zst"),
            zst(b"{\"m\":1}\n"),
        )
        .unwrap();
        std::fs::write(run.join("metrics_A_r1_i8_o8.jsonl"), "{\"m\":1}\n").unwrap();
        let rep = compress_root(d.path(), 3).unwrap();
        assert!(rep.kept.is_empty(), "{:?}", rep.kept);
        assert_eq!((rep.compressed, rep.already_archived), (1, 1));
        let dec = |n: &str| zstd::decode_all(&std::fs::read(run.join(n)).unwrap()[..]).unwrap();
        assert_eq!(
            dec("requests_A_r1_i8_o8.jsonl.zst"),
            b"{\"a\":1}\n{\"a\":2}\n"
        );
        assert_eq!(dec("metrics_A_r1_i8_o8.jsonl.zst"), b"{\"m\":1}\n");
        assert!(!run.join("requests_A_r1_i8_o8.jsonl").exists());
        assert!(!run.join("metrics_A_r1_i8_o8.jsonl").exists());
    }

    #[test]
    fn symlinks_are_never_followed_out_of_the_root_or_deleted_through() {
        let outside = tempfile::tempdir().unwrap();
        let ext_run = run_dir(outside.path());
        std::fs::write(ext_run.join("requests_A_r1_i8_o8.jsonl"), "{\"o\":1}\n").unwrap();
        std::fs::write(outside.path().join("lone.jsonl"), "{\"o\":2}\n").unwrap();

        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        // A symlinked run directory and a symlinked raw file, both pointing outside the root.
        std::os::unix::fs::symlink(&ext_run, d.path().join("20260101-000001_plain_l1")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("lone.jsonl"),
            run.join("metrics_A_r1_i8_o8.jsonl"),
        )
        .unwrap();
        let rep = compress_root(d.path(), 3).unwrap();
        assert_eq!(rep.compressed, 0);
        assert_eq!(rep.kept.len(), 2, "{:?}", rep.kept);
        assert!(rep.kept.iter().all(|k| k.contains("symbolic link")));
        // Nothing outside was touched; the link itself is still there.
        assert_eq!(
            std::fs::read_to_string(ext_run.join("requests_A_r1_i8_o8.jsonl")).unwrap(),
            "{\"o\":1}\n"
        );
        assert!(!ext_run.join("requests_A_r1_i8_o8.jsonl.zst").exists());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("lone.jsonl")).unwrap(),
            "{\"o\":2}\n"
        );
        assert!(
            std::fs::symlink_metadata(run.join("metrics_A_r1_i8_o8.jsonl"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(!run.join("metrics_A_r1_i8_o8.jsonl.zst").exists());
    }

    #[test]
    fn a_fifo_named_like_a_raw_file_is_left_alone_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let run = run_dir(d.path());
        let p = run.join("requests_A_r1_i8_o8.jsonl");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let rep = compress_root(d.path(), 3).unwrap();
        assert_eq!(rep.compressed, 0);
        assert!(rep.kept[0].contains("not a regular file"), "{:?}", rep.kept);
        assert!(p.exists());
    }
}
