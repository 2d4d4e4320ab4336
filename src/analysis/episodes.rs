//! Slow episodes inside a launch's measured window: a stretch of consecutive requests (in send
//! order) whose TTFT is far above the launch's own median in that cell, long enough to set the
//! launch's TTFT p90.
//!
//! A p90 over ~85 requests (2 req/s for the measured window) is set by its top 9: one stretch of
//! ten seconds in which the server slows (an LMCache store falling from 2.6 to 0.9 GB/s, seen on
//! H200: DESIGN.md §8, twenty-third stretch) moves a launch's p90 by more than the taxes the
//! report reads, and a tax that pools few launches carries it. The report names each such
//! launch with its p90 without the episode; nothing here changes a statistic or a verdict.
//!
//! The rule ([`find_in_launch`], pure): a request is slow when its TTFT exceeds
//! [`SLOW_FACTOR`] × the launch's median TTFT in the cell; an episode is a run of slow requests in
//! send order in which at most [`MAX_GAP`] other requests separate two slow ones, with at least
//! [`MIN_SLOW`] slow requests. A launch's episodes are named when its TTFT p90 (linear) is at
//! least [`MIN_P90_SHIFT`] above the p90 of its requests outside every episode, and those are at
//! least half of its requests (a launch slow throughout has no episode: it is slow). Phase A
//! cells found saturated are not read: their TTFT climbs with the queue, which is not an
//! episode. Phase B and B' cells have no saturation verdict of their own (they run at the
//! reference rates Phase A found below saturation) and are read.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use ctax_schema::Phase;
use serde::{Deserialize, Serialize};

use super::model::{CellKey, CellStats};
use super::samples::CellSamples;
use crate::stats::quantile;

/// A request is slow when its TTFT exceeds this many times the launch's median in the cell.
pub const SLOW_FACTOR: f64 = 2.0;
/// At most this many other requests between two slow ones of one episode.
pub const MAX_GAP: usize = 2;
/// An episode has at least this many slow requests.
pub const MIN_SLOW: usize = 3;
/// Episodes are named when they raise the launch's TTFT p90 by at least this fraction.
pub const MIN_P90_SHIFT: f64 = 0.10;
/// Launches with fewer measured TTFTs in the cell are not read.
pub const MIN_REQUESTS: usize = 20;

/// One episode: a stretch of a launch's measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Send times of its first and last request, seconds from the start of the measured window.
    pub from_s: f64,
    pub to_s: f64,
    /// Requests it spans, and of those the slow ones.
    pub requests: usize,
    pub slow: usize,
    /// Median TTFT of the requests it spans (ms).
    pub ttft_median_ms: f64,
    /// The server's own evidence from its first send to its last send plus its median TTFT
    /// ([`Span::range`]).
    #[serde(flatten)]
    pub evidence: Evidence,
}

impl Span {
    /// The stretch on a clock on which the measured window starts at `start` and a second is
    /// `per_s` units: from its first send to its last send plus its median TTFT (when the
    /// prefills of its requests ran).
    fn range(&self, start: f64, per_s: f64) -> RangeInclusive<f64> {
        start + self.from_s * per_s
            ..=start + self.to_s * per_s + self.ttft_median_ms * (per_s / 1e3)
    }
}

/// The server's own evidence over a stretch, or over the rest of its window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Median throughput (GB/s) of the LMCache stores the server logged there, when at least
    /// [`MIN_STORES`] were ([`attach_stores`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_gbps: Option<f64>,
    /// Stores counted there; `None` when the launch's stores could not be placed on the
    /// collector's clock (no store lines, no UTC offset, no window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stores: Option<usize>,
    /// Time-weighted median duration (ms) of the engine steps that started there, when at least
    /// [`MIN_STEPS`] did ([`step_evidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_ms: Option<f64>,
    /// Steps counted there; `None` without step timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
}

