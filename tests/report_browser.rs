//! Opens the rendered report in headless Chromium (tools/browser_check.py, DevTools protocol over
//! a pipe) and checks what a reader sees: no console errors or exceptions, every figure present
//! and non-empty, every anchor resolving, nothing loaded from outside the page. Full-page and
//! per-figure screenshots land in `target/tmp/report-browser/`.
//!
//! Chromium comes from `tools/install_chromium.sh` (Debian's `chromium`). Without it this test
//! prints a loud SKIPPED and passes, unless `CTAX_REQUIRE_BROWSER=1`, where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn required() -> bool {
    std::env::var("CTAX_REQUIRE_BROWSER").is_ok_and(|v| v == "1")
}

/// Fails under CTAX_REQUIRE_BROWSER=1, otherwise says SKIPPED loudly; returns whether to go on.
fn unavailable(why: &str) -> bool {
    if required() {
        panic!("report browser check cannot run: {why} (CTAX_REQUIRE_BROWSER=1)");
    }
    eprintln!("\n==================== SKIPPED ====================");
    eprintln!("report_browser: {why}");
    eprintln!("install it with: bash tools/install_chromium.sh");
    eprintln!("=================================================\n");
    false
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/browser_check.py")
}

/// Runs browser_check.py; `Ok(false)` when Chromium is missing (already reported).
fn check(args: &[&str]) -> Result<bool, String> {
    let out = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {
            eprintln!("{}", text.lines().last().unwrap_or(""));
            Ok(true)
        }
        Some(2) if text.contains("SKIP: no Chromium") => Ok(unavailable("no Chromium on PATH")),
        _ => Err(text),
    }
}

#[test]
fn report_opens_cleanly_in_headless_chromium() {
    if Command::new("python3").arg("--version").output().is_err() {
        unavailable("python3 not found");
        return;
    }
    // First prove the checker detects console errors, exceptions and failed loads at all.
    match check(&["--self-test"]) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => panic!("browser_check.py --self-test failed:\n{e}"),
    }
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    let cases = [
        ("full", common::demo()),
        ("simulated", common::simulated()),
        ("degraded", common::degraded()),
        ("hostile", common::hostile()),
    ];
    for (name, fixture) in cases {
        let site = shots.join(name).join("site");
        let _ = std::fs::remove_dir_all(&site);
        let rendered = fixture.render(&site);
        let drawn: Vec<String> = rendered
            .figures
            .iter()
            .filter(|f| f.file.is_some())
            .map(|f| f.number.to_string())
            .collect();
        let png = shots.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&png);
        let figs = shots.join(name).join("figures-png");
        let expect = drawn.join(",");
        let mut args = vec![
            site.to_str().unwrap(),
            "--screenshot",
            png.to_str().unwrap(),
            "--expect-svg",
            &expect,
        ];
        if name == "full" || name == "degraded" {
            args.extend(["--shots-dir", figs.to_str().unwrap()]);
        }
        match check(&args) {
            Ok(true) => {
                assert!(
                    std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000),
                    "{name}: no screenshot"
                );
                eprintln!("{name}: screenshot {}", png.display());
            }
            Ok(false) => return,
            Err(e) => panic!("{name}: the report failed the browser check:\n{e}"),
        }
    }
}
