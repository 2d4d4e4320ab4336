//! `ctax-collect`: open-loop load against one OpenAI-compatible server, cell by cell.
//!
//! Threads of a cell (the rule: latency-measuring code never shares a thread with parsing,
//! disk writes or analysis):
//!
//! | thread | does | never does |
//! |---|---|---|
//! | pacer (OS thread) | absolute-deadline sleeps + spin, cap check, hand-off, renders the next body | I/O, parsing |
//! | I/O runtime (tokio, `--io-threads`) | HTTP, SSE byte framing, stamping at byte arrival | JSON, disk |
//! | writer (OS thread) | JSON parse of captured frames, `RequestRecord`, write + flush per line | timing |
//! | sampler (OS thread) | absolute 1 s ticks, blocking `/metrics` GET, Prometheus parse, write | request I/O |
//! | main | rules (stop, drain, hard cap, server death), progress, summary.json | any of the above |

pub mod io;
pub mod pacer;
pub mod record;
pub mod sampler;
pub mod summary;
pub mod writer;

use crate::clock::{monotonic_ns, process_cpu_ns, unix_ms};
use crate::stats::p50_p99_max;
use crate::workload::{BodyTemplate, MIN_VOCAB_SPAN, PromptGen, Schedule};
use anyhow::Context;
use ctax_schema::{CAPPED_PREFIX, CellHealth, CellKey, Exit, FileKind, PlannedCell, file_name};
use io::{CellIo, IoShared};
use pacer::{PacerCfg, PacerCtx, PacerEnd};
use record::CellMeta;
use sampler::{SamplerCtx, Target};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use writer::CellCounters;

/// `eprintln!` for anything that may carry an external string (server error bodies, config
/// and model names, paths): control characters of the whole message are escaped first
/// ([`ctax_schema::text::escape_controls`]), so an ESC or BEL never reaches the terminal.
macro_rules! say {
    ($($t:tt)*) => {
        eprintln!("{}", ctax_schema::text::escape_controls(&format!($($t)*)))
    };
}

// Exit codes: defined once in the schema crate, which `ctax run` reads them from too.
pub const EXIT_OK: i32 = Exit::Ok.code();
pub const EXIT_FAILURE: i32 = Exit::Failure.code();
pub const EXIT_USAGE: i32 = Exit::Usage.code();
pub const EXIT_INCOMPLETE: i32 = Exit::Incomplete.code();
pub const EXIT_SERVER_DEAD: i32 = Exit::ServerDead.code();
pub const EXIT_INTERRUPTED: i32 = Exit::Interrupted.code();

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "ctax-collect",
    version,
    about = "Open-loop load against ONE OpenAI-compatible server: per-event SSE timing, /metrics \
             sampling, raw JSONL out",
    after_help = "Exit status: 0 all cells complete; 3 ran to the end with >=1 cell incomplete; \
                  4 server unreachable or died; 2 usage/plan error; 130 interrupted; 1 other failure."
)]
pub struct Args {
    /// Server base URL, e.g. http://127.0.0.1:8000
    #[arg(long)]
    pub url: String,
    /// Served model name (the request's "model").
    #[arg(long)]
    pub model: String,
    /// Configuration name (goes into request ids and records).
    #[arg(long)]
    pub config: String,
    /// Launch index of the configuration.
    #[arg(long)]
    pub launch: u32,
    /// PLAN.json: {"cells": [PlannedCell, ...]}, run in order.
    #[arg(long)]
    pub plan: PathBuf,
    /// Run directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Prompt token ids are drawn from [vocab-lo, vocab-hi).
    #[arg(long, default_value_t = 10)]
    pub vocab_lo: u32,
    #[arg(long, default_value_t = 4000)]
    pub vocab_hi: u32,
    /// Per-request limit (send to end of stream), seconds.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout_s: f64,
    /// No progress display (a one-line summary per cell is still printed).
    #[arg(long)]
    pub no_progress: bool,
    /// Failed requests in a row before the cell stops (connect errors in a row: server dead).
    #[arg(long, default_value_t = 20)]
    pub max_consecutive_failures: u32,
    /// Do not ask for per-chunk token ids (for servers that reject `return_token_ids`).
    #[arg(long)]
    pub no_return_token_ids: bool,
    /// Worker threads of the I/O runtime.
    #[arg(long, default_value_t = 1)]
    pub io_threads: usize,
    /// /metrics sampling period, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub metrics_period_s: f64,
    /// SCHED_FIFO priority of the I/O threads; the pacer gets one more (0 = normal scheduling
    /// for all). The writer, sampler and main thread always keep normal scheduling. On a busy
    /// 2-core machine this turns a 50 ms send-lateness p99 into ~50 µs. Falls back to normal
    /// scheduling (with a warning) when not permitted.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub rt_priority: i32,
}

