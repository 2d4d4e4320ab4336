//! `ctax diagnose ROOT`: the evidence behind the statistical defaults (DESIGN.md §4.3).
//!
//! Per run cell (one launch of one config at one rate and shape), from the measured requests
//! in send order:
//! - the autocorrelation of log TTFT and log TPOT at lags 1, 2, 5 and 10, and the
//!   Politis–White block length ([`crate::stats::block_length`]): how far from iid the
//!   request-level data are, hence which bootstrap the per-cell CIs need;
//! - the within-cell drift: p50 and p90 of the second half of the cell over the first half
//!   (− 1), and the cell's position in its launch (1 = first measured cell after the server
//!   became ready) with the seconds since the launch's first cell started: does the server keep
//!   getting faster while it serves?
//!
//! - where a launch recorded GPU telemetry (`ingest::gpu_telemetry`), the GPU inside each cell's
//!   measurement window (SM clock, power, temperature, utilisation, active clock-event reasons)
//!   beside the engine's step p50 in the same window: was a slow launch's GPU clocked down?
//!
//! Pure reading and printing: nothing here feeds a verdict.

use std::fmt::Write as _;

use ctax_schema::{Phase, RequestRecord};

use crate::analysis::samples::is_measured;
use crate::ingest::Dataset;
use crate::ingest::gpu_telemetry::{self, Window};
use crate::stats::block_length::politis_white;
use crate::stats::quantile;

/// Diagnostics of one run cell.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellDiagnostics {
    pub run: String,
    pub config: String,
    pub launch: u32,
    pub phase: Phase,
    pub cell: String,
    /// 1-based position among the launch's cells by start time.
    pub position: usize,
    /// Seconds from the start of the launch's first cell to the start of this one.
    pub start_s: f64,
    pub n: usize,
    pub ttft: SeriesDiagnostics,
    pub tpot: SeriesDiagnostics,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SeriesDiagnostics {
    /// Autocorrelation of the log values at lags 1, 2, 5, 10.
    pub acf: [Option<f64>; 4],
    pub block_len: usize,
    /// p50 and p90 of the second half over the first half, − 1.
    pub half_drift_p50: Option<f64>,
    pub half_drift_p90: Option<f64>,
}

/// Sample autocorrelation at `lag` (numpy-style: Σ e_t e_{t+k} / Σ e_t²).
fn acf(x: &[f64], lag: usize) -> Option<f64> {
    if x.len() <= lag + 1 {
        return None;
    }
    let m = x.iter().sum::<f64>() / x.len() as f64;
    let den: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    if den <= 0.0 {
        return None;
    }
    let num: f64 = x[..x.len() - lag]
        .iter()
        .zip(&x[lag..])
        .map(|(a, b)| (a - m) * (b - m))
        .sum();
    Some(num / den)
}

fn series(x: &[f64]) -> SeriesDiagnostics {
    let logs: Vec<f64> = x.iter().filter(|v| **v > 0.0).map(|v| v.ln()).collect();
    let h = x.len() / 2;
    let drift = |q: f64| -> Option<f64> {
        let a = quantile(&x[..h], q)?;
        let b = quantile(&x[h..], q)?;
        (a > 0.0).then(|| b / a - 1.0)
    };
    SeriesDiagnostics {
        acf: [1, 2, 5, 10].map(|k| acf(&logs, k)),
        block_len: politis_white(&logs),
        half_drift_p50: drift(0.5),
        half_drift_p90: drift(0.9),
    }
}

