//! The I/O side: one pooled HTTP client on a tokio runtime that does nothing but send, frame SSE
//! bytes and stamp them. JSON is never parsed here; finished requests go to the writer thread.

use super::record::{IoOutcome, RawResult};
use super::writer::WriterMsg;
use crate::clock::monotonic_ns;
use crate::rtq::Sender;
use crate::sse::{FrameSink, SseParser};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// State shared by every request of the run.
pub struct IoShared {
    pub client: reqwest::Client,
    /// `…/v1/completions`
    pub url: reqwest::Url,
    pub request_timeout: Duration,
    /// Sent and not yet ended (incremented by the pacer, decremented here).
    pub inflight: AtomicU32,
    /// Requests that ended in failure since the last `ok`-looking stream.
    pub consecutive_failures: AtomicU32,
    /// Of those, connect errors in a row (the server did not answer at all).
    pub consecutive_connect_errors: AtomicU32,
    pub last_failure: Mutex<Option<String>>,
}

impl IoShared {
    pub fn new(
        base_url: &reqwest::Url,
        request_timeout: Duration,
        pool: usize,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .http1_only()
            .no_proxy()
            .pool_max_idle_per_host(pool)
            // vLLM's uvicorn closes idle keep-alive connections after 5 s: retire ours first so a
            // request never races a server-side close.
            .pool_idle_timeout(Duration::from_secs(4))
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(IoShared {
            client,
            url: base_url.join("v1/completions")?,
            request_timeout,
            inflight: AtomicU32::new(0),
            consecutive_failures: AtomicU32::new(0),
            consecutive_connect_errors: AtomicU32::new(0),
            last_failure: Mutex::new(None),
        })
    }
}

/// Per-cell handles the I/O tasks need.
pub struct CellIo {
    pub cancel: CancellationToken,
    pub tx: Sender<WriterMsg>,
}

/// One due request, handed over by the pacer.
pub struct Job {
    pub seq: u64,
    pub t_intended_ns: u64,
    pub warmup: bool,
    pub inflight_at_send: u32,
    pub body: Vec<u8>,
}

struct IoState {
    http_status: Option<u16>,
    error: Option<String>,
    parser: SseParser,
    sink: FrameSink,
    eof: crate::sse::EofState,
    t_eof: u64,
    head: Vec<u8>,
}

const HEAD_KEEP: usize = 256;

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    s
}

async fn drive(io: &IoShared, body: Vec<u8>, st: &mut IoState) -> IoOutcome {
    let req = io
        .client
        .post(io.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            st.error = Some(error_chain(&e));
            return IoOutcome::ConnectError;
        }
    };
    let status = resp.status();
    st.http_status = Some(status.as_u16());
    if !status.is_success() {
        let mut body = Vec::new();
        while body.len() < 4096 {
            match resp.chunk().await {
                Ok(Some(c)) => body.extend_from_slice(&c),
                _ => break,
            }
        }
        st.error = Some(format!(
            "HTTP {}: {}",
            status.as_u16(),
            super::record::excerpt(&body, 1000)
        ));
        return IoOutcome::HttpError;
    }
    loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => {
                // Stamp first, frame second; nothing else happens on this thread.
                let t = monotonic_ns();
                if st.head.len() < HEAD_KEEP {
                    let n = (HEAD_KEEP - st.head.len()).min(bytes.len());
                    st.head.extend_from_slice(&bytes[..n]);
                }
                st.parser.feed(&bytes, t, &mut st.sink);
                if st.sink.done_t_ns.is_some() {
                    break;
                }
            }
            Ok(None) => {
                st.t_eof = monotonic_ns();
                st.eof = st.parser.finish(&mut st.sink);
                return IoOutcome::Eof;
            }
            Err(e) => {
                st.t_eof = monotonic_ns();
                st.eof = st.parser.finish(&mut st.sink);
                st.error = Some(format!("reading the stream: {}", error_chain(&e)));
                return IoOutcome::StreamIoError;
            }
        }
    }
    // After [DONE]: read the (normally empty) rest so the connection returns to the pool, but
    // never wait long for a server that keeps the stream open.
    let rest = async {
        while let Ok(Some(b)) = resp.chunk().await {
            st.parser.feed(&b, monotonic_ns(), &mut st.sink);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), rest).await;
    st.t_eof = monotonic_ns();
    st.eof = st.parser.finish(&mut st.sink);
    IoOutcome::Eof
}

/// Runs one request to its end and hands the raw result to the writer. Never panics on server
/// behaviour; always sends exactly one message.
pub async fn run_request(io: std::sync::Arc<IoShared>, cell: std::sync::Arc<CellIo>, job: Job) {
    let t_send_ns = monotonic_ns();
    let deadline = tokio::time::Instant::now() + io.request_timeout;
    let mut st = IoState {
        http_status: None,
        error: None,
        parser: SseParser::new(),
        sink: FrameSink::default(),
        eof: Default::default(),
        t_eof: 0,
        head: Vec::new(),
    };
    let outcome = {
        let fut = drive(&io, job.body, &mut st);
        tokio::select! {
            biased;
            _ = cell.cancel.cancelled() => IoOutcome::Cancelled,
            _ = tokio::time::sleep_until(deadline) => IoOutcome::Timeout,
            o = fut => o,
        }
    };
    let now = monotonic_ns();
    let t_end_ns = match outcome {
        IoOutcome::Eof => st.sink.done_t_ns.unwrap_or(st.t_eof),
        IoOutcome::StreamIoError => st.t_eof,
        _ => now,
    };
    match outcome {
        IoOutcome::Cancelled => {
            st.error.get_or_insert_with(|| {
                "cancelled by the collector (cell deadline or interrupt)".into()
            });
        }
        IoOutcome::Timeout => {
            st.error.get_or_insert_with(|| {
                format!("no complete response within {:?}", io.request_timeout)
            });
        }
        _ => {}
    }
    // Failure bookkeeping for the controller's "server died" rule.
    let healthy = outcome == IoOutcome::Eof
        && st.sink.done_t_ns.is_some()
        && st.sink.error_event_t_ns.is_none();
    match outcome {
        IoOutcome::Cancelled => {}
        _ if healthy => {
            io.consecutive_failures.store(0, Ordering::Relaxed);
            io.consecutive_connect_errors.store(0, Ordering::Relaxed);
        }
        IoOutcome::ConnectError => {
            io.consecutive_failures.fetch_add(1, Ordering::Relaxed);
            io.consecutive_connect_errors
                .fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            io.consecutive_failures.fetch_add(1, Ordering::Relaxed);
            io.consecutive_connect_errors.store(0, Ordering::Relaxed);
        }
    }
    if !healthy
        && outcome != IoOutcome::Cancelled
        && let Ok(mut g) = io.last_failure.lock()
    {
        *g = Some(
            st.error
                .clone()
                .unwrap_or_else(|| "stream ended without [DONE]".into()),
        );
    }
    io.inflight.fetch_sub(1, Ordering::AcqRel);
    let raw = RawResult {
        seq: job.seq,
        t_intended_ns: job.t_intended_ns,
        t_send_ns,
        t_end_ns,
        inflight_at_send: job.inflight_at_send,
        warmup: job.warmup,
        outcome,
        http_status: st.http_status,
        error: st.error,
        sink: st.sink,
        eof: st.eof,
        head: st.head,
    };
    // The writer outlives every task of its cell; a send error would mean it crashed, and the
    // controller reports that.
    let _ = cell.tx.send(WriterMsg::Sent(Box::new(raw)));
}
