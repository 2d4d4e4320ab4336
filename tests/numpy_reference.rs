//! The report's per-launch TTFT and TPOT p90s on the archived real data equal an independent
//! reference: `tools/p90_by_hand.py` recomputes every one of them from the raw request records
//! with numpy's default (linear) percentile and the DESIGN definitions (warm-up and non-ok
//! requests left out; TTFT = first token - send; TPOT = (last - first token) / (tokens - 1)),
//! using none of the tool's analysis code (only `ctax cat`, the archive's lossless decoder).
//! From those p90s, `tools/tax_by_hand.py` recomputes every tax's point estimate, the launches
//! it compares and H1-H6's estimates by DESIGN §4.3's within-machine weighting, and
//! `tools/ci_by_hand.py` works out every TTFT/TPOT p90 tax's CI in closed form (the t-interval
//! the launch-noise bootstrap stands for) and checks the report's bounds and detections.
//! Needs `CTAX_VLLM_VENV` (its python has numpy; `bash tools/setup.sh` provides it).

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/venv.rs"]
mod venv;

/// The venv's python, or `None` (skipped loudly) when no venv is set and none is required.
fn python() -> Option<PathBuf> {
    venv::python("the numpy reference", "numpy")
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `tools/SCRIPT` with ARGS: (exit ok, stdout + stderr).
fn run_tool(py: &Path, script: &str, args: &[&Path]) -> (bool, String) {
    let o = Command::new(py)
        .arg(repo().join("tools").join(script))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// Runs the reference on ROOT against SUMMARY: (exit ok, stdout + stderr).
fn check(py: &Path, root: &Path, summary: &Path) -> (bool, String) {
    let ctax = Path::new(env!("CARGO_BIN_EXE_ctax"));
    run_tool(py, "p90_by_hand.py", &[root, summary, ctax])
}

/// Runs the tax reference on a report's summary and verdicts: (exit ok, stdout + stderr).
fn check_taxes(py: &Path, summary: &Path, verdicts: &Path) -> (bool, String) {
    run_tool(py, "tax_by_hand.py", &[summary, verdicts])
}

/// Runs the CI reference on a report's summary and verdicts: (exit ok, stdout + stderr).
fn check_cis(py: &Path, summary: &Path, verdicts: &Path) -> (bool, String) {
    run_tool(py, "ci_by_hand.py", &[summary, verdicts])
}

/// From the CI reference's last line: (bounds checked, intervals checked exactly).
fn cis_checked(text: &str) -> (usize, usize) {
    let line = text
        .lines()
        .find(|l| l.starts_with("checked ") && l.contains(" 0 bad;"))
        .unwrap_or_else(|| panic!("no clean `checked` line:\n{text}"));
    let num = |after: &str| -> usize {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num("checked "), num("(exact "))
}

/// The index of `config`'s tax at ref_safe in a summary value.
fn ref_safe_tax(s: &serde_json::Value, config: &str) -> usize {
    s["taxes"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["config"] == config && t["context"] == "ref_safe")
        .unwrap_or_else(|| panic!("{config} at ref_safe"))
}

/// Narrows a fraction CI (`est`, `lo`, `hi`) in place: each bound moved to F of its distance
/// from the estimate on the log scale (`ln(1 + x)`, where the tax CIs are t-intervals).
fn narrow_log(x: &mut serde_json::Value, f: f64) {
    let d = x["est"].as_f64().unwrap().ln_1p();
    for b in ["lo", "hi"] {
        let y = x[b].as_f64().unwrap().ln_1p();
        x[b] = serde_json::json!((d + f * (y - d)).exp_m1());
    }
}

/// The H100 root's `summary.json` and `verdicts.json` from one fresh `ctax report`, rendered
/// once for every test of this file that reads them (each render takes ~10 s).
static H100_RENDER: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

/// A temporary directory (kept alive by the caller, who writes changed copies there) holding
/// the H100 root's fresh `summary.json` and `verdicts.json`, and their paths.
fn render_h100() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (summary_text, verdicts_text) = H100_RENDER.get_or_init(|| {
        let out = tempfile::tempdir().unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_ctax"))
            .arg("report")
            .arg(repo().join("results/h100-2026-12-05"))
            .arg("--out")
            .arg(out.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let read = |f: &str| std::fs::read_to_string(out.path().join("data").join(f)).unwrap();
        (read("summary.json"), read("verdicts.json"))
    });
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (summary, verdicts) = (data.join("summary.json"), data.join("verdicts.json"));
    std::fs::write(&summary, summary_text).unwrap();
    std::fs::write(&verdicts, verdicts_text).unwrap();
    (tmp, summary, verdicts)
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Writes V as DIR/NAME and returns that path.
fn write_json(dir: &Path, name: &str, v: &serde_json::Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
    p
}

/// Hypothesis ID's estimate (`est`, `lo`, `hi`) in a `verdicts.json` value, to change in place.
fn interval_of<'a>(verdicts: &'a mut serde_json::Value, id: &str) -> &'a mut serde_json::Value {
    let h = verdicts["hypotheses"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|h| h["id"] == id)
        .unwrap_or_else(|| panic!("no {id}"));
    &mut h["estimate"]
}

/// Hypothesis ID's point estimate in a `verdicts.json` value, to change in place.
fn estimate_of<'a>(verdicts: &'a mut serde_json::Value, id: &str) -> &'a mut serde_json::Value {
    &mut interval_of(verdicts, id)["est"]
}