impl Evidence {
    /// `engine steps 1117 ms (59 steps)`, `LMCache stores 0.92 GB/s (37 stores)`: those of its
    /// figures that `shown` (the rest of the window's, to compare with) also has.
    fn words(&self, shown: &Evidence) -> Vec<String> {
        let steps = match (self.step_ms, self.steps, shown.step_ms) {
            (Some(d), Some(n), Some(_)) => Some(format!("engine steps {d:.0} ms ({n} steps)")),
            _ => None,
        };
        let stores = match (self.store_gbps, self.stores, shown.store_gbps) {
            (Some(g), Some(n), Some(_)) => Some(format!("LMCache stores {g:.2} GB/s ({n} stores)")),
            _ => None,
        };
        [steps, stores].into_iter().flatten().collect()
    }
}

/// The values of `events` (a time on the ranges' clock, a value) inside each of `ranges`, and
/// those outside every range for which `in_rest` holds.
fn split(
    ranges: &[RangeInclusive<f64>],
    events: &[(f64, f64)],
    in_rest: impl Fn(f64) -> bool,
) -> (Vec<Vec<f64>>, Vec<f64>) {
    let inside = ranges
        .iter()
        .map(|r| {
            events
                .iter()
                .filter(|(t, _)| r.contains(t))
                .map(|(_, v)| *v)
                .collect()
        })
        .collect();
    let rest = events
        .iter()
        .filter(|(t, _)| in_rest(*t) && !ranges.iter().any(|r| r.contains(t)))
        .map(|(_, v)| *v)
        .collect();
    (inside, rest)
}

/// A stretch's store throughput is shown when at least this many stores fall in it.
pub const MIN_STORES: usize = 3;
/// A stretch's step duration is shown when at least this many steps started in it.
pub const MIN_STEPS: usize = 3;

/// The episodes of one launch in one cell, and what they do to its TTFT p90.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchEpisodes {
    pub config: String,
    pub phase: Phase,
    pub cell: String,
    pub launch: u32,
    pub run_dir: String,
    pub machine: String,
    /// Measured requests with a TTFT.
    pub measured: usize,
    pub ttft_median_ms: f64,
    pub ttft_p90_ms: f64,
    /// TTFT p90 of the requests outside every episode.
    pub ttft_p90_without_ms: f64,
    pub spans: Vec<Span>,
    /// Unix time (ms) of the start of the measured window (the collector's wall clock at the
    /// cell's start plus the window's offset on its monotonic clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start_unix_ms: Option<f64>,
    /// Length of the measured window (s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<f64>,
    /// The server's own evidence over the rest of the cell's window, outside every stretch:
    /// the stores logged from its start to its end plus the launch's median TTFT, the steps
    /// that started in it.
    #[serde(flatten)]
    pub rest: Evidence,
}

impl LaunchEpisodes {
    /// How much the episodes raise the launch's TTFT p90 (a fraction).
    pub fn p90_shift(&self) -> f64 {
        self.ttft_p90_ms / self.ttft_p90_without_ms - 1.0
    }
}

/// What [`find_in_launch`] finds in one launch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub median_ms: f64,
    pub p90_ms: f64,
    pub p90_without_ms: f64,
    pub spans: Vec<Span>,
}

