//! Per-cell samples extracted from the ingested runs: the numbers every statistic is computed
//! from, grouped by launch (each launch's values in send order) so that CIs can resample
//! launches and then requests.

use std::collections::{BTreeMap, BTreeSet};

use ctax_schema::{Cell, CellHealth, Phase, RequestRecord, Status};

use rayon::prelude::*;

use super::model::{CellKey, Counts};
use crate::ingest::{Dataset, RunCell};

/// A request counts in the statistics when it ended ok and was not sent during warm-up.
pub(crate) fn is_measured(r: &RequestRecord) -> bool {
    r.status == Status::Ok && !r.warmup
}

/// Measurement window of one launch of a cell: [start, end) ns. It spans the send slots of the
/// measured requests: from the end of warm-up to one inter-arrival gap after the last scheduled
/// send, so n sends at rate r give a window of exactly n/r seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    pub(crate) fn seconds(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }
    fn contains(&self, t: u64) -> bool {
        t >= self.start_ns && t < self.end_ns
    }
}

/// One launch's samples of one cell.
#[derive(Debug, Clone, Default)]
pub(crate) struct LaunchSamples {
    pub launch: u32,
    pub run_dir: String,
    pub counts: Counts,
    /// The collector said the cell is complete and the evidence agrees ([`RunCell::account`]).
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    /// Why the raw data itself is not whole (empty or cut-short file, no collector summary,
    /// records missing or rejected): the saturation criteria are not evaluated on such a cell.
    pub data_incomplete: Vec<String>,
    pub ttft_ms: Vec<f64>,
    /// The send time (ns, the collector's clock) of each value of `ttft_ms`, same order: where
    /// in the window a TTFT was measured ([`super::episodes`]).
    pub ttft_send_ns: Vec<u64>,
    pub tpot_ms: Vec<f64>,
    pub e2e_ms: Vec<f64>,
    /// Pooled gaps between consecutive token-carrying events (ms).
    pub itl_ms: Vec<f64>,
    pub window: Option<Window>,
    /// Requests (warm-up included) that ended ok inside the completion window: the
    /// measurement window shifted by the median end-to-end latency of the measured requests.
    pub completions_in_window: u64,
    /// The shift (ns) = median(t_last_token − t_intended) over measured requests.
    pub completion_shift_ns: u64,
    /// Requests sent inside the window.
    pub sends_in_window: u64,
    /// Requests (any outcome) whose intended send time lies inside the window: what the
    /// schedule actually offered (for Poisson arrivals this differs from rate × window).
    pub scheduled_in_window: u64,
    /// Of those, the ones that ended ok.
    pub ok_of_scheduled: u64,
    /// The window's own requests' completion pace relative to their arrivals: `1 / slope` of
    /// completion time on intended send time over the ok ones. ≈ 1 when the server keeps up
    /// (whatever the arrival process), capacity/offered when the queue grows.
    pub completion_pace: Option<f64>,
    /// `vllm:num_requests_waiting` / `_running` totals per scrape inside the window.
    pub waiting: Vec<f64>,
    pub running: Vec<f64>,
    /// Engine steps inside the window (µs); `connector_total_us` only where observed.
    pub step_duration_us: Vec<f64>,
    /// When each value of `step_duration_us` started (`t_ns`, the collector's clock), same
    /// order: where in the window a step ran ([`super::episodes`]).
    pub step_t_ns: Vec<u64>,
    pub schedule_us: Vec<f64>,
    pub build_meta_us: Vec<f64>,
    pub get_finished_us: Vec<f64>,
    pub start_load_kv_us: Vec<f64>,
    pub connector_total_us: Vec<f64>,
    pub health: Option<CellHealth>,
    /// Step durations are only meaningful with a step log.
    pub n_steps: u64,
    /// Where this launch's cell ran (GPU slot, GPU index/UUID); `None` before slots existed.
    pub placement: Option<ctax_schema::Placement>,
    /// The machine it ran on ([`crate::ingest::machine::machine_key`]): taxes compare launches
    /// on the same machine.
    pub machine: String,
}

/// All launches of one cell.
#[derive(Debug, Clone)]
pub(crate) struct CellSamples {
    pub key: CellKey,
    pub shape: Cell,
    pub launches: Vec<LaunchSamples>,
}

impl LaunchSamples {
    /// Its raw data in the cell is whole (`data_incomplete` is empty): only such a launch-cell
    /// is compared with another (DESIGN.md §4.1).
    pub(crate) fn whole(&self) -> bool {
        self.data_incomplete.is_empty()
    }
}

impl CellSamples {
    /// The launches a pooled statistic reads: the whole ones, or every launch when none is
    /// whole (then the pooled row is incomplete and says so).
    pub(crate) fn pooled_launches(&self) -> Vec<&LaunchSamples> {
        let whole: Vec<&LaunchSamples> = self.launches.iter().filter(|l| l.whole()).collect();
        if whole.is_empty() {
            self.launches.iter().collect()
        } else {
            whole
        }
    }

