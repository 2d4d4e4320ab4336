//! The raw-data contract: every record the collector, the simulated engine and the vLLM
//! step-timing plugin write, and that the analysis reads. This module is the only place the
//! on-disk shapes are defined; DESIGN.md ("Raw-data contract") documents the same fields.
//! It is one file on purpose (longer than the project's ~500-line guideline): the contract is
//! read as a whole, each on-disk type next to the keys, names and codes that refer to it. The
//! line reader ([`jsonl`]) and the archive's stored forms ([`columns`], [`request_columns`],
//! [`number_columns`]: `.jsonl.cols`, DESIGN.md §2.7) are modules of their own.
//!
//! Layout of a results root (one sweep):
//!
//! ```text
//! <root>/
//!   MANIFEST.md                 one row per server launch (human-readable, appended)
//!   manifest.jsonl              the same rows, machine-readable (ManifestRow)
//!   profile.toml                the profile the sweep ran with (copied in)
//!   reference_rates.json        ReferenceRates, written between Phase A and Phase B
//!   preflight/                  verify_<config>.log + preflight_status.json (PreflightStatus)
//!   <YYYYMMDD-HHMMSS>_<config>_l<k>/      one directory per server launch ("run")
//!     config.json               RunConfig
//!     launch.sh                 the exact command that started the server
//!     vllm_stdout.log, vllm_stderr.log
//!     env.txt                   pip freeze, vLLM version + git SHA, GPU, driver, CPU governor
//!     requests_<phase>_<cell>.jsonl[.zst|.cols]  RequestRecord, one per line (.cols: the
//!                               archive's request columns, DESIGN.md §2.7)
//!     metrics_<phase>_<cell>.jsonl[.zst]      MetricsSample, one per line
//!     engine_step_<phase>_<cell>.jsonl[.zst]  StepRecord, one per line
//!     summary.json              RunSummary (collector health per cell + per-cell statistics)
//!     gpu_telemetry_<stamp>.csv|.json  on a GPU: nvidia-smi samples beside the launch (written
//!                               and read by the ctax crate, not by the collector)
//!   analysis/                   written by `ctax analyze`
//! ```
//!
//! All `*_ns` times are nanoseconds on ONE clock: Linux `CLOCK_MONOTONIC`, the clock behind
//! Python's `time.perf_counter_ns()` / `time.monotonic_ns()`, so collector, /metrics sampler and
//! the engine's step log can be laid on one time axis. Wall-clock anchors are kept separately
//! (`RunSummary::cells[*].wall_start_unix_ms`) for humans only.

use serde::{Deserialize, Serialize};

pub mod columns;
pub mod jsonl;
pub mod number_columns;
pub mod request_columns;
pub mod text;

/// Bumped when a field changes meaning or a required field is added.
pub const SCHEMA_VERSION: u32 = 1;

/// Phases of the sweep. File names use [`Phase::tag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    /// Rate sweep at one shape (finds saturation per config).
    A,
    /// Shape sweep at `ref_safe`.
    B,
    /// Optional shape sweep at `ref_load` for the priority configs (the seed's "Phase B'").
    #[serde(rename = "Bp")]
    Bp,
    /// Pre-flight verification requests (never analysed as a cell).
    #[serde(rename = "preflight")]
    Preflight,
}

impl Phase {
    pub fn tag(self) -> &'static str {
        match self {
            Phase::A => "A",
            Phase::B => "B",
            Phase::Bp => "Bp",
            Phase::Preflight => "preflight",
        }
    }
    /// How people read the phase (reports, warnings, verdict reasons): the seed's names, `B'`
    /// for [`Phase::Bp`]. File names and record fields keep [`Phase::tag`].
    pub fn label(self) -> &'static str {
        match self {
            Phase::A => "A",
            Phase::B => "B",
            Phase::Bp => "B'",
            Phase::Preflight => "pre-flight",
        }
    }
    pub fn from_tag(s: &str) -> Option<Phase> {
        match s {
            "A" => Some(Phase::A),
            "B" => Some(Phase::B),
            "Bp" => Some(Phase::Bp),
            "preflight" => Some(Phase::Preflight),
            _ => None,
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.tag())
    }
}

/// Arrival process of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Fixed interval 1/rate (the seed's default).
    #[default]
    Fixed,
    /// Exponential gaps with mean 1/rate, seeded.
    Poisson,
}

/// One cell: an offered rate and a request shape. Its name is [`Cell::name`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Offered rate, requests per second.
    pub rate: f64,
    /// Prompt length in tokens (exact).
    pub input_len: u32,
    /// `max_tokens` with `ignore_eos`, i.e. the exact output length.
    pub output_len: u32,
}