/// The rule on one launch's measured requests in send order: `send_ns` and `ttft_ms` side by
/// side, `start_ns` the start of its measured window. `None` when nothing qualifies.
pub(crate) fn find_in_launch(send_ns: &[u64], ttft_ms: &[f64], start_ns: u64) -> Option<Found> {
    let n = ttft_ms.len();
    if n < MIN_REQUESTS || send_ns.len() != n {
        return None;
    }
    let median_ms = quantile(ttft_ms, 0.5)?;
    let slow: Vec<bool> = ttft_ms
        .iter()
        .map(|v| *v > SLOW_FACTOR * median_ms)
        .collect();
    // (first index, last index, slow requests) of each run.
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for i in (0..n).filter(|i| slow[*i]) {
        match runs.last_mut() {
            Some((_, last, k)) if i - *last - 1 <= MAX_GAP => {
                *last = i;
                *k += 1;
            }
            _ => runs.push((i, i, 1)),
        }
    }
    runs.retain(|(_, _, k)| *k >= MIN_SLOW);
    if runs.is_empty() {
        return None;
    }
    let mut inside = vec![false; n];
    for (a, b, _) in &runs {
        inside[*a..=*b].iter_mut().for_each(|x| *x = true);
    }
    let outside: Vec<f64> = (0..n).filter(|i| !inside[*i]).map(|i| ttft_ms[i]).collect();
    if outside.len() * 2 < n {
        return None;
    }
    let p90_ms = quantile(ttft_ms, 0.9)?;
    let p90_without_ms = quantile(&outside, 0.9)?;
    // Written so that a p90 of 0 (a NaN or infinite shift) names nothing.
    let shift = p90_ms / p90_without_ms - 1.0;
    if !(p90_without_ms > 0.0 && shift >= MIN_P90_SHIFT) {
        return None;
    }
    let secs = |i: usize| send_ns[i].saturating_sub(start_ns) as f64 / 1e9;
    let spans = runs
        .iter()
        .map(|(a, b, k)| Span {
            from_s: secs(*a),
            to_s: secs(*b),
            requests: b - a + 1,
            slow: *k,
            ttft_median_ms: quantile(&ttft_ms[*a..=*b], 0.5).unwrap_or(f64::NAN),
            evidence: Evidence::default(),
        })
        .collect();
    Some(Found {
        median_ms,
        p90_ms,
        p90_without_ms,
        spans,
    })
}

/// Every launch of every cell not found saturated (its pooled cell in `cells`: Phase A's
/// verdict; Phase B and B' have none) whose TTFT p90 is set by episodes, in config, phase, cell
/// and launch order.
pub(crate) fn find(
    samples: &BTreeMap<CellKey, CellSamples>,
    cells: &[CellStats],
) -> Vec<LaunchEpisodes> {
    // Cells in the tables' order; each cell's launches are already in launch order.
    let mut ordered: Vec<&CellSamples> = samples.values().collect();
    ordered.sort_by(|a, b| super::cell_order(a, b));
    let mut out: Vec<LaunchEpisodes> = Vec::new();
    for cs in ordered {
        if super::model::pooled_saturated(cells, &cs.key) != Some(false) {
            continue;
        }
        // A launch whose data in the cell is not whole is compared nowhere (DESIGN.md §4.1):
        // a stretch in its cut window would be named as moving a tax it is not in.
        for l in cs.launches.iter().filter(|l| l.whole()) {
            let start = l
                .window
                .map(|w| w.start_ns)
                .or_else(|| l.ttft_send_ns.iter().copied().min())
                .unwrap_or(0);
            let Some(mut f) = find_in_launch(&l.ttft_send_ns, &l.ttft_ms, start) else {
                continue;
            };
            let rest = step_evidence(&mut f.spans, &l.step_t_ns, &l.step_duration_us, start);
            let window_start_unix_ms = match (&l.health, l.window) {
                // A zero wall-clock anchor (never recorded) places nothing.
                (Some(h), Some(w)) if h.wall_start_unix_ms > 0 => Some(
                    h.wall_start_unix_ms as f64 + (w.start_ns as f64 - h.t_start_ns as f64) / 1e6,
                ),
                _ => None,
            };
            out.push(LaunchEpisodes {
                config: cs.key.config.clone(),
                phase: cs.key.phase,
                cell: cs.key.cell.clone(),
                launch: l.launch,
                run_dir: l.run_dir.clone(),
                machine: l.machine.clone(),
                measured: l.ttft_ms.len(),
                ttft_median_ms: f.median_ms,
                ttft_p90_ms: f.p90_ms,
                ttft_p90_without_ms: f.p90_without_ms,
                spans: f.spans,
                window_start_unix_ms,
                window_s: l.window.map(|w| w.seconds()),
                rest: Evidence {
                    step_ms: rest.and_then(|(ms, _)| ms),
                    steps: rest.map(|(_, n)| n),
                    ..Evidence::default()
                },
            });
        }
    }
    out
}

