//! Synthetic results roots with known truth, for tests, benchmarks and demos. Every run it
//! writes says `simulated: true` in config.json, so any report built from it carries the
//! simulated banner.
//!
//! The model: each config has a capacity (req/s). Requests arrive at fixed intervals (or the
//! given schedule) and start service at `max(arrival, previous start + 1/capacity)`, so below
//! capacity there is no queue and above it the queue grows linearly. TTFT = queue delay +
//! base TTFT × `ttft_mult` × lognormal noise; tokens arrive every TPOT × `tpot_mult` × noise.
//! The true TTFT tax of a config below capacity is therefore exactly `ttft_mult − 1`.
//!
//! Length: 521 lines of code; the rest of the file is its unit tests (kept next to the rules).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub use ctax_schema::Arrival;
use ctax_schema::{
    Cell, CellHealth, CellKey, Decision, Event, FileKind, MetricsSample, Phase, PlannedCell,
    PreflightEntry, PreflightStatus, RequestRecord, RunConfig, RunSummary, SCHEMA_VERSION, Status,
    StepRecord, file_name,
};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

mod presets;
pub use presets::{Preset, preset};

/// One synthetic config.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    pub name: String,
    pub ttft_mult: f64,
    pub tpot_mult: f64,
    /// Requests per second the server can start.
    pub capacity_rps: f64,
    /// Extra engine-step time (µs) and instrumented callback time (µs) per step.
    pub step_extra_us: f64,
    pub callback_us: Option<f64>,
    /// `(launch, factor)`: that launch of this config alone runs `factor` × slower (TTFT and
    /// TPOT), e.g. a server that came up on a degraded GPU; the A/A check must catch it.
    pub slow_launch: Option<(u32, f64)>,
    /// `(launch, capacity_rps)`: that launch of this config alone starts this many requests/s
    /// (instead of `capacity_rps`): one launch that saturates where the others keep up, as
    /// single launches did on the H200 (DESIGN.md §4.4 "Each launch's own saturation rate").
    pub launch_capacity: Option<(u32, f64)>,
    /// Lognormal sigma of an extra per-launch level of this config alone (every cell), on top
    /// of the spec's `launch_sigma`: a config whose launches spread more than the others', as
    /// LMCache's CPU-side store path did on the H200 (DESIGN.md §4.3). Drawn from its own
    /// seeded stream: the requests and the other configs stay as without it.
    pub launch_sigma_extra: f64,
    /// The machine (index into the spec's `machine_levels`) each launch runs on, by launch
    /// index; launches past the list (and every launch when it is empty) run on machine 0.
    pub machines: Vec<u32>,
    /// A slow stretch inside one launch's measured window, in every Phase A cell of it: the
    /// TTFT of measured requests `first..first + len` (send order) × `factor`, as an LMCache
    /// store slowed 3× for ten seconds on the H200 ([`crate::analysis::episodes`]); the engine
    /// steps that start from its first to its last send (with `with_steps`) run `factor` ×
    /// longer, as the H200's did. No draw is spent on it, so the other requests stay as without
    /// it; the stalled launch's fewer steps leave its later cells' draws shifted.
    pub stall: Option<Stall>,
}

/// See [`SynthConfig::stall`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stall {
    pub launch: u32,
    pub first: usize,
    pub len: usize,
    pub factor: f64,
}

