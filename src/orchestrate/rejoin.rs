//! `ctax rejoin BACK ROOT`: what a sweep on a skeleton of ROOT wrote (`ctax skeleton`, run on
//! another host and brought back by `tools/gpu_run.sh`, or the skeleton itself) joins ROOT.
//!
//! Everything is checked before anything is written, and ROOT loses nothing:
//! - Every run directory of BACK (a directory with a `config.json`) has a `config.json` that
//!   parses: one that does not is refused, naming it (it would otherwise be left out unseen).
//! - ROOT is not in use: `ctax rejoin` holds [`ROOT_LOCK`] exclusive while it joins, `ctax run`
//!   holds it shared for its whole sweep (several sweeps may still share a root), `ctax archive`
//!   exclusive ([`root_lock`]); each is refused while another holds it.
//! - ROOT is not a skeleton; BACK's `manifest.jsonl` continues ROOT's (ROOT's bytes are a
//!   prefix of BACK's: a manifest with other rows means another sweep wrote to one of them;
//!   BACK without a manifest, a sweep killed in its first launch, adds no row);
//!   BACK's `profile.toml`, if there, is ROOT's.
//! - A run directory BACK has and ROOT lacks is new: copied in.
//! - One both have was resumed on the other host when BACK's `config.json` is newer than ROOT's
//!   (every launch attempt, and nothing else, writes it as it starts) or a manifest row BACK
//!   adds names it (the same second: tar keeps whole seconds): it replaces ROOT's
//!   **whole** (two attempts' files never mix) — only if every file of ROOT's copy is in
//!   BACK's, as it is, compressed or moved to `superseded/` (what a resume does; the slim
//!   marker and, where BACK slimmed, per-cell step files are not data); anything missing is
//!   refused, naming the files. A file both hold under one name, in any stored form (`X`,
//!   `X.zst`, columns `X.cols`), must hold the same records in every form BACK has
//!   ([`changed_files`]: the same bytes, or the same decoded stream), unless a
//!   launch attempt rewrites it (`config.json`, `summary.json`, `env.txt`, `launch.sh`, the slim
//!   marker), BACK's `superseded/` holds ROOT's version (a rerun cell's), or it only grew
//!   (server and raw step logs, files of cells ROOT's `summary.json` does not list yet); the
//!   records of a finished cell and anything under `superseded/` never change. Every run
//!   directory of BACK is walked first (a symlink is refused before anything is written).
//!   Otherwise it is left alone: a skeletal or untouched copy, or one already joined (and
//!   perhaps recompressed or slimmed here since).
//! - The plans of the run directories joined (`.ctax/plan_<dir>.json`: the cells the last
//!   launch attempt there handed the collector; never the skeleton's marker or the lock) and
//!   `preflight/` files are copied over ROOT's, and sweep logs (`ctax_run*.log`) beside ROOT's.
//!   The manifest is written last (atomically) and `MANIFEST.md` regenerated, so an interrupted
//!   rejoin is finished by running it again.
//!
//! Files keep their modification times. Replacement goes through hidden names in ROOT
//! (`.rejoin-<dir>.new`, `.rejoin-<dir>.old`; ingest and `ctax run` skip hidden directories),
//! the new copy flushed to disk before the old one goes; the next rejoin puts back a directory
//! an interrupted one had moved aside. Plans, pre-flight and logs are written atomically; a log
//! of the same name with other content is kept beside (`.1.log`); BACK's manifest joins up to
//! its last complete line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::root_lock::{self, Holder, ROOT_LOCK};
use super::{archive, manifest, resume, skeleton};

/// What [`rejoin`] did.
#[derive(Debug, Default, PartialEq)]
pub struct Rejoined {
    pub new_runs: Vec<String>,
    pub replaced_runs: Vec<String>,
    pub unchanged_runs: usize,
    pub rows_added: usize,
    /// Of the rows added, Phase A ones (reference rates to recompute before Phase B).
    pub phase_a_rows_added: usize,
    pub other_files: usize,
    /// Entries of BACK left as they are (not part of a results root).
    pub ignored: Vec<String>,
    /// Run directories of ROOT, after the join, that a launch left before its end (no
    /// manifest row, or a raw step log still plain): killed there, or still running when BACK
    /// is a snapshot of a live sweep (`ctax archive --finish-killed` seals them, once that
    /// sweep has ended). Read from ROOT, so an interrupted rejoin run again, or a directory an
    /// earlier rejoin brought, is listed too.
    pub unfinished: Vec<String>,
}

