//! `ctax-collect` against `ctax-sim`: counts, ordering, drops, arrival processes, the cell rules
//! (warm-up, min-completed, hard cap), failures (HTTP errors, a killed server, SIGINT) and
//! summary.json. No assertion depends on timing: the machine running the tests may be busy.

mod common;

use common::*;
use ctax_schema::{Status, StepRecord};
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;

#[test]
fn exact_counts_monotone_timestamps_warmup_and_metrics() {
    let sim = Sim::start(&["--base-step-us", "1000"]);
    let run = Run::new();
    let plan = plan(&[
        cell(
            20.0,
            32,
            8,
            json!({"duration_s": 1.5, "warmup_s": 0.5, "min_completed": 5}),
        ),
        // A 20k-token prompt: the first chunk echoes it (prompt_token_ids), a ~100 kB SSE line.
        cell(
            4.0,
            20_000,
            4,
            json!({"duration_s": 0.5, "min_completed": 1}),
        ),
    ]);
    let (st, _) = run.collect(&sim.url, &plan, &[]);
    assert_eq!(st.code(), Some(0));

    let s = run.summary();
    let h = &s.cells["A/r20_i32_o8"];
    let recs = run.requests("r20_i32_o8");
    // Fixed 20 req/s for warm-up + duration = 2.0 s: dues at 0, 50, …, 1950 ms.
    assert_eq!(recs.len(), 40);
    assert_eq!(h.scheduled, 40);
    assert_eq!(
        (h.sent, h.ok, h.dropped, h.errors, h.cancelled),
        (40, 40, 0, 0, 0)
    );
    assert!(h.complete, "{:?}", h.incomplete_reason);
    let seqs: HashSet<u64> = recs.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (0..40).collect());
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        assert_eq!(r.error, None);
        assert_eq!(r.prompt_tokens, Some(32));
        assert_eq!(r.completion_tokens, Some(8));
        assert_eq!(r.events.iter().map(|e| e.1).sum::<u32>(), 8);
        assert_eq!(r.http_status, Some(200));
        assert_eq!(r.request_id, format!("plain/l0/A/r20_i32_o8/{}", r.seq));
        // Intended times are the absolute schedule (±1 ns of rounding).
        let want = h.t_start_ns + r.seq * 50_000_000;
        assert!(
            r.t_intended_ns.abs_diff(want) <= 1,
            "seq {} intended {} want {want}",
            r.seq,
            r.t_intended_ns
        );
        assert_eq!(r.warmup, r.t_intended_ns < h.t_warmup_end_ns);
        assert_monotone(r);
    }
    assert_eq!(recs.iter().filter(|r| r.warmup).count(), 10);
    assert_eq!(h.completed_measured, 30);
    assert_eq!(h.t_warmup_end_ns, h.t_start_ns + 500_000_000);
    assert_eq!(h.t_last_send_ns, h.t_start_ns + 1_950_000_000);
    assert!(h.t_end_ns >= h.t_last_send_ns);
    assert!(h.lateness_us_p50 <= h.lateness_us_p99 && h.lateness_us_p99 <= h.lateness_us_max);

    let m = run.metrics("r20_i32_o8");
    assert!(m.len() >= 2, "{} scrapes", m.len());
    assert_eq!(h.scrapes as usize, m.len());
    assert!(m.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
    for x in &m {
        assert!(x.ok, "{:?}", x.error);
        assert!(
            x.gauges
                .contains_key("vllm:num_requests_running{engine=\"0\"}")
        );
        assert!(
            x.histograms
                .contains_key("vllm:e2e_request_latency_seconds_sum{engine=\"0\"}")
        );
    }
    let last = m.last().unwrap();
    assert!(last.counter_total("vllm:request_success_total").unwrap() >= 40.0);

    let big = run.requests("r4_i20000_o4");
    assert!(!big.is_empty());
    for r in &big {
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        assert_eq!(r.prompt_tokens, Some(20_000));
        assert_eq!(r.events.iter().map(|e| e.1).sum::<u32>(), 4);
    }
}