impl Cell {
    /// `r<rate>_i<input>_o<output>`, rate printed without trailing zeros (`r0.5_i4096_o256`).
    pub fn name(&self) -> String {
        format!(
            "r{}_i{}_o{}",
            fmt_rate(self.rate),
            self.input_len,
            self.output_len
        )
    }

    /// Parses a name written by [`Cell::name`].
    pub fn parse(name: &str) -> Option<Cell> {
        let mut rate = None;
        let mut input = None;
        let mut output = None;
        for part in name.split('_') {
            let (k, v) = part.split_at_checked(1)?;
            match k {
                "r" => rate = v.parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0),
                "i" => input = v.parse::<u32>().ok(),
                "o" => output = v.parse::<u32>().ok(),
                _ => return None,
            }
        }
        Some(Cell {
            rate: rate?,
            input_len: input?,
            output_len: output?,
        })
    }
}

/// Formats a rate the way file names and tables show it: shortest exact decimal.
pub fn fmt_rate(rate: f64) -> String {
    let s = format!("{rate}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

/// Identity of one cell inside a run directory: its phase and its shape. Written
/// `<phase>/<cell>` (e.g. `A/r4_i4096_o256`): the key of [`RunSummary::cells`] and
/// [`RunSummary::stats`], and the prefix of every request id's cell part.
#[derive(Debug, Clone, PartialEq)]
pub struct CellKey {
    pub phase: Phase,
    pub cell: Cell,
}

impl CellKey {
    pub fn new(phase: Phase, cell: Cell) -> CellKey {
        CellKey { phase, cell }
    }

    /// Parses `<phase>/<cell>` as written by `Display`.
    pub fn parse(s: &str) -> Option<CellKey> {
        let (phase, cell) = s.split_once('/')?;
        Some(CellKey {
            phase: Phase::from_tag(phase)?,
            cell: Cell::parse(cell)?,
        })
    }
}

impl std::fmt::Display for CellKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.phase.tag(), self.cell.name())
    }
}

impl std::str::FromStr for CellKey {
    type Err = String;
    fn from_str(s: &str) -> Result<CellKey, String> {
        CellKey::parse(s)
            .ok_or_else(|| format!("`{s}` is not a cell key `<phase>/r<rate>_i<input>_o<output>`"))
    }
}

/// Exit status of `ctax-collect`; `ctax run` reads it and exits with the same codes for the
/// same outcomes (incomplete, interrupted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every cell complete.
    Ok,
    /// An error before or between cells (bad plan, unwritable output).
    Failure,
    /// Bad command-line arguments.
    Usage,
    /// At least one cell hit its hard cap before its targets.
    Incomplete,
    /// The server died during a cell.
    ServerDead,
    /// SIGINT/SIGTERM: files and summary written, the rest not run.
    Interrupted,
}

impl Exit {
    pub const ALL: [Exit; 6] = [
        Exit::Ok,
        Exit::Failure,
        Exit::Usage,
        Exit::Incomplete,
        Exit::ServerDead,
        Exit::Interrupted,
    ];

    pub const fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Incomplete => 3,
            Exit::ServerDead => 4,
            Exit::Interrupted => 130,
        }
    }

    pub fn from_code(code: i32) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| e.code() == code)
    }
}

/// `requests_<phase>_<cell>.jsonl` and friends.
pub fn file_name(kind: FileKind, phase: Phase, cell: &str) -> String {
    format!("{}_{}_{}.jsonl", kind.prefix(), phase.tag(), cell)
}

/// The three per-cell raw file kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Requests,
    Metrics,
    EngineStep,
}

impl FileKind {
    pub fn prefix(self) -> &'static str {
        match self {
            FileKind::Requests => "requests",
            FileKind::Metrics => "metrics",
            FileKind::EngineStep => "engine_step",
        }
    }
    pub const ALL: [FileKind; 3] = [FileKind::Requests, FileKind::Metrics, FileKind::EngineStep];
}

/// The suffixes of a raw file's stored forms beyond the one the collector writes: `.zst`
/// (zstd, `ctax archive`) and `.cols` (request files and raw step logs: the archive's columnar
/// encodings, `ctax archive --columns`, DESIGN.md §2.7). Every form of one name holds the same
/// records.
pub const STORED_SUFFIXES: [&str; 2] = [".zst", ".cols"];