/// Joins `back` into `root` (module doc).
pub fn rejoin(back: &Path, root: &Path) -> anyhow::Result<Rejoined> {
    anyhow::ensure!(root.is_dir(), "{}: not a directory", root.display());
    anyhow::ensure!(back.is_dir(), "{}: not a directory", back.display());
    skeleton::refuse(
        root,
        "a rejoin target (rejoin into the root it was made from)",
    )?;
    anyhow::ensure!(
        !back.canonicalize()?.starts_with(root.canonicalize()?),
        "{} is {} or inside it: rejoin from a directory outside the root",
        back.display(),
        root.display()
    );
    // A run directory whose config.json does not parse would be left out unseen.
    check_configs(back)?;
    let _lock = root_lock::lock(root, Holder::Rejoin)?;
    recover(root)?;

    // The manifest: BACK continues ROOT. A bring-back without one (the sweep wrote no row: its
    // first launch was killed) adds no row.
    let old = read_or_empty(&root.join("manifest.jsonl"))?;
    let new = if back.join("manifest.jsonl").exists() {
        // Up to its last complete line (a snapshot taken mid-append).
        let mut b = read_or_empty(&back.join("manifest.jsonl"))?;
        b.truncate(b.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1));
        b
    } else {
        old.clone()
    };
    anyhow::ensure!(
        new.starts_with(&old),
        "{}/manifest.jsonl does not continue {}/manifest.jsonl (its first {} bytes differ): \
         another sweep wrote to one of them since the skeleton was made; nothing joined",
        back.display(),
        root.display(),
        old.len()
    );
    let mut added: Vec<ctax_schema::ManifestRow> = Vec::new();
    for (i, line) in new[old.len()..].split(|&c| c == b'\n').enumerate() {
        if !line.is_empty() {
            added.push(serde_json::from_slice(line).with_context(|| {
                format!(
                    "{}/manifest.jsonl: row {} after {}'s rows",
                    back.display(),
                    i + 1,
                    root.display()
                )
            })?);
        }
    }
    let named: BTreeSet<&str> = added.iter().filter_map(|r| r.run_dir.as_deref()).collect();
    if let Ok(p) = std::fs::read(back.join("profile.toml")) {
        anyhow::ensure!(
            std::fs::read(root.join("profile.toml")).ok().as_deref() == Some(&p[..]),
            "{}/profile.toml differs from {}'s: not a sweep on a skeleton of this root",
            back.display(),
            root.display()
        );
    }

    super::one_gpu_model::ensure_same(
        root,
        &super::one_gpu_model::of_root(back),
        &format!("the rejoin of {}", back.display()),
    )?;

    // Run directories: new, unchanged or resumed there (checked now, written below).
    let mut out = Rejoined::default();
    let mut copy: Vec<(PathBuf, String, bool)> = Vec::new();
    let mut runs: BTreeSet<String> = BTreeSet::new();
    for (dir, _) in resume::runs(back) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        runs.insert(name.clone());
        let mine = root.join(&name);
        // Symlinks and unreadable entries are found now, before anything is written.
        files(&dir)?;
        if !mine.exists() {
            copy.push((dir, name, false));
        } else if config_time(&dir) <= config_time(&mine) && !named.contains(name.as_str()) {
            out.unchanged_runs += 1;
        } else {
            let lost = lost_files(&mine, &dir)?;
            anyhow::ensure!(
                lost.is_empty(),
                "{name}: {}'s copy lacks {} file(s) of {}'s ({}): it is not the whole directory \
                 a resume there leaves (a skeletal copy?); nothing joined",
                back.display(),
                lost.len(),
                root.display(),
                lost.join(", ")
            );
            let changed = changed_files(&mine, &dir)?;
            anyhow::ensure!(
                changed.is_empty(),
                "{name}: {}'s copy changes {} file(s) of {}'s ({}): a resume moves a rerun cell's \
                 files to superseded/, leaves every other record as it is and only appends to \
                 logs; nothing joined",
                back.display(),
                changed.len(),
                root.display(),
                changed.join(", ")
            );
            copy.push((dir, name, true));
        }
    }
    // The run directories this rejoin adds or replaces: only their plans join (below).
    let joined: BTreeSet<String> = copy.iter().map(|(_, n, _)| n.clone()).collect();
    // Sweep logs: under their name, or beside a different one of that name.
    let mut logs = Vec::new();
    for e in archive::sorted_entries(back)? {
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type()?;
        anyhow::ensure!(
            !ft.is_symlink(),
            "{} is a symlink: rejoin copies files",
            e.path().display()
        );
        let known = runs.contains(&name)
            || [
                ".ctax",
                "preflight",
                "manifest.jsonl",
                "MANIFEST.md",
                "profile.toml",
                "reference_rates.json",
            ]
            .contains(&name.as_str());
        if known {
            continue;
        }
        if ft.is_file() && name.starts_with("ctax_run") && name.ends_with(".log") {
            // A sweep restarted on the same OUT keeps its log's name: both are kept.
            let mut dst = root.join(&name);
            let mut k = 1;
            while dst.exists() && std::fs::read(&dst)? != std::fs::read(e.path())? {
                dst = root.join(format!("{}.{k}.log", name.trim_end_matches(".log")));
                k += 1;
            }
            logs.push((e.path(), dst));
        } else {
            out.ignored.push(name);
        }
    }

    // Writes: run directories, plans, pre-flight, logs, then the manifest.
    for (src, name, replace) in copy {
        // `recover` above cleared what an interrupted rejoin left under these names.
        let tmp = root.join(format!(".rejoin-{name}.new"));
        let old = root.join(format!(".rejoin-{name}.old"));
        let mut made = skeleton::Made::default();
        if let Err(e) = skeleton::copy_tree(&src, &tmp, false, &mut made) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        sync_tree(&tmp)?;
        let dst = root.join(&name);
        if replace {
            std::fs::rename(&dst, &old)?;
            std::fs::rename(&tmp, &dst)?;
            std::fs::File::open(root)?.sync_all()?;
            std::fs::remove_dir_all(&old)?;
            out.replaced_runs.push(name);
        } else {
            std::fs::rename(&tmp, &dst)?;
            out.new_runs.push(name);
        }
    }
    for sub in [".ctax", "preflight"] {
        let dir = back.join(sub);
        if !dir.is_dir() {
            continue;
        }
        for e in archive::sorted_entries(&dir)? {
            let name = e.file_name();
            let rel = Path::new(sub).join(&name);
            // A plan (`plan_<dir>.json`) is the record of the last launch attempt in that run
            // directory: one of a directory left alone is BACK's copy of ROOT's (a skeleton's)
            // or older than ROOT's (a launch resumed here since), never newer.
            let plan_of_other = sub == ".ctax"
                && name
                    .to_str()
                    .and_then(super::launch::plan_run_dir)
                    .is_some_and(|d| !joined.contains(d));
            if e.file_type()?.is_file()
                && rel != Path::new(skeleton::MARKER)
                && rel != Path::new(ROOT_LOCK)
                && !plan_of_other
            {
                std::fs::create_dir_all(root.join(sub))?;
                copy_file(&e.path(), &root.join(sub).join(&name))?;
                out.other_files += 1;
            }
        }
    }
    for (src, dst) in logs {
        copy_file(&src, &dst)?;
        out.other_files += 1;
    }
    if new.len() > old.len() {
        crate::fsutil::write_atomic(&root.join("manifest.jsonl"), &new)?;
    }
    manifest::render(root)?;
    out.rows_added = added.len();
    out.phase_a_rows_added = added
        .iter()
        .filter(|r| r.stage == manifest::STAGE_A)
        .count();
    out.unfinished = super::killed::unfinished(root)?;
    Ok(out)
}

