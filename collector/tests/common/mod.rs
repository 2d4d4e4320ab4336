//! Shared helpers of the integration tests: start `ctax-sim` on an ephemeral port, run
//! `ctax-collect`, read what it wrote.
#![allow(dead_code)]

use ctax_schema::{MetricsSample, RequestRecord, RunSummary};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const SIM: &str = env!("CARGO_BIN_EXE_ctax-sim");
pub const COLLECT: &str = env!("CARGO_BIN_EXE_ctax-collect");

/// A running `ctax-sim`, killed on drop.
pub struct Sim {
    pub child: Child,
    pub port: u16,
    pub url: String,
}

impl Sim {
    pub fn start(extra: &[&str]) -> Sim {
        let mut child = Command::new(SIM)
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ctax-sim");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let first = lines
            .next()
            .expect("sim said nothing")
            .expect("read sim stderr");
        let port: u16 = first
            .split("http://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        // Keep draining stderr so the sim never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Sim {
            child,
            port,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn plan(cells: &[serde_json::Value]) -> serde_json::Value {
    serde_json::json!({ "cells": cells })
}

/// One planned cell with sensible test defaults; override fields with `extra`.
pub fn cell(rate: f64, input: u32, output: u32, extra: serde_json::Value) -> serde_json::Value {
    let mut c = serde_json::json!({
        "phase": "A",
        "cell": {"rate": rate, "input_len": input, "output_len": output},
        "arrival": "fixed",
        "duration_s": 1.0,
        "warmup_s": 0.0,
        "min_completed": 1,
        "max_cell_s": 60.0,
        "inflight_cap": 256,
        "seed": 1
    });
    if let serde_json::Value::Object(m) = extra {
        for (k, v) in m {
            c[k] = v;
        }
    }
    c
}

pub struct Run {
    pub dir: tempfile::TempDir,
    pub out: PathBuf,
    pub model: String,
}

impl Run {
    pub fn new() -> Run {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        Run {
            dir,
            out,
            model: "sim".into(),
        }
    }

    pub fn write_plan(&self, plan: &serde_json::Value) -> PathBuf {
        let p = self.dir.path().join("plan.json");
        std::fs::write(&p, serde_json::to_vec_pretty(plan).unwrap()).unwrap();
        p
    }

    pub fn command(&self, url: &str, plan: &serde_json::Value, extra: &[&str]) -> Command {
        let p = self.write_plan(plan);
        let mut c = Command::new(COLLECT);
        c.args([
            "--url",
            url,
            "--model",
            self.model.as_str(),
            "--config",
            "plain",
            "--launch",
            "0",
            "--no-progress",
        ])
        .arg("--plan")
        .arg(&p)
        .arg("--out")
        .arg(&self.out)
        .args(extra);
        c
    }

    /// Runs to the end; returns (status, stderr).
    pub fn collect(
        &self,
        url: &str,
        plan: &serde_json::Value,
        extra: &[&str],
    ) -> (ExitStatus, String) {
        let out = self
            .command(url, plan, extra)
            .output()
            .expect("run ctax-collect");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        eprintln!("--- ctax-collect stderr ---\n{err}");
        (out.status, err)
    }

    pub fn requests(&self, cell: &str) -> Vec<RequestRecord> {
        read_jsonl(&self.out.join(format!("requests_A_{cell}.jsonl")))
    }

    pub fn metrics(&self, cell: &str) -> Vec<MetricsSample> {
        read_jsonl(&self.out.join(format!("metrics_A_{cell}.jsonl")))
    }

    pub fn summary(&self) -> RunSummary {
        serde_json::from_slice(&std::fs::read(self.out.join("summary.json")).expect("summary.json"))
            .unwrap()
    }
}

pub fn read_jsonl<T: serde::de::DeserializeOwned>(p: &Path) -> Vec<T> {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} does not end with a newline",
        p.display()
    );
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: {e}: {l}", p.display(), i + 1))
        })
        .collect()
}

/// Checks the ordering invariants of a record.
pub fn assert_monotone(r: &RequestRecord) {
    if let Some(s) = r.t_send_ns {
        assert!(r.t_intended_ns <= s, "{}: intended > send", r.request_id);
        let end = r.t_end_ns.expect("sent requests have an end");
        assert!(s <= end, "{}: send > end", r.request_id);
        if let (Some(f), Some(l)) = (r.t_first_token_ns, r.t_last_token_ns) {
            assert!(
                s <= f && f <= l && l <= end,
                "{}: send/first/last/end out of order",
                r.request_id
            );
        }
        assert!(
            r.events.windows(2).all(|w| w[0].0 <= w[1].0),
            "{}: events out of order",
            r.request_id
        );
        if let Some(e) = r.events.first() {
            assert_eq!(Some(e.0), r.t_first_token_ns);
        }
        if let Some(e) = r.events.last() {
            assert_eq!(Some(e.0), r.t_last_token_ns);
        }
    } else {
        assert!(r.events.is_empty() && r.t_end_ns.is_none() && r.t_first_token_ns.is_none());
    }
}

/// Minimal blocking GET returning (status line + headers, body).
pub fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (h, b) = buf.split_once("\r\n\r\n").unwrap();
    (h.to_owned(), b.to_owned())
}

pub fn wait_for<F: FnMut() -> bool>(timeout: Duration, mut f: F) -> bool {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
