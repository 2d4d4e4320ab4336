//! `ctax merge ROOT… --out ROOT`: the results roots of a sweep's shards (`ctax run --shard K/N`
//! on several hosts) into one root that `ctax reference-rates`, `ctax analyze` and
//! `ctax report` read like an unsharded one.
//!
//! Refused: roots whose `profile.toml` differ (not one sweep), roots whose launches ran on
//! different GPU models, two roots holding the same
//! launch (config, launch index, stage) or the same run directory name, and pre-flight
//! decisions that disagree (a config included on one host and skipped on another). Run
//! directories are hard-linked when the output is on the same filesystem, else copied;
//! `manifest.jsonl` is the roots' rows in the order the roots are given; every other root's
//! pre-flight logs are kept under `preflight/merged_from/<n>_<name>/`. `analysis/`, `report/`
//! and `.ctax/` are derived and not merged. `merge.json` lists where everything came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ctax_schema::{ManifestRow, PreflightStatus, RunConfig};

use super::{manifest, resume};

/// What a merge did.
#[derive(Debug, Default)]
pub struct Merged {
    pub runs: usize,
    pub manifest_rows: usize,
    pub notes: Vec<String>,
}

pub fn merge(roots: &[PathBuf], out: &Path) -> anyhow::Result<Merged> {
    anyhow::ensure!(!roots.is_empty(), "nothing to merge");
    for r in roots {
        anyhow::ensure!(r.is_dir(), "{}: not a directory", r.display());
        super::skeleton::refuse(r, "a merge")?;
        anyhow::ensure!(
            r.canonicalize()? != out.canonicalize().unwrap_or_else(|_| out.to_path_buf()),
            "--out {} is one of the roots",
            out.display()
        );
    }
    if out.exists() {
        anyhow::ensure!(
            std::fs::read_dir(out)?.next().is_none(),
            "{} exists and is not empty: merge into a new directory",
            out.display()
        );
    }
    // One sweep: byte-identical profiles.
    let profile = read_profile(&roots[0])?;
    for r in &roots[1..] {
        anyhow::ensure!(
            read_profile(r)? == profile,
            "{} and {} hold different profile.toml files: only the shards of one sweep (same profile, same seed) can be merged",
            roots[0].display(),
            r.display()
        );
    }
    // One GPU model (DESIGN.md §4.3 "GPU model"): shards on hosts of different models are two
    // datasets.
    let mut models: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in roots {
        for m in super::one_gpu_model::of_root(r).into_keys() {
            models.entry(m).or_default().push(r.display().to_string());
        }
    }
    anyhow::ensure!(
        models.len() <= 1,
        "the shards ran on different GPU models ({}): a results root holds one GPU model; merge the shards of each model into a root of its own",
        models
            .iter()
            .map(|(m, rs)| format!("{m} in {}", rs.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    );
    // Launches: no identity twice.
    let mut seen: BTreeMap<(String, u32, String), PathBuf> = BTreeMap::new();
    let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut runs: Vec<(PathBuf, String)> = Vec::new();
    for r in roots {
        for (dir, rc) in run_dirs(r)? {
            let id = (rc.config.clone(), rc.launch, resume::run_stage(&rc));
            if let Some(prev) = seen.get(&id) {
                anyhow::bail!(
                    "overlapping launches: {} l{} stage {} is in both {} and {}; merge only disjoint shards (same profile, different --shard K/N)",
                    id.0,
                    id.1,
                    id.2,
                    prev.display(),
                    dir.display()
                );
            }
            let name = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if let Some(prev) = names.get(&name) {
                anyhow::bail!(
                    "two run directories named {name}: {} and {}",
                    prev.display(),
                    dir.display()
                );
            }
            seen.insert(id, dir.clone());
            names.insert(name.clone(), dir.clone());
            runs.push((dir, name));
        }
    }
    // Pre-flight: one decision per config.
    let mut status: Option<PreflightStatus> = None;
    let mut decided_in: BTreeMap<String, PathBuf> = BTreeMap::new();
    for r in roots {
        let Some(s) = read_preflight(r)? else {
            continue;
        };
        match &mut status {
            None => {
                for c in s.configs.keys() {
                    decided_in.insert(c.clone(), r.clone());
                }
                status = Some(s);
            }
            Some(m) => {
                for (c, e) in s.configs {
                    match m.configs.get(&c) {
                        Some(prev) if prev.decision != e.decision => anyhow::bail!(
                            "pre-flight disagrees on {c}: {} in {} ({}), {} in {} ({}); install the same packages on every host and rerun that shard",
                            prev.decision,
                            decided_in[&c].display(),
                            prev.reason.as_deref().unwrap_or(""),
                            e.decision,
                            r.display(),
                            e.reason.as_deref().unwrap_or("")
                        ),
                        Some(_) => {}
                        None => {
                            decided_in.insert(c.clone(), r.clone());
                            m.configs.insert(c, e);
                        }
                    }
                }
                if m.step_timing_available.is_none() {
                    m.step_timing_available = s.step_timing_available;
                    m.step_timing_reason = s.step_timing_reason;
                }
            }
        }
    }

    // Write.
    std::fs::create_dir_all(out)?;
    let mut merged = Merged::default();
    crate::fsutil::write_atomic(&out.join("profile.toml"), profile.as_bytes())?;
    for (dir, name) in &runs {
        link_or_copy_tree(dir, &out.join(name))?;
        merged.runs += 1;
    }
    if let Some(s) = &status {
        crate::fsutil::write_json_atomic(&out.join("preflight/preflight_status.json"), s)?;
    }
    for (i, r) in roots.iter().enumerate() {
        let pre = r.join("preflight");
        if !pre.is_dir() {
            continue;
        }
        let dst = if i == 0 {
            out.join("preflight")
        } else {
            out.join("preflight/merged_from").join(format!(
                "{}_{}",
                i + 1,
                r.file_name().unwrap_or_default().to_string_lossy()
            ))
        };
        for e in std::fs::read_dir(&pre)?.flatten() {
            let n = e.file_name();
            if n == "preflight_status.json" || n == "merged_from" {
                continue;
            }
            link_or_copy_tree(&e.path(), &dst.join(&n))?;
        }
    }
    let mut rows: Vec<ManifestRow> = Vec::new();
    for r in roots {
        rows.extend(manifest::read(r).with_context(|| format!("{}", r.display()))?);
    }
    merged.manifest_rows = rows.len();
    if !rows.is_empty() {
        let mut text = Vec::new();
        for row in &rows {
            text.extend(serde_json::to_vec(row)?);
            text.push(b'\n');
        }
        crate::fsutil::write_atomic(&out.join("manifest.jsonl"), &text)?;
        manifest::render(out)?;
    }
    // Reference rates: kept when every root that has them agrees (Phase B shards all adopted
    // the same file); otherwise recompute on the merged root.
    let refs: Vec<Vec<u8>> = roots
        .iter()
        .filter_map(|r| std::fs::read(r.join("reference_rates.json")).ok())
        .collect();
    match refs.first() {
        Some(first) if refs.iter().all(|x| x == first) => {
            crate::fsutil::write_atomic(&out.join("reference_rates.json"), first)?;
        }
        Some(_) => merged.notes.push(
            "the roots hold different reference_rates.json files: none kept; run `ctax reference-rates` on the merged root".into(),
        ),
        None => {}
    }
    crate::fsutil::write_json_atomic(
        &out.join("merge.json"),
        &serde_json::json!({
            "roots": roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>(),
            "runs": runs.iter().map(|(d, n)| serde_json::json!({"run_dir": n, "from": d.display().to_string()})).collect::<Vec<_>>(),
            "notes": merged.notes,
        }),
    )?;
    Ok(merged)
}

fn read_profile(root: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(root.join("profile.toml")).with_context(|| {
        format!(
            "{}: no profile.toml (not a results root of `ctax run`)",
            root.display()
        )
    })
}

fn read_preflight(root: &Path) -> anyhow::Result<Option<PreflightStatus>> {
    let p = root.join("preflight/preflight_status.json");
    match std::fs::read(&p) {
        Ok(b) => Ok(Some(
            serde_json::from_slice(&b).with_context(|| format!("{}", p.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", p.display())),
    }
}

/// Run directories of a root (those with a readable config.json), by name.
fn run_dirs(root: &Path) -> anyhow::Result<Vec<(PathBuf, RunConfig)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(root)?.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if !p.is_dir() || name.starts_with('.') || matches!(name.as_str(), "analysis" | "report") {
            continue;
        }
        let cfg = p.join("config.json");
        if !cfg.exists() {
            continue;
        }
        let rc: RunConfig = serde_json::from_slice(&std::fs::read(&cfg)?)
            .with_context(|| format!("{}", cfg.display()))?;
        v.push((p, rc));
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(v)
}

/// Hard-links every file of `src` into `dst` (copies when linking fails, e.g. across
/// filesystems).
fn link_or_copy_tree(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let md = std::fs::symlink_metadata(src)?;
    if md.is_dir() {
        std::fs::create_dir_all(dst)?;
        for e in std::fs::read_dir(src)?.flatten() {
            link_or_copy_tree(&e.path(), &dst.join(e.file_name()))?;
        }
    } else if md.is_file() {
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::hard_link(src, dst).is_err() {
            std::fs::copy(src, dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}