impl SynthConfig {
    pub fn new(name: &str, ttft_mult: f64, tpot_mult: f64) -> Self {
        SynthConfig {
            name: name.into(),
            ttft_mult,
            tpot_mult,
            capacity_rps: 1e9,
            step_extra_us: 0.0,
            callback_us: if name == "plain" { None } else { Some(0.0) },
            slow_launch: None,
            launch_capacity: None,
            launch_sigma_extra: 0.0,
            machines: Vec::new(),
            stall: None,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthSpec {
    pub configs: Vec<SynthConfig>,
    pub launches: u32,
    pub phase_a_rates: Vec<f64>,
    pub phase_a_shape: (u32, u32),
    /// Phase B shapes (input, output) at `phase_b_rate`; empty = no Phase B.
    pub phase_b_shapes: Vec<(u32, u32)>,
    pub phase_b_rate: f64,
    /// Measured (non-warm-up) requests per cell.
    pub requests_per_cell: usize,
    pub warmup_requests: usize,
    /// Base TTFT median (ms) for a 4096-token prompt; scales with input length.
    pub base_ttft_ms: f64,
    /// Base TPOT (ms).
    pub base_tpot_ms: f64,
    /// Lognormal sigma of per-request TTFT / TPOT noise.
    pub sigma: f64,
    /// Lognormal sigma of a per-launch level shift.
    pub launch_sigma: f64,
    /// (Phase A rate, sigma): an extra per-launch lognormal level of that rate's cells alone, on
    /// top of `launch_sigma` — launches that spread more in one cell than in the others, as
    /// queueing can make them near the knee (DESIGN.md §4.3). Drawn from its own seeded stream:
    /// the requests stay as without it.
    pub launch_sigma_at: Vec<(f64, f64)>,
    /// Machines: the level (TTFT and TPOT factor) of each machine a launch can run on
    /// ([`SynthConfig::machines`]), e.g. `[1.0, 0.8]` for a second machine 20% faster, as the
    /// H200's GPU sessions differed (DESIGN.md §4.3 "Machines"). Empty: one machine, and no
    /// machine is recorded (the runs carry no placement, as before machines existed); else every
    /// run records `placement.machine_id` = `synth-machine-<m>`.
    pub machine_levels: Vec<f64>,
    /// AR(1) coefficient of the per-request log-latency noise in send order (0 = independent):
    /// consecutive requests of a cell share part of their noise, as on a real server.
    pub ar_rho: f64,
    /// Fixed intervals, or Poisson arrivals (exponential gaps seeded by the launch's stream).
    pub arrival: Arrival,
    /// Cap on events per request (outputs longer than this are written as fewer events
    /// carrying several tokens each); `None` = one event per token.
    pub max_events: Option<u32>,
    pub with_metrics: bool,
    pub with_steps: bool,
    /// Idle time between synthetic engine steps (ms).
    pub step_gap_ms: f64,
    pub seed: u64,
    pub skipped: Vec<(String, String)>,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            configs: vec![SynthConfig::new("plain", 1.0, 1.0)],
            launches: 1,
            phase_a_rates: vec![1.0, 2.0, 4.0],
            phase_a_shape: (4096, 256),
            phase_b_shapes: Vec::new(),
            phase_b_rate: 2.0,
            requests_per_cell: 200,
            warmup_requests: 10,
            base_ttft_ms: 200.0,
            base_tpot_ms: 10.0,
            sigma: 0.25,
            launch_sigma: 0.0,
            launch_sigma_at: Vec::new(),
            machine_levels: Vec::new(),
            ar_rho: 0.0,
            arrival: Arrival::Fixed,
            max_events: Some(64),
            with_metrics: true,
            with_steps: true,
            step_gap_ms: 10.0,
            seed: 1,
            skipped: Vec::new(),
        }
    }
}

/// The extra per-launch level of a Phase A cell whose rate `launch_sigma_at` names (1 for every
/// other cell), from a stream seeded by (seed, config, launch, rate) alone.
fn cell_level(spec: &SynthSpec, config: &str, launch: u32, phase: Phase, cell: &Cell) -> f64 {
    let Some(&(_, sigma)) = spec
        .launch_sigma_at
        .iter()
        .find(|(r, _)| phase == Phase::A && *r == cell.rate)
    else {
        return 1.0;
    };
    let key = format!("launch-level|{config}|l{launch}");
    let mut rng =
        Xoshiro256PlusPlus::seed_from_u64(crate::stats::stable_seed(spec.seed, &key, cell.rate));
    (sigma * normal(&mut rng)).exp()
}

fn normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    // Box–Muller.
    let u: f64 = rng.random::<f64>().max(1e-300);
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// Refuses a `root` that exists and is not an empty directory: simulated launches must never
/// land beside real ones (or overwrite their `preflight_status.json`).
fn check_new_root(root: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", root.display())),
        Ok(m) if !m.is_dir() => anyhow::bail!(
            "{}: exists and is not a directory; ctax synth writes a new results root",
            root.display()
        ),
        Ok(_) => {
            let mut names: Vec<String> = std::fs::read_dir(root)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<Result<_, _>>()?;
            if names.is_empty() {
                return Ok(());
            }
            names.sort();
            anyhow::bail!(
                "{}: not empty ({} entries, e.g. {}); ctax synth only writes into a new or empty \
                 directory, so that simulated launches are never pooled with real ones nor \
                 overwrite their files",
                root.display(),
                names.len(),
                names.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            )
        }
    }
}