    /// Per-launch slices of one metric of the whole launches, for a comparison's bootstrap.
    pub(crate) fn groups(&self, f: impl Fn(&LaunchSamples) -> &Vec<f64>) -> Vec<&[f64]> {
        self.launches
            .iter()
            .filter(|l| l.whole())
            .map(|l| f(l).as_slice())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// Groups every run's cells by (config, phase, cell) and extracts the samples.
/// `with_itl = false` skips the (large) pooled inter-token gaps. The launch-cells in
/// `leave_out` are dropped (a cell left with no launch is dropped whole).
pub(crate) fn extract(
    ds: &Dataset,
    with_itl: bool,
    leave_out: &BTreeSet<super::LaunchCell>,
) -> BTreeMap<CellKey, CellSamples> {
    let all: Vec<&crate::ingest::Run> = ds.runs.iter().collect();
    let mut out = extract_runs(&all, with_itl);
    if !leave_out.is_empty() {
        for cs in out.values_mut() {
            cs.launches.retain(|l| {
                !leave_out.contains(&super::LaunchCell {
                    run_dir: l.run_dir.clone(),
                    phase: cs.key.phase,
                    cell: cs.key.cell.clone(),
                })
            });
        }
        out.retain(|_, cs| !cs.launches.is_empty());
    }
    out
}

/// [`extract`] over any runs (e.g. the dataset's calibration launches).
pub(crate) fn extract_runs(
    runs: &[&crate::ingest::Run],
    with_itl: bool,
) -> BTreeMap<CellKey, CellSamples> {
    let jobs: Vec<(&crate::ingest::Run, &Phase, &String, &RunCell)> = runs
        .iter()
        .copied()
        .flat_map(|run| run.cells.iter().map(move |((p, c), rc)| (run, p, c, rc)))
        .filter(|(_, p, _, rc)| **p != Phase::Preflight && rc.has_requests)
        .collect();
    let done: Vec<(CellKey, Cell, LaunchSamples)> = jobs
        .par_iter()
        .filter_map(|(run, phase, cell, rc)| {
            let shape = Cell::parse(cell)?;
            let key = CellKey {
                config: run.config.clone(),
                phase: **phase,
                cell: (*cell).clone(),
            };
            let mut ls = launch_samples(run.launch, &run.dir_name, rc, &shape, with_itl);
            ls.machine = crate::ingest::machine::machine_key(rc.placement.as_ref(), &run.env);
            Some((key, shape, ls))
        })
        .collect();
    let mut out: BTreeMap<CellKey, CellSamples> = BTreeMap::new();
    for (key, shape, ls) in done {
        out.entry(key.clone())
            .or_insert_with(|| CellSamples {
                key,
                shape,
                launches: Vec::new(),
            })
            .launches
            .push(ls);
    }
    for cs in out.values_mut() {
        cs.launches.sort_by_key(|l| (l.launch, l.run_dir.clone()));
    }
    out
}

/// `rc.requests` are the kept records only (ingest's accounting), so every statistic below —
/// point estimates and bootstrap samples alike — reads the same records.
fn launch_samples(
    launch: u32,
    run_dir: &str,
    rc: &RunCell,
    shape: &Cell,
    with_itl: bool,
) -> LaunchSamples {
    let mut reqs: Vec<&RequestRecord> = rc.requests.iter().collect();
    reqs.sort_by_key(|r| (r.seq, r.t_intended_ns));
    let mut s = LaunchSamples {
        launch,
        run_dir: run_dir.to_owned(),
        health: rc.health.clone(),
        placement: rc.placement.clone(),
        data_incomplete: rc.account.incomplete.clone(),
        ..Default::default()
    };
    let c = &mut s.counts;
    c.rejected = rc.account.dropped();
    for r in &reqs {
        c.scheduled += 1;
        if r.warmup {
            c.warmup += 1;
        }
        match r.status {
            Status::Ok if !r.warmup => c.measured_ok += 1,
            Status::Ok => {}
            Status::Dropped => c.dropped += 1,
            Status::Cancelled => c.cancelled += 1,
            Status::HttpError | Status::ConnectError | Status::Timeout | Status::StreamError => {
                c.errors += 1
            }
        }
    }
    for r in reqs.iter().filter(|r| is_measured(r)) {
        if let (Some(v), Some(t)) = (r.ttft_ms(), r.t_send_ns) {
            s.ttft_ms.push(v);
            s.ttft_send_ns.push(t);
        }
        if let Some(v) = r.tpot_ms() {
            s.tpot_ms.push(v);
        }
        if let Some(v) = r.e2e_ms() {
            s.e2e_ms.push(v);
        }
        if with_itl {
            s.itl_ms.extend(
                r.events
                    .windows(2)
                    .map(|w| w[1].t_ns().saturating_sub(w[0].t_ns()) as f64 / 1e6),
            );
        }
    }
    // The cell's rate from its (typed) name: a record's `rate` field never drives the window.
    s.window = window(rc, &reqs, shape.rate);
    let mut reasons: Vec<String> = Vec::new();
    let mut complete = s.data_incomplete.is_empty();
    if let Some(h) = &rc.health {
        complete &= h.complete;
        reasons.extend(h.incomplete_reason.clone());
    }
    reasons.extend(s.data_incomplete.iter().cloned());
    s.complete = complete;
    s.incomplete_reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    if let Some(w) = s.window {
        let e2e: Vec<f64> = reqs
            .iter()
            .filter(|r| is_measured(r))
            .filter_map(|r| {
                r.t_last_token_ns
                    .map(|t| t.saturating_sub(r.t_intended_ns) as f64)
            })
            .collect();
        s.completion_shift_ns = crate::stats::quantile(&e2e, 0.5).map_or(0, |d| d as u64);
        let shifted = Window {
            start_ns: w.start_ns.saturating_add(s.completion_shift_ns),
            end_ns: w.end_ns.saturating_add(s.completion_shift_ns),
        };
        s.completions_in_window = reqs
            .iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(|r| r.t_last_token_ns.or(r.t_end_ns))
            .filter(|t| shifted.contains(*t))
            .count() as u64;
        s.sends_in_window = reqs
            .iter()
            .filter_map(|r| r.t_send_ns)
            .filter(|t| w.contains(*t))
            .count() as u64;
        let own: Vec<&&RequestRecord> = reqs
            .iter()
            .filter(|r| w.contains(r.t_intended_ns))
            .collect();
        s.scheduled_in_window = own.len() as u64;
        let done: Vec<(f64, f64)> = own
            .iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(|r| {
                r.t_last_token_ns
                    .or(r.t_end_ns)
                    .map(|t| (r.t_intended_ns as f64, t as f64))
            })
            .collect();
        s.ok_of_scheduled = done.len() as u64;
        s.completion_pace = completion_pace(&done);
        for m in rc.metrics.iter().filter(|m| m.ok && w.contains(m.t_ns)) {
            if let Some(v) = m.gauge_total("vllm:num_requests_waiting") {
                s.waiting.push(v);
            }
            if let Some(v) = m.gauge_total("vllm:num_requests_running") {
                s.running.push(v);
            }
        }
    }
    let in_window = |t: u64| s.window.is_none_or(|w| w.contains(t));
    for st in rc.steps.iter().filter(|st| in_window(st.t_ns)) {
        s.n_steps += 1;
        if st.step_duration_us.is_some_and(f64::is_finite) {
            s.step_t_ns.push(st.t_ns);
        }
        let pairs = [
            (&mut s.step_duration_us, st.step_duration_us),
            (&mut s.schedule_us, st.schedule_us),
            (&mut s.build_meta_us, st.build_meta_us),
            (&mut s.get_finished_us, st.get_finished_us),
            (&mut s.start_load_kv_us, st.start_load_kv_us),
            (&mut s.connector_total_us, st.connector_total_us()),
        ];
        for (dst, v) in pairs {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                dst.push(v);
            }
        }
    }
    s
}

/// The measurement window: from the collector's summary when present, else from the
/// schedule (first non-warm-up intended send → one gap after the last intended send).
/// `1 / slope` of the least-squares line of completion time on intended send time over the
/// window's ok requests: 1 when completions keep the arrivals' pace, capacity/offered when the
/// queue grows. Every request weighs in, so no single latency at either end can move it (sd ≈
/// latency sd ÷ (arrival-time sd · √n): ~2% for 100 requests over 6 s with 0.3 s latency jitter).
fn completion_pace(done: &[(f64, f64)]) -> Option<f64> {
    if done.len() < 10 {
        return None;
    }
    let n = done.len() as f64;
    let ma = done.iter().map(|d| d.0).sum::<f64>() / n;
    let mc = done.iter().map(|d| d.1).sum::<f64>() / n;
    let sxx: f64 = done.iter().map(|d| (d.0 - ma).powi(2)).sum();
    let sxy: f64 = done.iter().map(|d| (d.0 - ma) * (d.1 - mc)).sum();
    (sxx > 0.0 && sxy > 0.0).then(|| sxx / sxy)
}

fn window(rc: &RunCell, reqs: &[&RequestRecord], rate: f64) -> Option<Window> {
    let gap = (1e9 / rate) as u64;
    if let Some(h) = &rc.health
        && h.t_last_send_ns > h.t_warmup_end_ns
    {
        return Some(Window {
            start_ns: h.t_warmup_end_ns,
            end_ns: h.t_last_send_ns.saturating_add(gap),
        });
    }
    let start = reqs
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| r.t_intended_ns)
        .min()?;
    let end = reqs.iter().map(|r| r.t_intended_ns).max()?;
    (end > start).then_some(Window {
        start_ns: start,
        end_ns: end.saturating_add(gap),
    })
}
