//! The committed `site/` is exactly what README's main command renders from the archived
//! dataset: regenerating it must give byte-identical files (the report is seeded and carries
//! no timestamps of its own). If this fails after an intended change, regenerate with
//! `cargo run --release --bin ctax -- report results/h200x2-2026-11-30 --out site`.

use std::path::{Path, PathBuf};

const DATASET: &str = "results/h200x2-2026-11-30";

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn committed_site_matches_a_fresh_render() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::env::set_current_dir(&repo).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ctax"))
        .args(["report", DATASET, "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let committed = files(&repo.join("site"));
    let fresh = files(tmp.path());
    assert_eq!(
        committed, fresh,
        "site/ and a fresh render list different files"
    );
    for f in &committed {
        let a = std::fs::read(repo.join("site").join(f)).unwrap();
        let b = std::fs::read(tmp.path().join(f)).unwrap();
        assert!(
            a == b,
            "site/{} differs from a fresh render of {DATASET}",
            f.display()
        );
    }
    assert!(committed.iter().any(|f| f.ends_with("index.html")));
    assert!(committed.iter().any(|f| f.ends_with("report.md")));
}