#[test]
fn min_completed_extends_the_cell() {
    let sim = Sim::start(&["--base-step-us", "1000"]);
    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(
            10.0,
            16,
            4,
            json!({"duration_s": 0.3, "warmup_s": 0.2, "min_completed": 15}),
        )]),
        &[],
    );
    assert_eq!(st.code(), Some(0));
    let h = &run.summary().cells["A/r10_i16_o4"];
    let recs = run.requests("r10_i16_o4");
    assert!(h.completed_measured >= 15);
    assert!(h.complete);
    // 0.5 s of schedule would give 5 requests; the rule kept sending until 15 measured completed.
    assert!(h.scheduled >= 17, "{}", h.scheduled);
    assert!(h.t_last_send_ns - h.t_warmup_end_ns >= 300_000_000);
    assert_eq!(recs.len() as u64, h.scheduled);
    assert_eq!(recs.iter().filter(|r| r.warmup).count(), 2);
    assert_eq!(
        recs.iter()
            .filter(|r| !r.warmup && r.status == Status::Ok)
            .count() as u64,
        h.completed_measured
    );
}

#[test]
fn drops_are_recorded_when_the_inflight_cap_is_hit() {
    // 20 ms steps × 20 tokens: every request stays ≥ 400 ms; 50 req/s offered, cap 4.
    let sim = Sim::start(&["--base-step-us", "20000", "--jitter-pct", "0"]);
    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(
            50.0,
            16,
            20,
            json!({"duration_s": 1.0, "inflight_cap": 4}),
        )]),
        &[],
    );
    assert_eq!(st.code(), Some(0));
    let h = &run.summary().cells["A/r50_i16_o20"];
    let recs = run.requests("r50_i16_o20");
    assert_eq!(recs.len() as u64, h.scheduled);
    assert_eq!(h.scheduled, 50);
    let dropped: Vec<_> = recs
        .iter()
        .filter(|r| r.status == Status::Dropped)
        .collect();
    assert!(dropped.len() >= 20, "only {} dropped", dropped.len());
    assert_eq!(dropped.len() as u64, h.dropped);
    assert_eq!(h.sent + h.dropped, h.scheduled);
    for r in &dropped {
        assert_eq!(r.t_send_ns, None);
        assert_eq!(r.inflight_at_send, 4);
        assert!(r.events.is_empty());
        assert_monotone(r);
    }
    for r in recs.iter().filter(|r| r.status != Status::Dropped) {
        assert!(r.inflight_at_send < 4);
        assert_eq!(r.status, Status::Ok);
    }
    // Never more than 4 in flight: at any send, the number of other requests in [send, end) < 4.
    let sent: Vec<_> = recs
        .iter()
        .filter_map(|r| Some((r.t_send_ns?, r.t_end_ns?)))
        .collect();
    for &(s, _) in &sent {
        let overlapping = sent.iter().filter(|&&(s2, e2)| s2 < s && e2 > s).count();
        assert!(overlapping < 4, "{overlapping} in flight at a send");
    }
}

#[test]
fn poisson_arrivals_have_the_offered_mean_rate() {
    let sim = Sim::start(&["--fixed-ttft-ms", "1", "--fixed-itl-ms", "1"]);
    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(
            200.0,
            8,
            1,
            json!({"arrival": "poisson", "duration_s": 5.0, "seed": 11}),
        )]),
        &[],
    );
    assert_eq!(st.code(), Some(0));
    let h = &run.summary().cells["A/r200_i8_o1"];
    let recs = run.requests("r200_i8_o1");
    let n = recs.len() as f64;
    // N ~ Poisson(λT) = Poisson(1000): sd = √1000 ≈ 31.6; allow 4 sd.
    assert!(
        (n - 1000.0).abs() <= 4.0 * 1000f64.sqrt(),
        "{n} arrivals in 5 s at 200/s"
    );
    assert_eq!(h.scheduled as f64, n);
    // Exponential gaps: counts in 100 ms bins have variance ≈ mean (index of dispersion ≈ 1; its
    // sampling sd with 50 bins is ≈ √(2/49) ≈ 0.2), where a fixed schedule would give ≈ 0.
    let mut bins = [0f64; 50];
    for r in &recs {
        let b = ((r.t_intended_ns - h.t_start_ns) / 100_000_000) as usize;
        if b < 50 {
            bins[b] += 1.0;
        }
    }
    let mean = bins.iter().sum::<f64>() / 50.0;
    let var = bins.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 49.0;
    let d = var / mean;
    assert!((0.4..1.8).contains(&d), "index of dispersion {d}");
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        assert_monotone(r);
    }
}