/// `name` without its stored-form suffix (`X.jsonl.zst` and `X.jsonl.cols` → `X.jsonl`).
pub fn plain_name(name: &str) -> &str {
    STORED_SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// Every stored form of the plain name `plain`: itself, then with each of [`STORED_SUFFIXES`].
pub fn stored_forms(plain: &str) -> [String; 3] {
    [
        plain.to_owned(),
        format!("{plain}{}", STORED_SUFFIXES[0]),
        format!("{plain}{}", STORED_SUFFIXES[1]),
    ]
}

/// Splits `requests_A_r4_i4096_o256.jsonl[.zst|.cols]` into (kind, phase, cell); `.cols` only
/// for request files.
pub fn parse_file_name(name: &str) -> Option<(FileKind, Phase, String)> {
    let stem = plain_name(name).strip_suffix(".jsonl")?;
    for kind in FileKind::ALL {
        if let Some(rest) = stem
            .strip_prefix(kind.prefix())
            .and_then(|r| r.strip_prefix('_'))
        {
            if kind != FileKind::Requests && name.ends_with(".cols") {
                return None;
            }
            let (phase, cell) = rest.split_once('_')?;
            let phase = Phase::from_tag(phase)?;
            Cell::parse(cell)?;
            return Some((kind, phase, cell.to_owned()));
        }
    }
    None
}

/// How a request ended. Every request the schedule produced gets exactly one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// HTTP 200, stream ended with `[DONE]`, the server's usage says `completion_tokens` tokens.
    Ok,
    /// Not sent: the in-flight cap was reached at its intended send time.
    Dropped,
    /// Non-200 HTTP status (body excerpt in `error`).
    HttpError,
    /// TCP connect refused / reset before any response byte.
    ConnectError,
    /// No byte for `request_timeout_s`, or the stream exceeded it.
    Timeout,
    /// The stream carried an error event, broke off, or ended without `[DONE]`.
    StreamError,
    /// Still in flight when the cell's drain deadline passed; the client cancelled it.
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Dropped => "dropped",
            Status::HttpError => "http_error",
            Status::ConnectError => "connect_error",
            Status::Timeout => "timeout",
            Status::StreamError => "stream_error",
            Status::Cancelled => "cancelled",
        }
    }
}

/// One streamed SSE event that carried output: arrival time (stamped when its bytes arrived,
/// before any JSON parsing) and the number of tokens it carried according to the server
/// (`token_ids` length when the server returns them, else 1 per non-empty choice). The usage
/// chunk and `[DONE]` are not events.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Event(pub u64, pub u32);

impl Event {
    pub fn t_ns(&self) -> u64 {
        self.0
    }
    pub fn tokens(&self) -> u32 {
        self.1
    }
}

/// `<config>/l<launch>/<phase>/<cell>/<seq>`: the `request_id` of every request record.
pub fn request_id(config: &str, launch: u32, phase: Phase, cell: &str, seq: u64) -> String {
    format!("{config}/l{launch}/{}/{cell}/{seq}", phase.tag())
}

/// One line of `requests_<phase>_<cell>.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// `<config>/l<launch>/<phase>/<cell>/<seq>`, unique within a results root.
    pub request_id: String,
    pub config: String,
    /// Launch index of the config (0-based); several launches give launch-to-launch variation.
    pub launch: u32,
    pub phase: Phase,
    /// Cell name, `r<rate>_i<in>_o<out>`.
    pub cell: String,
    /// Offered rate of the cell, req/s.
    pub rate: f64,
    pub input_len: u32,
    pub output_len: u32,
    /// Position in the cell's send schedule (0-based, send order).
    pub seq: u64,
    /// Scheduled send time (absolute deadline from the pacer), CLOCK_MONOTONIC ns.
    pub t_intended_ns: u64,
    /// Time the request was handed to the socket; `None` when dropped.
    pub t_send_ns: Option<u64>,
    /// Arrival of the first event carrying output tokens.
    pub t_first_token_ns: Option<u64>,
    /// Arrival of the last event carrying output tokens.
    pub t_last_token_ns: Option<u64>,
    /// Time the stream ended (`[DONE]`, error, or close).
    pub t_end_ns: Option<u64>,
    /// Every output-carrying event: `[t_ns, tokens]`.
    pub events: Vec<Event>,
    /// From the server's final usage chunk.
    pub prompt_tokens: Option<u32>,
    /// From the server's final usage chunk.
    pub completion_tokens: Option<u32>,
    /// Requests in flight (sent, not finished) at this request's send, this one excluded.
    pub inflight_at_send: u32,
    /// Sent inside the cell's warm-up window; kept, flagged, excluded from statistics.
    pub warmup: bool,
    pub status: Status,
    pub http_status: Option<u16>,
    pub error: Option<String>,
}