fn read_or_empty(p: &Path) -> anyhow::Result<Vec<u8>> {
    match std::fs::read(p) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", p.display())),
    }
}

/// Copies one file atomically (temp + rename), keeping its modification time.
fn copy_file(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    crate::fsutil::write_atomic(dst, &bytes)?;
    let mtime = std::fs::metadata(src)?.modified()?;
    std::fs::File::open(dst)?.set_modified(mtime)?;
    Ok(())
}

/// Flushes every file and directory under `dir` to disk (before the copy it replaces goes).
fn sync_tree(dir: &Path) -> anyhow::Result<()> {
    for e in archive::sorted_entries(dir)? {
        if e.file_type()?.is_dir() {
            sync_tree(&e.path())?;
        } else {
            std::fs::File::open(e.path())?.sync_all()?;
        }
    }
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Finishes what an interrupted rejoin left in `root`: a run directory moved aside
/// (`.rejoin-X.old`) goes back where it was if nothing took its place, else it is the replaced
/// copy and goes; a half-made copy (`.rejoin-X.new`) goes.
fn recover(root: &Path) -> anyhow::Result<()> {
    for e in archive::sorted_entries(root)? {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(".rejoin-") else {
            continue;
        };
        if let Some(x) = rest.strip_suffix(".old") {
            if root.join(x).exists() {
                std::fs::remove_dir_all(e.path())?;
            } else {
                std::fs::rename(e.path(), root.join(x))?;
                eprintln!("[ctax] {x}: put back (an interrupted rejoin had moved it aside)");
            }
        } else if rest.ends_with(".new") {
            std::fs::remove_dir_all(e.path())?;
        }
    }
    Ok(())
}

/// The files under `dir`, as paths relative to it, with (size, modification time).
fn files(dir: &Path) -> anyhow::Result<Vec<(PathBuf, u64, std::time::SystemTime)>> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        for e in archive::sorted_entries(&dir.join(&rel))? {
            let (md, r) = (e.metadata()?, rel.join(e.file_name()));
            anyhow::ensure!(
                !e.file_type()?.is_symlink(),
                "{} is a symlink: rejoin copies files",
                e.path().display()
            );
            if md.is_dir() {
                todo.push(r);
            } else {
                out.push((r, md.len(), md.modified()?));
            }
        }
    }
    Ok(out)
}

