//! The collector against servers that misbehave (issue 11): a server that stops answering
//! `/metrics` and `/health` under load must not stretch a capped cell; error bodies with
//! terminal control characters must not reach the terminal raw; plans the server cannot serve
//! are refused before anything is written.

mod common;

use common::*;
use ctax_schema::Status;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
enum Completions {
    /// 200, one token event every 50 ms, never `[DONE]`.
    EndlessStream,
    /// 400 with a body full of terminal control sequences.
    HostileError,
}

/// A hand-written HTTP server on an ephemeral port, one thread per connection. `/health`
/// answers at once the first time (the collector's start-up probe) and then hangs, as does
/// `/metrics` (a server too busy to answer them).
fn fake_server(mode: Completions) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let health_calls = Arc::new(AtomicU32::new(0));
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let health_calls = health_calls.clone();
            std::thread::spawn(move || {
                let _ = serve(conn, mode, &health_calls);
            });
        }
    });
    url
}

fn serve(conn: TcpStream, mode: Completions, health_calls: &AtomicU32) -> std::io::Result<()> {
    let mut r = BufReader::new(conn.try_clone()?);
    let mut w = conn;
    loop {
        let mut first = String::new();
        if r.read_line(&mut first)? == 0 {
            return Ok(());
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            r.read_line(&mut h)?;
            if h.trim().is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        let path = first.split_whitespace().nth(1).unwrap_or("").to_owned();
        let hang = || std::thread::sleep(Duration::from_secs(30));
        match path.as_str() {
            "/health" => {
                if health_calls.fetch_add(1, Ordering::SeqCst) > 0
                    && matches!(mode, Completions::EndlessStream)
                {
                    hang();
                }
                w.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")?;
                return Ok(());
            }
            "/v1/models" => {
                let b = r#"{"data":[{"id":"sim","max_model_len":4096}]}"#;
                write!(
                    w,
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{b}",
                    b.len()
                )?;
                return Ok(());
            }
            "/metrics" => {
                if matches!(mode, Completions::EndlessStream) {
                    hang();
                }
                w.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")?;
                return Ok(());
            }
            _ => match mode {
                Completions::EndlessStream => {
                    w.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
                    )?;
                    for _ in 0..600 {
                        w.write_all(
                            b"data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"token_ids\":[7]}]}\n\n",
                        )?;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    return Ok(());
                }
                Completions::HostileError => {
                    let b =
                        "{\"error\":\"bad \x1b[31mred\x1b[0m \x07bell \x1b]0;owned\x07 \u{9b}2J\"}";
                    write!(
                        w,
                        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                        b.len()
                    )?;
                }
            },
        }
    }
}

#[test]
fn the_cap_holds_within_a_second_when_metrics_and_health_hang() {
    let url = fake_server(Completions::EndlessStream);
    let run = Run::new();
    let t = Instant::now();
    let (st, _) = run.collect(
        &url,
        &plan(&[cell(
            8.0,
            16,
            50,
            json!({"duration_s": 5.0, "min_completed": 100, "max_cell_s": 0.5}),
        )]),
        &["--rt-priority", "0"],
    );
    let wall = t.elapsed();
    assert_eq!(st.code(), Some(3));
    let h = &run.summary().cells["A/r8_i16_o50"];
    assert!(!h.complete);
    assert!(
        h.incomplete_reason
            .as_deref()
            .unwrap()
            .contains("max_cell_s=0.5s"),
        "{:?}",
        h.incomplete_reason
    );
    // `ctax run` keeps a capped cell on resume (a rerun reproduces the overload).
    assert!(h.capped(), "{:?}", h.incomplete_reason);
    // Every scheduled request ended in exactly one record, the in-flight ones cancelled.
    let recs = run.requests("r8_i16_o50");
    assert_eq!(recs.len() as u64, h.scheduled);
    assert_eq!(h.scheduled, 4, "sends at 0, 125, 250, 375 ms");
    let mut seqs: Vec<u64> = recs.iter().map(|r| r.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
    assert!(recs.iter().all(|r| r.status == Status::Cancelled));
    assert!(
        recs.iter().any(|r| !r.events.is_empty()),
        "partial streams kept"
    );
    // The cap is honoured within a second: the cell's traffic and the whole process.
    let cell_s = (h.t_end_ns - h.t_start_ns) as f64 / 1e9;
    eprintln!("cell {cell_s:.3} s, ctax-collect {wall:?}");
    assert!(cell_s < 1.5, "cell lasted {cell_s:.2} s");
    assert!(
        wall < Duration::from_millis(2500),
        "ctax-collect ran {wall:?}"
    );
}

#[test]
fn control_characters_from_error_bodies_and_names_are_escaped_on_the_terminal() {
    let url = fake_server(Completions::HostileError);
    let mut run = Run::new();
    // A path with an ESC sequence in it: printed when the second run moves the first one's
    // files aside.
    run.out = run.dir.path().join("out\x1b[2Jdir");
    for attempt in 0..2 {
        let out = run
            .command(
                &url,
                &plan(&[cell(20.0, 8, 4, json!({"duration_s": 0.5}))]),
                &["--max-consecutive-failures", "3", "--rt-priority", "0"],
            )
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        eprintln!("{}", err.escape_debug());
        assert_eq!(out.status.code(), Some(3), "stopped after 3 HTTP 400s");
        assert!(err.contains("HTTP 400"), "the error body is reported");
        for bad in ['\x1b', '\x07', '\u{9b}'] {
            assert!(!err.contains(bad), "{bad:?} reached the terminal");
        }
        assert!(err.contains("\\x1b[31mred"), "ESC shown escaped");
        assert!(err.contains("\\x07bell"), "BEL shown escaped");
        if attempt == 1 {
            assert!(err.contains("out\\x1b[2Jdir"), "the path is shown escaped");
        }
    }
    // The raw records keep the server's text as it was (JSON-escaped on disk).
    let recs =
        read_jsonl::<ctax_schema::RequestRecord>(&run.out.join("requests_A_r20_i8_o4.jsonl"));
    assert!(recs[0].error.as_deref().unwrap().contains("\x1b[31mred"));
}

#[test]
fn plans_the_server_cannot_serve_are_refused_before_any_file_is_written() {
    let sim = Sim::start(&["--max-model-len", "1000"]);
    let run = Run::new();
    let cases = [
        (
            cell(1.0, 990, 11, json!({})),
            "exceeds the server's max_model_len 1000",
        ),
        (
            cell(1.0, 4_294_967_295, 1, json!({})),
            "input_len 4294967295",
        ),
        (
            cell(1.0, 8, 4_294_967_295, json!({})),
            "output_len 4294967295",
        ),
        (cell(0.0, 8, 1, json!({})), "rate 0 req/s"),
        (cell(-2.0, 8, 1, json!({})), "rate -2 req/s"),
        (cell(1e12, 8, 1, json!({})), "rate 1000000000000 req/s"),
        (cell(1.0, 8, 1, json!({"duration_s": 1e300})), "duration_s"),
        (cell(1.0, 8, 1, json!({"max_cell_s": 0.0})), "max_cell_s 0"),
        (
            cell(1.0, 8, 1, json!({"inflight_cap": 4_000_000_000u64})),
            "inflight_cap",
        ),
    ];
    for (c, want) in cases {
        let (st, err) = run.collect(&sim.url, &plan(std::slice::from_ref(&c)), &[]);
        assert_eq!(st.code(), Some(2), "{c}: {err}");
        assert!(err.contains(want), "{c}: wanted {want:?} in {err}");
        assert!(!run.out.exists(), "{c}: created {}", run.out.display());
    }
    // At the limit is fine.
    let (st, err) = run.collect(
        &sim.url,
        &plan(&[cell(20.0, 990, 10, json!({"duration_s": 0.1}))]),
        &[],
    );
    assert_eq!(st.code(), Some(0), "{err}");
}