impl RequestRecord {
    /// Time to first token from the actual send (the convention `vllm bench serve` uses), ms.
    pub fn ttft_ms(&self) -> Option<f64> {
        Some(ns_to_ms(
            self.t_first_token_ns?.checked_sub(self.t_send_ns?)?,
        ))
    }
    /// End-to-end latency from the actual send to the last token, ms.
    pub fn e2e_ms(&self) -> Option<f64> {
        Some(ns_to_ms(
            self.t_last_token_ns?.checked_sub(self.t_send_ns?)?,
        ))
    }
    /// `(t_last − t_first) / (completion_tokens − 1)` in ms: vLLM's request-weighted TPOT.
    pub fn tpot_ms(&self) -> Option<f64> {
        let n = self.completion_tokens?;
        if n < 2 {
            return None;
        }
        let span = self.t_last_token_ns?.checked_sub(self.t_first_token_ns?)?;
        Some(ns_to_ms(span) / f64::from(n - 1))
    }
}

pub fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One line of `metrics_<phase>_<cell>.jsonl`: one scrape of the server's `/metrics`.
///
/// Series keys are the metric name followed by its labels in Prometheus order without the
/// `model_name` label, e.g. `vllm:num_requests_waiting{engine="0"}` or
/// `vllm:request_success_total{engine="0",finished_reason="length"}`. Histograms keep only
/// `_sum` and `_count` (under their own keys, e.g. `vllm:e2e_request_latency_seconds_sum`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsSample {
    /// Time the scrape was sent (CLOCK_MONOTONIC ns).
    pub t_ns: u64,
    /// Scrape round-trip, ms.
    pub scrape_ms: f64,
    /// `false` if the scrape failed; `error` says why and the maps are empty.
    pub ok: bool,
    pub error: Option<String>,
    pub gauges: std::collections::BTreeMap<String, f64>,
    pub counters: std::collections::BTreeMap<String, f64>,
    /// `_sum` and `_count` of every `vllm:*` histogram.
    pub histograms: std::collections::BTreeMap<String, f64>,
}

impl MetricsSample {
    /// Sum of every series of a gauge family (`vllm:num_requests_waiting` over engines).
    pub fn gauge_total(&self, family: &str) -> Option<f64> {
        family_total(&self.gauges, family)
    }
    pub fn counter_total(&self, family: &str) -> Option<f64> {
        family_total(&self.counters, family)
    }
}

fn family_total(map: &std::collections::BTreeMap<String, f64>, family: &str) -> Option<f64> {
    let mut found = false;
    let mut total = 0.0;
    for (k, v) in map.range(family.to_owned()..) {
        let rest = match k.strip_prefix(family) {
            Some(r) => r,
            None => break,
        };
        if rest.is_empty() || rest.starts_with('{') {
            found = true;
            total += v;
        }
    }
    found.then_some(total)
}

/// One line of `engine_step_<phase>_<cell>.jsonl`, written by the step-timing plugin
/// (`patches/ctax_step_timing`) in the vLLM engine process. Times on CLOCK_MONOTONIC.
///
/// One record per engine-core step. Fields the plugin cannot observe in a given vLLM version are
/// `null`; `build_meta_us`/`get_finished_us`/`start_load_kv_us` are `null` when no connector is
/// configured (plain), never 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// `Scheduler.schedule()` entry.
    pub t_ns: u64,
    /// Monotonic per process.
    pub step_id: u64,
    pub pid: u32,
    /// Whole engine-core step: `schedule()` entry to the end of `update_from_output()` of the
    /// same step (µs). Seed: "step_duration_us"; see DESIGN.md for how it differs.
    pub step_duration_us: Option<f64>,
    /// `Scheduler.schedule()` entry to exit (µs): the seed's original step measure.
    pub schedule_us: Option<f64>,
    /// `connector.build_connector_meta()` (µs), scheduler side.
    pub build_meta_us: Option<f64>,
    /// Worker-side `get_finished()`/`get_transfer_results()` (µs).
    pub get_finished_us: Option<f64>,
    /// Worker-side `start_load_kv()` (µs).
    pub start_load_kv_us: Option<f64>,
    pub num_running: Option<u32>,
    pub num_waiting: Option<u32>,
    pub prefill_tokens: Option<u32>,
    pub decode_tokens: Option<u32>,
}

impl StepRecord {
    /// Sum of the three instrumented connector callbacks, `None` if none was observed.
    pub fn connector_total_us(&self) -> Option<f64> {
        let parts = [
            self.build_meta_us,
            self.get_finished_us,
            self.start_load_kv_us,
        ];
        if parts.iter().all(Option::is_none) {
            return None;
        }
        Some(parts.iter().flatten().sum())
    }
}