#[test]
fn hard_cap_cancels_and_marks_the_cell_incomplete() {
    // 50 ms steps × 50 tokens: ≥ 2.5 s per request; the cell may only last 2 s.
    let sim = Sim::start(&["--base-step-us", "50000", "--jitter-pct", "0"]);
    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(
            5.0,
            16,
            50,
            json!({"duration_s": 1.0, "min_completed": 100, "max_cell_s": 2.0}),
        )]),
        &[],
    );
    assert_eq!(st.code(), Some(3));
    let h = &run.summary().cells["A/r5_i16_o50"];
    assert!(!h.complete);
    assert!(
        h.incomplete_reason
            .as_deref()
            .unwrap()
            .contains("max_cell_s"),
        "{:?}",
        h.incomplete_reason
    );
    let recs = run.requests("r5_i16_o50");
    assert_eq!(recs.len() as u64, h.scheduled);
    assert_eq!(h.scheduled, 10);
    let cancelled: Vec<_> = recs
        .iter()
        .filter(|r| r.status == Status::Cancelled)
        .collect();
    assert_eq!(cancelled.len() as u64, h.cancelled);
    assert_eq!(h.cancelled, 10);
    for r in &recs {
        assert_monotone(r);
        // Partial streams are kept.
        assert!(r.t_end_ns.unwrap() <= h.t_end_ns);
    }
    assert!(recs.iter().any(|r| !r.events.is_empty()));
    assert!(h.t_end_ns - h.t_start_ns < 2_500_000_000);
}

#[test]
fn a_cell_that_meets_its_rule_before_the_cap_is_complete() {
    // 2 req/s with a 0.5 s cap: the second send would fall on the cap, but the first request
    // completes within ~20 ms and meets min_completed = 1 (duration 0): complete, not capped
    // (it used to be reported "max_cell_s reached ... 1 of 1 measured completions").
    let sim = Sim::start(&[]);
    let run = Run::new();
    let (st, err) = run.collect(
        &sim.url,
        &plan(&[cell(
            2.0,
            16,
            5,
            json!({"duration_s": 0.0, "min_completed": 1, "max_cell_s": 0.5}),
        )]),
        &[],
    );
    assert_eq!(st.code(), Some(0), "{err}");
    let h = &run.summary().cells["A/r2_i16_o5"];
    assert!(h.complete, "{:?}", h.incomplete_reason);
    assert_eq!((h.scheduled, h.ok), (1, 1));
    assert!(h.t_end_ns - h.t_start_ns < 500_000_000);
}

#[test]
fn request_timeouts_are_recorded() {
    // 3 s per engine step: no request can finish within the 0.5 s request timeout.
    let sim = Sim::start(&["--base-step-us", "3000000", "--jitter-pct", "0"]);
    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(
            4.0,
            8,
            2,
            json!({"duration_s": 0.5, "min_completed": 0}),
        )]),
        &["--request-timeout-s", "0.5"],
    );
    assert_eq!(st.code(), Some(0));
    let recs = run.requests("r4_i8_o2");
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r.status, Status::Timeout);
        assert!(
            r.error.as_deref().unwrap().contains("500ms"),
            "{:?}",
            r.error
        );
        let took = r.t_end_ns.unwrap() - r.t_send_ns.unwrap();
        assert!(took >= 500_000_000, "{took}");
        assert_monotone(r);
    }
    assert_eq!(run.summary().cells["A/r4_i8_o2"].errors, 2);
}

