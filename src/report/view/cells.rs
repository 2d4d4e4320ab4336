//! The Cells section: per config, every pooled cell's statistics, each launch's own row after
//! it when a config ran several launches, and the saturation criteria that fired.

use std::collections::BTreeMap;

use crate::analysis::model::{AnalysisResult, CellStats, Estimate, Quantiles};
use crate::analysis::saturation::{THROUGHPUT_RATIO_MIN, TTFT_GROWTH_MAX, WAITING_P50_MAX};
use crate::report::fmt;

/// The saturation criteria's thresholds as the Cells legend prints them, taken from the
/// analysis's definitions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SaturationRules {
    /// Criterion 1: ok share × completion pace below this (`95%`).
    pub throughput: String,
    /// Criterion 2: waiting p50 above this (`1`).
    pub waiting: String,
    /// Criterion 3: TTFT p90 growth above this factor (`1.5`).
    pub growth: String,
}

impl SaturationRules {
    pub(super) fn new() -> SaturationRules {
        SaturationRules {
            throughput: fmt::whole_pct(THROUGHPUT_RATIO_MIN),
            waiting: format!("{WAITING_P50_MAX}"),
            growth: format!("{TTFT_GROWTH_MAX}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellGroup {
    pub config: String,
    pub anchor: String,
    pub rows: Vec<CellRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellRow {
    pub phase: String,
    pub rate: String,
    pub shape: String,
    pub n: String,
    pub ttft_p50: String,
    pub ttft_p90: String,
    pub tpot_p50: String,
    pub tpot_p90: String,
    pub e2e_p90: String,
    pub throughput: String,
    pub waiting: String,
    pub saturation: String,
    /// Send lateness p99 (µs).
    pub lateness: String,
    /// Problems only: incomplete, errors, dropped.
    pub health: String,
    /// True when the cell is incomplete or had errors (highlighted).
    pub flagged: bool,
    /// Where the launches ran: `GPU 1 (3f2a9c1e)` (nvidia-smi index and the UUID's first 8 hex
    /// digits), or `slot 1, device 1` without nvidia-smi; distinct values joined.
    pub gpu: String,
}

fn q(qs: &Quantiles, which: u8, unit: &str) -> String {
    let e = match which {
        50 => qs.p50.as_ref(),
        90 => qs.p90.as_ref(),
        _ => qs.p99.as_ref(),
    };
    fmt::opt_estimate(e, unit)
}

/// A point estimate without its CI (secondary columns).
fn point(e: Option<&Estimate>) -> String {
    e.map_or_else(|| fmt::NA.to_owned(), |e| fmt::num(e.est))
}

fn cell_row(c: &CellStats) -> CellRow {
    let sat = match &c.saturation {
        None => String::new(),
        Some(s) => {
            let mut t = s.codes();
            if t.is_empty() {
                t.push('-');
            }
            if s.saturated {
                t.push_str(" *");
            }
            t
        }
    };
    let mut health = Vec::new();
    if !c.complete {
        health.push(if c.incomplete_reasons.is_empty() {
            "incomplete".to_owned()
        } else {
            format!("incomplete: {}", c.incomplete_reasons.join("; "))
        });
    }
    if !c.not_whole.is_empty() {
        health.push(format!(
            "left out, raw data not whole: {}",
            c.not_whole.join("; ")
        ));
    }
    if c.counts.errors > 0 {
        health.push(format!("{} errors", c.counts.errors));
    }
    if c.counts.dropped > 0 {
        health.push(format!("{} dropped", c.counts.dropped));
    }
    let flagged = !c.complete || c.counts.errors > 0 || !c.not_whole.is_empty();
    let throughput = match c.effective_rps {
        Some(e) if c.offered_rps > 0.0 => {
            format!("{} ({})", fmt::num(e), fmt::share(e / c.offered_rps))
        }
        Some(e) => fmt::num(e),
        None => fmt::NA.to_owned(),
    };
    CellRow {
        phase: c.key.phase.label().to_owned(),
        rate: fmt::rate(c.rate),
        shape: format!("{}/{}", c.input_len, c.output_len),
        n: format!("{} / {}", c.counts.measured_ok, c.counts.scheduled),
        ttft_p50: point(c.ttft_ms.p50.as_ref()),
        ttft_p90: q(&c.ttft_ms, 90, ""),
        tpot_p50: point(c.tpot_ms.p50.as_ref()),
        tpot_p90: q(&c.tpot_ms, 90, ""),
        e2e_p90: point(c.e2e_ms.p90.as_ref()),
        lateness: fmt::opt(c.lateness_us_p99, ""),
        throughput,
        waiting: c
            .waiting_p50
            .map_or_else(|| fmt::NA.to_owned(), |w| fmt::fixed(w, 1)),
        saturation: sat,
        health: health.join("; "),
        flagged,
        gpu: {
            let mut labels: Vec<String> = c.gpus.iter().map(ToString::to_string).collect();
            labels.sort();
            labels.dedup();
            labels.join(", ")
        },
    }
}

pub(super) fn cell_groups(r: &AnalysisResult) -> Vec<CellGroup> {
    let mut by: BTreeMap<(usize, String), Vec<&CellStats>> = BTreeMap::new();
    for c in r.summary.cells.iter().filter(|c| c.launch.is_none()) {
        by.entry(crate::report::config_rank(&c.key.config))
            .or_default()
            .push(c);
    }
    by.into_iter()
        .enumerate()
        .map(|(i, ((_, config), mut cells))| {
            cells.sort_by(|a, b| {
                (a.key.phase, a.input_len, a.output_len)
                    .cmp(&(b.key.phase, b.input_len, b.output_len))
                    .then(a.rate.total_cmp(&b.rate))
            });
            // With several launches, each launch's own row follows its pooled row, so the
            // launch-to-launch variation is visible next to the pooled CI (counting the
            // launches the pooled row left out, whose data is not whole: their rows show why).
            let mut rows = Vec::new();
            for c in cells {
                rows.push(cell_row(c));
                if c.launches.len() + c.not_whole.len() > 1 {
                    for l in r.summary.per_launch.iter().filter(|p| p.key == c.key) {
                        let mut row = cell_row(l);
                        row.phase =
                            format!("{} l{}", l.key.phase.label(), l.launch.unwrap_or_default());
                        rows.push(row);
                    }
                }
            }
            CellGroup {
                anchor: format!("cells-{i}"),
                config,
                rows,
            }
        })
        .collect()
}

#[cfg(test)]
mod gpu_label_tests {
    use crate::analysis::model::LaunchGpu;

    #[test]
    fn gpu_labels() {
        let g = |gpu_index, gpu_uuid: Option<&str>, device: Option<&str>| LaunchGpu {
            launch: 0,
            slot: 1,
            device: device.map(str::to_owned),
            gpu_index,
            gpu_uuid: gpu_uuid.map(str::to_owned),
        };
        assert_eq!(
            g(
                Some(1),
                Some("GPU-3f2a9c1e-77aa-4b1c-9d00-0123456789ab"),
                Some("1")
            )
            .to_string(),
            "GPU 1 (3f2a9c1e)"
        );
        assert_eq!(g(Some(0), None, None).to_string(), "GPU 0");
        assert_eq!(g(None, None, Some("1")).to_string(), "slot 1, device 1");
        assert_eq!(g(None, None, None).to_string(), "slot 1");
    }
}