/// The engine's own timing next to each stretch: the time-weighted median duration
/// ([`time_weighted_median`]) of the steps that started in it (from its first send to its last
/// send plus its median TTFT, on the collector's clock: `start_ns` is the measured window's
/// start, `t_ns` the steps' starts, `dur_us` their durations, side by side, all inside the
/// window), set on each span, and of those that started in the rest of the window, returned with
/// their count. `None` (nothing set) without steps. Time-weighted, because a stretch of few
/// long steps (durations of 1.1–1.9 s in lmcache_only l3's) is framed by many short ones that
/// a plain median would report. Consecutive steps overlap, so durations are not wall time owned
/// by one step; the comparison inside against outside a stretch holds. Steps that ran long say
/// the stretch was the engine's; steps that did not point elsewhere (the front end, the
/// network, a queue).
pub(crate) fn step_evidence(
    spans: &mut [Span],
    t_ns: &[u64],
    dur_us: &[f64],
    start_ns: u64,
) -> Option<(Option<f64>, usize)> {
    if t_ns.is_empty() || t_ns.len() != dur_us.len() {
        return None;
    }
    let events: Vec<(f64, f64)> = t_ns
        .iter()
        .zip(dur_us)
        .map(|(t, d)| (*t as f64, d / 1e3))
        .collect();
    let ranges: Vec<RangeInclusive<f64>> = spans
        .iter()
        .map(|s| s.range(start_ns as f64, 1e9))
        .collect();
    let (inside, rest) = split(&ranges, &events, |_| true);
    let median = |v: &[f64]| {
        (v.len() >= MIN_STEPS)
            .then(|| time_weighted_median(v))
            .flatten()
    };
    for (s, v) in spans.iter_mut().zip(&inside) {
        s.evidence.steps = Some(v.len());
        s.evidence.step_ms = median(v);
    }
    Some((median(&rest), rest.len()))
}

/// The duration `d` of the step in which the middle of the summed step time falls: steps of
/// duration ≤ `d` take at least half of it, steps ≥ `d` at least half (sorted ascending, the
/// first whose running sum reaches half the total). `None` when empty or the total is not
/// positive.
pub(crate) fn time_weighted_median(durations: &[f64]) -> Option<f64> {
    let mut d: Vec<f64> = durations
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    d.sort_by(f64::total_cmp);
    let total: f64 = d.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let mut run = 0.0;
    d.into_iter().find(|x| {
        run += x;
        run >= total / 2.0
    })
}

/// Puts the server's own evidence next to each stretch: the LMCache stores its log stamped
/// inside the stretch (from its first send to its last send plus its median TTFT, when the
/// prefills of its requests ran), against those in the rest of the same cell's window (the
/// same rate and shape). The log's local times go
/// on the collector's clock with the host's UTC offset from env.txt
/// ([`crate::ingest::env::utc_offset_s`]); without an offset, a window start or stores, nothing
/// is attached.
pub(crate) fn attach_stores(
    found: &mut [LaunchEpisodes],
    engine: &BTreeMap<String, crate::ingest::engine_log::EngineFacts>,
    environments: &BTreeMap<String, BTreeMap<String, String>>,
) {
    for e in found.iter_mut() {
        let Some(events) = engine
            .get(&e.run_dir)
            .map(|f| &f.store_events)
            .filter(|v| !v.is_empty())
        else {
            continue;
        };
        let (Some(offset_s), Some(start), Some(window_s)) = (
            environments
                .get(&e.run_dir)
                .and_then(crate::ingest::env::utc_offset_s),
            e.window_start_unix_ms,
            e.window_s,
        ) else {
            continue;
        };
        let events: Vec<(f64, f64)> = events
            .iter()
            .map(|ev| ((ev.local_ms - offset_s * 1000) as f64, ev.gbps()))
            .collect();
        let ranges: Vec<RangeInclusive<f64>> =
            e.spans.iter().map(|s| s.range(start, 1e3)).collect();
        let window = start..=start + window_s * 1000.0 + e.ttft_median_ms;
        let (inside, rest) = split(&ranges, &events, |t| window.contains(&t));
        let median = |v: &[f64]| (v.len() >= MIN_STORES).then(|| quantile(v, 0.5)).flatten();
        for (s, v) in e.spans.iter_mut().zip(&inside) {
            s.evidence.stores = Some(v.len());
            s.evidence.store_gbps = median(v);
        }
        e.rest.stores = Some(rest.len());
        e.rest.store_gbps = median(&rest);
    }
}

