//! `ctax-sim`: a SIMULATED vLLM engine behind an OpenAI-compatible HTTP server, for tests and
//! demos with no GPU. Everything it produces is labelled simulated: the `x-ctax-simulated: 1`
//! header on every response, `"owned_by":"ctax-sim"` in `/v1/models`, a
//! `"system_fingerprint":"ctax-sim (simulated)"` in usage chunks, `cmpl-sim-` ids and a
//! `ctax_sim_info{simulated="1"}` metric.
//!
//! Two engines: the default continuous-batching engine ([`engine`]) with a per-step token budget
//! and an injectable connector cost per step and per request (logged as `StepRecord`s with
//! `--step-log`), and an infinite-capacity fixed-latency mode ([`fixed`], `--fixed-ttft-ms` +
//! `--fixed-itl-ms`) for calibrating clients.

pub mod engine;
pub mod fixed;
pub mod metrics;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics::SimMetrics;
use serde::Deserialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A request handed to an engine.
pub struct SimRequest {
    pub id: u64,
    pub prompt_len: u32,
    pub max_tokens: u32,
    pub arrival_ns: u64,
    pub tx: tokio::sync::mpsc::UnboundedSender<TokenMsg>,
}

/// Where requests go: the batching engine's thread, or the fixed-latency task on the runtime.
enum EngineTx {
    Thread(crate::rtq::Sender<SimRequest>),
    Task(tokio::sync::mpsc::UnboundedSender<SimRequest>),
}

impl EngineTx {
    fn send(&self, r: SimRequest) -> Result<(), ()> {
        match self {
            EngineTx::Thread(t) => t.send(r).map_err(|_| ()),
            EngineTx::Task(t) => t.send(r).map_err(|_| ()),
        }
    }
}

/// One generated token.
#[derive(Debug, Clone, Copy)]
pub struct TokenMsg {
    pub token_id: u32,
    pub last: bool,
}

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "ctax-sim",
    version,
    about = "A SIMULATED vLLM engine (continuous batching, chunked prefill, injectable connector cost) \
             behind an OpenAI-compatible server. Not a model: every number it produces is simulated."
)]
pub struct SimArgs {
    /// Port to listen on (0 = any free port; the chosen one is printed on stderr).
    #[arg(long)]
    pub port: u16,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value = "sim")]
    pub model_name: String,
    /// Token budget per engine step (chunked prefill).
    #[arg(long, default_value_t = 8192)]
    pub max_num_batched_tokens: u32,
    #[arg(long, default_value_t = 256)]
    pub max_num_seqs: u32,
    /// Prompt + max_tokens limit (longer requests get HTTP 400, as in vLLM).
    #[arg(long, default_value_t = 131_072)]
    pub max_model_len: u32,
    #[arg(long, default_value_t = 2000.0)]
    pub base_step_us: f64,
    #[arg(long, default_value_t = 0.5)]
    pub prefill_token_us: f64,
    #[arg(long, default_value_t = 20.0)]
    pub decode_seq_us: f64,
    /// Injected connector cost per engine step, µs (exact, not jittered).
    #[arg(long, default_value_t = 0.0)]
    pub connector_step_us: f64,
    /// Injected connector cost per scheduled request per step, µs (exact, not jittered).
    #[arg(long, default_value_t = 0.0)]
    pub connector_request_us: f64,
    /// Uniform jitter of the compute part of each step, ± percent.
    #[arg(long, default_value_t = 5.0)]
    pub jitter_pct: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write one StepRecord JSON line per engine step here.
    #[arg(long)]
    pub step_log: Option<PathBuf>,
    /// Infinite-capacity calibration mode: first token exactly this long after arrival…
    #[arg(long, requires = "fixed_itl_ms")]
    pub fixed_ttft_ms: Option<f64>,
    /// …then one token every this many ms.
    #[arg(long, requires = "fixed_ttft_ms")]
    pub fixed_itl_ms: Option<f64>,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Exit abruptly (status 3) when request number N+1 arrives, as a crashed server would.
    #[arg(long)]
    pub die_after_requests: Option<u64>,
    /// SCHED_FIFO priority of the engine and HTTP threads (0 = normal scheduling).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub rt_priority: i32,
}