/// The wall clock of the first synthetic launch (2026-01-01 00:00 UTC).
const SYNTH_EPOCH_MS: u64 = 1_767_225_600_000;

/// Writes a results root at `root` (which must not exist or be empty: [`check_new_root`]) and
/// returns the run directories written.
pub fn generate(spec: &SynthSpec, root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    check_new_root(root)?;
    std::fs::create_dir_all(root.join("preflight"))?;
    let mut dirs = Vec::new();
    let mut pre = PreflightStatus {
        schema_version: SCHEMA_VERSION,
        step_timing_available: Some(spec.with_steps),
        ..Default::default()
    };
    for (ci, cfg) in spec.configs.iter().enumerate() {
        pre.configs.insert(
            cfg.name.clone(),
            PreflightEntry {
                decision: Decision::Include,
                reason: None,
                log: None,
                checked_unix_ms: None,
            },
        );
        for launch in 0..spec.launches {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                spec.seed ^ ((ci as u64) << 32) ^ u64::from(launch) << 8,
            );
            let mut level = (spec.launch_sigma * normal(&mut rng)).exp();
            if let Some((l, factor)) = cfg.slow_launch
                && l == launch
            {
                level *= factor;
            }
            let machine = cfg.machines.get(launch as usize).copied().unwrap_or(0);
            level *= spec
                .machine_levels
                .get(machine as usize)
                .copied()
                .unwrap_or(1.0);
            if cfg.launch_sigma_extra > 0.0 {
                let key = format!("config-level|{}|l{launch}", cfg.name);
                let mut own = Xoshiro256PlusPlus::seed_from_u64(crate::stats::stable_seed(
                    spec.seed, &key, 0.0,
                ));
                level *= (cfg.launch_sigma_extra * normal(&mut own)).exp();
            }
            let dir = root.join(format!(
                "20260101-{:02}{:02}00_{}_l{launch}",
                ci, launch, cfg.name
            ));
            let mut cells: Vec<(Phase, Cell)> = spec
                .phase_a_rates
                .iter()
                .map(|&r| {
                    (
                        Phase::A,
                        Cell {
                            rate: r,
                            input_len: spec.phase_a_shape.0,
                            output_len: spec.phase_a_shape.1,
                        },
                    )
                })
                .collect();
            cells.extend(spec.phase_b_shapes.iter().map(|&(i, o)| {
                (
                    Phase::B,
                    Cell {
                        rate: spec.phase_b_rate,
                        input_len: i,
                        output_len: o,
                    },
                )
            }));
            let placement = (!spec.machine_levels.is_empty()).then(|| ctax_schema::Placement {
                slots: 1,
                machine_id: Some(format!("synth-machine-{machine}")),
                ..Default::default()
            });
            // Wall clock: launches in turn, launch-major (every config's l0, then every l1, …),
            // 10 minutes apart, as a sweep interleaves them.
            let wall_ms = SYNTH_EPOCH_MS
                + (u64::from(launch) * spec.configs.len() as u64 + ci as u64) * 600_000;
            write_run(
                spec, cfg, launch, level, placement, &cells, &dir, wall_ms, &mut rng,
            )?;
            dirs.push(dir);
        }
    }
    for (name, reason) in &spec.skipped {
        pre.configs.insert(
            name.clone(),
            PreflightEntry {
                decision: Decision::Skip,
                reason: Some(reason.clone()),
                log: None,
                checked_unix_ms: None,
            },
        );
    }
    crate::fsutil::write_json_atomic(&root.join("preflight/preflight_status.json"), &pre)?;
    Ok(dirs)
}