/// Every run cell of the dataset with requests, in (run, start time) order.
pub fn diagnose(ds: &Dataset) -> Vec<CellDiagnostics> {
    let mut out = Vec::new();
    for run in &ds.runs {
        let mut cells: Vec<(u64, &Phase, &String, Vec<&RequestRecord>)> = run
            .cells
            .iter()
            .filter(|((p, _), rc)| *p != Phase::Preflight && rc.has_requests)
            .map(|((p, c), rc)| {
                let start = rc
                    .health
                    .as_ref()
                    .map(|h| h.t_start_ns)
                    .or_else(|| rc.requests.iter().map(|r| r.t_intended_ns).min())
                    .unwrap_or(0);
                let mut reqs: Vec<&RequestRecord> =
                    rc.requests.iter().filter(|r| is_measured(r)).collect();
                reqs.sort_by_key(|r| (r.seq, r.t_intended_ns));
                (start, p, c, reqs)
            })
            .collect();
        cells.sort_by_key(|(start, ..)| *start);
        let t0 = cells.first().map_or(0, |c| c.0);
        for (i, (start, phase, cell, reqs)) in cells.into_iter().enumerate() {
            let ttft: Vec<f64> = reqs.iter().filter_map(|r| r.ttft_ms()).collect();
            let tpot: Vec<f64> = reqs.iter().filter_map(|r| r.tpot_ms()).collect();
            out.push(CellDiagnostics {
                run: run.dir_name.clone(),
                config: run.config.clone(),
                launch: run.launch,
                phase: *phase,
                cell: cell.clone(),
                position: i + 1,
                start_s: start.saturating_sub(t0) as f64 / 1e9,
                n: reqs.len(),
                ttft: series(&ttft),
                tpot: series(&tpot),
            });
        }
    }
    out
}

/// Markdown table of [`diagnose`].
pub fn markdown(rows: &[CellDiagnostics]) -> String {
    let f = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let pct = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{:+.1}%", v * 100.0));
    let mut s = String::from(
        "| run | cell | pos | start s | n | TTFT ρ1 ρ2 ρ5 ρ10 | TTFT b | TTFT drift p50 / p90 | TPOT ρ1 ρ2 ρ5 ρ10 | TPOT b | TPOT drift p50 / p90 |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let acfs = |d: &SeriesDiagnostics| d.acf.map(f).join(" ");
        let _ = writeln!(
            s,
            "| {} | {} {} | {} | {:.0} | {} | {} | {} | {} / {} | {} | {} | {} / {} |",
            r.run,
            r.phase,
            r.cell,
            r.position,
            r.start_s,
            r.n,
            acfs(&r.ttft),
            r.ttft.block_len,
            pct(r.ttft.half_drift_p50),
            pct(r.ttft.half_drift_p90),
            acfs(&r.tpot),
            r.tpot.block_len,
            pct(r.tpot.half_drift_p50),
            pct(r.tpot.half_drift_p90),
        );
    }
    s += "\nρk: autocorrelation of log latency at lag k by send order (measured requests); b: Politis–White block length; drift: second half of the cell over the first half − 1 (numpy-linear percentiles).\n";
    s
}

/// The GPU during one run cell's measurement window (launches with telemetry only).
#[derive(Debug, Clone, serde::Serialize)]
pub struct GpuCell {
    pub run: String,
    pub phase: Phase,
    pub cell: String,
    /// The engine's step-duration p50 over the steps that began inside the window (ms).
    pub step_p50_ms: Option<f64>,
    /// `None`: the telemetry has no sample inside the window.
    pub gpu: Option<Window>,
}