impl LaunchEpisodes {
    /// Its stretches, as the warning and the report's table print them, `; `-separated, then
    /// the rest of the window's figures once: `19.0–32.0 s: 27 of 27 slow, median 2022 ms,
    /// engine steps 1117 ms, LMCache stores 0.92 GB/s (37 stores); rest of the window: engine
    /// steps 27 ms, LMCache stores 2.57 GB/s (66 stores)`. Engine steps are the time-weighted
    /// median duration of the steps that started there ([`step_evidence`]).
    pub(crate) fn spans_words(&self) -> String {
        let mut parts: Vec<String> = self
            .spans
            .iter()
            .map(|s| {
                // A stretch's figures only where the rest of the window has them to compare.
                let evidence: String = s
                    .evidence
                    .words(&self.rest)
                    .iter()
                    .map(|x| format!(", {x}"))
                    .collect();
                format!(
                    "{:.1}–{:.1} s: {} of {} slow, median {:.0} ms{evidence}",
                    s.from_s, s.to_s, s.slow, s.requests, s.ttft_median_ms
                )
            })
            .collect();
        let rest = self.rest.words(&self.rest);
        if !rest.is_empty() {
            parts.push(format!("rest of the window: {}", rest.join(", ")));
        }
        parts.join("; ")
    }
}

/// The rule in words, from the constants (the warning and the report's note print it).
pub fn rule() -> String {
    format!(
        "a run of requests in send order whose TTFT exceeds {SLOW_FACTOR}× the launch's own median in the cell, at least {MIN_SLOW} such with at most {MAX_GAP} other requests between two of them, where the launch's TTFT p90 is at least {:.0}% above the p90 of its requests outside every such run and those are at least half of its requests",
        MIN_P90_SHIFT * 100.0
    )
}