/// The number of values the tax reference checked, from its last line (none bad).
fn taxes_checked(text: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.starts_with("checked ") && l.ends_with(" taxes, 0 bad"))
        .unwrap_or_else(|| panic!("no clean `checked` line:\n{text}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn per_launch_len(summary: &Path) -> usize {
    read_json(summary)["per_launch"].as_array().unwrap().len()
}

/// The reference's last line must say it checked both metrics of every launch-cell, none bad.
fn assert_all_checked(text: &str, cells: usize) {
    let want = format!(
        "checked {} values in {cells} launch-cells, 0 bad",
        2 * cells
    );
    assert!(text.contains(&want), "expected `{want}`, got:\n{text}");
}

#[test]
fn committed_site_p90s_equal_numpy_on_the_h200_archive() {
    let Some(py) = python() else { return };
    let summary = repo().join("site/data/summary.json");
    let cells = per_launch_len(&summary);
    assert!(
        cells > 300,
        "the H200 archive has 313 launch-cells, got {cells}"
    );
    let (ok, text) = check(&py, &repo().join("results/h200x2-2026-11-30"), &summary);
    assert!(ok, "{text}");
    assert_all_checked(&text, cells);
}

#[test]
fn h100_root_p90s_equal_numpy_and_a_changed_p90_is_caught() {
    let Some(py) = python() else { return };
    let root = repo().join("results/h100-2026-12-05");
    let (tmp, summary, _) = render_h100();
    let cells = per_launch_len(&summary);
    let (ok, text) = check(&py, &root, &summary);
    assert!(ok, "{text}");
    assert_all_checked(&text, cells);

    // The reference is not blind: one TTFT p90 moved by 0.1% is reported by its launch-cell.
    let mut v = read_json(&summary);
    let first = &mut v["per_launch"][0];
    let where_ = format!(
        "{} l{} {}/{}",
        first["key"]["config"].as_str().unwrap(),
        first["launch"],
        first["key"]["phase"].as_str().unwrap(),
        first["key"]["cell"].as_str().unwrap()
    );
    let est = first["ttft_ms"]["p90"]["est"].as_f64().unwrap();
    first["ttft_ms"]["p90"]["est"] = serde_json::json!(est * 1.001);
    let changed = write_json(tmp.path(), "changed.json", &v);
    let (ok, text) = check(&py, &root, &changed);
    assert!(!ok, "a changed p90 passed:\n{text}");
    assert!(
        text.contains(&format!("{where_} ttft_ms: p90")) && text.contains(", 1 bad"),
        "the changed launch-cell {where_} is not named alone:\n{text}"
    );
}

/// Every tax of the committed report equals the within-machine weighting done by hand from its
/// per-launch p90s and step p50s (which the test above checks against the raw records), on the
/// launches the definition picks, and H1-H6's estimates follow from those taxes: 3 values
/// (TTFT, TPOT, step) for nearly every one of the archive's 39 taxes, plus H1-H6 (the archive
/// has Phase B, so H5 and H6 are estimated). H6 moved by 0.1 pp is caught by name.
#[test]
fn committed_site_taxes_equal_the_within_machine_weighting_by_hand() {
    let Some(py) = python() else { return };
    let data = repo().join("site/data");
    let (ok, text) = check_taxes(&py, &data.join("summary.json"), &data.join("verdicts.json"));
    assert!(ok, "{text}");
    assert!(taxes_checked(&text) > 100, "{text}");

    let mut v = read_json(&data.join("verdicts.json"));
    let h6 = estimate_of(&mut v, "h6");
    let est = h6.as_f64().expect("H6 is estimated on the archive");
    *h6 = serde_json::json!(est + 0.001);
    let tmp = tempfile::tempdir().unwrap();
    let changed = write_json(tmp.path(), "verdicts.json", &v);
    let (ok, text) = check_taxes(&py, &data.join("summary.json"), &changed);
    assert!(!ok, "a changed H6 passed:\n{text}");
    assert!(
        text.contains("H6 estimate: by hand") && text.contains(", 1 bad"),
        "{text}"
    );
}

/// The tax reference is not blind: on the H100 root's report, a tax estimate moved by 0.1%, a
/// launch dropped from a tax's pairing and an H1 estimate moved by 0.1% are each reported, by
/// config, context and metric.
#[test]
fn h100_taxes_equal_the_weighting_by_hand_and_a_changed_tax_is_caught() {
    let Some(py) = python() else { return };
    let (tmp, summary, verdicts) = render_h100();
    let (ok, text) = check_taxes(&py, &summary, &verdicts);
    assert!(ok, "{text}");
    assert!(taxes_checked(&text) >= 20, "{text}");

    let s = read_json(&summary);
    let i = ref_safe_tax(&s, "mooncake_both");

    let mut v = s.clone();
    let est = v["taxes"][i]["tpot_p90"]["value"]["est"].as_f64().unwrap();
    v["taxes"][i]["tpot_p90"]["value"]["est"] =
        serde_json::json!(est + 0.001 * est.abs().max(1e-3));
    let (ok, text) = check_taxes(&py, &write_json(tmp.path(), "tpot.json", &v), &verdicts);
    assert!(!ok, "a changed tax passed:\n{text}");
    assert!(
        text.contains("mooncake_both ref_safe A/r2_i4096_o256 tpot_p90: by hand")
            && text.contains(", 1 bad"),
        "{text}"
    );

    let mut v = s.clone();
    v["taxes"][i]["paired_launches"]
        .as_array_mut()
        .unwrap()
        .pop();
    let (ok, text) = check_taxes(&py, &write_json(tmp.path(), "launches.json", &v), &verdicts);
    assert!(!ok, "a dropped launch passed:\n{text}");
    assert!(
        text.contains("mooncake_both ref_safe A/r2_i4096_o256: launches by hand"),
        "{text}"
    );

    let mut v = read_json(&verdicts);
    let h1 = estimate_of(&mut v, "h1");
    let est = h1.as_f64().unwrap();
    *h1 = serde_json::json!(est * 1.001);
    let (ok, text) = check_taxes(&py, &summary, &write_json(tmp.path(), "verdicts.json", &v));
    assert!(!ok, "a changed H1 passed:\n{text}");
    assert!(text.contains("H1 estimate: by hand"), "{text}");
}

/// Every TTFT/TPOT p90 tax CI on `site/` equals the t-interval its launch-noise model stands for
/// (t_df * s / sqrt(sum of the machine weights) on the log scale, DESIGN §4.3), within three Monte
/// Carlo errors of the bootstrap: 76 intervals, 56 of them exact t-intervals (6 Welch, 14 where the
/// request-level floor binds: there the report's must contain the t-interval). The reference is not
/// blind: H1's interval narrowed by 15% on the log scale, the 2 req/s cell's TTFT variance
/// raised by 30% (every ref_safe TTFT tax then disagrees, and mooncake_both's "tax" would read
/// inconclusive) and a detection changed from "tax" to "inconclusive" (nixl_both's, whose
/// interval the request-level floor widens: read against its own bounds) are each caught by name.
/// H1-H6's intervals agree with a simulation of the model (tools/ci_by_hand.py `simulate`); H5's
/// lower bound moved by 5 pp, H2's interval narrowed by 8 pp on each side and SC2's interval
/// moved 1 pp apart from H2's (which it reads) are caught.
#[test]
fn committed_site_tax_cis_equal_the_t_interval_by_hand() {
    let Some(py) = python() else { return };
    let data = repo().join("site/data");
    let (summary, verdicts) = (data.join("summary.json"), data.join("verdicts.json"));
    let (ok, text) = check_cis(&py, &summary, &verdicts);
    assert!(ok, "{text}");
    let (bounds, exact) = cis_checked(&text);
    assert!(bounds > 140 && exact > 40, "{text}");

    let s = read_json(&summary);
    let tmp = tempfile::tempdir().unwrap();
    let i = ref_safe_tax(&s, "mooncake_both");

    let mut v = s.clone();
    narrow_log(&mut v["taxes"][i]["ttft_p90"]["value"], 0.85);
    let (ok, text) = check_cis(&py, &write_json(tmp.path(), "narrow.json", &v), &verdicts);
    assert!(!ok, "a narrowed CI passed:\n{text}");
    assert!(
        text.contains("mooncake_both ref_safe A/r2_i4096_o256 ttft_p90: report")
            && text.contains("lo, hi off")
            && text.contains("H1's interval"),
        "{text}"
    );

    let mut v = s.clone();
    let var = &mut v["launch_noise"]["cells"]["A/r2_i4096_o256"]["ttft_p90"]["var"];
    *var = serde_json::json!(var.as_f64().unwrap() * 1.3);
    let (ok, text) = check_cis(&py, &write_json(tmp.path(), "var.json", &v), &verdicts);
    assert!(!ok, "a changed variance passed:\n{text}");
    for config in ["noop_connector", "mooncake_producer", "mooncake_both"] {
        assert!(
            text.contains(&format!(
                "{config} ref_safe A/r2_i4096_o256 ttft_p90: report"
            )),
            "{config}:\n{text}"
        );
    }
    assert!(
        text.contains(
            "mooncake_both ref_safe A/r2_i4096_o256 ttft_p90: detection tax, by hand inconclusive"
        ),
        "{text}"
    );

    // H1-H6 by simulating the model: each reported, H5's lower bound moved by 0.05 (pp as a
    // fraction) is caught, and so is H2's interval narrowed inside the simulation's (one-sided
    // there: nixl_both l5's lopsided CI is under the floor).
    for h in ["H1", "H2", "H3", "H4", "H5", "H6"] {
        assert!(
            text.contains(&format!("{h} by simulation (")),
            "{h}:\n{text}"
        );
    }
    assert!(text.contains("H2 by simulation (one-sided"), "{text}");
    let vd = read_json(&verdicts);
    let mut w = vd.clone();
    let h5 = interval_of(&mut w, "h5");
    h5["lo"] = serde_json::json!(h5["lo"].as_f64().unwrap() + 0.05);
    let mut w2 = vd.clone();
    let h2 = interval_of(&mut w2, "h2");
    h2["lo"] = serde_json::json!(h2["lo"].as_f64().unwrap() + 0.08);
    h2["hi"] = serde_json::json!(h2["hi"].as_f64().unwrap() - 0.08);
    // SC2 reads H2's interval: one moved apart from it is caught.
    let mut w3 = vd.clone();
    let sc2 = w3["success_criteria"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["id"] == "sc2")
        .unwrap();
    sc2["estimate"]["lo"] = serde_json::json!(sc2["estimate"]["lo"].as_f64().unwrap() + 0.01);
    for (name, changed, want) in [
        ("h5.json", &w, "H5 interval: lo by simulation"),
        ("h2.json", &w2, "H2 interval: lo by simulation"),
        ("sc2.json", &w3, "SC2's interval"),
    ] {
        let (ok, text) = check_cis(&py, &summary, &write_json(tmp.path(), name, changed));
        assert!(!ok, "{name} passed:\n{text}");
        assert!(text.contains(want), "{want}:\n{text}");
    }

    let mut v = s.clone();
    let j = ref_safe_tax(&s, "nixl_both");
    assert_eq!(v["taxes"][j]["ttft_p90"]["detection"], "tax");
    v["taxes"][j]["ttft_p90"]["detection"] = serde_json::json!("inconclusive");
    let (ok, text) = check_cis(
        &py,
        &write_json(tmp.path(), "detection.json", &v),
        &verdicts,
    );
    assert!(!ok, "a changed detection passed:\n{text}");
    assert!(
        text.contains(
            "nixl_both ref_safe A/r2_i4096_o256 ttft_p90: detection inconclusive, its own interval reads tax"
        ) && text.contains(", 1 bad;"),
        "{text}"
    );
}

/// On the H100 root's fresh report the CIs agree with the t-interval too (most of its intervals
/// carry the request-level floor, so the check is one-sided there), and an interval narrowed
/// inside the t-interval is caught even where the floor binds.
#[test]
fn h100_tax_cis_contain_the_t_interval_by_hand() {
    let Some(py) = python() else { return };
    let (tmp, summary, verdicts) = render_h100();
    let (ok, text) = check_cis(&py, &summary, &verdicts);
    assert!(ok, "{text}");
    let (bounds, _) = cis_checked(&text);
    assert!(bounds >= 30, "{text}");
    assert!(
        text.contains("H1 by simulation (two-sided)")
            && text.contains("H2 by simulation (two-sided)"),
        "{text}"
    );

    let s = read_json(&summary);
    let i = ref_safe_tax(&s, "mooncake_both");
    let mut v = s.clone();
    narrow_log(&mut v["taxes"][i]["ttft_p90"]["value"], 0.6);
    let (ok, text) = check_cis(&py, &write_json(tmp.path(), "narrow.json", &v), &verdicts);
    assert!(!ok, "a narrowed CI passed:\n{text}");
    assert!(
        text.contains("mooncake_both ref_safe A/r2_i4096_o256 ttft_p90: report")
            && text.contains("floor"),
        "{text}"
    );
}
