//! `ctax archive`: compress a results root's raw JSONL with zstd so it fits in a repository.
//! Each `X.jsonl` becomes `X.jsonl.zst` (written atomically, verified by decompressing, then the
//! original is removed). Ingest reads both forms.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Compresses every raw `*.jsonl` under `root` (run directories only; `manifest.jsonl` stays
/// plain). Returns (files, bytes before, bytes after).
pub fn compress_root(root: &Path, level: i32) -> anyhow::Result<(usize, u64, u64)> {
    let mut files = Vec::new();
    collect(root, &mut files)?;
    let (mut before, mut after) = (0u64, 0u64);
    for f in &files {
        let raw = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let packed = zstd::encode_all(&raw[..], level)
            .with_context(|| format!("compressing {}", f.display()))?;
        let check = zstd::decode_all(&packed[..])?;
        anyhow::ensure!(check == raw, "{}: zstd round trip differs", f.display());
        let dst = PathBuf::from(format!("{}.zst", f.display()));
        crate::fsutil::write_atomic(&dst, &packed)?;
        std::fs::remove_file(f)?;
        before += raw.len() as u64;
        after += packed.len() as u64;
    }
    Ok((files.len(), before, after))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() && name != "analysis" {
            collect(&p, out)?;
        } else if name.ends_with(".jsonl") && ctax_schema::parse_file_name(&name).is_some() {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compresses_raw_files_and_ingest_reads_them() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("20260101-000000_plain_l0");
        std::fs::create_dir_all(&run).unwrap();
        let body = "{\"x\":1}\n".repeat(1000);
        std::fs::write(run.join("metrics_A_r1_i8_o8.jsonl"), &body).unwrap();
        std::fs::write(d.path().join("manifest.jsonl"), "{}\n").unwrap();
        let (n, before, after) = compress_root(d.path(), 3).unwrap();
        assert_eq!(n, 1);
        assert!(after < before / 10, "{before} -> {after}");
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
}