#[derive(serde::Deserialize)]
struct Plan {
    cells: Vec<PlannedCell>,
}

/// Errors before any cell ran.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Unreachable(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

fn usage(m: impl Into<String>) -> SetupError {
    SetupError::Usage(m.into())
}

pub fn load_plan(path: &Path) -> Result<Vec<PlannedCell>, SetupError> {
    let bytes =
        std::fs::read(path).map_err(|e| usage(format!("reading plan {}: {e}", path.display())))?;
    let plan: Plan = serde_json::from_slice(&bytes)
        .map_err(|e| usage(format!("plan {}: {e}", path.display())))?;
    if plan.cells.is_empty() {
        return Err(usage(format!("plan {} has no cells", path.display())));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, c) in plan.cells.iter().enumerate() {
        let bad = |m: &str| {
            usage(format!(
                "plan cell {i} ({}/{}): {m}",
                c.phase,
                c.cell.name()
            ))
        };
        if !(c.cell.rate.is_finite() && c.cell.rate > 0.0 && c.cell.rate <= MAX_RATE) {
            return Err(bad(&format!(
                "rate {} req/s: must be > 0 and <= {MAX_RATE}",
                c.cell.rate
            )));
        }
        for (v, n) in [
            (c.cell.input_len, "input_len"),
            (c.cell.output_len, "output_len"),
        ] {
            if v == 0 || v > MAX_TOKENS {
                return Err(bad(&format!(
                    "{n} {v}: must be >= 1 and <= {MAX_TOKENS} tokens (a longer prompt would \
                     allocate gigabytes of request bodies)"
                )));
            }
        }
        for (v, n) in [(c.duration_s, "duration_s"), (c.warmup_s, "warmup_s")] {
            if !(v.is_finite() && (0.0..=MAX_SECONDS).contains(&v)) {
                return Err(bad(&format!("{n} {v}: must be >= 0 and <= {MAX_SECONDS}")));
            }
        }
        if !(c.max_cell_s.is_finite() && c.max_cell_s > 0.0 && c.max_cell_s <= MAX_SECONDS) {
            return Err(bad(&format!(
                "max_cell_s {}: must be > 0 and <= {MAX_SECONDS}",
                c.max_cell_s
            )));
        }
        if c.inflight_cap == 0 || c.inflight_cap > MAX_INFLIGHT {
            return Err(bad(&format!(
                "inflight_cap {}: must be >= 1 and <= {MAX_INFLIGHT}",
                c.inflight_cap
            )));
        }
        if !seen.insert((c.phase, c.cell.name())) {
            return Err(bad("appears twice (its files would collide)"));
        }
    }
    Ok(plan.cells)
}

/// After the cap (or a stop) cancels what is in flight, how long the cancelled requests have to
/// hand over their records before the cell is closed without them (and marked incomplete).
const CANCEL_GRACE_NS: u64 = 500_000_000;

/// Largest `input_len` / `output_len` a plan may ask for, whatever the server says (2^20
/// tokens: a 5 MB request body; the largest context of any current model is below it).
pub const MAX_TOKENS: u32 = 1 << 20;
/// Largest offered rate, req/s (the collector is measured up to 4,000 req/s).
pub const MAX_RATE: f64 = 100_000.0;
/// Longest duration, warm-up or cell cap: 30 days.
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;
/// Largest in-flight cap.
pub const MAX_INFLIGHT: u32 = 65_536;

