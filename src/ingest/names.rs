//! Canonical names: which directories of a results root are runs, and which raw file feeds
//! which cell.
//!
//! - A **run** is a directory named `<YYYYMMDD-HHMMSS>_<config>_l<k>` whose `config.json` (if
//!   any) agrees with the name: same config, same launch, `run_dir` = the name. Anything else
//!   that looks like a run (a copy `… copy`, a backup `….bak`, a symbolic link to a run, a
//!   directory that cannot be read, a second directory of the same (config, launch, stage)) is
//!   **not loaded** and reported loudly ([`NotLoaded`]): it never becomes an extra launch and it
//!   is never skipped silently (SC6 lists it).
//! - A **cell** is identified by its typed [`Cell`] (rate, input, output), whatever the spelling
//!   of its file name: `requests_A_r4.0_i8_o8.jsonl` and `requests_A_r4_i8_o8.jsonl` are one
//!   cell, `A/r4_i8_o8`. Several files for one stream (two spellings, or `X.jsonl` beside
//!   `X.jsonl.zst`) are resolved by [`choose`]: identical → one is used; one a prefix of the
//!   other → the longer is used; otherwise an error. Each case says which file is used and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctax_schema::{Cell, FileKind, Phase, RunConfig, parse_file_name};
use serde::{Deserialize, Serialize};

use super::jsonl::Lines;

/// `<YYYYMMDD-HHMMSS>_<config>_l<k>`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunDirName {
    pub stamp: String,
    pub config: String,
    pub launch: u32,
}

/// Parses a run directory name strictly: an 8-digit date, `-`, a 6-digit time, `_`, a config
/// name (ASCII letters, digits, `_`, `-`, `.`), `_l`, a launch index without leading zeros.
/// `None` for anything else (`… copy`, `….bak`, `2026-11-29_plain`).
pub(crate) fn parse_run_dir_name(name: &str) -> Option<RunDirName> {
    let (stamp, rest) = name.split_at_checked(15)?;
    let sb = stamp.as_bytes();
    let stamp_ok = sb[8] == b'-'
        && sb[..8].iter().all(u8::is_ascii_digit)
        && sb[9..].iter().all(u8::is_ascii_digit);
    let rest = rest.strip_prefix('_')?;
    let (config, k) = rest.rsplit_once("_l")?;
    let config_ok = !config.is_empty()
        && config
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
    let k_ok = !k.is_empty()
        && k.len() <= 10
        && k.bytes().all(|c| c.is_ascii_digit())
        && (k == "0" || !k.starts_with('0'));
    if !(stamp_ok && config_ok && k_ok) {
        return None;
    }
    Some(RunDirName {
        stamp: stamp.to_owned(),
        config: config.to_owned(),
        launch: k.parse().ok()?,
    })
}

/// A directory (or other entry) of a results root that looks like a run but is not loaded,
/// with the reason. Every one is a warning and a missing artifact in SC6.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotLoaded {
    /// The entry's name in the results root.
    pub name: String,
    pub reason: String,
}

/// Entries of a results root that are never runs (outputs and pre-flight).
const NOT_RUNS: [&str; 3] = ["preflight", "analysis", "report"];

/// Does this directory hold what a run directory holds?
fn has_run_files(entries: &[String]) -> bool {
    entries.iter().any(|n| {
        matches!(n.as_str(), "config.json" | "summary.json") || parse_file_name(n).is_some()
    })
}

/// The run directories of `root` (sorted by name) and the entries that look like runs but are
/// not loaded. Only the root's listing itself failing is an error.
pub(crate) fn run_dirs(root: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<NotLoaded>)> {
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(root)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    let mut runs = Vec::new();
    let mut refused = Vec::new();
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || NOT_RUNS.contains(&name.as_str()) {
            continue;
        }
        let path = e.path();
        let named_like_a_run = parse_run_dir_name(&name).is_some();
        let not_loaded = |reason: String| NotLoaded {
            name: name.clone(),
            reason,
        };
        // The entry's own type: a symbolic link is not followed to decide what it is.
        let ft = match e.file_type() {
            Ok(ft) => ft,
            Err(err) => {
                refused.push(not_loaded(format!("cannot stat ({err})")));
                continue;
            }
        };
        if ft.is_symlink() {
            let target_is_run = std::fs::metadata(&path).is_ok_and(|m| m.is_dir())
                && (named_like_a_run || listing(&path).is_ok_and(|l| has_run_files(&l)));
            if target_is_run {
                let target = std::fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|err| format!("? ({err})"));
                refused.push(not_loaded(format!(
                    "a symbolic link to {target}: a link is not a launch of its own (a second \
                     name for a run would count it twice); copy the run or use `ctax merge`"
                )));
            }
            continue;
        }
        if !ft.is_dir() {
            if named_like_a_run {
                refused.push(not_loaded(
                    "named like a run directory but not a directory".into(),
                ));
            }
            continue;
        }
        let list = match listing(&path) {
            Ok(l) => l,
            Err(err) => {
                refused.push(not_loaded(format!(
                    "cannot read the directory ({err}); its data is missing from this analysis"
                )));
                continue;
            }
        };
        if !named_like_a_run {
            if has_run_files(&list) {
                refused.push(not_loaded(
                    "holds run files but is not named `<YYYYMMDD-HHMMSS>_<config>_l<k>` \
                     (a copy or backup of a run?)"
                        .into(),
                ));
            }
            continue;
        }
        if !has_run_files(&list) {
            refused.push(not_loaded(
                "named like a run but holds no config.json, summary.json or raw file".into(),
            ));
            continue;
        }
        runs.push(path);
    }
    Ok((runs, refused))
}