/// Every run cell of the launches that recorded GPU telemetry, in (run, start time) order,
/// and the launches whose telemetry could not be read (`run: why`).
pub fn gpu_cells(ds: &Dataset) -> (Vec<GpuCell>, Vec<String>) {
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for run in &ds.runs {
        let samples = match gpu_telemetry::read_run(&run.path) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                errors.push(format!("{}: {e:#}", run.dir_name));
                continue;
            }
        };
        let mut cells: Vec<_> = run
            .cells
            .iter()
            .filter(|((p, _), _)| *p != Phase::Preflight)
            .filter_map(|((p, c), rc)| rc.health.as_ref().map(|h| (h, p, c, rc)))
            .collect();
        cells.sort_by_key(|(h, ..)| h.t_start_ns);
        for (h, phase, cell, rc) in cells {
            // The window on the wall clock: the cell's wall-clock anchor plus monotonic offsets.
            let at = |t_ns: u64| {
                h.wall_start_unix_ms as i64 + (t_ns as i64 - h.t_start_ns as i64) / 1_000_000
            };
            let steps: Vec<f64> = rc
                .steps
                .iter()
                .filter(|s| (h.t_warmup_end_ns..=h.t_last_send_ns).contains(&s.t_ns))
                .filter_map(|s| s.step_duration_us)
                .collect();
            out.push(GpuCell {
                run: run.dir_name.clone(),
                phase: *phase,
                cell: cell.clone(),
                step_p50_ms: quantile(&steps, 0.5).map(|v| v / 1000.0),
                gpu: gpu_telemetry::window(&samples, at(h.t_warmup_end_ns), at(h.t_last_send_ns)),
            });
        }
    }
    (out, errors)
}

/// Markdown table of [`gpu_cells`]; one line when no launch recorded telemetry.
pub fn gpu_markdown(rows: &[GpuCell], errors: &[String]) -> String {
    let mut s = String::new();
    for e in errors {
        let _ = writeln!(s, "GPU telemetry unreadable: {e}");
    }
    if rows.is_empty() {
        s += "No launch of this root recorded GPU telemetry (gpu_telemetry_*.csv: launches on a GPU since 2026-12-08).\n";
        return s;
    }
    let f0 = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.0}"));
    s += "\n| run | cell | step p50 ms | samples | SM MHz p50 / min (max) | mem MHz p50 | W p50 | °C max | util % p50 | clock events (share of samples) |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        let Some(g) = &r.gpu else {
            let _ = writeln!(
                s,
                "| {} | {} {} | {} | 0 | – | – | – | – | – | no sample in the window |",
                r.run,
                r.phase,
                r.cell,
                r.step_p50_ms.map_or("–".to_owned(), |v| format!("{v:.1}")),
            );
            continue;
        };
        let events = if g.reason_samples == 0 {
            "not read".to_owned()
        } else if g.reasons.is_empty() {
            "none".to_owned()
        } else {
            g.reasons
                .iter()
                .map(|(n, share)| format!("{n} {:.0}%", share * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            s,
            "| {} | {} {} | {} | {} | {} / {} ({}) | {} | {} | {} | {} | {} |",
            r.run,
            r.phase,
            r.cell,
            r.step_p50_ms.map_or("–".to_owned(), |v| format!("{v:.1}")),
            g.samples,
            f0(g.sm_mhz_p50),
            f0(g.sm_mhz_min),
            f0(g.max_sm_mhz),
            f0(g.mem_mhz_p50),
            f0(g.power_w_p50),
            f0(g.temp_c_max),
            f0(g.util_pct_p50),
            events,
        );
    }
    s += "\nGPU columns: nvidia-smi once a second inside the cell's measurement window (end of warm-up to last send); p50s numpy-linear; clock events: NVML's active clock-event (throttle) reasons, with the share of samples each was active in.\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy: x = [1, 2, 3, 4]; e = [−1.5, −0.5, 0.5, 1.5]; Σe² = 5;
    /// lag 1: (0.75 − 0.25 + 0.75) / 5 = 0.25.
    #[test]
    fn acf_by_hand() {
        assert!((acf(&[1.0, 2.0, 3.0, 4.0], 1).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(acf(&[1.0, 1.0, 1.0], 1), None);
        assert_eq!(acf(&[1.0, 2.0], 1), None);
    }

    /// A series that doubles halfway drifts +100% at p50 and p90.
    #[test]
    fn half_drift() {
        let x: Vec<f64> = (0..100).map(|i| if i < 50 { 10.0 } else { 20.0 }).collect();
        let d = series(&x);
        assert!((d.half_drift_p50.unwrap() - 1.0).abs() < 1e-12);
        assert!((d.half_drift_p90.unwrap() - 1.0).abs() < 1e-12);
    }
}