/// The server's context length from its `/v1/models` answer (vLLM lists `max_model_len` per
/// model): the entry of `model`, else `None`.
pub fn max_model_len(models: &serde_json::Value, model: &str) -> Option<u64> {
    models["data"]
        .as_array()?
        .iter()
        .find(|m| m["id"] == model)?
        .get("max_model_len")?
        .as_u64()
}

/// Cells the server cannot serve: prompt + output beyond its context length.
pub fn check_plan_against_server(
    cells: &[PlannedCell],
    max_model_len: u64,
    url: &str,
) -> Result<(), SetupError> {
    for (i, c) in cells.iter().enumerate() {
        let need = u64::from(c.cell.input_len) + u64::from(c.cell.output_len);
        if need > max_model_len {
            return Err(usage(format!(
                "plan cell {i} ({}/{}): input_len {} + output_len {} = {need} tokens exceeds the \
                 server's max_model_len {max_model_len} (from {url}/v1/models); every request \
                 would be rejected",
                c.phase,
                c.cell.name(),
                c.cell.input_len,
                c.cell.output_len
            )));
        }
    }
    Ok(())
}

/// Everything that lives across cells.
struct Env {
    args: Args,
    cells: Vec<PlannedCell>,
    target: Target,
    io: Arc<IoShared>,
    rt: tokio::runtime::Runtime,
    interrupted: Arc<AtomicBool>,
    current_cancel: Arc<Mutex<Option<CancellationToken>>>,
}

struct CellOutcome {
    health: CellHealth,
    server_dead: Option<String>,
    interrupted: bool,
}

fn s_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

/// Entry point of the binary; returns the exit status.
pub fn main_with(args: Args) -> i32 {
    let env = match setup(args) {
        Ok(e) => e,
        Err(SetupError::Usage(m)) => {
            say!("ctax-collect: error: {m}");
            return EXIT_USAGE;
        }
        Err(SetupError::Unreachable(m)) => {
            say!("ctax-collect: SERVER UNREACHABLE: {m}");
            return EXIT_SERVER_DEAD;
        }
        Err(SetupError::Other(e)) => {
            say!("ctax-collect: error: {e:#}");
            return EXIT_FAILURE;
        }
    };
    let mut any_incomplete = false;
    for pc in &env.cells {
        if env.interrupted.load(Ordering::Acquire) {
            break;
        }
        let out = match run_cell(&env, pc) {
            Ok(o) => o,
            Err(e) => {
                say!(
                    "ctax-collect: error in cell {}/{}: {e:#}",
                    pc.phase,
                    pc.cell.name()
                );
                return EXIT_FAILURE;
            }
        };
        let key = CellKey::new(pc.phase, pc.cell.clone()).to_string();
        match summary::update_cell(&env.args.out, &key, &out.health) {
            Ok(Some(w)) => say!("ctax-collect: warning: {w}"),
            Ok(None) => {}
            Err(e) => {
                say!("ctax-collect: error writing summary.json: {e:#}");
                return EXIT_FAILURE;
            }
        }
        any_incomplete |= !out.health.complete;
        if let Some(m) = out.server_dead {
            say!(
                "ctax-collect: SERVER DIED during cell {key}: {m}. Stopped; everything received is on disk \
                 in {}.",
                env.args.out.display()
            );
            return EXIT_SERVER_DEAD;
        }
        if out.interrupted {
            say!(
                "ctax-collect: interrupted during cell {key}; files and summary.json are written."
            );
            return EXIT_INTERRUPTED;
        }
    }
    if env.interrupted.load(Ordering::Acquire) {
        return EXIT_INTERRUPTED;
    }
    if any_incomplete {
        EXIT_INCOMPLETE
    } else {
        EXIT_OK
    }
}

