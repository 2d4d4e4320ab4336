//! The /metrics sampler: its own OS thread, absolute 1 s ticks on CLOCK_MONOTONIC, a blocking
//! HTTP/1.0 GET per scrape (no shared pool, no shared runtime), parsing on this thread.
//! When a scrape fails it probes `/health`; three failed probes in a row mark the server dead.

use crate::clock::{monotonic_ns, sleep_until_abs};
use crate::prom;
use ctax_schema::MetricsSample;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where the server listens.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl Target {
    pub fn from_url(u: &reqwest::Url) -> anyhow::Result<Target> {
        let host = u
            .host_str()
            .ok_or_else(|| anyhow::anyhow!("URL {u} has no host"))?
            .to_owned();
        let port = u
            .port_or_known_default()
            .ok_or_else(|| anyhow::anyhow!("URL {u} has no port"))?;
        Ok(Target { host, port })
    }
    fn addr(&self) -> Result<SocketAddr, String> {
        let h = self.host.trim_start_matches('[').trim_end_matches(']');
        (h, self.port)
            .to_socket_addrs()
            .map_err(|e| format!("resolving {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("{} resolves to nothing", self.host))
    }
}

/// A blocking HTTP/1.0 GET (the server answers without chunking and closes). Returns the status
/// and the body.
pub fn http_get(t: &Target, path: &str, timeout: Duration) -> Result<(u16, Vec<u8>), String> {
    http_get_abortable(t, path, timeout, None)
}

/// Largest response body read (a /metrics scrape of a big server is ~100 KB).
const MAX_RESPONSE: usize = 64 << 20;
/// How often a blocked GET looks at its abort flag.
const ABORT_POLL: Duration = Duration::from_millis(50);
const ABORTED: &str = "abandoned: the cell ended";

/// [`http_get`] that gives up within [`ABORT_POLL`] once `abort` is set (the cell ended: its
/// sampler must not hold the cell open for a slow server) and never buffers more than
/// [`MAX_RESPONSE`] bytes.
pub fn http_get_abortable(
    t: &Target,
    path: &str,
    timeout: Duration,
    abort: Option<&AtomicBool>,
) -> Result<(u16, Vec<u8>), String> {
    let deadline = std::time::Instant::now() + timeout;
    let aborted = || abort.is_some_and(|a| a.load(Ordering::Acquire));
    let addr = t.addr()?;
    let slice = if abort.is_some() {
        timeout.min(ABORT_POLL)
    } else {
        timeout
    };
    // One connect attempt (a retry loop of short attempts would fail on a link slower than the
    // slice); an abortable GET gives it at most 1 s, since it cannot be interrupted.
    let connect_limit = if abort.is_some() {
        timeout.min(Duration::from_secs(1))
    } else {
        timeout
    };
    let mut s = TcpStream::connect_timeout(&addr, connect_limit)
        .map_err(|e| format!("connect {addr}: {e}"))?;
    if aborted() {
        return Err(ABORTED.into());
    }
    s.set_read_timeout(Some(slice)).ok();
    s.set_write_timeout(Some(timeout)).ok();
    s.set_nodelay(true).ok();
    let req = format!(
        "GET {path} HTTP/1.0\r\nHost: {}:{}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n",
        t.host, t.port
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("sending GET {path}: {e}"))?;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if buf.len() + n > MAX_RESPONSE {
                    return Err(format!(
                        "reading {path}: response over {MAX_RESPONSE} bytes"
                    ));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if aborted() {
                    return Err(ABORTED.into());
                }
                if std::time::Instant::now() >= deadline {
                    return Err(format!("reading {path}: timed out after {timeout:?}"));
                }
            }
            Err(e) => return Err(format!("reading {path}: {e}")),
        }
    }
    parse_response(&buf).map_err(|e| format!("GET {path}: {e}"))
}