/// When the run directory's last launch attempt started: its `config.json`'s modification time
/// (the epoch when unreadable).
fn config_time(dir: &Path) -> std::time::SystemTime {
    std::fs::metadata(dir.join("config.json"))
        .and_then(|m| m.modified())
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// Refuses `back` when one of its run directories (a directory, not hidden, with a
/// `config.json`) has a `config.json` that does not parse: [`resume::runs`] would leave it out,
/// so its launch would not join and nothing would say why.
fn check_configs(back: &Path) -> anyhow::Result<()> {
    for dir in resume::run_dir_candidates(back) {
        let cfg = dir.join("config.json");
        if std::fs::symlink_metadata(&cfg).is_err() {
            continue;
        }
        let bytes = std::fs::read(&cfg).with_context(|| format!("reading {}", cfg.display()))?;
        if let Err(why) = serde_json::from_slice::<ctax_schema::RunConfig>(&bytes) {
            anyhow::bail!(
                "{}: not a run directory's config.json ({why}): its launch would not join; \
                 repair or remove {}, then rejoin; nothing joined",
                cfg.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// BACK's `superseded/` files by name (every attempt's directory).
fn superseded(back: &Path) -> anyhow::Result<std::collections::BTreeMap<String, Vec<PathBuf>>> {
    let mut out: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    let dir = back.join("superseded");
    if dir.is_dir() {
        for (rel, ..) in files(&dir)? {
            if let Some(n) = rel.file_name() {
                out.entry(n.to_string_lossy().into_owned())
                    .or_default()
                    .push(dir.join(&rel));
            }
        }
    }
    Ok(out)
}

/// Top-level files of a run directory that every launch attempt (a resume too) writes anew:
/// `config.json` and `env.txt` ([`super::launch`]), `launch.sh` (the launch script, or the
/// simulated server's), `summary.json` (the collector, [`resume::supersede`], the statistics);
/// the slim marker goes or is rewritten (`ctax archive --slim-steps`). Server logs are
/// appended to (the append-only rule); the collector creates the files of the cells it runs
/// only after [`resume::supersede`] moved their old ones to `superseded/`.
const REWRITTEN: [&str; 6] = [
    "config.json",
    "summary.json",
    "env.txt",
    "launch.sh",
    "launch.sh.tmp",
    crate::ingest::step_slices::SLIM_MARKER,
];

/// How one stream compares with another.
#[derive(Debug, PartialEq)]
enum Cmp {
    Same,
    /// The first is a strict prefix of the second.
    Grown,
    Other,
}

/// Compares two streams chunk by chunk.
fn compare(mut a: impl std::io::Read, mut b: impl std::io::Read) -> std::io::Result<Cmp> {
    fn fill(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match r.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let (n, m) = (fill(&mut a, &mut x)?, fill(&mut b, &mut y)?);
        if n > m || x[..n] != y[..n] {
            return Ok(Cmp::Other);
        }
        if n < x.len() {
            return Ok(if n == m { Cmp::Same } else { Cmp::Grown });
        }
    }
}

/// `p`'s records: its bytes, or what they decode to for a stored form (a `.zst` with zstd's
/// magic number, a `.cols` with a columns one).
fn records(p: &Path) -> anyhow::Result<Box<dyn std::io::Read>> {
    use std::io::{Read, Seek};
    let mut f = std::fs::File::open(p).with_context(|| format!("reading {}", p.display()))?;
    let mut magic = [0u8; 8];
    let n = f.read(&mut magic).unwrap_or(0);
    let encoded = match p.extension().and_then(|e| e.to_str()) {
        Some("zst") => magic[..n].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
        Some("cols") => crate::ingest::columns::is_columns(&magic[..n]),
        _ => false,
    };
    // One open: back to the start after the look at the magic number.
    f.rewind()
        .with_context(|| format!("reading {}", p.display()))?;
    Ok(if encoded {
        crate::ingest::jsonl::decoded(p, f).with_context(|| format!("decoding {}", p.display()))?
    } else {
        Box::new(f)
    })
}

/// How ROOT's file `a` compares with BACK's `b`: their bytes, else, where one is in a stored
/// form (a `.zst` recompressed on one side or compressed under `superseded/`, request columns
/// made on one side), their decoded records.
fn compare_files(a: &Path, b: &Path) -> anyhow::Result<Cmp> {
    let bytes =
        |p: &Path| std::fs::File::open(p).with_context(|| format!("reading {}", p.display()));
    let raw = compare(bytes(a)?, bytes(b)?)?;
    let stored = |p: &Path| {
        p.file_name()
            .is_some_and(|n| ctax_schema::plain_name(&n.to_string_lossy()) != n)
    };
    if raw == Cmp::Same || !(stored(a) || stored(b)) {
        return Ok(raw);
    }
    compare(records(a)?, records(b)?)
        .with_context(|| format!("decoding {} and {}", a.display(), b.display()))
}

/// The files `mine` and `back` hold under the same name (neither compressed nor decompressed
/// since) whose records differ where a resume cannot have changed them, each with why. Allowed:
/// the same records; a file every launch attempt rewrites ([`REWRITTEN`]); a name whose ROOT
/// version BACK moved to `superseded/` (a rerun cell's files, the name reused);
/// and, but for anything under a subdirectory (`superseded/`) and the records of a cell ROOT's
/// `summary.json` lists (finished: its files are closed), BACK's starting with ROOT's records
/// (server logs appended to, a raw step log or a cell's file a snapshot took mid-write).
fn changed_files(mine: &Path, back: &Path) -> anyhow::Result<Vec<String>> {
    // Moved aside there: under superseded/ in BACK, not in ROOT's copy.
    let mut moved = superseded(back)?;
    for paths in moved.values_mut() {
        paths.retain(|p| p.strip_prefix(back).is_ok_and(|r| !mine.join(r).exists()));
    }
    let finished: BTreeSet<String> = resume::read_summary(mine)
        .cells
        .values()
        .flat_map(|h| {
            ctax_schema::FileKind::ALL.map(|k| ctax_schema::file_name(k, h.phase, &h.cell))
        })
        .collect();
    let mut changed = Vec::new();
    for (rel, ..) in files(mine)? {
        let name = rel.file_name().unwrap().to_string_lossy().into_owned();
        let top = rel.parent() == Some(Path::new(""));
        if name.starts_with('.') || top && REWRITTEN.contains(&name.as_str()) {
            continue;
        }
        let plain = ctax_schema::plain_name(&name);
        let ours = mine.join(&rel);
        // Every form BACK holds of that name (`X`, `X.zst`, `X.cols`) that differs from ROOT's
        // (two forms with other records would otherwise join unexamined).
        let mut differ = Vec::new();
        for f in ctax_schema::stored_forms(plain) {
            let theirs = back.join(rel.with_file_name(&f));
            if theirs.is_file() {
                let cmp = compare_files(&ours, &theirs)?;
                if cmp != Cmp::Same {
                    differ.push((f, cmp));
                }
            }
        }
        if differ.is_empty() {
            continue;
        }
        // The name reused after BACK moved ROOT's version aside (a rerun cell's files).
        let mut kept_aside = false;
        for p in ctax_schema::stored_forms(plain)
            .iter()
            .filter_map(|f| moved.get(f))
            .flatten()
        {
            if compare_files(&ours, p)? == Cmp::Same {
                kept_aside = true;
                break;
            }
        }
        if kept_aside {
            continue;
        }
        let closed = !top || finished.contains(plain);
        for (f, cmp) in differ {
            if cmp == Cmp::Grown && !closed {
                continue;
            }
            let why = if cmp == Cmp::Grown {
                "grown, but it was final"
            } else {
                "other records"
            };
            changed.push(if f == name {
                format!("{} ({why})", rel.display())
            } else {
                format!("{} ({why}: BACK's {f})", rel.display())
            });
        }
    }
    Ok(changed)
}

/// The files of `mine` that `back` holds nowhere: not at the same place, not in another stored
/// form there (`X`, `X.zst`, `X.cols`), and not under its `superseded/`.
fn lost_files(mine: &Path, back: &Path) -> anyhow::Result<Vec<String>> {
    let superseded = superseded(back)?;
    let forms = |name: &str| ctax_schema::stored_forms(ctax_schema::plain_name(name));
    // A resume writes the slimmed per-cell step files back and removes the marker; a slim
    // there removes per-cell step files its raw step logs hold (and writes the marker).
    let slimmed_there = back.join(crate::ingest::step_slices::SLIM_MARKER).is_file();
    let mut lost = Vec::new();
    for (rel, ..) in files(mine)? {
        let name = rel.file_name().unwrap().to_string_lossy().into_owned();
        let top = rel.parent() == Some(Path::new(""));
        // Hidden files are no data: the collector's `.summary.lock`, temps of atomic writes.
        if name.starts_with('.')
            || top
                && (name == crate::ingest::step_slices::SLIM_MARKER
                    || (slimmed_there
                        && name.starts_with("engine_step_")
                        && !name.starts_with("engine_step_raw")))
        {
            continue;
        }
        let held = forms(&name).iter().any(|f| {
            back.join(rel.with_file_name(f)).is_file() || superseded.contains_key(f.as_str())
        });
        if !held {
            lost.push(rel.display().to_string());
        }
    }
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `skeleton::tests::root` and its skeleton (the temp dir kept alive by the caller).
    fn root_and_skeleton() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = skeleton::tests::root(t.path());
        let sk = t.path().join("sk");
        skeleton::make(&root, &sk).unwrap();
        (t, root, sk)
    }

    /// The files of `root` but its lock (taken, and so created, by the first rejoin).
    fn data(root: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let mut v = files(root).unwrap();
        v.retain(|(p, ..)| p != Path::new(ROOT_LOCK));
        v
    }

    /// `launch` of the skeleton `sk` resumed there: its config.json rewritten later.
    fn resume_there(sk: &Path, launch: &str) -> PathBuf {
        let d = sk.join(launch);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let cfg = std::fs::read(d.join("config.json")).unwrap();
        std::fs::write(d.join("config.json"), cfg).unwrap();
        d
    }

    /// A skeleton of a root, a sweep there that resumed the unfinished launch l1 (a new file,
    /// a rerun cell's file moved to `superseded/`, config.json rewritten) and added launch l3,
    /// rows appended: rejoin brings l3 in, replaces l1 whole, leaves the skeletal l0 and l2
    /// alone (their raw files stay in the root), copies the plan and the log, and continues
    /// the manifest; a second rejoin changes nothing.
    #[test]
    fn a_skeleton_s_sweep_rejoins_its_root_and_nothing_of_the_root_is_lost() {
        let (t, root, sk) = root_and_skeleton();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // The sweep there.
        let l1 = sk.join("20261201-000100_plain_l1");
        std::fs::rename(
            l1.join("metrics_A_r2_i4096_o256.jsonl"),
            l1.join("superseded/1/metrics_A_r2_i4096_o256.jsonl"),
        )
        .unwrap();
        std::fs::write(l1.join("metrics_A_r2_i4096_o256.jsonl.zst"), b"rerun").unwrap();
        let cfg = std::fs::read(l1.join("config.json")).unwrap();
        std::fs::write(l1.join("config.json"), &cfg).unwrap();
        let l3 = sk.join("20261202-000000_plain_l3");
        std::fs::create_dir_all(&l3).unwrap();
        // Its own config.json: l1's, renamed (a launch's config names its run directory).
        let own_cfg = |name: &str| {
            String::from_utf8(cfg.clone())
                .unwrap()
                .replace("20261201-000100_plain_l1", name)
        };
        std::fs::write(l3.join("config.json"), own_cfg("20261202-000000_plain_l3")).unwrap();
        std::fs::write(l3.join("requests_A_r2_i4096_o256.jsonl.zst"), b"new").unwrap();
        std::fs::write(sk.join(".ctax/plan_20261202-000000_plain_l3.json"), b"{}").unwrap();
        std::fs::write(sk.join("ctax_run_20261202-000000.log"), b"log").unwrap();
        let mut r = manifest::row("1 Phase A", "plain", 3, 0);
        r.run_dir = Some("20261202-000000_plain_l3".into());
        manifest::append(&sk, &r).unwrap();
        let mut r = manifest::row("1 Phase A", "plain", 1, 0);
        r.run_dir = Some("20261201-000100_plain_l1".into());
        manifest::append(&sk, &r).unwrap();
        manifest::append(&sk, &manifest::row("3 Phase B", "plain", 0, 0)).unwrap();

        let done = rejoin(&sk, &root).unwrap();
        assert_eq!(done.new_runs, ["20261202-000000_plain_l3"]);
        assert_eq!(done.replaced_runs, ["20261201-000100_plain_l1"]);
        assert_eq!(done.unchanged_runs, 2);
        assert_eq!((done.rows_added, done.phase_a_rows_added), (3, 2));
        // The root's l2 never got a row (the fixture's launch killed before its end); the
        // resumed l1 and the new l3 did.
        assert_eq!(done.unfinished, ["20261201-000200_plain_l2"]);
        assert_eq!(
            std::fs::read(root.join("manifest.jsonl")).unwrap(),
            std::fs::read(sk.join("manifest.jsonl")).unwrap()
        );
        assert!(root.join("MANIFEST.md").is_file());
        let l0 = root.join("20261201-000000_plain_l0");
        assert!(
            l0.join("requests_A_r2_i4096_o256.jsonl.zst").is_file(),
            "the skeletal launch keeps its raw files"
        );
        let r1 = root.join("20261201-000100_plain_l1");
        assert_eq!(
            std::fs::read(r1.join("metrics_A_r2_i4096_o256.jsonl.zst")).unwrap(),
            b"rerun"
        );
        assert!(!r1.join("metrics_A_r2_i4096_o256.jsonl").exists());
        assert!(
            r1.join("superseded/1/metrics_A_r2_i4096_o256.jsonl")
                .is_file()
        );
        assert!(
            root.join("20261202-000000_plain_l3/requests_A_r2_i4096_o256.jsonl.zst")
                .is_file()
        );
        assert!(
            root.join(".ctax/plan_20261202-000000_plain_l3.json")
                .is_file()
        );
        assert!(root.join("ctax_run_20261202-000000.log").is_file());
        assert!(
            !root.join(skeleton::MARKER).exists(),
            "the marker never joins"
        );
        let hidden: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".rejoin"))
            .collect();
        assert!(hidden.is_empty());

        // Recompressed here since: a second rejoin leaves the joined copies alone.
        std::fs::write(r1.join("metrics_A_r2_i4096_o256.jsonl.zst"), b"smaller").unwrap();
        let again = rejoin(&sk, &root).unwrap();
        assert!(again.new_runs.is_empty() && again.replaced_runs.is_empty());
        assert_eq!((again.unchanged_runs, again.rows_added), (4, 0));
        assert_eq!(
            std::fs::read(r1.join("metrics_A_r2_i4096_o256.jsonl.zst")).unwrap(),
            b"smaller"
        );

        // What `gpu_run.sh` brings back when the sweep's first launch was killed: that run
        // directory alone, no manifest (no row was written). It joins; no row is added.
        let back = t.path().join("back");
        let l4 = back.join("20261203-000000_plain_l4");
        std::fs::create_dir_all(&l4).unwrap();
        std::fs::write(l4.join("config.json"), own_cfg("20261203-000000_plain_l4")).unwrap();
        let killed = rejoin(&back, &root).unwrap();
        assert_eq!(killed.new_runs, ["20261203-000000_plain_l4"]);
        assert_eq!(killed.rows_added, 0);
        assert_eq!(
            killed.unfinished,
            ["20261201-000200_plain_l2", "20261203-000000_plain_l4"]
        );
        // Run again (an interrupted rejoin is finished that way): nothing is joined, and the
        // killed launch is still named, read from the root.
        let again = rejoin(&back, &root).unwrap();
        assert!(again.new_runs.is_empty() && again.replaced_runs.is_empty());
        assert_eq!(
            again.unfinished,
            ["20261201-000200_plain_l2", "20261203-000000_plain_l4"]
        );
        // A launch with its row whose raw step log is still plain (a resumed attempt killed
        // after an earlier attempt's row) is named too.
        let l3_root = root.join("20261202-000000_plain_l3");
        std::fs::write(l3_root.join("engine_step_raw.1.jsonl"), b"{}\n").unwrap();
        let plain_log = rejoin(&back, &root).unwrap();
        assert_eq!(
            plain_log.unfinished,
            [
                "20261201-000200_plain_l2",
                "20261202-000000_plain_l3",
                "20261203-000000_plain_l4"
            ]
        );
        assert_eq!(
            std::fs::read(root.join("manifest.jsonl")).unwrap(),
            std::fs::read(sk.join("manifest.jsonl")).unwrap()
        );
    }

    /// Refused, with nothing written: a manifest that does not continue the root's, and a
    /// resumed directory that lacks a file of the root's copy.
    #[test]
    fn a_rejoin_that_could_lose_data_is_refused_before_writing() {
        let (_t, root, sk) = root_and_skeleton();
        let rows = std::fs::read(root.join("manifest.jsonl")).unwrap();
        // A row another sweep wrote to the root since.
        let mut r = manifest::row("1 Phase A", "plain", 7, 0);
        r.run_dir = Some("elsewhere".into());
        let mut more = rows.clone();
        more.extend(serde_json::to_vec(&r).unwrap());
        more.push(b'\n');
        std::fs::write(root.join("manifest.jsonl"), &more).unwrap();
        let before = data(&root);
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(e.contains("does not continue"), "{e}");
        assert_eq!(data(&root), before, "nothing written");
        std::fs::write(root.join("manifest.jsonl"), &rows).unwrap();
        let before = files(&root).unwrap();

        // l1 (copied whole) resumed there (config.json rewritten) and lost a raw file, not
        // moved to superseded/. (Without the rewrite it is not a resume: left alone.)
        let l1 = sk.join("20261201-000100_plain_l1");
        std::fs::remove_file(l1.join("vllm_stdout.log")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let cfg = std::fs::read(l1.join("config.json")).unwrap();
        std::fs::write(l1.join("config.json"), cfg).unwrap();
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(
            e.contains("lacks 1 file(s)") && e.contains("vllm_stdout.log"),
            "{e}"
        );
        let after = files(&root).unwrap();
        let names = |v: &[(PathBuf, u64, std::time::SystemTime)]| {
            v.iter()
                .map(|(p, l, _)| (p.clone(), *l))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&after), names(&before), "nothing written");
    }

    /// A bring-back from a GPU of another model than the root's launches is refused before
    /// anything is written, naming both models; one from the same model joins.
    #[test]
    fn a_bring_back_from_another_gpu_model_is_refused_before_writing() {
        use crate::orchestrate::one_gpu_model::tests::{H100, H200, run_on};
        let t = tempfile::tempdir().unwrap();
        let root = skeleton::tests::root(t.path());
        for (dir, _) in resume::runs(&root) {
            let gpus = format!("== gpu\nGPU 0: {H200} (UUID: GPU-13eae37f)\n");
            std::fs::write(dir.join("env.txt"), gpus).unwrap();
        }
        let sk = t.path().join("sk");
        skeleton::make(&root, &sk).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        run_on(&sk, "20261205-000000_plain_l3", &[H100], Some(0));
        let before = data(&root);
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(
            e.contains(&format!("holds launches on {H200} ("))
                && e.contains(&format!(
                    "would add launches on {H100} (20261205-000000_plain_l3)"
                )),
            "{e}"
        );
        assert_eq!(data(&root), before, "nothing written");
        // The same launch on the root's model joins.
        run_on(&sk, "20261205-000000_plain_l3", &[H200], Some(0));
        let out = rejoin(&sk, &root).unwrap();
        assert!(
            root.join("20261205-000000_plain_l3/env.txt").exists(),
            "{out:?}"
        );
    }

    /// From a review: an interrupted replace is put back; a directory a new manifest row names
    /// is replaced even when its config.json has the root's time (tar keeps whole seconds, a
    /// snapshot joined before the final fetch); a resume that wrote the slimmed step files back
    /// and dropped the marker is not a loss, nor a hidden file BACK lacks; a manifest cut
    /// mid-append joins up to its last line.
    #[test]
    fn review_cases_interrupted_same_second_slim_marker_cut_manifest() {
        let (_t, root, sk) = root_and_skeleton();
        // An interrupted replace of l0 (moved aside, nothing in its place).
        let l0 = "20261201-000000_plain_l0";
        std::fs::rename(root.join(l0), root.join(format!(".rejoin-{l0}.old"))).unwrap();
        std::fs::create_dir_all(root.join(".rejoin-x.new")).unwrap();
        // l1 resumed there within the same second: config.json's time kept, a new file, the
        // marker gone, its row appended (and a second row cut mid-append).
        let l1 = "20261201-000100_plain_l1";
        std::fs::remove_file(sk.join(l1).join("steps_slimmed.json")).unwrap();
        std::fs::write(sk.join(l1).join("engine_step_A_r2_i4096_o256.jsonl"), b"[]").unwrap();
        // A hidden file of ROOT's copy that a bring-back never carries (the collector's lock
        // from a local sweep) is no data: not a loss.
        std::fs::write(root.join(l1).join(".summary.lock"), b"").unwrap();
        let mut r = manifest::row("1 Phase A", "plain", 1, 0);
        r.run_dir = Some(l1.into());
        let mut m = std::fs::read(sk.join("manifest.jsonl")).unwrap();
        m.extend(serde_json::to_vec(&r).unwrap());
        m.extend(b"\n{\"date_utc\":\"2026-12");
        std::fs::write(sk.join("manifest.jsonl"), &m).unwrap();

        let done = rejoin(&sk, &root).unwrap();
        assert!(
            root.join(l0)
                .join("requests_A_r2_i4096_o256.jsonl.zst")
                .is_file(),
            "put back"
        );
        assert!(!root.join(format!(".rejoin-{l0}.old")).exists());
        assert!(!root.join(".rejoin-x.new").exists());
        assert_eq!(done.replaced_runs, [l1]);
        assert!(
            root.join(l1)
                .join("engine_step_A_r2_i4096_o256.jsonl")
                .is_file()
        );
        assert_eq!(done.rows_added, 1);
        let joined = std::fs::read(root.join("manifest.jsonl")).unwrap();
        assert!(
            joined.ends_with(b"\n") && !joined.ends_with(b"2026-12"),
            "cut line left out"
        );
        assert_eq!(manifest::read(&root).unwrap().len(), 4);
    }

    /// From a review: a resumed copy is compared file by file where both hold a name. Refused,
    /// naming the file, with nothing written: a finished cell's records grown or rewritten, a
    /// file under superseded/ rewritten. Joined: what a resume does — config.json, env.txt,
    /// launch.sh and summary.json rewritten, a server log appended to, a rerun cell's file
    /// moved to superseded/ and its name reused — and an archive recompressed on one side.
    #[test]
    fn a_resumed_copy_that_changed_records_under_the_same_name_is_refused() {
        let (_t, root, sk) = root_and_skeleton();
        let l1 = resume_there(&sk, "20261201-000100_plain_l1");
        let orig = b"0123456789";
        let before = data(&root);
        let req = "requests_A_r2_i4096_o256.jsonl.zst";
        let old = "superseded/1/requests_A_r2_i4096_o256.jsonl";
        for (file, body, why) in [
            (req, &b"0123456789 more"[..], "grown, but it was final"),
            (req, &b"9876543210"[..], "other records"),
            (old, &b"0123456789 more"[..], "grown, but it was final"),
            ("vllm_stdout.log", &b"not appended"[..], "other records"),
        ] {
            std::fs::write(l1.join(file), body).unwrap();
            let e = rejoin(&sk, &root).unwrap_err().to_string();
            assert!(
                e.contains("changes 1 file(s)") && e.contains(&format!("{file} ({why})")),
                "{e}"
            );
            assert_eq!(data(&root), before, "nothing written");
            std::fs::write(l1.join(file), orig).unwrap();
        }

        // What a resume does, and a recompressed archive.
        for f in ["env.txt", "launch.sh", "summary.json"] {
            std::fs::write(l1.join(f), b"rewritten").unwrap();
        }
        std::fs::write(l1.join("vllm_stdout.log"), b"0123456789 appended").unwrap();
        std::fs::create_dir_all(l1.join("superseded/2")).unwrap();
        std::fs::rename(
            l1.join("metrics_A_r2_i4096_o256.jsonl"),
            l1.join("superseded/2/metrics_A_r2_i4096_o256.jsonl"),
        )
        .unwrap();
        std::fs::write(l1.join("metrics_A_r2_i4096_o256.jsonl"), b"rerun").unwrap();
        let steps = vec![b'{'; 4096];
        let raw = "engine_step_raw.123.jsonl.zst";
        let (fast, small) = (
            zstd::encode_all(&steps[..], 1).unwrap(),
            zstd::encode_all(&steps[..], 19).unwrap(),
        );
        assert_ne!(fast, small, "the test needs two encodings");
        std::fs::write(root.join("20261201-000100_plain_l1").join(raw), &fast).unwrap();
        std::fs::write(l1.join(raw), &small).unwrap();
        let done = rejoin(&sk, &root).unwrap();
        assert_eq!(done.replaced_runs, ["20261201-000100_plain_l1"]);
        let r1 = root.join("20261201-000100_plain_l1");
        assert_eq!(
            std::fs::read(r1.join("metrics_A_r2_i4096_o256.jsonl")).unwrap(),
            b"rerun"
        );
        assert_eq!(std::fs::read(r1.join(raw)).unwrap(), small);
    }

    /// ROOT re-encoded a request file as columns (`ctax archive --columns`) after the skeleton
    /// was made; BACK's resumed copy holds it as `.zst`. The two forms are compared by their
    /// records: other records are refused, naming ROOT's file; the same records join.
    #[test]
    fn request_columns_in_root_and_zstd_in_back_are_compared_by_their_records() {
        let (_t, root, sk) = root_and_skeleton();
        let l1 = resume_there(&sk, "20261201-000100_plain_l1");
        let r1 = root.join("20261201-000100_plain_l1");
        let body = |first: u64| -> String {
            (first..first + 50)
                .map(|i| {
                    format!(
                        "{{\"request_id\":\"plain/l1/A/r2_i4096_o256/{i}\",\"t_send_ns\":{},\
                         \"t_first_token_ns\":{},\"events\":[[{},1],[{},1]]}}\n",
                        10 * i,
                        10 * i + 3,
                        10 * i + 3,
                        10 * i + 7
                    )
                })
                .collect()
        };
        let zst = "requests_A_r2_i4096_o256.jsonl.zst";
        let cols = "requests_A_r2_i4096_o256.jsonl.cols";
        std::fs::remove_file(r1.join(zst)).unwrap();
        std::fs::write(
            r1.join(cols),
            crate::ingest::request_columns::encode(body(0).as_bytes()).unwrap(),
        )
        .unwrap();
        let before = data(&root);
        std::fs::write(
            l1.join(zst),
            zstd::encode_all(body(1).as_bytes(), 3).unwrap(),
        )
        .unwrap();
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(
            e.contains("changes 1 file(s)")
                && e.contains(&format!("{cols} (other records: BACK's {zst})")),
            "{e}"
        );
        assert_eq!(data(&root), before, "nothing written");
        std::fs::write(
            l1.join(zst),
            zstd::encode_all(body(0).as_bytes(), 3).unwrap(),
        )
        .unwrap();
        // BACK holding two forms: every one is compared (from a review: only the first was).
        std::fs::write(
            l1.join(cols),
            crate::ingest::request_columns::encode(body(1).as_bytes()).unwrap(),
        )
        .unwrap();
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(e.contains(&format!("{cols} (other records)")), "{e}");
        assert_eq!(data(&root), before, "nothing written");
        std::fs::remove_file(l1.join(cols)).unwrap();
        let done = rejoin(&sk, &root).unwrap();
        assert_eq!(done.replaced_runs, ["20261201-000100_plain_l1"]);
        assert_eq!(
            zstd::decode_all(&std::fs::read(r1.join(zst)).unwrap()[..]).unwrap(),
            body(0).as_bytes()
        );
    }

    /// From a review: a run directory of BACK whose config.json does not parse is refused,
    /// naming the file and the parse error, before anything is written (not even the lock, nor
    /// what an interrupted rejoin left); it used to be listed as ignored, its launch never joined.
    #[test]
    fn a_back_run_directory_whose_config_does_not_parse_is_refused_before_writing() {
        let (_t, root, sk) = root_and_skeleton();
        let cfg = std::fs::read(sk.join("20261201-000000_plain_l0/config.json")).unwrap();
        let l3 = sk.join("20261202-000000_plain_l3");
        std::fs::create_dir_all(&l3).unwrap();
        std::fs::write(l3.join("config.json"), &cfg[..cfg.len() / 2]).unwrap();
        let l4 = sk.join("20261202-000100_plain_l4");
        std::fs::create_dir_all(&l4).unwrap();
        std::fs::write(l4.join("config.json"), &cfg).unwrap();
        std::fs::create_dir_all(root.join(".rejoin-x.new")).unwrap();
        let before = files(&root).unwrap();
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(
            e.contains("20261202-000000_plain_l3/config.json") && e.contains("EOF while parsing"),
            "{e}"
        );
        assert_eq!(files(&root).unwrap(), before, "nothing written");
        assert!(root.join(".rejoin-x.new").is_dir());
        // A directory without a config.json is not a run directory: left as it is.
        std::fs::remove_file(l3.join("config.json")).unwrap();
        let done = rejoin(&sk, &root).unwrap();
        assert_eq!(done.new_runs, ["20261202-000100_plain_l4"]);
        assert_eq!(done.ignored, ["20261202-000000_plain_l3"]);
    }

    /// From a review: only the plans of the run directories joined are copied. A plan of a
    /// directory left alone is BACK's old copy: here ROOT resumed l0 since the skeleton was made
    /// (its plan rewritten), and the skeleton's older plan must not replace it.
    #[test]
    fn only_the_plans_of_run_directories_joined_are_copied() {
        let (_t, root, sk) = root_and_skeleton();
        let plan = |d: &Path, l: &str| d.join(format!(".ctax/plan_{l}.json"));
        let (l0, l1, l3) = (
            "20261201-000000_plain_l0",
            "20261201-000100_plain_l1",
            "20261202-000000_plain_l3",
        );
        std::fs::write(plan(&sk, l0), b"the skeleton's").unwrap();
        std::fs::write(plan(&root, l0), b"resumed here since").unwrap();
        resume_there(&sk, l1);
        std::fs::write(plan(&sk, l1), b"resumed there").unwrap();
        let cfg = std::fs::read(sk.join(l0).join("config.json")).unwrap();
        std::fs::create_dir_all(sk.join(l3)).unwrap();
        std::fs::write(sk.join(l3).join("config.json"), &cfg).unwrap();
        std::fs::write(plan(&sk, l3), b"new there").unwrap();
        let done = rejoin(&sk, &root).unwrap();
        assert_eq!((done.new_runs.len(), done.replaced_runs.len()), (1, 1));
        assert_eq!(
            std::fs::read(plan(&root, l0)).unwrap(),
            b"resumed here since"
        );
        assert_eq!(std::fs::read(plan(&root, l1)).unwrap(), b"resumed there");
        assert_eq!(std::fs::read(plan(&root, l3)).unwrap(), b"new there");
    }

    /// From a review: a rejoin is refused while a sweep (`ctax run`, shared lock) holds the
    /// root, with nothing written, and joins once it has ended; a sweep is refused while a
    /// rejoin (exclusive) holds it; two sweeps may share a root.
    #[test]
    fn a_rejoin_and_a_sweep_never_write_one_root_at_once() {
        let (_t, root, sk) = root_and_skeleton();
        resume_there(&sk, "20261201-000100_plain_l1");
        std::fs::write(sk.join(ROOT_LOCK), b"the sweep there").unwrap();
        let sweep = root_lock::lock(&root, Holder::Sweep).unwrap();
        let other = root_lock::lock(&root, Holder::Sweep).unwrap();
        let before = files(&root).unwrap();
        let e = rejoin(&sk, &root).unwrap_err().to_string();
        assert!(e.contains("is in use") && e.contains(ROOT_LOCK), "{e}");
        assert_eq!(files(&root).unwrap(), before, "nothing written");
        drop((sweep, other));
        let joining = root_lock::lock(&root, Holder::Rejoin).unwrap();
        let e = root_lock::lock(&root, Holder::Sweep)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a `ctax rejoin` or `ctax archive` holds"), "{e}");
        drop(joining);
        let done = rejoin(&sk, &root).unwrap();
        assert_eq!(done.replaced_runs, ["20261201-000100_plain_l1"]);
        assert_eq!(
            std::fs::read(root.join(ROOT_LOCK)).unwrap(),
            b"",
            "BACK's lock file (a sweep there created it) never joins"
        );
    }
}