#[test]
fn killed_server_mid_cell_exits_4_with_every_record_on_disk() {
    let mut sim = Sim::start(&["--base-step-us", "5000"]);
    let run = Run::new();
    let child = run
        .command(
            &sim.url,
            &plan(&[cell(
                20.0,
                16,
                40,
                json!({"duration_s": 60.0, "max_cell_s": 120.0}),
            )]),
            &["--max-consecutive-failures", "5"],
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    sim.kill();
    let t = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{err}");
    assert_eq!(out.status.code(), Some(4));
    assert!(t.elapsed() < Duration::from_secs(20));
    assert!(err.contains("SERVER DIED"), "{err}");
    let h = &run.summary().cells["A/r20_i16_o40"];
    assert!(!h.complete);
    assert!(
        h.incomplete_reason
            .as_deref()
            .unwrap()
            .contains("server died")
    );
    assert!(
        !h.capped(),
        "a dead server is rerun on resume, not kept as capped"
    );
    let recs = run.requests("r20_i16_o40");
    assert_eq!(recs.len() as u64, h.scheduled);
    assert!(
        recs.iter().any(|r| r.status == Status::Ok),
        "some finished before the kill"
    );
    let failed: Vec<_> = recs
        .iter()
        .filter(|r| matches!(r.status, Status::StreamError | Status::ConnectError))
        .collect();
    assert!(failed.len() >= 5, "{} failures", failed.len());
    assert!(failed.iter().all(|r| r.error.is_some()));
    // Streams cut by the kill keep the tokens they had.
    assert!(
        recs.iter()
            .any(|r| r.status == Status::StreamError && !r.events.is_empty())
    );
    for r in &recs {
        assert_monotone(r);
    }
}

#[test]
fn sigint_exits_130_with_files_and_summary_written() {
    let sim = Sim::start(&["--base-step-us", "2000"]);
    let run = Run::new();
    let child = run
        .command(
            &sim.url,
            &plan(&[cell(20.0, 16, 200, json!({"duration_s": 60.0}))]),
            &[],
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling a child we own.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(130));
    let h = &run.summary().cells["A/r20_i16_o200"];
    assert!(!h.complete);
    assert_eq!(h.incomplete_reason.as_deref(), Some("interrupted"));
    assert!(!h.capped());
    let recs = run.requests("r20_i16_o200");
    assert_eq!(recs.len() as u64, h.scheduled);
    assert!(h.scheduled >= 10);
    // 200 tokens at ~2 ms/step: everything was still streaming and got cancelled.
    assert!(
        recs.iter()
            .filter(|r| r.status == Status::Cancelled)
            .count()
            >= 5
    );
    for r in &recs {
        assert_monotone(r);
    }
    assert!(!run.metrics("r20_i16_o200").is_empty());
}

#[test]
fn summary_json_keeps_stats_and_other_cells() {
    let sim = Sim::start(&[]);
    let run = Run::new();
    std::fs::create_dir_all(&run.out).unwrap();
    std::fs::write(
        run.out.join("summary.json"),
        r#"{"schema_version":1,"cells":{"B/r1_i1_o1":{"phase":"B","cell":"r1_i1_o1","rate":1.0,"input_len":1,"output_len":1,"arrival":"fixed","seed":0,"t_start_ns":0,"t_warmup_end_ns":0,"t_last_send_ns":0,"t_end_ns":0,"wall_start_unix_ms":0,"scheduled":0,"sent":0,"dropped":0,"ok":0,"errors":0,"cancelled":0,"completed_measured":0,"complete":true,"incomplete_reason":null,"lateness_us_p50":0.0,"lateness_us_p99":0.0,"lateness_us_max":0.0,"client_cpu_pct":0.0,"scrapes":0,"scrape_failures":0}},"stats":{"B/r1_i1_o1":{"ttft_p50_ms":12.5}}}"#,
    )
    .unwrap();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(10.0, 8, 2, json!({"duration_s": 0.3}))]),
        &[],
    );
    assert_eq!(st.code(), Some(0));
    let s = run.summary();
    assert_eq!(s.cells.len(), 2);
    assert!(s.cells.contains_key("A/r10_i8_o2"));
    assert_eq!(s.stats["B/r1_i1_o1"]["ttft_p50_ms"], 12.5);
    let leftovers: Vec<_> = std::fs::read_dir(&run.out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn http_errors_are_recorded_and_stop_the_cell() {
    // A model the server does not serve: every request gets HTTP 404 from the server. (Prompts
    // longer than the model's context are refused before the cell starts, since the server
    // lists its max_model_len: tests/hostile_server.rs.)
    let sim = Sim::start(&[]);
    let mut run = Run::new();
    run.model = "not-served".into();
    let (st, err) = run.collect(
        &sim.url,
        &plan(&[cell(50.0, 64, 4, json!({"duration_s": 30.0}))]),
        &["--max-consecutive-failures", "8"],
    );
    assert!(err.contains("does not list model"), "{err}");
    assert_eq!(st.code(), Some(3), "{err}");
    let h = &run.summary().cells["A/r50_i64_o4"];
    assert!(
        h.incomplete_reason
            .as_deref()
            .unwrap()
            .contains("failed requests in a row")
    );
    let recs = run.requests("r50_i64_o4");
    assert_eq!(recs.len() as u64, h.scheduled);
    assert!(recs.len() >= 8 && recs.len() < 200);
    for r in recs.iter().filter(|r| r.status != Status::Cancelled) {
        assert_eq!(r.status, Status::HttpError);
        assert_eq!(r.http_status, Some(404));
        assert!(
            r.error
                .as_deref()
                .unwrap()
                .contains("`not-served` does not exist"),
            "{:?}",
            r.error
        );
    }
}

#[test]
fn unreachable_server_and_bad_plans() {
    let run = Run::new();
    // Nothing listens on port 1.
    let (st, err) = run.collect(
        "http://127.0.0.1:1",
        &plan(&[cell(1.0, 8, 1, json!({}))]),
        &[],
    );
    assert_eq!(st.code(), Some(4));
    assert!(err.contains("UNREACHABLE"), "{err}");
    let sim = Sim::start(&[]);
    for bad in [
        json!({"cells": []}),
        plan(&[cell(0.0, 8, 1, json!({}))]),
        plan(&[cell(1.0, 8, 1, json!({"inflight_cap": 0}))]),
        plan(&[cell(1.0, 8, 1, json!({})), cell(1.0, 8, 1, json!({}))]),
        json!({"cells": [{"phase": "Z"}]}),
    ] {
        let (st, err) = run.collect(&sim.url, &bad, &[]);
        assert_eq!(st.code(), Some(2), "{bad}: {err}");
    }
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(1.0, 8, 1, json!({}))]),
        &["--vocab-lo", "10", "--vocab-hi", "20"],
    );
    assert_eq!(st.code(), Some(2));
}

