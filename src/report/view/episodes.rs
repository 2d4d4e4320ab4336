//! The Slow episodes subsection of Taxes: launches whose TTFT p90 in a cell below saturation
//! is set by a transient slow stretch of their measured window
//! ([`crate::analysis::episodes`]), with the p90 without it.

use crate::analysis::episodes::LaunchEpisodes;
use crate::analysis::model::AnalysisResult;
use crate::report::fmt;

/// One launch-cell as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EpisodeView {
    pub config: String,
    /// `A 2 req/s, 4096/256`.
    pub cell: String,
    /// `l3 (20261204-210250_lmcache_only_l3)`.
    pub launch: String,
    pub machine: String,
    pub measured: usize,
    /// Each stretch: `19.0–32.0 s: 27 of 27 slow, median 2022 ms`.
    pub spans: String,
    pub median: String,
    pub p90: String,
    pub p90_without: String,
    /// `+500%`.
    pub shift: String,
}

/// The rule, for the subsection's note ([`crate::analysis::episodes::rule`]).
pub(super) fn rule() -> String {
    crate::analysis::episodes::rule()
}

pub(super) fn rows(r: &AnalysisResult) -> Vec<EpisodeView> {
    r.summary.episodes.iter().map(view).collect()
}

fn view(e: &LaunchEpisodes) -> EpisodeView {
    let cell = ctax_schema::Cell::parse(&e.cell).map_or_else(
        || e.cell.clone(),
        |s| {
            format!(
                "{} {} req/s, {}/{}",
                super::phase_name(e.phase),
                fmt::rate(s.rate),
                s.input_len,
                s.output_len
            )
        },
    );
    let spans: Vec<String> = e
        .spans
        .iter()
        .map(|s| {
            format!(
                "{:.1}–{:.1} s: {} of {} slow, median {:.0} ms{}",
                s.from_s,
                s.to_s,
                s.slow,
                s.requests,
                s.ttft_median_ms,
                crate::analysis::episodes::store_words(s, e)
            )
        })
        .collect();
    EpisodeView {
        config: e.config.clone(),
        cell,
        launch: format!("l{} ({})", e.launch, e.run_dir),
        machine: e.machine.clone(),
        measured: e.measured,
        spans: spans.join("; "),
        median: format!("{:.0} ms", e.ttft_median_ms),
        p90: format!("{:.0} ms", e.ttft_p90_ms),
        p90_without: format!("{:.0} ms", e.ttft_p90_without_ms),
        shift: format!("{:+.0}%", e.p90_shift() * 100.0),
    }
}