#[allow(clippy::too_many_arguments)]
fn write_run(
    spec: &SynthSpec,
    cfg: &SynthConfig,
    launch: u32,
    level: f64,
    placement: Option<ctax_schema::Placement>,
    cells: &[(Phase, Cell)],
    dir: &Path,
    wall_ms: u64,
    rng: &mut Xoshiro256PlusPlus,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let planned: Vec<PlannedCell> = cells
        .iter()
        .map(|(p, c)| PlannedCell {
            phase: *p,
            cell: c.clone(),
            arrival: spec.arrival,
            duration_s: 0.0,
            warmup_s: 0.0,
            min_completed: spec.requests_per_cell as u64,
            max_cell_s: 1e9,
            inflight_cap: 256,
            seed: spec.seed,
        })
        .collect();
    let rc = RunConfig {
        schema_version: SCHEMA_VERSION,
        config: cfg.name.clone(),
        launch,
        run_dir: dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        phases: cells
            .iter()
            .map(|c| c.0)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        cells: planned,
        model: "synthetic".into(),
        served_model_name: "synthetic".into(),
        port: 0,
        extra: serde_json::json!({"generator": "connector_tax::synth", "ttft_mult": cfg.ttft_mult, "tpot_mult": cfg.tpot_mult}),
        simulated: true,
        placement,
    };
    crate::fsutil::write_json_atomic(&dir.join("config.json"), &rc)?;
    for (f, body) in [
        (
            "launch.sh",
            "#!/usr/bin/env bash\n# synthetic run: no server was launched\n",
        ),
        ("vllm_stdout.log", "synthetic\n"),
        ("vllm_stderr.log", ""),
        (
            "env.txt",
            "generator: connector_tax::synth\nvllm_version: synthetic\n",
        ),
    ] {
        std::fs::write(dir.join(f), body)?;
    }
    let mut summary = RunSummary {
        schema_version: SCHEMA_VERSION,
        ..Default::default()
    };
    const T0: u64 = 1_000_000_000_000;
    let mut t0 = T0;
    for (phase, cell) in cells {
        let level = level * cell_level(spec, &cfg.name, launch, *phase, cell);
        let mut h = write_cell(spec, cfg, launch, level, *phase, cell, dir, t0, rng)?;
        h.wall_start_unix_ms = wall_ms + (h.t_start_ns - T0) / 1_000_000;
        t0 = h.t_end_ns + 5_000_000_000;
        summary
            .cells
            .insert(CellKey::new(*phase, cell.clone()).to_string(), h);
    }
    crate::fsutil::write_json_atomic(&dir.join("summary.json"), &summary)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn write_cell(
    spec: &SynthSpec,
    cfg: &SynthConfig,
    launch: u32,
    level: f64,
    phase: Phase,
    cell: &Cell,
    dir: &Path,
    t0: u64,
    rng: &mut Xoshiro256PlusPlus,
) -> anyhow::Result<CellHealth> {
    let name = cell.name();
    let n = spec.warmup_requests + spec.requests_per_cell;
    let gap_ns = 1e9 / cell.rate;
    let capacity = match cfg.launch_capacity {
        Some((l, c)) if l == launch => c,
        _ => cfg.capacity_rps,
    };
    let service_ns = 1e9 / capacity;
    let ttft_base =
        spec.base_ttft_ms * (f64::from(cell.input_len) / 4096.0).max(0.05) * cfg.ttft_mult * level;
    let tpot_base = spec.base_tpot_ms * cfg.tpot_mult * level;
    let out = cell.output_len.max(1);
    let n_events = spec.max_events.map_or(out, |m| m.min(out)).max(1);
    let mut w = BufWriter::new(std::fs::File::create(dir.join(file_name(
        FileKind::Requests,
        phase,
        &name,
    )))?);
    let mut prev_start = 0.0f64;
    // First and last send of the stalled requests: the engine steps between run slow too.
    let mut stall_sends: Option<(u64, u64, f64)> = None;
    let mut starts = Vec::with_capacity(n);
    let mut ends = Vec::with_capacity(n);
    let mut events: Vec<Event> = Vec::with_capacity(n_events as usize);
    let mut acc = 0.0f64;
    let arrivals: Vec<f64> = (0..n)
        .map(|i| match spec.arrival {
            Arrival::Fixed => t0 as f64 + i as f64 * gap_ns,
            Arrival::Poisson => {
                let t = t0 as f64 + acc;
                acc += -gap_ns * (1.0 - rng.random::<f64>()).ln();
                t
            }
        })
        .collect();
    let rho = spec.ar_rho.clamp(0.0, 0.999);
    let innovation = (1.0 - rho * rho).sqrt();
    // Stationary start; with rho = 0 no draw is spent, so independent noise keeps the stream
    // (and every fixture built on it) exactly as before the AR option existed.
    let (mut ar_ttft, mut ar_tpot) = if rho > 0.0 {
        (normal(rng), normal(rng))
    } else {
        (0.0, 0.0)
    };
    for (i, &arrival) in arrivals.iter().enumerate() {
        ar_ttft = rho * ar_ttft + innovation * normal(rng);
        ar_tpot = rho * ar_tpot + innovation * normal(rng);
        let start = if i == 0 {
            arrival
        } else {
            arrival.max(prev_start + service_ns)
        };
        prev_start = start;
        let stalled = cfg.stall.filter(|st| {
            st.launch == launch
                && phase == Phase::A
                && (st.first..st.first + st.len).contains(&i.wrapping_sub(spec.warmup_requests))
        });
        let ttft_ns = (start - arrival)
            + ttft_base * 1e6 * (spec.sigma * ar_ttft).exp() * stalled.map_or(1.0, |st| st.factor);
        let tpot_ns = tpot_base * 1e6 * (0.5 * spec.sigma * ar_tpot).exp();
        let t_send = arrival as u64 + 20_000;
        if let Some(st) = stalled {
            let (a, _, _) = stall_sends.unwrap_or((t_send, t_send, st.factor));
            stall_sends = Some((a, t_send, st.factor));
        }
        let first = t_send + ttft_ns as u64;
        events.clear();
        let per_event = out.div_ceil(n_events);
        let mut tokens_left = out;
        let mut t = first;
        while tokens_left > 0 {
            let k = per_event.min(tokens_left);
            events.push(Event(t, k));
            tokens_left -= k;
            t += (tpot_ns * f64::from(k)) as u64;
        }
        let last = events.last().map_or(first, |e| e.0);
        starts.push(start as u64);
        ends.push(last);
        let rec = RequestRecord {
            request_id: ctax_schema::request_id(&cfg.name, launch, phase, &name, i as u64),
            config: cfg.name.clone(),
            launch,
            phase,
            cell: name.clone(),
            rate: cell.rate,
            input_len: cell.input_len,
            output_len: cell.output_len,
            seq: i as u64,
            t_intended_ns: arrival as u64,
            t_send_ns: Some(t_send),
            t_first_token_ns: Some(first),
            t_last_token_ns: Some(last),
            t_end_ns: Some(last + 100_000),
            events: events.clone(),
            prompt_tokens: Some(cell.input_len),
            completion_tokens: Some(out),
            inflight_at_send: 0,
            warmup: i < spec.warmup_requests,
            status: Status::Ok,
            http_status: Some(200),
            error: None,
        };
        serde_json::to_writer(&mut w, &rec)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    let t_start = t0;
    let t_warm = arrivals.get(spec.warmup_requests).map_or(t0, |&a| a as u64);
    let t_last = arrivals.last().map_or(t0, |&a| a as u64);
    let t_end = ends.iter().copied().max().unwrap_or(t_last) + 1_000_000;
    if spec.with_metrics {
        let mut w = BufWriter::new(std::fs::File::create(dir.join(file_name(
            FileKind::Metrics,
            phase,
            &name,
        )))?);
        let mut t = t_start;
        while t <= t_end {
            let arrived = arrivals.iter().filter(|&&a| a as u64 <= t).count();
            let started = starts.iter().filter(|&&s| s <= t).count();
            let running = starts
                .iter()
                .zip(&ends)
                .filter(|&(&s, &e)| s <= t && e > t)
                .count();
            let mut m = MetricsSample {
                t_ns: t,
                scrape_ms: 1.0,
                ok: true,
                error: None,
                gauges: Default::default(),
                counters: Default::default(),
                histograms: Default::default(),
            };
            m.gauges.insert(
                "vllm:num_requests_waiting{engine=\"0\"}".into(),
                arrived.saturating_sub(started) as f64,
            );
            m.gauges.insert(
                "vllm:num_requests_running{engine=\"0\"}".into(),
                running as f64,
            );
            serde_json::to_writer(&mut w, &m)?;
            w.write_all(b"\n")?;
            t += 1_000_000_000;
        }
        w.flush()?;
    }
    if spec.with_steps {
        let mut w = BufWriter::new(std::fs::File::create(dir.join(file_name(
            FileKind::EngineStep,
            phase,
            &name,
        )))?);
        let mut t = t_start;
        let mut id = 0u64;
        while t <= t_end {
            let base = 2_000.0 * (0.2 * normal(rng)).exp();
            let cb = cfg.callback_us.map(|c| c * (0.1 * normal(rng)).exp());
            let slowed = stall_sends
                .filter(|(a, b, _)| (*a..=*b).contains(&t))
                .map_or(1.0, |(_, _, f)| f);
            let dur = (base + cfg.step_extra_us) * slowed;
            let rec = StepRecord {
                t_ns: t,
                step_id: id,
                pid: 1,
                step_duration_us: Some(dur),
                schedule_us: Some(dur * 0.1),
                build_meta_us: cb.map(|c| c * 0.5),
                get_finished_us: cb.map(|c| c * 0.3),
                start_load_kv_us: cb.map(|c| c * 0.2),
                num_running: Some(1),
                num_waiting: Some(0),
                prefill_tokens: Some(0),
                decode_tokens: Some(1),
            };
            serde_json::to_writer(&mut w, &rec)?;
            w.write_all(b"\n")?;
            t += (dur * 1000.0) as u64 + (spec.step_gap_ms * 1e6) as u64;
            id += 1;
        }
        w.flush()?;
    }
    Ok(CellHealth {
        phase,
        cell: name,
        rate: cell.rate,
        input_len: cell.input_len,
        output_len: cell.output_len,
        arrival: spec.arrival,
        seed: spec.seed,
        t_start_ns: t_start,
        t_warmup_end_ns: t_warm,
        t_last_send_ns: t_last,
        t_end_ns: t_end,
        wall_start_unix_ms: 0,
        scheduled: n as u64,
        sent: n as u64,
        dropped: 0,
        ok: n as u64,
        errors: 0,
        cancelled: 0,
        completed_measured: spec.requests_per_cell as u64,
        complete: true,
        incomplete_reason: None,
        lateness_us_p50: 20.0,
        lateness_us_p99: 40.0,
        lateness_us_max: 60.0,
        client_cpu_pct: 5.0,
        scrapes: 0,
        scrape_failures: 0,
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SynthSpec {
        SynthSpec {
            phase_a_rates: vec![1.0],
            requests_per_cell: 5,
            warmup_requests: 1,
            ..Default::default()
        }
    }

    #[test]
    fn refuses_a_non_empty_root_and_touches_nothing_in_it() {
        let d = tempfile::tempdir().unwrap();
        // A real results root: its pre-flight status and one real launch.
        std::fs::create_dir_all(d.path().join("preflight")).unwrap();
        let status = d.path().join("preflight/preflight_status.json");
        std::fs::write(&status, "{\"real\": true}\n").unwrap();
        std::fs::create_dir_all(d.path().join("20261129-163730_plain_l0")).unwrap();
        let e = generate(&small(), d.path()).unwrap_err().to_string();
        assert!(e.contains("not empty (2 entries"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&status).unwrap(),
            "{\"real\": true}\n"
        );
        let n = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(n, 2, "nothing was added");
        // A file where the root should be is refused too.
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        assert!(generate(&small(), &f).is_err());
    }

    #[test]
    fn writes_into_a_new_or_empty_directory() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(generate(&small(), d.path()).unwrap().len(), 1);
        let fresh = d.path().join("new/root");
        assert_eq!(generate(&small(), &fresh).unwrap().len(), 1);
        assert!(fresh.join("preflight/preflight_status.json").exists());
    }
}
