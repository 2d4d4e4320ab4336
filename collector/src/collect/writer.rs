//! The writer thread of a cell: parses the captured frames, builds one [`RequestRecord`] per
//! scheduled request and appends it to `requests_<phase>_<cell>.jsonl`, flushed per line.

use super::record::{CellMeta, RawResult, build_record, dropped_record};
use crate::rtq::Receiver;
use ctax_schema::{RequestRecord, Status};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub enum WriterMsg {
    Sent(Box<RawResult>),
    Dropped {
        seq: u64,
        t_intended_ns: u64,
        inflight: u32,
        warmup: bool,
    },
}

/// Live counters the pacer (stop rule) and the progress display read.
#[derive(Default)]
pub struct CellCounters {
    /// Records written.
    pub records: AtomicU64,
    pub ok: AtomicU64,
    /// Non-warm-up requests that ended `ok` (the min-completed rule).
    pub ok_measured: AtomicU64,
    pub errors: AtomicU64,
    pub cancelled: AtomicU64,
    pub dropped: AtomicU64,
    /// Largest send lateness since the progress display last read it, ns.
    pub recent_lateness_max_ns: AtomicU64,
}

#[derive(Debug, Default)]
pub struct WriterStats {
    pub records: u64,
    pub ok: u64,
    pub ok_measured: u64,
    pub errors: u64,
    pub cancelled: u64,
    pub dropped: u64,
    pub lateness_us: Vec<f64>,
    pub estimated_token_records: u64,
    pub by_status: std::collections::BTreeMap<&'static str, u64>,
    /// First few distinct error texts (for the cell's stderr summary).
    pub sample_errors: Vec<String>,
    /// A write to disk failed: the file is incomplete.
    pub io_error: Option<String>,
}

pub fn spawn_writer(
    path: PathBuf,
    meta: CellMeta,
    rx: Receiver<WriterMsg>,
    counters: Arc<CellCounters>,
) -> std::io::Result<std::thread::JoinHandle<WriterStats>> {
    let file = std::fs::File::create(&path)?;
    std::thread::Builder::new()
        .name("ctax-writer".into())
        .spawn(move || writer_loop(file, meta, rx, counters))
}

fn writer_loop(
    file: std::fs::File,
    meta: CellMeta,
    rx: Receiver<WriterMsg>,
    counters: Arc<CellCounters>,
) -> WriterStats {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    let mut stats = WriterStats::default();
    let mut line = Vec::with_capacity(4096);
    let mut batch = Vec::new();
    while rx.recv_all(&mut batch).is_ok() {
        for msg in batch.drain(..) {
            let rec: RequestRecord = match msg {
                WriterMsg::Dropped {
                    seq,
                    t_intended_ns,
                    inflight,
                    warmup,
                } => dropped_record(&meta, seq, t_intended_ns, inflight, warmup),
                WriterMsg::Sent(raw) => {
                    let late = raw.t_send_ns.saturating_sub(raw.t_intended_ns);
                    stats.lateness_us.push(late as f64 / 1e3);
                    counters
                        .recent_lateness_max_ns
                        .fetch_max(late, Ordering::Relaxed);
                    let (rec, notes) = build_record(&meta, *raw);
                    if notes.estimated_tokens {
                        stats.estimated_token_records += 1;
                    }
                    rec
                }
            };
            account(&rec, &mut stats, &counters);
            line.clear();
            // Serialising our own plain structs cannot fail.
            serde_json::to_writer(&mut line, &rec).expect("RequestRecord serialises");
            line.push(b'\n');
            if stats.io_error.is_none()
                && let Err(e) = out.write_all(&line).and_then(|_| out.flush())
            {
                stats.io_error = Some(e.to_string());
            }
            stats.records += 1;
            counters.records.fetch_add(1, Ordering::Release);
        }
    }
    if stats.io_error.is_none()
        && let Err(e) = out.flush().and_then(|_| out.get_ref().sync_data())
    {
        stats.io_error = Some(e.to_string());
    }
    stats
}

fn account(rec: &RequestRecord, stats: &mut WriterStats, c: &CellCounters) {
    *stats.by_status.entry(rec.status.as_str()).or_default() += 1;
    match rec.status {
        Status::Ok => {
            stats.ok += 1;
            c.ok.fetch_add(1, Ordering::Relaxed);
            if !rec.warmup {
                stats.ok_measured += 1;
                c.ok_measured.fetch_add(1, Ordering::Release);
            }
        }
        Status::Dropped => {
            stats.dropped += 1;
            c.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Status::Cancelled => {
            stats.cancelled += 1;
            c.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            stats.errors += 1;
            c.errors.fetch_add(1, Ordering::Relaxed);
            if stats.sample_errors.len() < 3
                && let Some(e) = &rec.error
            {
                let e = format!(
                    "{}: {}",
                    rec.status.as_str(),
                    e.chars().take(300).collect::<String>()
                );
                if !stats.sample_errors.contains(&e) {
                    stats.sample_errors.push(e);
                }
            }
        }
    }
}
