//! The Slow episodes subsection of Taxes: launches whose TTFT p90 in a cell below saturation
//! is set by a transient slow stretch of their measured window
//! ([`crate::analysis::episodes`]), with the p90 without it.

use crate::analysis::episodes::LaunchEpisodes;
use crate::analysis::model::AnalysisResult;

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

pub(super) fn rows(r: &AnalysisResult) -> Vec<EpisodeView> {
    r.summary.episodes.iter().map(|e| view(r, e)).collect()
}

fn view(r: &AnalysisResult, e: &LaunchEpisodes) -> EpisodeView {
    EpisodeView {
        config: e.config.clone(),
        cell: super::machines::cell_label(r, e.phase, &e.cell),
        launch: format!("l{} ({})", e.launch, e.run_dir),
        machine: e.machine.clone(),
        measured: e.measured,
        spans: e.spans_words(),
        median: format!("{:.0} ms", e.ttft_median_ms),
        p90: format!("{:.0} ms", e.ttft_p90_ms),
        p90_without: format!("{:.0} ms", e.ttft_p90_without_ms),
        shift: format!("{:+.0}%", e.p90_shift() * 100.0),
    }
}