fn listing(dir: &Path) -> std::io::Result<Vec<String>> {
    std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect()
}

/// Why a run directory's `config.json` disagrees with its name, if it does.
pub(crate) fn config_disagrees(dir_name: &str, rc: &RunConfig) -> Option<String> {
    let n = parse_run_dir_name(dir_name)?;
    let mut diffs = Vec::new();
    if rc.config != n.config {
        diffs.push(format!(
            "config `{}` (the name says `{}`)",
            rc.config, n.config
        ));
    }
    if rc.launch != n.launch {
        diffs.push(format!("launch {} (the name says {})", rc.launch, n.launch));
    }
    if rc.run_dir != dir_name {
        diffs.push(format!("run_dir `{}`", rc.run_dir));
    }
    (!diffs.is_empty()).then(|| {
        format!(
            "config.json says {}: a copied or renamed run?",
            diffs.join(", ")
        )
    })
}

/// One raw stream of a run directory: a file kind of one cell, and the file(s) that hold it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawStream {
    pub kind: FileKind,
    pub phase: Phase,
    pub cell: Cell,
    /// Sorted by name; more than one when the stream is spelled twice or exists both plain and
    /// compressed.
    pub files: Vec<PathBuf>,
}

impl RawStream {
    /// The cell's canonical name (`r4_i8_o8`).
    pub(crate) fn cell_name(&self) -> String {
        self.cell.name()
    }
}

