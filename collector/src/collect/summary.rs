//! `summary.json`: read-modify-write of one cell's health, preserving everything else in the
//! file (other cells, the analysis's `stats`, unknown keys), written atomically (temp file in
//! the same directory, fsync, rename, fsync of the directory) under an advisory lock.

use anyhow::Context;
use ctax_schema::{CellHealth, SCHEMA_VERSION};
use serde_json::{Map, Value};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

pub const SUMMARY: &str = "summary.json";

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .context("path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    {
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

struct Lock(std::fs::File);

impl Lock {
    fn take(dir: &Path) -> anyhow::Result<Lock> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".summary.lock"))?;
        // SAFETY: flock on a descriptor we own.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Sets `cells[key] = health` in `dir/summary.json`. Returns a warning when an unreadable
/// existing file had to be moved aside.
pub fn update_cell(dir: &Path, key: &str, health: &CellHealth) -> anyhow::Result<Option<String>> {
    let _lock = Lock::take(dir)?;
    let path = dir.join(SUMMARY);
    let mut warning = None;
    let mut root: Map<String, Value> = match std::fs::read(&path) {
        Ok(b) => match serde_json::from_slice::<Value>(&b) {
            Ok(Value::Object(m)) => m,
            other => {
                let aside = dir.join(format!("{SUMMARY}.unreadable.{}", crate::clock::unix_ms()));
                std::fs::rename(&path, &aside)?;
                warning = Some(format!(
                    "{} was not a JSON object ({}); moved it to {}",
                    path.display(),
                    match other {
                        Err(e) => e.to_string(),
                        Ok(_) => "wrong shape".into(),
                    },
                    aside.display()
                ));
                Map::new()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    root.entry("schema_version")
        .or_insert(Value::from(SCHEMA_VERSION));
    let cells = root
        .entry("cells")
        .or_insert_with(|| Value::Object(Map::new()));
    if !cells.is_object() {
        *cells = Value::Object(Map::new());
    }
    cells
        .as_object_mut()
        .expect("just made an object")
        .insert(key.to_owned(), serde_json::to_value(health)?);
    root.entry("stats")
        .or_insert_with(|| Value::Object(Map::new()));
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(root))?;
    bytes.push(b'\n');
    write_atomic(&path, &bytes)?;
    Ok(warning)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctax_schema::{Arrival, Phase, RunSummary};

    fn health(cell: &str) -> CellHealth {
        CellHealth {
            phase: Phase::A,
            cell: cell.into(),
            rate: 1.0,
            input_len: 8,
            output_len: 4,
            arrival: Arrival::Fixed,
            seed: 0,
            t_start_ns: 1,
            t_warmup_end_ns: 2,
            t_last_send_ns: 3,
            t_end_ns: 4,
            wall_start_unix_ms: 5,
            scheduled: 1,
            sent: 1,
            dropped: 0,
            ok: 1,
            errors: 0,
            cancelled: 0,
            completed_measured: 1,
            complete: true,
            incomplete_reason: None,
            lateness_us_p50: 1.0,
            lateness_us_p99: 2.0,
            lateness_us_max: 3.0,
            client_cpu_pct: 4.0,
            scrapes: 1,
            scrape_failures: 0,
        }
    }

    #[test]
    fn preserves_stats_other_cells_and_unknown_keys() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join(SUMMARY),
            r#"{"schema_version":1,"cells":{},"stats":{"A/x":{"p50":1}},"extra":[1,2]}"#,
        )
        .unwrap();
        update_cell(d.path(), "A/r1_i8_o4", &health("r1_i8_o4")).unwrap();
        update_cell(d.path(), "A/r2_i8_o4", &health("r2_i8_o4")).unwrap();
        let mut h = health("r1_i8_o4");
        h.complete = false;
        update_cell(d.path(), "A/r1_i8_o4", &h).unwrap();
        let v: Value =
            serde_json::from_slice(&std::fs::read(d.path().join(SUMMARY)).unwrap()).unwrap();
        assert_eq!(v["stats"]["A/x"]["p50"], 1);
        assert_eq!(v["extra"], serde_json::json!([1, 2]));
        let s: RunSummary = serde_json::from_value(v).unwrap();
        assert_eq!(s.cells.len(), 2);
        assert!(!s.cells["A/r1_i8_o4"].complete);
        // No temp files left behind.
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            names.iter().all(|n| !n.to_string_lossy().contains(".tmp.")),
            "{names:?}"
        );
    }

    #[test]
    fn creates_and_recovers_from_garbage() {
        let d = tempfile::tempdir().unwrap();
        assert!(
            update_cell(d.path(), "A/c", &health("c"))
                .unwrap()
                .is_none()
        );
        std::fs::write(d.path().join(SUMMARY), "{not json").unwrap();
        assert!(
            update_cell(d.path(), "A/c", &health("c"))
                .unwrap()
                .is_some()
        );
        let s: RunSummary =
            serde_json::from_slice(&std::fs::read(d.path().join(SUMMARY)).unwrap()).unwrap();
        assert_eq!(s.schema_version, SCHEMA_VERSION);
        assert!(s.stats.is_empty());
    }
}