fn parse_response(buf: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = memchr::memmem::find(buf, b"\r\n\r\n").ok_or("truncated response head")?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| "non-UTF-8 response head")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let code = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = &buf[end + 4..];
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok((code, body))
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let eol = memchr::memmem::find(b, b"\r\n").ok_or("truncated chunk size")?;
        let size_s = std::str::from_utf8(&b[..eol]).map_err(|_| "bad chunk size")?;
        let size_s = size_s.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_s, 16).map_err(|_| format!("bad chunk size {size_s:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// `Ok(status)` when the server answered `/health` (any status), `Err` when it did not.
pub fn probe_health(t: &Target, timeout: Duration) -> Result<u16, String> {
    http_get(t, "/health", timeout).map(|(c, _)| c)
}

/// Healthy: answered and not 5xx (a server without `/health` answers 404 and is alive).
pub fn health_ok(r: &Result<u16, String>) -> bool {
    matches!(r, Ok(c) if *c < 500)
}

/// One scrape as a `MetricsSample`.
pub fn scrape(t: &Target, timeout: Duration) -> MetricsSample {
    scrape_abortable(t, timeout, None)
}

fn scrape_abortable(t: &Target, timeout: Duration, abort: Option<&AtomicBool>) -> MetricsSample {
    let t_ns = monotonic_ns();
    let res = http_get_abortable(t, "/metrics", timeout, abort);
    let scrape_ms = (monotonic_ns() - t_ns) as f64 / 1e6;
    let mut s = MetricsSample {
        t_ns,
        scrape_ms,
        ok: false,
        error: None,
        gauges: Default::default(),
        counters: Default::default(),
        histograms: Default::default(),
    };
    match res {
        Err(e) => s.error = Some(e),
        Ok((code, _)) if code != 200 => s.error = Some(format!("HTTP {code}")),
        Ok((_, body)) => match std::str::from_utf8(&body)
            .map_err(|e| e.to_string())
            .and_then(|txt| prom::reduce_vllm(txt).map_err(|e| format!("parse: {e}")))
        {
            Ok(r) => {
                s.ok = true;
                s.gauges = r.gauges;
                s.counters = r.counters;
                s.histograms = r.histograms;
            }
            Err(e) => s.error = Some(e),
        },
    }
    s
}

#[derive(Debug, Default, Clone)]
pub struct SamplerStats {
    pub scrapes: u64,
    pub failures: u64,
    pub io_error: Option<String>,
}

/// How long the final scrape of a cell may take.
const FINAL_SCRAPE: Duration = Duration::from_millis(300);

pub struct SamplerCtx {
    pub target: Target,
    pub path: PathBuf,
    pub t_first_ns: u64,
    pub period_ns: u64,
    pub stop: Arc<AtomicBool>,
    /// Set when `/health` failed three times in a row.
    pub server_dead: Arc<AtomicBool>,
}

pub fn spawn_sampler(ctx: SamplerCtx) -> std::io::Result<std::thread::JoinHandle<SamplerStats>> {
    let file = std::fs::File::create(&ctx.path)?;
    std::thread::Builder::new()
        .name("ctax-sampler".into())
        .spawn(move || run(ctx, file))
}

fn run(ctx: SamplerCtx, file: std::fs::File) -> SamplerStats {
    crate::clock::set_thread_timerslack_ns(1000);
    let mut out = std::io::BufWriter::new(file);
    let mut stats = SamplerStats::default();
    let mut health_failures = 0u32;
    let timeout = Duration::from_millis(ctx.period_ns / 1_000_000).max(Duration::from_millis(900));
    let mut tick = ctx.t_first_ns;
    loop {
        // Sleep to the absolute tick in slices, so a stop is seen within 20 ms.
        let mut stopping = false;
        loop {
            if ctx.stop.load(Ordering::Acquire) {
                stopping = true;
                break;
            }
            let now = monotonic_ns();
            if now >= tick {
                break;
            }
            sleep_until_abs(tick.min(now + 20_000_000));
        }
        // A final scrape when stopping gives the cell's end state; it has FINAL_SCRAPE to
        // answer. A scrape (or health probe) still running when the cell ends is abandoned
        // within 50 ms and not recorded, so a slow server never holds the cell open.
        let s = if stopping {
            scrape(&ctx.target, FINAL_SCRAPE)
        } else {
            scrape_abortable(&ctx.target, timeout, Some(&ctx.stop))
        };
        if s.error.as_deref() == Some(ABORTED) {
            continue;
        }
        stats.scrapes += 1;
        if !s.ok {
            stats.failures += 1;
            if stopping {
                // No health probe for the final scrape: the cell is over.
            } else {
                let h = http_get_abortable(
                    &ctx.target,
                    "/health",
                    Duration::from_secs(2),
                    Some(&ctx.stop),
                )
                .map(|(c, _)| c);
                if health_ok(&h) {
                    health_failures = 0;
                } else if !ctx.stop.load(Ordering::Acquire) {
                    health_failures += 1;
                    if health_failures >= 3 {
                        ctx.server_dead.store(true, Ordering::Release);
                    }
                }
            }
        } else {
            health_failures = 0;
        }
        if stats.io_error.is_none() {
            let mut line = serde_json::to_vec(&s).expect("MetricsSample serialises");
            line.push(b'\n');
            if let Err(e) = out.write_all(&line).and_then(|_| out.flush()) {
                stats.io_error = Some(e.to_string());
            }
        }
        if stopping {
            break;
        }
        // Next absolute tick after now (ticks missed by a slow scrape are skipped, not bunched).
        let now = monotonic_ns();
        tick += ctx.period_ns;
        if tick <= now {
            tick += (now - tick) / ctx.period_ns * ctx.period_ns + ctx.period_ns;
        }
    }
    if stats.io_error.is_none()
        && let Err(e) = out.flush().and_then(|_| out.get_ref().sync_data())
    {
        stats.io_error = Some(e.to_string());
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let (c, b) = parse_response(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi").unwrap();
        assert_eq!((c, b.as_slice()), (200, &b"hi"[..]));
        let (c, b) =
            parse_response(b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n3;x=1\r\nyou\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!((c, b.as_slice()), (503, &b"hiyou"[..]));
        assert!(parse_response(b"HTTP/1.1 200").is_err());
    }

    #[test]
    fn unreachable_target_is_an_error() {
        // Port 1 on loopback: nothing listens there.
        let t = Target {
            host: "127.0.0.1".into(),
            port: 1,
        };
        assert!(probe_health(&t, Duration::from_millis(500)).is_err());
        let s = scrape(&t, Duration::from_millis(500));
        assert!(!s.ok && s.error.is_some());
    }
}