/// Groups the raw files of a run directory by (kind, phase, typed cell); pre-flight files are
/// ignored. Warnings name each file whose cell is not spelled canonically.
pub(crate) fn raw_streams(dir: &Path) -> std::io::Result<(Vec<RawStream>, Vec<String>)> {
    let mut by: BTreeMap<(u8, Phase, String), RawStream> = BTreeMap::new();
    let mut warnings = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((kind, phase, spelled)) = parse_file_name(&name) else {
            continue;
        };
        if phase == Phase::Preflight {
            continue;
        }
        let cell = Cell::parse(&spelled).expect("parse_file_name checked the cell");
        let canonical = cell.name();
        if spelled != canonical {
            warnings.push(format!(
                "{}: cell spelled `{spelled}`; read as cell {}/{canonical}",
                e.path().display(),
                phase.tag()
            ));
        }
        by.entry((kind as u8, phase, canonical))
            .or_insert_with(|| RawStream {
                kind,
                phase,
                cell,
                files: Vec::new(),
            })
            .files
            .push(e.path());
    }
    let mut out: Vec<RawStream> = by.into_values().collect();
    for s in &mut out {
        s.files.sort();
    }
    Ok((out, warnings))
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Resolves several files holding one stream (`parsed` in the order of
/// [`RawStream::files`]): identical rows → the first is used; every other file's rows a
/// prefix of the longest → the longest is used; otherwise an error naming the files. The
/// warning says which file is used and why.
pub(crate) fn choose<T: PartialEq>(
    mut parsed: Vec<(PathBuf, Lines<T>)>,
) -> anyhow::Result<(PathBuf, Lines<T>, Option<String>)> {
    anyhow::ensure!(!parsed.is_empty(), "no file to choose from");
    if parsed.len() == 1 {
        let (p, l) = parsed.remove(0);
        return Ok((p, l, None));
    }
    // The longest (the first of equal length, in name order).
    let longest = (0..parsed.len())
        .max_by(|&a, &b| {
            parsed[a]
                .1
                .rows
                .len()
                .cmp(&parsed[b].1.rows.len())
                .then(b.cmp(&a))
        })
        .expect("non-empty");
    let long = &parsed[longest].1.rows;
    let mut others = Vec::new();
    for (i, (p, l)) in parsed.iter().enumerate() {
        if i == longest {
            continue;
        }
        if let Some(k) = l.rows.iter().zip(long).position(|(a, b)| a != b) {
            let names: Vec<String> = parsed.iter().map(|(p, _)| file_name(p)).collect();
            anyhow::bail!(
                "{}: {} files hold this stream and they differ (`{}` and `{}` first differ at \
                 record {}): two different runs of one cell; move the one that should not count \
                 out of the run directory",
                parsed[longest]
                    .0
                    .parent()
                    .map_or_else(String::new, |d| d.display().to_string()),
                parsed.len(),
                names[longest],
                file_name(p),
                k + 1
            );
        }
        others.push(format!("`{}` ({} records)", file_name(p), l.rows.len()));
    }
    // What the other files said about themselves (a damaged copy's reason) is kept.
    let theirs: Vec<String> = parsed
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != longest)
        .flat_map(|(_, (_, l))| l.warnings.iter().cloned())
        .collect();
    let (path, mut lines) = parsed.swap_remove(longest);
    lines.warnings.extend(theirs);
    // Every other file is a prefix of the longest: equal length means identical.
    let same = parsed.iter().all(|(_, l)| l.rows.len() == lines.rows.len());
    let why = if same {
        format!(
            "{}: the same stream is also in {}: identical records; using `{}`",
            path.display(),
            others.join(", "),
            file_name(&path)
        )
    } else {
        format!(
            "{}: the same stream is also in {}, a shorter copy (a prefix of this one); using \
             `{}` ({} records), the longer",
            path.display(),
            others.join(", "),
            file_name(&path),
            lines.rows.len()
        )
    };
    Ok((path, lines, Some(why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dir_names_are_strict() {
        assert_eq!(
            parse_run_dir_name("20261129-101500_mooncake_both_l1"),
            Some(RunDirName {
                stamp: "20261129-101500".into(),
                config: "mooncake_both".into(),
                launch: 1
            })
        );
        assert_eq!(
            parse_run_dir_name("20261129-101500_plain_l1000").map(|n| n.launch),
            Some(1000)
        );
        for bad in [
            "20261129-101500_plain_l0 copy",
            "20261129-101500_plain_l0.bak",
            "20261129-101500_plain_l0_copy",
            "20261129-101500_plain_l01",
            "20261129-101500_plain_l",
            "20261129-101500__l0",
            "20261129-101500_pla in_l0",
            "2026-11-29_plain",
            "2026112-9101500_plain_l0",
            "20261129_101500_plain_l0",
            "x_plain_l0",
            "20261129-101500_plain_l99999999999",
        ] {
            assert_eq!(parse_run_dir_name(bad), None, "{bad}");
        }
    }

    fn lines(rows: &[u32]) -> Lines<u32> {
        Lines {
            rows: rows.to_vec(),
            line_numbers: (1..=rows.len()).collect(),
            warnings: vec![],
            cut_short: None,
        }
    }

    #[test]
    fn choosing_between_copies_of_a_stream() {
        let p = |n: &str| PathBuf::from(format!("/r/{n}"));
        // Identical: the first (name order) is used.
        let (path, l, why) = choose(vec![
            (p("requests_A_r4.0_i8_o8.jsonl"), lines(&[1, 2])),
            (p("requests_A_r4_i8_o8.jsonl"), lines(&[1, 2])),
        ])
        .unwrap();
        assert_eq!(path, p("requests_A_r4.0_i8_o8.jsonl"));
        assert_eq!(l.rows, vec![1, 2]);
        assert!(why.unwrap().contains("identical records"));
        // A prefix: the longer is used, whichever it is.
        let (path, _, why) = choose(vec![
            (p("requests_A_r4_i8_o8.jsonl"), lines(&[1])),
            (p("requests_A_r4_i8_o8.jsonl.zst"), lines(&[1, 2, 3])),
        ])
        .unwrap();
        assert_eq!(path, p("requests_A_r4_i8_o8.jsonl.zst"));
        let why = why.unwrap();
        assert!(
            why.contains("`requests_A_r4_i8_o8.jsonl` (1 records)") && why.contains("the longer"),
            "{why}"
        );
        // Different streams: an error naming both.
        let e = choose(vec![
            (p("requests_A_r4_i8_o8.jsonl"), lines(&[1, 5])),
            (p("requests_A_r4_i8_o8.jsonl.zst"), lines(&[1, 2, 3])),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("first differ at record 2") && e.contains("requests_A_r4_i8_o8.jsonl`"),
            "{e}"
        );
        // A damaged copy (a `.cols` that reads as a stream ending before its first line) beside
        // a good one: the good one is used, and the damaged one's reason is kept (from a review:
        // it was dropped, leaving "(0 records)").
        let mut damaged = lines(&[]);
        damaged.warnings.push(
            "/r/requests_A_r4_i8_o8.jsonl.cols: stream ends early before its first line (the \
             numbers section is damaged)"
                .into(),
        );
        let (path, l, _) = choose(vec![
            (p("requests_A_r4_i8_o8.jsonl.cols"), damaged),
            (p("requests_A_r4_i8_o8.jsonl.zst"), lines(&[1, 2, 3])),
        ])
        .unwrap();
        assert_eq!(path, p("requests_A_r4_i8_o8.jsonl.zst"));
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        assert!(l.warnings[0].contains(".cols: stream ends early"));
    }
}