/// One warning naming the launches whose TTFT p90 an episode sets, with the p90 without it.
pub(crate) fn warning(found: &[LaunchEpisodes]) -> Option<String> {
    if found.is_empty() {
        return None;
    }
    let each: Vec<String> = found
        .iter()
        .map(|e| {
            format!(
                "{} l{} Phase {} {}: p90 {:.0} ms, {:.0} ms without {} ({}; launch median {:.0} ms)",
                e.config,
                e.launch,
                e.phase.label(),
                e.cell,
                e.ttft_p90_ms,
                e.ttft_p90_without_ms,
                if e.spans.len() == 1 { "it" } else { "them" },
                e.spans_words(),
                e.ttft_median_ms
            )
        })
        .collect();
    Some(format!(
        "slow episodes set the TTFT p90 of {} launch-cell(s) not found saturated ({}; see Taxes, \"Slow episodes\"): {}. Taxes pool these launches as measured: under fixed-rate arrivals such a stretch is the server's, and part of what the config does if it recurs (DESIGN.md §4.3 \"Slow episodes\")",
        found.len(),
        rule(),
        each.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sends(n: usize) -> Vec<u64> {
        // 2 req/s from t = 10 s: request i is sent at 10 + i/2 s.
        (0..n as u64)
            .map(|i| 10_000_000_000 + i * 500_000_000)
            .collect()
    }

    /// 40 requests at 100 ms with requests 20..=27 at 500 ms. By hand: median 100, slow >
    /// 200 ms: one run 20..=27 (8 slow). numpy.percentile(v, 90) (linear): h = 39 × 0.9 = 35.1,
    /// sorted[35] = sorted[36] = 500 → 500; without the run, 32 × 100 → 100.
    #[test]
    fn one_stretch_of_slow_requests_sets_the_p90() {
        let mut v = vec![100.0; 40];
        v[20..=27].iter_mut().for_each(|x| *x = 500.0);
        let f = find_in_launch(&sends(40), &v, 10_000_000_000).unwrap();
        assert_eq!(f.median_ms, 100.0);
        assert_eq!(f.p90_ms, 500.0);
        assert_eq!(f.p90_without_ms, 100.0);
        assert_eq!(
            f.spans,
            vec![Span {
                from_s: 10.0,
                to_s: 13.5,
                requests: 8,
                slow: 8,
                ttft_median_ms: 500.0,
                evidence: Evidence::default(),
            }]
        );
    }

    /// Slow requests 10, 11 and 14 (two fast ones between 11 and 14: MAX_GAP) make one episode
    /// of 5 requests with 3 slow; 30 and 34 (three between) are two runs of 1, below MIN_SLOW.
    /// 40 requests, values 100 except those: by hand the p90 (h = 35.1; sorted, indices 0..=34
    /// are 100 and 35..=39 are 400) is 400; without requests 10..=14 (35 left: 33 × 100, then
    /// 2 × 400; h = 34 × 0.9 = 30.6 → 100): +300%, named.
    #[test]
    fn a_gap_of_two_joins_runs_and_of_three_does_not() {
        let mut v = vec![100.0; 40];
        for i in [10, 11, 14, 30, 34] {
            v[i] = 400.0;
        }
        let f = find_in_launch(&sends(40), &v, 10_000_000_000).unwrap();
        assert_eq!(f.spans.len(), 1);
        assert_eq!((f.spans[0].requests, f.spans[0].slow), (5, 3));
        assert_eq!(f.p90_ms, 400.0);
        assert_eq!(f.p90_without_ms, 100.0);
    }

    /// The stores logged inside a stretch, on the collector's clock. The window opens at Unix
    /// 1,000,000 ms and lasts 40 s, the launch's median TTFT is 300 ms (so stores count up to
    /// 1,040,300); the stretch is sent 10–20 s in with median TTFT 500 ms, so it spans
    /// 1,010,000–1,020,500 ms. The host is at +01:00 (`date.offset` +0100): a line stamped
    /// local L is Unix L − 3,600,000. Inside (the last one on the boundary): 1.0, 0.8 and 0.9
    /// GB/s, median 0.9. The rest of the window: 2.0 (before the stretch), 2.4 (1 ms past it),
    /// 2.6 and 3.0 (at 1,040,000): median (2.4 + 2.6) / 2 = 2.5; not counted: 5.0 at 1,041,000
    /// (past the window) and one stamped at the stretch's Unix time without the offset (an
    /// hour early). Without an offset nothing is attached.
    #[test]
    fn stores_inside_a_stretch_on_the_collectors_clock() {
        use crate::ingest::engine_log::{EngineFacts, StoreEvent};
        let ev = |unix_ms: i64, gbps: f64| StoreEvent {
            local_ms: unix_ms + 3_600_000,
            gb: gbps * 0.1,
            cost_ms: 100.0,
        };
        let facts = EngineFacts {
            store_events: vec![
                ev(1_005_000, 2.0),
                ev(1_011_000, 1.0),
                ev(1_015_000, 0.8),
                ev(1_020_500, 0.9),
                ev(1_020_501, 2.4),
                ev(1_030_000, 2.6),
                ev(1_040_000, 3.0),
                ev(1_041_000, 5.0),
                StoreEvent {
                    local_ms: 1_012_000,
                    gb: 0.25,
                    cost_ms: 100.0,
                },
            ],
            ..Default::default()
        };
        let episode = || LaunchEpisodes {
            config: "lmcache_only".into(),
            phase: Phase::A,
            cell: "r2_i4096_o256".into(),
            launch: 3,
            run_dir: "d".into(),
            machine: "boot x".into(),
            measured: 96,
            ttft_median_ms: 300.0,
            ttft_p90_ms: 2000.0,
            ttft_p90_without_ms: 350.0,
            spans: vec![Span {
                from_s: 10.0,
                to_s: 20.0,
                requests: 21,
                slow: 21,
                ttft_median_ms: 500.0,
                evidence: Evidence::default(),
            }],
            window_start_unix_ms: Some(1_000_000.0),
            window_s: Some(40.0),
            rest: Evidence::default(),
        };
        let engine = BTreeMap::from([("d".to_owned(), facts)]);
        let env = |offset: Option<&str>| {
            let mut m = BTreeMap::new();
            if let Some(o) = offset {
                m.insert("date.offset".to_owned(), o.to_owned());
            }
            BTreeMap::from([("d".to_owned(), m)])
        };
        let mut found = vec![episode()];
        attach_stores(&mut found, &engine, &env(Some("+0100")));
        let s = &found[0].spans[0];
        assert_eq!(s.evidence.stores, Some(3));
        assert!((s.evidence.store_gbps.unwrap() - 0.9).abs() < 1e-9, "{s:?}");
        assert_eq!(found[0].rest.stores, Some(4));
        assert!((found[0].rest.store_gbps.unwrap() - 2.5).abs() < 1e-9);
        assert_eq!(
            found[0].spans_words(),
            "10.0–20.0 s: 21 of 21 slow, median 500 ms, LMCache stores 0.90 GB/s (3 stores); rest of the window: LMCache stores 2.50 GB/s (4 stores)"
        );
        let mut none = vec![episode()];
        attach_stores(&mut none, &engine, &env(None));
        assert_eq!(none, vec![episode()]);
    }

    /// By hand: sorted ascending, the first duration whose running sum reaches half the total.
    #[test]
    fn time_weighted_medians_by_hand() {
        // Total 14, half 7: running sums 1, 2, 3, 4, 14.
        assert_eq!(
            time_weighted_median(&[1.0, 10.0, 1.0, 1.0, 1.0]),
            Some(10.0)
        );
        // Total 10, half 5: running sums 1, 3, 6 (the plain median would be 2.5).
        assert_eq!(time_weighted_median(&[4.0, 3.0, 2.0, 1.0]), Some(3.0));
        // Total 4, half 2: the running sum reaches it exactly at the second.
        assert_eq!(time_weighted_median(&[1.0, 1.0, 2.0]), Some(1.0));
        assert_eq!(time_weighted_median(&[5.0]), Some(5.0));
        assert_eq!(time_weighted_median(&[]), None);
        assert_eq!(time_weighted_median(&[0.0, 0.0]), None);
        assert_eq!(time_weighted_median(&[f64::NAN, 2.0]), Some(2.0));
    }

    /// Which steps fall in a stretch, on the collector's clock, with both boundaries by hand.
    /// The window starts at 1 s; stretch one spans sends 2.0–3.0 s with a median TTFT of
    /// 500 ms, so its steps start in [3.0, 4.5] s (both ends in); stretch two, sends 10.0–10.5 s
    /// and 100 ms, holds two steps: counted, too few for a median.
    #[test]
    fn steps_inside_a_stretch_and_in_the_rest_of_the_window() {
        let span = |from_s: f64, to_s: f64, ttft: f64| Span {
            from_s,
            to_s,
            requests: 5,
            slow: 5,
            ttft_median_ms: ttft,
            evidence: Evidence::default(),
        };
        let mut spans = vec![span(2.0, 3.0, 500.0), span(10.0, 10.5, 100.0)];
        let s = 1_000_000_000u64;
        // (start on the collector's clock, duration µs)
        let steps: [(u64, f64); 10] = [
            (2_999_999_999, 40_000.0),  // just before stretch one: rest
            (3_000_000_000, 150_000.0), // its first instant: in
            (3_500_000_000, 160_000.0),
            (4_000_000_000, 300_000.0),
            (4_500_000_000, 150_000.0),  // its last instant: in
            (4_500_000_001, 50_000.0),   // just after: rest
            (11_000_000_000, 500_000.0), // stretch two (11.0–11.6 s)
            (11_600_000_000, 500_000.0),
            (20_000_000_000, 60_000.0), // rest
            (21_000_000_000, 45_000.0), // rest
        ];
        let t: Vec<u64> = steps.iter().map(|x| x.0).collect();
        let d: Vec<f64> = steps.iter().map(|x| x.1).collect();
        let rest = step_evidence(&mut spans, &t, &d, s);
        // Stretch one: 150, 160, 300, 150 ms; total 760, half 380: running sums 150, 300, 460.
        assert_eq!(spans[0].evidence.steps, Some(4));
        assert_eq!(spans[0].evidence.step_ms, Some(160.0));
        assert_eq!(
            (spans[1].evidence.steps, spans[1].evidence.step_ms),
            (Some(2), None)
        );
        // Rest: 40, 50, 60, 45 ms; total 195, half 97.5: running sums 40, 85, 135.
        assert_eq!(rest, Some((Some(50.0), 4)));
        // No steps, or mismatched columns: nothing set.
        let mut untouched = vec![span(2.0, 3.0, 500.0)];
        assert_eq!(step_evidence(&mut untouched, &[], &[], s), None);
        assert_eq!(step_evidence(&mut untouched, &t, &d[..3], s), None);
        assert_eq!(untouched, vec![span(2.0, 3.0, 500.0)]);
    }

    /// Three slow requests in 100 do not reach the p90 (h = 89.1 falls among the 100-ms ones):
    /// no shift, nothing named. Fewer than MIN_REQUESTS: not read. Slow for more than half the
    /// launch: its state, not an episode.
    #[test]
    fn what_is_not_an_episode() {
        let mut v = vec![100.0; 100];
        v[50..53].iter_mut().for_each(|x| *x = 900.0);
        assert_eq!(find_in_launch(&sends(100), &v, 0), None);
        let mut short = vec![100.0; 19];
        short[5..10].iter_mut().for_each(|x| *x = 900.0);
        assert_eq!(find_in_launch(&sends(19), &short, 0), None);
        // 40 requests: 15 at 100, then 25 at 300 (median 300: nothing is slow against it).
        let mut ramp = vec![100.0; 15];
        ramp.extend(vec![300.0; 25]);
        assert_eq!(find_in_launch(&sends(40), &ramp, 0), None);
        // 40 requests: 18 at 100 and 22 alternating 100/1000 from index 18: median 100, the
        // alternation is one run of 11 slow spanning 21 requests, 19 left outside < 20.
        let mut half = vec![100.0; 40];
        for i in (18..40).step_by(2) {
            half[i] = 1000.0;
        }
        assert_eq!(find_in_launch(&sends(40), &half, 0), None);
        // TTFTs of 0 outside a stretch: the p90 without it is 0 and the shift infinite; nothing
        // is named rather than an infinite shift printed.
        let mut zeros = vec![0.0; 40];
        zeros[10..20].iter_mut().for_each(|x| *x = 5.0);
        assert_eq!(find_in_launch(&sends(40), &zeros, 0), None);
    }
}