/// Collector-side facts about one cell (written by the collector into `summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellHealth {
    pub phase: Phase,
    pub cell: String,
    pub rate: f64,
    pub input_len: u32,
    pub output_len: u32,
    pub arrival: Arrival,
    pub seed: u64,
    /// First intended send.
    pub t_start_ns: u64,
    /// End of warm-up = start of the measurement window.
    pub t_warmup_end_ns: u64,
    /// Last intended send = end of the measurement window.
    pub t_last_send_ns: u64,
    /// Drain finished (all requests ended or cancelled).
    pub t_end_ns: u64,
    /// Wall clock at `t_start_ns`, for humans.
    pub wall_start_unix_ms: u64,
    /// Requests scheduled (sent + dropped).
    pub scheduled: u64,
    pub sent: u64,
    pub dropped: u64,
    pub ok: u64,
    pub errors: u64,
    pub cancelled: u64,
    /// Non-warm-up requests that ended `ok`.
    pub completed_measured: u64,
    /// `false` when the hard cap on cell time stopped the cell before `min_completed` /
    /// `duration` were met, or when the server died during the cell.
    pub complete: bool,
    /// Why the cell is incomplete, if it is.
    pub incomplete_reason: Option<String>,
    /// Send lateness (actual − intended), µs.
    pub lateness_us_p50: f64,
    pub lateness_us_p99: f64,
    pub lateness_us_max: f64,
    /// Client process CPU over the cell, percent of one core.
    pub client_cpu_pct: f64,
    /// Scrapes attempted / failed.
    pub scrapes: u64,
    pub scrape_failures: u64,
}

/// How the reason of a cell stopped by its hard time cap (`max_cell_s`) begins: the workload
/// overloaded the server (it could not send its measured requests, or not drain them, in time).
pub const CAPPED_PREFIX: &str = "max_cell_s=";

impl CellHealth {
    /// Stopped by `max_cell_s`: an overload outcome that a rerun reproduces, unlike an
    /// interruption, a dead server or missing records.
    pub fn capped(&self) -> bool {
        !self.complete
            && self
                .incomplete_reason
                .as_deref()
                .is_some_and(|r| r.starts_with(CAPPED_PREFIX))
    }
}

/// `summary.json` of one run directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub schema_version: u32,
    /// Keyed by [`CellKey`] (`<phase>/<cell>`).
    pub cells: std::collections::BTreeMap<String, CellHealth>,
    /// Per-cell statistics added by `ctax` after the launch (analysis code), keyed like `cells`.
    #[serde(default)]
    pub stats: std::collections::BTreeMap<String, serde_json::Value>,
    /// Where each cell was measured (slot, GPU, CPU set, ports), keyed like `cells`; written by
    /// `ctax run` after each launch. A launch resumed on another slot keeps each cell's own.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub placement: std::collections::BTreeMap<String, Placement>,
}

/// Where one launch ran: its GPU slot on the host, the GPU, the CPU set and the ports it was
/// given (`ctax run --gpus`, `--shard`). Recorded in `config.json`, the manifest and
/// `summary.json`; absent in runs made before slots existed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Slot index on this host (0-based) and the number of slots the sweep ran with.
    pub slot: u32,
    pub slots: u32,
    /// `CUDA_VISIBLE_DEVICES` given to the server; `None` when the sweep did not set it
    /// (one slot without `--gpus`).
    #[serde(default)]
    pub cuda_visible_devices: Option<String>,
    /// The GPU's index and UUID as `nvidia-smi --query-gpu=index,uuid` reports them; `None`
    /// where nvidia-smi is absent (CPU, simulated) or the GPU is ambiguous.
    #[serde(default)]
    pub gpu_index: Option<u32>,
    #[serde(default)]
    pub gpu_uuid: Option<String>,
    /// CPUs the server's process group and this slot's collector were pinned to (cpulist
    /// syntax, e.g. `0-7`).
    #[serde(default)]
    pub cpuset: Option<String>,
    /// Ports the slot owns: `api` (HTTP), `vllm_port` (first of vLLM's internal range),
    /// `mooncake_bootstrap`, `nixl_side_channel`, `lmcache_internal_api`.
    #[serde(default)]
    pub ports: std::collections::BTreeMap<String, u16>,
    /// `K/N` when the sweep ran as shard K of N (`ctax run --shard`).
    #[serde(default)]
    pub shard: Option<String>,
    /// A plain launch of the GPU-to-GPU calibration round (plain's first launches, on every
    /// slot at once): pooled like any plain launch, and also compared between GPUs.
    #[serde(default)]
    pub calibration: bool,
    /// Host name.
    #[serde(default)]
    pub host: Option<String>,
    /// The machine the launch ran on, as one boot of it: `/proc/sys/kernel/random/boot_id`
    /// when the launch started. Launches with the same id ran on the same machine in the same
    /// boot; taxes compare a config with plain on the same machine (machines differ by more
    /// than launches do: DESIGN.md §4.3). `None` in runs made before it was recorded (the
    /// analysis then reads the machine from env.txt's GPU UUIDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
}