struct AppState {
    model: String,
    model_json: String,
    max_model_len: u32,
    engine: EngineTx,
    metrics: Arc<Mutex<SimMetrics>>,
    next_id: AtomicU64,
    die_after: Option<u64>,
    created: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PromptIn {
    Ids(Vec<u32>),
    Text(String),
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct CompletionReq {
    #[serde(default)]
    model: Option<String>,
    prompt: PromptIn,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    return_token_ids: bool,
}

fn error_response(code: StatusCode, kind: &str, msg: &str) -> Response {
    let body = serde_json::json!({"error": {"message": msg, "type": kind, "param": null, "code": code.as_u16()}});
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Builds the SSE body of a streaming completion, vLLM's chunk shape.
struct StreamBuilder {
    id: String,
    created: u64,
    model_json: Arc<str>,
    return_token_ids: bool,
    prompt_ids_json: Option<String>,
    prompt_len: u32,
}

impl StreamBuilder {
    fn token_chunk(&mut self, tok: u32, last: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(320 + self.prompt_ids_json.as_ref().map_or(0, |s| s.len()));
        let pids = if self.return_token_ids {
            self.prompt_ids_json.take()
        } else {
            None
        };
        let _ = write!(
            b,
            "data: {{\"id\":\"{}\",\"object\":\"text_completion\",\"created\":{},\"model\":{},\"choices\":[{{\"index\":0,\
             \"text\":\" w{}\",\"logprobs\":null,\"finish_reason\":{},\"stop_reason\":null,\"prompt_token_ids\":{},\
             \"token_ids\":",
            self.id,
            self.created,
            self.model_json,
            tok % 1000,
            if last { "\"length\"" } else { "null" },
            pids.as_deref().unwrap_or("null"),
        );
        if self.return_token_ids {
            let _ = write!(b, "[{tok}]");
        } else {
            b.extend_from_slice(b"null");
        }
        b.extend_from_slice(b"}]}\n\n");
        b
    }

    fn tail(&self, include_usage: bool, completion: u32) -> Vec<u8> {
        let mut b = Vec::with_capacity(400);
        if include_usage {
            let _ = write!(
                b,
                "data: {{\"id\":\"{}\",\"object\":\"text_completion\",\"created\":{},\"model\":{},\"choices\":[],\
                 \"usage\":{{\"prompt_tokens\":{p},\"total_tokens\":{},\"completion_tokens\":{completion}}},\
                 \"system_fingerprint\":\"ctax-sim (simulated)\"}}\n\n",
                self.id,
                self.created,
                self.model_json,
                self.prompt_len + completion,
                p = self.prompt_len,
            );
        }
        b.extend_from_slice(b"data: [DONE]\n\n");
        b
    }
}

async fn completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let arrival_ns = crate::clock::monotonic_ns();
    let n = {
        let mut m = st.metrics.lock().expect("metrics lock");
        m.requests_received += 1;
        m.requests_received
    };
    if let Some(die) = st.die_after
        && n > die
    {
        eprintln!("ctax-sim: --die-after-requests {die} reached: exiting abruptly");
        std::process::exit(3);
    }
    let req: CompletionReq = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("invalid request: {e}"),
            );
        }
    };
    if let Some(m) = &req.model
        && *m != st.model
    {
        return error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!(
                "The model `{m}` does not exist. Valid aliases: {}.",
                st.model
            ),
        );
    }
    let (prompt_len, prompt_ids_json) = match &req.prompt {
        PromptIn::Ids(v) => (v.len() as u32, serde_json::to_string(v).ok()),
        PromptIn::Text(t) => (t.split_whitespace().count().max(1) as u32, None),
    };
    let max_tokens = req.max_tokens.unwrap_or(16);
    if max_tokens == 0 || prompt_len == 0 {
        return error_response(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            "prompt and max_tokens must be non-empty",
        );
    }
    if prompt_len + max_tokens > st.max_model_len {
        return error_response(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            &format!(
                "This model's maximum context length is {} tokens; the request has {prompt_len} prompt tokens and \
                 max_tokens={max_tokens}.",
                st.max_model_len
            ),
        );
    }
    let id = st.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    if st
        .engine
        .send(SimRequest {
            id,
            prompt_len,
            max_tokens,
            arrival_ns,
            tx,
        })
        .is_err()
    {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "engine is gone",
        );
    }
    let mut sb = StreamBuilder {
        id: format!("cmpl-sim-{id:016x}"),
        created: st.created,
        model_json: st.model_json.as_str().into(),
        return_token_ids: req.return_token_ids,
        prompt_ids_json,
        prompt_len,
    };
    if !req.stream {
        let mut ids = Vec::with_capacity(max_tokens as usize);
        let mut text = String::new();
        while let Some(t) = rx.recv().await {
            ids.push(t.token_id);
            text.push_str(&format!(" w{}", t.token_id % 1000));
            if t.last {
                break;
            }
        }
        let n = ids.len() as u32;
        let body = serde_json::json!({
            "id": sb.id, "object": "text_completion", "created": st.created, "model": st.model,
            "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": "length", "stop_reason": null,
                         "token_ids": if req.return_token_ids { serde_json::json!(ids) } else { serde_json::Value::Null }}],
            "usage": {"prompt_tokens": prompt_len, "total_tokens": prompt_len + n, "completion_tokens": n},
            "system_fingerprint": "ctax-sim (simulated)",
        });
        return (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
    }
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let mut generated = 0u32;
    let mut finished = false;
    let stream = futures_util::stream::poll_fn(move |cx| {
        if finished {
            return std::task::Poll::Ready(None);
        }
        match rx.poll_recv(cx) {
            std::task::Poll::Pending => std::task::Poll::Pending,
            // The engine dropped the request: end the stream without [DONE].
            std::task::Poll::Ready(None) => std::task::Poll::Ready(None),
            std::task::Poll::Ready(Some(t)) => {
                generated += 1;
                let mut b = sb.token_chunk(t.token_id, t.last);
                if t.last {
                    b.extend_from_slice(&sb.tail(include_usage, generated));
                    finished = true;
                }
                std::task::Poll::Ready(Some(Ok::<_, std::convert::Infallible>(Bytes::from(b))))
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")],
        Body::from_stream(stream),
    )
        .into_response()
}

async fn models(State(st): State<Arc<AppState>>) -> Response {
    let body = serde_json::json!({"object": "list", "data": [{
        "id": st.model, "object": "model", "created": st.created, "owned_by": "ctax-sim",
        "root": "ctax-sim (simulated)", "parent": null, "max_model_len": st.max_model_len}]});
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn metrics_handler(State(st): State<Arc<AppState>>) -> Response {
    let text = st.metrics.lock().expect("metrics lock").render(&st.model);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn label_simulated(mut r: Response) -> Response {
    r.headers_mut()
        .insert("x-ctax-simulated", HeaderValue::from_static("1"));
    r
}

fn spawn_step_log(path: &PathBuf) -> anyhow::Result<crate::rtq::Sender<ctax_schema::StepRecord>> {
    let f = std::fs::File::create(path)?;
    let (tx, rx) = crate::rtq::channel::<ctax_schema::StepRecord>();
    std::thread::Builder::new()
        .name("sim-steplog".into())
        .spawn(move || {
            let mut out = std::io::BufWriter::new(f);
            let write = |out: &mut std::io::BufWriter<std::fs::File>,
                         r: ctax_schema::StepRecord| {
                let _ = serde_json::to_writer(&mut *out, &r);
                let _ = out.write_all(b"\n");
            };
            let mut batch = Vec::new();
            while rx.recv_all(&mut batch).is_ok() {
                for r in batch.drain(..) {
                    write(&mut out, r);
                }
                // Flushed whenever the engine is not ahead of us: a killed sim loses at most a step.
                let _ = out.flush();
            }
        })?;
    Ok(tx)
}

/// Runs the simulator until killed.
pub fn main_with(args: SimArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.max_num_batched_tokens > 0 && args.max_num_seqs > 0,
        "budget and seats must be > 0"
    );
    anyhow::ensure!(args.workers > 0, "--workers must be >= 1");
    let metrics = Arc::new(Mutex::new(SimMetrics::default()));
    let prio = args.rt_priority;
    if prio > 0 {
        std::thread::spawn(move || crate::clock::set_thread_realtime(prio))
            .join()
            .map_err(|_| anyhow::anyhow!("probe thread panicked"))?
            .map_err(|e| anyhow::anyhow!("--rt-priority {prio}: {e}"))?;
    }
    // One worker: everything (accept, connections, the fixed-mode token clock) on this thread.
    let rt = if args.workers == 1 {
        if prio > 0 {
            let _ = crate::clock::set_thread_realtime(prio);
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.workers)
            .thread_name("sim-http")
            .on_thread_start(move || {
                if prio > 0 {
                    let _ = crate::clock::set_thread_realtime(prio);
                }
            })
            .enable_all()
            .build()?
    };
    let (etx, mode) = match (args.fixed_ttft_ms, args.fixed_itl_ms) {
        (Some(ttft), Some(itl)) => {
            anyhow::ensure!(ttft >= 0.0 && itl >= 0.0, "fixed latencies must be >= 0");
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let cfg = fixed::FixedCfg {
                ttft_ns: (ttft * 1e6) as u64,
                itl_ns: (itl * 1e6) as u64,
                seed: args.seed,
            };
            let m = metrics.clone();
            rt.spawn(async move {
                if let Err(e) = fixed::run(cfg, rx, m).await {
                    eprintln!("ctax-sim: token clock failed: {e}");
                    std::process::exit(1);
                }
            });
            (
                EngineTx::Task(tx),
                format!("fixed latency: TTFT {ttft} ms, ITL {itl} ms, infinite capacity"),
            )
        }
        _ => {
            let (etx, erx) = crate::rtq::channel::<SimRequest>();
            let step_log = args.step_log.as_ref().map(spawn_step_log).transpose()?;
            engine::spawn(
                engine::EngineCfg {
                    max_num_batched_tokens: args.max_num_batched_tokens,
                    max_num_seqs: args.max_num_seqs,
                    base_step_us: args.base_step_us,
                    prefill_token_us: args.prefill_token_us,
                    decode_seq_us: args.decode_seq_us,
                    connector_step_us: args.connector_step_us,
                    connector_request_us: args.connector_request_us,
                    jitter_pct: args.jitter_pct,
                    seed: args.seed,
                    rt_priority: args.rt_priority,
                },
                erx,
                metrics.clone(),
                step_log,
            )?;
            (
                EngineTx::Thread(etx),
                format!(
                    "continuous batching: budget {} tokens, {} seqs, step {} µs + {} µs/prefill token + {} µs/decode seq, \
                     connector {} µs/step + {} µs/request, jitter ±{}%",
                    args.max_num_batched_tokens,
                    args.max_num_seqs,
                    args.base_step_us,
                    args.prefill_token_us,
                    args.decode_seq_us,
                    args.connector_step_us,
                    args.connector_request_us,
                    args.jitter_pct
                ),
            )
        }
    };
    let state = Arc::new(AppState {
        model: args.model_name.clone(),
        model_json: serde_json::to_string(&args.model_name)?,
        max_model_len: args.max_model_len,
        engine: etx,
        metrics,
        next_id: AtomicU64::new(0),
        die_after: args.die_after_requests,
        created: crate::clock::unix_ms() / 1000,
    });
    let app = Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics_handler))
        .route("/health", get(health))
        .layer(axum::middleware::map_response(label_simulated))
        .with_state(state);
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await?;
        let addr = listener.local_addr()?;
        eprintln!("ctax-sim (SIMULATED) listening on http://{addr} — {mode}");
        tokio::spawn(async {
            use tokio::signal::unix::{SignalKind, signal};
            if let (Ok(mut i), Ok(mut t)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                tokio::select! { _ = i.recv() => {}, _ = t.recv() => {} }
                // Give the step-log thread a moment to flush, then go.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                std::process::exit(0);
            }
        });
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app.into_make_service()).await?;
        anyhow::Ok(())
    })
}
