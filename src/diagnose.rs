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
//! Pure reading and printing: nothing here feeds a verdict.

use std::fmt::Write as _;

use ctax_schema::{Phase, RequestRecord};

use crate::analysis::samples::is_measured;
use crate::ingest::Dataset;
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