#[test]
fn without_token_ids_tokens_are_estimated_and_noted() {
    let sim = Sim::start(&[]);
    let run = Run::new();
    let (st, err) = run.collect(
        &sim.url,
        &plan(&[cell(10.0, 8, 5, json!({"duration_s": 0.3}))]),
        &["--no-return-token-ids"],
    );
    assert_eq!(st.code(), Some(0));
    assert!(err.contains("no token_ids"), "{err}");
    for r in run.requests("r10_i8_o5") {
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.events.iter().map(|e| e.1).sum::<u32>(), 5);
        assert!(r.error.as_deref().unwrap().starts_with("note:"));
    }
}

#[test]
fn sim_labels_itself_and_logs_injected_connector_cost() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("steps.jsonl");
    let sim = Sim::start(&[
        "--connector-step-us",
        "300",
        "--connector-request-us",
        "5",
        "--jitter-pct",
        "0",
        "--step-log",
        log.to_str().unwrap(),
    ]);
    let (h, b) = http_get(sim.port, "/v1/models");
    assert!(
        h.to_ascii_lowercase().contains("x-ctax-simulated: 1"),
        "{h}"
    );
    assert!(b.contains("\"owned_by\":\"ctax-sim\""), "{b}");
    let (h, b) = http_get(sim.port, "/metrics");
    assert!(h.to_ascii_lowercase().contains("x-ctax-simulated: 1"));
    assert!(b.contains("ctax_sim_info{simulated=\"1\"} 1.0"));
    let (h, _) = http_get(sim.port, "/health");
    assert!(
        h.starts_with("HTTP/1.0 200") || h.starts_with("HTTP/1.1 200"),
        "{h}"
    );

    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(20.0, 100, 10, json!({"duration_s": 0.5}))]),
        &[],
    );
    assert_eq!(st.code(), Some(0));
    assert!(wait_for(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.lines().count() >= 10)
    }));
    std::thread::sleep(Duration::from_millis(300));
    let steps: Vec<StepRecord> = read_jsonl(&log);
    assert!(!steps.is_empty());
    for s in &steps {
        assert_eq!(s.get_finished_us, Some(100.0));
        assert_eq!(s.start_load_kv_us, Some(100.0));
        // build_meta = 100 µs + 5 µs per scheduled request (at least one).
        let per_req = (s.build_meta_us.unwrap() - 100.0) / 5.0;
        assert!(per_req >= 1.0 && per_req.fract() == 0.0, "{per_req}");
        // The step took at least its modelled cost (base 2000 µs + the connector).
        assert!(s.step_duration_us.unwrap() >= 2000.0 + s.connector_total_us().unwrap() - 1.0);
    }
    assert!(
        steps
            .windows(2)
            .all(|w| w[0].t_ns < w[1].t_ns && w[0].step_id + 1 == w[1].step_id)
    );
    assert_eq!(
        steps
            .iter()
            .map(|s| s.prefill_tokens.unwrap() as u64)
            .sum::<u64>(),
        100 * run.requests("r20_i100_o10").len() as u64
    );
}

#[test]
fn plain_sim_step_log_has_null_connector_fields() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("steps.jsonl");
    let sim = Sim::start(&["--step-log", log.to_str().unwrap()]);
    let run = Run::new();
    let (st, _) = run.collect(
        &sim.url,
        &plan(&[cell(10.0, 8, 3, json!({"duration_s": 0.2}))]),
        &[],
    );
    assert_eq!(st.code(), Some(0));
    assert!(wait_for(Duration::from_secs(5), || std::fs::metadata(&log)
        .is_ok_and(|m| m.len() > 0)));
    let steps: Vec<StepRecord> = read_jsonl(&log);
    assert!(steps.iter().all(|s| s.connector_total_us().is_none()));
}