impl RunSummary {
    /// The collector's health record of one cell.
    pub fn cell(&self, key: &CellKey) -> Option<&CellHealth> {
        self.cells.get(&key.to_string())
    }
}

/// `config.json` of one run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub schema_version: u32,
    pub config: String,
    pub launch: u32,
    pub run_dir: String,
    pub phases: Vec<Phase>,
    pub cells: Vec<PlannedCell>,
    pub model: String,
    pub served_model_name: String,
    pub port: u16,
    /// Free-form: engine settings, profile name, environment overrides.
    #[serde(default)]
    pub extra: serde_json::Value,
    /// True when the server was `ctax-sim`, not vLLM: every report built from it says so.
    #[serde(default)]
    pub simulated: bool,
    /// Where the latest launch in this run directory ran (absent before slots existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// One cell of a collector plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCell {
    pub phase: Phase,
    pub cell: Cell,
    #[serde(default)]
    pub arrival: Arrival,
    /// Measurement duration floor, seconds (after warm-up).
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Keep sending until this many non-warm-up requests completed `ok`.
    pub min_completed: u64,
    /// Hard cap on the whole cell (warm-up + measurement + drain); hitting it marks the cell
    /// incomplete.
    pub max_cell_s: f64,
    /// In-flight cap; requests over it are dropped and recorded.
    pub inflight_cap: u32,
    pub seed: u64,
}

/// What the pre-flight decided for a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Include,
    Skip,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Include => "include",
            Decision::Skip => "skip",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decision of the pre-flight for one config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreflightEntry {
    pub decision: Decision,
    pub reason: Option<String>,
    pub log: Option<String>,
    pub checked_unix_ms: Option<u64>,
}

/// `preflight/preflight_status.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PreflightStatus {
    pub schema_version: u32,
    pub configs: std::collections::BTreeMap<String, PreflightEntry>,
    /// Whether step-timing records were actually produced by the plugin.
    pub step_timing_available: Option<bool>,
    #[serde(default)]
    pub step_timing_reason: Option<String>,
}

/// Outcome of one manifest row: a pre-flight decision or how a server launch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Pre-flight: the config runs.
    Include,
    /// Pre-flight: the config is skipped (the row's reason says why).
    Skip,
    /// Launch: every cell complete.
    Ok,
    /// Launch: some cell hit its cap; rerun on resume.
    Incomplete,
    /// Launch: the server did not start or died.
    Failed,
    /// Launch: Ctrl-C.
    Interrupted,
}

impl RowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Include => "include",
            RowStatus::Skip => "skip",
            RowStatus::Ok => "ok",
            RowStatus::Incomplete => "incomplete",
            RowStatus::Failed => "failed",
            RowStatus::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for RowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Decision> for RowStatus {
    fn from(d: Decision) -> RowStatus {
        match d {
            Decision::Include => RowStatus::Include,
            Decision::Skip => RowStatus::Skip,
        }
    }
}

/// [`ManifestRow::stage`] of a pre-flight decision, of a Phase A launch and of a Phase B launch
/// (whose launches also run Phase B' cells): written by `ctax run`, read by the analysis.
pub const STAGE_PREFLIGHT: &str = "0 pre-flight";
pub const STAGE_A: &str = "1 Phase A";
pub const STAGE_B: &str = "3 Phase B";

/// One row of `manifest.jsonl` (rendered into MANIFEST.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestRow {
    pub date_utc: String,
    pub stage: String,
    pub config: String,
    pub launch: u32,
    pub run_dir: Option<String>,
    pub status: RowStatus,
    pub reason: Option<String>,
    pub vllm_version: Option<String>,
    pub vllm_git_sha: Option<String>,
    pub connector_versions: std::collections::BTreeMap<String, String>,
    pub gpu: Option<String>,
    pub launch_command: Option<String>,
    pub step_timing_active: Option<bool>,
    pub started_unix_ms: u64,
    pub duration_s: f64,
    pub host: Option<String>,
    /// Where the launch ran (absent for pre-flight rows and runs made before slots existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// `reference_rates.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceRates {
    pub schema_version: u32,
    /// Max rate where every config that completed Phase A is unsaturated.
    pub ref_safe: Option<f64>,
    /// Max rate where plain is unsaturated.
    pub ref_load: Option<f64>,
    pub configs_considered: Vec<String>,
    /// Per config: the saturation rate (lowest rate with ≥1 criterion) or `None`.
    pub saturation_rate: std::collections::BTreeMap<String, Option<f64>>,
    /// Human explanation of each choice.
    pub notes: Vec<String>,
    /// The root's Phase A launch attempts (its manifest's `1 Phase A` rows) when the rates were
    /// computed: `ctax run` refuses Phase B on rates that miss one (a new launch, or an attempt
    /// that resumed one in its directory). `None` in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_a_launches: Option<Vec<LaunchAttempt>>,
}