fn setup(args: Args) -> Result<Env, SetupError> {
    let url =
        reqwest::Url::parse(&args.url).map_err(|e| usage(format!("--url {}: {e}", args.url)))?;
    if url.scheme() != "http" {
        return Err(usage("--url must be http:// (this build has no TLS)"));
    }
    if args.vocab_hi < args.vocab_lo.saturating_add(MIN_VOCAB_SPAN) {
        return Err(usage(format!(
            "--vocab-hi must be >= --vocab-lo + {MIN_VOCAB_SPAN}"
        )));
    }
    if !(args.request_timeout_s.is_finite()
        && args.request_timeout_s > 0.0
        && args.request_timeout_s < 1e7)
    {
        return Err(usage("--request-timeout-s must be > 0 (and < 1e7)"));
    }
    if !(args.metrics_period_s.is_finite() && args.metrics_period_s >= 0.05) {
        return Err(usage("--metrics-period-s must be >= 0.05"));
    }
    if args.max_consecutive_failures == 0 || args.io_threads == 0 {
        return Err(usage(
            "--max-consecutive-failures and --io-threads must be >= 1",
        ));
    }
    if args.metrics_period_s > 3600.0 {
        return Err(usage("--metrics-period-s must be <= 3600"));
    }
    let cells = load_plan(&args.plan)?;
    let target = Target::from_url(&url)?;
    let pool = cells
        .iter()
        .map(|c| c.inflight_cap as usize)
        .max()
        .unwrap_or(256);
    let io = Arc::new(IoShared::new(
        &url,
        Duration::from_secs_f64(args.request_timeout_s),
        pool,
    )?);
    let h = sampler::probe_health(&target, Duration::from_secs(5));
    if !sampler::health_ok(&h) {
        return Err(SetupError::Unreachable(format!(
            "{}: /health {}",
            args.url,
            match h {
                Ok(c) => format!("answered HTTP {c}"),
                Err(e) => e,
            }
        )));
    }
    if let Ok((200, body)) = sampler::http_get(&target, "/v1/models", Duration::from_secs(5)) {
        let v = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
        let listed = v["data"]
            .as_array()
            .is_some_and(|a| a.iter().any(|m| m["id"] == args.model.as_str()));
        if !listed {
            say!(
                "ctax-collect: warning: /v1/models does not list model {:?}",
                args.model
            );
        }
        if let Some(len) = max_model_len(&v, &args.model) {
            check_plan_against_server(&cells, len, args.url.trim_end_matches('/'))?;
        }
    }
    // Only now, with the plan known to be servable, is anything created on disk.
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut args = args;
    if args.rt_priority > 0 {
        let prio = args.rt_priority;
        let probe = std::thread::spawn(move || crate::clock::set_thread_realtime(prio))
            .join()
            .unwrap_or_else(|_| Err("probe thread panicked".into()));
        if let Err(e) = probe {
            say!(
                "ctax-collect: warning: no real-time scheduling (SCHED_FIFO {prio}: {e}); send lateness may suffer \
                 on a busy machine"
            );
            args.rt_priority = 0;
        }
    }
    let prio = args.rt_priority;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.io_threads)
        .thread_name("ctax-io")
        .on_thread_start(move || {
            if prio > 0 {
                let _ = crate::clock::set_thread_realtime(prio);
            }
        })
        .enable_all()
        .build()
        .context("building the I/O runtime")?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let current_cancel: Arc<Mutex<Option<CancellationToken>>> = Arc::new(Mutex::new(None));
    {
        let interrupted = interrupted.clone();
        let current_cancel = current_cancel.clone();
        // Registering the handlers inside the runtime replaces the default "die at once".
        let (int, term) = rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            )
        });
        let (mut int, mut term) = (
            int.context("SIGINT handler")?,
            term.context("SIGTERM handler")?,
        );
        rt.spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                if interrupted.swap(true, Ordering::AcqRel) {
                    say!("ctax-collect: second signal, exiting now");
                    std::process::exit(EXIT_INTERRUPTED);
                }
                say!("ctax-collect: signal received: stopping, cancelling in-flight requests, writing files");
                if let Ok(g) = current_cancel.lock()
                    && let Some(c) = g.as_ref()
                {
                    c.cancel();
                }
            }
        });
    }
    Ok(Env {
        args,
        cells,
        target,
        io,
        rt,
        interrupted,
        current_cancel,
    })
}