impl ReferenceRates {
    /// `config`'s saturation rate when it is at or below ref_load: such a config gets no
    /// Phase B' cells, whose rate is ref_load (a cell there measures a queue that grows with the
    /// cell's length, not a tax). The one place of that rule: `ctax run`'s plan, SC7 and the
    /// report's coverage read it here.
    pub fn saturated_at_ref_load(&self, config: &str) -> Option<f64> {
        let load = self.ref_load?;
        self.saturation_rate
            .get(config)
            .copied()
            .flatten()
            .filter(|&s| s <= load + 1e-9)
    }
}

/// One launch attempt as the manifest names it: its run directory and its row's start.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LaunchAttempt {
    pub run_dir: String,
    pub started_unix_ms: u64,
}

/// Current time on CLOCK_MONOTONIC, ns (the clock every record uses).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_names_round_trip() {
        for (rate, i, o, name) in [
            (0.5, 4096, 256, "r0.5_i4096_o256"),
            (4.0, 512, 64, "r4_i512_o64"),
            (32.0, 32768, 1024, "r32_i32768_o1024"),
        ] {
            let c = Cell {
                rate,
                input_len: i,
                output_len: o,
            };
            assert_eq!(c.name(), name);
            assert_eq!(Cell::parse(name), Some(c));
        }
        assert_eq!(Cell::parse("r0_i1_o1"), None);
        assert_eq!(Cell::parse("x4_i1_o1"), None);
    }

    #[test]
    fn cell_keys_display_and_parse() {
        let k = CellKey::new(
            Phase::Bp,
            Cell {
                rate: 0.5,
                input_len: 4096,
                output_len: 256,
            },
        );
        assert_eq!(k.to_string(), "Bp/r0.5_i4096_o256");
        assert_eq!(CellKey::parse("Bp/r0.5_i4096_o256"), Some(k.clone()));
        assert_eq!("Bp/r0.5_i4096_o256".parse::<CellKey>(), Ok(k));
        for bad in [
            "A",
            "A/",
            "Z/r1_i1_o1",
            "A/r1_i1",
            "A_r1_i1_o1",
            "A/r1_i1_o1/x",
        ] {
            assert_eq!(CellKey::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn exit_codes_round_trip_and_match_the_documented_numbers() {
        // DESIGN.md §6: 0 complete, 3 some cell incomplete, 4 server dead, 130 interrupted, 2 usage.
        let documented = [(Exit::Ok, 0), (Exit::Usage, 2), (Exit::Incomplete, 3)];
        for (e, c) in documented {
            assert_eq!(e.code(), c);
        }
        assert_eq!(Exit::ServerDead.code(), 4);
        assert_eq!(Exit::Interrupted.code(), 130);
        for e in Exit::ALL {
            assert_eq!(Exit::from_code(e.code()), Some(e));
        }
        assert_eq!(Exit::from_code(5), None);
    }

    #[test]
    fn statuses_keep_their_on_disk_spelling() {
        for (s, text) in [
            (RowStatus::Include, "include"),
            (RowStatus::Skip, "skip"),
            (RowStatus::Ok, "ok"),
            (RowStatus::Incomplete, "incomplete"),
            (RowStatus::Failed, "failed"),
            (RowStatus::Interrupted, "interrupted"),
        ] {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{text}\""));
            assert_eq!(s.as_str(), text);
        }
        let d: Decision = serde_json::from_str("\"skip\"").unwrap();
        assert_eq!(d, Decision::Skip);
        assert!(serde_json::from_str::<Decision>("\"error\"").is_err());
    }

    #[test]
    fn file_names_parse() {
        let f = file_name(FileKind::EngineStep, Phase::Bp, "r2_i512_o64");
        assert_eq!(f, "engine_step_Bp_r2_i512_o64.jsonl");
        assert_eq!(
            parse_file_name(&(f + ".zst")),
            Some((FileKind::EngineStep, Phase::Bp, "r2_i512_o64".into()))
        );
        assert_eq!(parse_file_name("requests_Z_r2_i512_o64.jsonl"), None);
        assert_eq!(parse_file_name("summary.json"), None);
        // Request columns: a stored form of request files only.
        assert_eq!(
            parse_file_name("requests_A_r4_i8_o8.jsonl.cols"),
            Some((FileKind::Requests, Phase::A, "r4_i8_o8".into()))
        );
        assert_eq!(parse_file_name("metrics_A_r4_i8_o8.jsonl.cols"), None);
        assert_eq!(parse_file_name("requests_A_r4_i8_o8.jsonl.zst.cols"), None);
        assert_eq!(plain_name("x.jsonl.cols"), "x.jsonl");
        assert_eq!(plain_name("x.log.zst"), "x.log");
        assert_eq!(
            stored_forms("x.jsonl"),
            ["x.jsonl", "x.jsonl.zst", "x.jsonl.cols"].map(String::from)
        );
    }

    #[test]
    fn derived_latencies_follow_vllm_definitions() {
        // Hand calculation: send at 1 ms, first token at 11 ms, last at 111 ms, 101 tokens.
        // TTFT = 10 ms, E2E = 110 ms, TPOT = (111-11)/(101-1) = 1 ms.
        let r = RequestRecord {
            request_id: "x".into(),
            config: "plain".into(),
            launch: 0,
            phase: Phase::A,
            cell: "r1_i8_o101".into(),
            rate: 1.0,
            input_len: 8,
            output_len: 101,
            seq: 0,
            t_intended_ns: 1_000_000,
            t_send_ns: Some(1_000_000),
            t_first_token_ns: Some(11_000_000),
            t_last_token_ns: Some(111_000_000),
            t_end_ns: Some(111_500_000),
            events: vec![],
            prompt_tokens: Some(8),
            completion_tokens: Some(101),
            inflight_at_send: 0,
            warmup: false,
            status: Status::Ok,
            http_status: Some(200),
            error: None,
        };
        assert_eq!(r.ttft_ms(), Some(10.0));
        assert_eq!(r.e2e_ms(), Some(110.0));
        assert_eq!(r.tpot_ms(), Some(1.0));
    }

    #[test]
    fn placement_is_optional_and_round_trips() {
        // A config.json and a manifest row written before slots existed still read, and write
        // back without a `placement` key (so archived datasets keep their bytes).
        let old_rc = r#"{"schema_version":1,"config":"plain","launch":0,"run_dir":"x","phases":["A"],"cells":[],"model":"m","served_model_name":"m","port":8000}"#;
        let rc: RunConfig = serde_json::from_str(old_rc).unwrap();
        assert_eq!(rc.placement, None);
        assert!(!serde_json::to_string(&rc).unwrap().contains("placement"));
        let old_row = r#"{"date_utc":"d","stage":"1 Phase A","config":"plain","launch":0,"run_dir":null,"status":"ok","reason":null,"vllm_version":null,"vllm_git_sha":null,"connector_versions":{},"gpu":null,"launch_command":null,"step_timing_active":null,"started_unix_ms":0,"duration_s":1.0,"host":null}"#;
        let row: ManifestRow = serde_json::from_str(old_row).unwrap();
        assert_eq!(row.placement, None);
        let s: RunSummary = serde_json::from_str(r#"{"schema_version":1,"cells":{}}"#).unwrap();
        assert!(s.placement.is_empty());
        assert!(!serde_json::to_string(&s).unwrap().contains("placement"));

        let p = Placement {
            slot: 1,
            slots: 2,
            cuda_visible_devices: Some("1".into()),
            gpu_index: Some(1),
            gpu_uuid: Some("GPU-abc".into()),
            cpuset: Some("8-15".into()),
            ports: [("api".to_owned(), 8100u16)].into_iter().collect(),
            shard: Some("1/2".into()),
            calibration: true,
            host: Some("h".into()),
            machine_id: Some("0f1e2d3c-boot".into()),
        };
        let rc2 = RunConfig {
            placement: Some(p.clone()),
            ..rc
        };
        let back: RunConfig = serde_json::from_str(&serde_json::to_string(&rc2).unwrap()).unwrap();
        assert_eq!(back.placement, Some(p));
    }

    #[test]
    fn family_totals_sum_series_and_ignore_prefix_neighbours() {
        let mut s = MetricsSample {
            t_ns: 0,
            scrape_ms: 0.0,
            ok: true,
            error: None,
            gauges: Default::default(),
            counters: Default::default(),
            histograms: Default::default(),
        };
        s.gauges
            .insert("vllm:num_requests_waiting{engine=\"0\"}".into(), 2.0);
        s.gauges
            .insert("vllm:num_requests_waiting{engine=\"1\"}".into(), 3.0);
        s.gauges.insert(
            "vllm:num_requests_waiting_by_reason{reason=\"capacity\"}".into(),
            9.0,
        );
        assert_eq!(s.gauge_total("vllm:num_requests_waiting"), Some(5.0));
        assert_eq!(s.gauge_total("vllm:num_requests_running"), None);
    }
}