/// Moves an existing file aside (never overwrite raw data).
fn move_aside(p: &Path) -> anyhow::Result<()> {
    if p.exists() {
        let aside = PathBuf::from(format!("{}.replaced-{}", p.display(), unix_ms()));
        std::fs::rename(p, &aside)?;
        say!(
            "ctax-collect: warning: {} existed; moved to {}",
            p.display(),
            aside.display()
        );
    }
    Ok(())
}

fn progress_bar(no_progress: bool, prefix: String) -> indicatif::ProgressBar {
    if no_progress {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::with_draw_target(
        None,
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {prefix:.bold} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_prefix(prefix);
    pb
}

fn run_cell(env: &Env, pc: &PlannedCell) -> anyhow::Result<CellOutcome> {
    let args = &env.args;
    let name = pc.cell.name();
    let key = CellKey::new(pc.phase, pc.cell.clone()).to_string();
    let meta = CellMeta {
        config: args.config.clone(),
        launch: args.launch,
        phase: pc.phase,
        cell: name.clone(),
        rate: pc.cell.rate,
        input_len: pc.cell.input_len,
        output_len: pc.cell.output_len,
    };
    let req_path = args
        .out
        .join(file_name(FileKind::Requests, pc.phase, &name));
    let met_path = args.out.join(file_name(FileKind::Metrics, pc.phase, &name));
    move_aside(&req_path)?;
    move_aside(&met_path)?;

    let io = &env.io;
    io.consecutive_failures.store(0, Ordering::Relaxed);
    io.consecutive_connect_errors.store(0, Ordering::Relaxed);
    let counters = Arc::new(CellCounters::default());
    let (tx, rx) = crate::rtq::channel();
    let writer = writer::spawn_writer(req_path.clone(), meta.clone(), rx, counters.clone())
        .with_context(|| format!("creating {}", req_path.display()))?;
    let cancel = CancellationToken::new();
    *env.current_cancel.lock().expect("lock") = Some(cancel.clone());
    if env.interrupted.load(Ordering::Acquire) {
        cancel.cancel();
    }
    let cell_io = Arc::new(CellIo {
        cancel: cancel.clone(),
        tx,
    });

    let cpu0 = process_cpu_ns();
    let now = monotonic_ns();
    // A short lead so the first request is not late because of thread start-up.
    let t0 = now + 50_000_000;
    let wall_start_unix_ms = unix_ms() + (t0 - now) / 1_000_000;
    let warmup_end = t0 + s_to_ns(pc.warmup_s);
    let hard_end = t0 + s_to_ns(pc.max_cell_s);
    let server_dead = Arc::new(AtomicBool::new(false));
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let sampler = sampler::spawn_sampler(SamplerCtx {
        target: env.target.clone(),
        path: met_path.clone(),
        t_first_ns: now,
        period_ns: s_to_ns(args.metrics_period_s),
        stop: sampler_stop.clone(),
        server_dead: server_dead.clone(),
    })
    .with_context(|| format!("creating {}", met_path.display()))?;

    let stop_send = Arc::new(AtomicBool::new(false));
    let identity = format!("{}/l{}/{}", args.config, args.launch, key);
    let pacer = pacer::spawn_pacer(PacerCtx {
        cfg: PacerCfg {
            warmup_end_ns: warmup_end,
            measure_end_ns: warmup_end + s_to_ns(pc.duration_s),
            hard_end_ns: hard_end,
            min_completed: pc.min_completed,
            inflight_cap: pc.inflight_cap,
            input_len: pc.cell.input_len as usize,
        },
        schedule: Schedule::new(t0, pc.cell.rate, pc.arrival, pc.seed),
        prompts: PromptGen::new(args.vocab_lo, args.vocab_hi, pc.seed, &identity),
        body: BodyTemplate::new(&args.model, pc.cell.output_len, !args.no_return_token_ids),
        handle: env.rt.handle().clone(),
        io: io.clone(),
        cell_io: cell_io.clone(),
        counters: counters.clone(),
        stop: stop_send.clone(),
        rt_priority: args.rt_priority,
    })?;

    let pb = progress_bar(args.no_progress, key.clone());
    let show = |phase: &str| {
        let el = monotonic_ns().saturating_sub(t0) as f64 / 1e9;
        let late = counters.recent_lateness_max_ns.swap(0, Ordering::Relaxed);
        pb.set_message(format!(
            "{phase} {el:6.1}s  sent {}  ok {} (measured {})  err {}  drop {}  in-flight {}  late max {:.0} µs",
            counters.records.load(Ordering::Relaxed) + io.inflight.load(Ordering::Relaxed) as u64
                - counters.dropped.load(Ordering::Relaxed),
            counters.ok.load(Ordering::Relaxed),
            counters.ok_measured.load(Ordering::Relaxed),
            counters.errors.load(Ordering::Relaxed),
            counters.dropped.load(Ordering::Relaxed),
            io.inflight.load(Ordering::Relaxed),
            late as f64 / 1e3,
        ));
        pb.tick();
    };

    // Why the cell stopped early, in priority order.
    let mut interrupted = false;
    let mut dead: Option<String> = None;
    let mut aborted: Option<String> = None;
    let max_fail = args.max_consecutive_failures;
    let check_rules =
        |dead: &mut Option<String>, aborted: &mut Option<String>, interrupted: &mut bool| {
            if env.interrupted.load(Ordering::Acquire) {
                *interrupted = true;
            }
            if dead.is_none() && server_dead.load(Ordering::Acquire) {
                *dead = Some("/health failed 3 times in a row".into());
            }
            let last = || {
                io.last_failure
                    .lock()
                    .ok()
                    .and_then(|g| g.clone())
                    .unwrap_or_default()
            };
            if dead.is_none() && aborted.is_none() {
                let conn = io.consecutive_connect_errors.load(Ordering::Relaxed);
                let fails = io.consecutive_failures.load(Ordering::Relaxed);
                if conn >= max_fail {
                    *dead = Some(format!("{conn} connect errors in a row (last: {})", last()));
                } else if fails >= max_fail {
                    // Short: the main thread must get back to the cap check.
                    let h = sampler::probe_health(&env.target, Duration::from_millis(500));
                    if sampler::health_ok(&h) {
                        *aborted = Some(format!(
                            "{fails} failed requests in a row (last: {})",
                            last()
                        ));
                    } else {
                        *dead = Some(format!(
                            "{fails} failed requests in a row (last: {}) and /health {}",
                            last(),
                            match h {
                                Ok(c) => format!("answered HTTP {c}"),
                                Err(e) => e,
                            }
                        ));
                    }
                }
            }
            *interrupted || dead.is_some() || aborted.is_some()
        };

    let mut tick = 0u32;
    while !pacer.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        if check_rules(&mut dead, &mut aborted, &mut interrupted) {
            stop_send.store(true, Ordering::Release);
        }
        tick += 1;
        if tick % 10 == 0 {
            show("sending");
        }
    }
    let pstats = pacer
        .join()
        .map_err(|_| anyhow::anyhow!("the pacer thread panicked"))?;

    // Drain: wait for every sent request to end, up to the hard cap; then cancel what is still
    // in flight (each cancelled request still gets its record) and give the cancelled tasks
    // a short grace to hand their records over.
    let mut drain_cut = 0u64;
    let mut cancelled_at: Option<u64> = None;
    let mut missing_records = 0u64;
    loop {
        let records = counters.records.load(Ordering::Acquire);
        if records >= pstats.scheduled {
            break;
        }
        if writer.is_finished() {
            // Only a crashed writer ends early; its join below reports it.
            break;
        }
        if let Some(t) = cancelled_at
            && monotonic_ns().saturating_sub(t) > CANCEL_GRACE_NS
        {
            missing_records = pstats.scheduled - records;
            break;
        }
        let stop_now = check_rules(&mut dead, &mut aborted, &mut interrupted);
        if !cancel.is_cancelled() && (stop_now || monotonic_ns() >= hard_end) {
            drain_cut = u64::from(io.inflight.load(Ordering::Relaxed));
            cancel.cancel();
            cancelled_at = Some(monotonic_ns());
        }
        std::thread::sleep(Duration::from_millis(2));
        tick += 1;
        if tick % 100 == 0 {
            show("draining");
        }
    }
    let t_end = monotonic_ns();
    *env.current_cancel.lock().expect("lock") = None;
    drop(cell_io);
    let wstats = writer
        .join()
        .map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    sampler_stop.store(true, Ordering::Release);
    let sstats = sampler
        .join()
        .map_err(|_| anyhow::anyhow!("the sampler thread panicked"))?;
    let cpu1 = process_cpu_ns();
    pb.finish_and_clear();

    let cap_s = pc.max_cell_s;
    let measured_s = pstats
        .t_last_intended_ns
        .map_or(0.0, |t| t.saturating_sub(warmup_end) as f64 / 1e9);
    let incomplete_reason = if interrupted {
        Some("interrupted".to_string())
    } else if let Some(d) = &dead {
        Some(format!("server died: {d}"))
    } else if let Some(a) = &aborted {
        Some(format!("stopped: {a}"))
    } else if pstats.end == PacerEnd::HardCap {
        Some(format!(
            "{CAPPED_PREFIX}{cap_s}s reached before the stop rule was met ({} of {} measured completions, \
             {measured_s:.1} of {} s sent after warm-up); {} in-flight requests cancelled",
            wstats.ok_measured, pc.min_completed, pc.duration_s, drain_cut
        ))
    } else if drain_cut > 0 {
        Some(format!(
            "{CAPPED_PREFIX}{cap_s}s reached while draining; {drain_cut} in-flight requests cancelled"
        ))
    } else if missing_records > 0 {
        Some(format!(
            "{missing_records} requests had no record {} s after they were cancelled",
            CANCEL_GRACE_NS as f64 / 1e9
        ))
    } else {
        wstats
            .io_error
            .as_ref()
            .or(sstats.io_error.as_ref())
            .map(|e| format!("writing raw files failed: {e}"))
    };
    let mut late = wstats.lateness_us.clone();
    let (p50, p99, max) = p50_p99_max(&mut late);
    let wall = t_end.saturating_sub(now).max(1);
    let health = CellHealth {
        phase: pc.phase,
        cell: name.clone(),
        rate: pc.cell.rate,
        input_len: pc.cell.input_len,
        output_len: pc.cell.output_len,
        arrival: pc.arrival,
        seed: pc.seed,
        t_start_ns: t0,
        t_warmup_end_ns: warmup_end,
        t_last_send_ns: pstats.t_last_intended_ns.unwrap_or(t0),
        t_end_ns: t_end,
        wall_start_unix_ms,
        scheduled: pstats.scheduled,
        sent: pstats.sent,
        dropped: pstats.dropped,
        ok: wstats.ok,
        errors: wstats.errors,
        cancelled: wstats.cancelled,
        completed_measured: wstats.ok_measured,
        complete: incomplete_reason.is_none(),
        incomplete_reason,
        lateness_us_p50: p50,
        lateness_us_p99: p99,
        lateness_us_max: max,
        client_cpu_pct: (cpu1.saturating_sub(cpu0)) as f64 / wall as f64 * 100.0,
        scrapes: sstats.scrapes,
        scrape_failures: sstats.failures,
    };
    say!(
        "ctax-collect: {key} {}: {} scheduled, {} sent, {} dropped, {} ok ({} measured), {} errors, {} cancelled; \
         send lateness p50/p99/max {:.0}/{:.0}/{:.0} µs; client CPU {:.1}%; {} scrapes ({} failed)",
        if health.complete {
            "complete"
        } else {
            "INCOMPLETE"
        },
        health.scheduled,
        health.sent,
        health.dropped,
        health.ok,
        health.completed_measured,
        health.errors,
        health.cancelled,
        p50,
        p99,
        max,
        health.client_cpu_pct,
        health.scrapes,
        health.scrape_failures
    );
    if let Some(r) = &health.incomplete_reason {
        say!("ctax-collect:   reason: {r}");
    }
    for e in &wstats.sample_errors {
        say!("ctax-collect:   e.g. {e}");
    }
    if wstats.estimated_token_records > 0 {
        say!(
            "ctax-collect:   note: {} streams carried no token_ids; 1 token per non-empty choice was assumed",
            wstats.estimated_token_records
        );
    }
    Ok(CellOutcome {
        health,
        server_dead: dead,
        interrupted,
    })
}
