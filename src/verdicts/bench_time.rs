//! SC7's estimate: how long ONE bench takes, as the results root's profile plans it, from the
//! launch durations its manifest recorded.
//!
//! The archive is not one bench: it grew over many GPU sessions that added launches beyond the
//! profile's `launches` (replicates, anchors, repeated configs), so the sum of its manifest
//! durations measures the archive, not the bench, and passes 6 h as soon as enough replicates
//! land. One bench is: every included config's pre-flight once, then, per planned stage
//! (Phase A always, Phase B when the profile has it; Phase B' cells run inside Phase B's
//! launches), `launches` launches of every included config, one after another on one GPU.
//! A launch costs the median duration of that (stage, config)'s launches in the manifest; a
//! (stage, config) pair the archive has no launch of costs the median of the stage's other
//! configs (*extrapolated*, and said so); a planned stage with no launch at all cannot be
//! estimated.

use std::collections::BTreeMap;

use ctax_schema::{ManifestRow, RowStatus};
use serde::Deserialize;

use crate::stats::percentile::quantile;

/// The manifest's stage of pre-flight rows and of the two launch stages.
const PREFLIGHT: &str = "0 pre-flight";
const STAGE_A: &str = "1 Phase A";
const STAGE_B: &str = "3 Phase B";

/// What SC7 reads from `profile.toml` (other fields ignored).
#[derive(Deserialize)]
struct Plan {
    configs: Vec<String>,
    #[serde(default = "one")]
    launches: u32,
    #[serde(default)]
    phase_b: Option<toml::Value>,
}

fn one() -> u32 {
    1
}

/// One planned stage's share of the bench.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StageTime {
    pub stage: &'static str,
    /// Seconds of one launch of every config (medians; extrapolated ones included).
    pub round_s: f64,
    /// Configs with launches of their own in this stage.
    pub measured: Vec<String>,
    /// Configs without: costed at the median of the measured configs' medians.
    pub extrapolated: Vec<String>,
    /// Launch directories the medians read (each directory's attempts summed).
    pub launches_read: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BenchTime {
    /// `profile.toml` was read (else: the manifest's configs and stages, one launch each).
    pub from_profile: bool,
    pub launches: u32,
    pub configs: Vec<String>,
    pub preflight_s: f64,
    pub stages: Vec<StageTime>,
    /// Planned stages without any launch in the manifest: not in the estimate.
    pub missing_stages: Vec<&'static str>,
    /// Total seconds of one bench (what the estimate covers).
    pub total_s: f64,
    /// Every manifest row's duration summed (the archive, for comparison).
    pub archive_s: f64,
    pub rows: usize,
}

/// One bench's duration from `manifest` and the root's profile text.
pub(crate) fn one_bench(manifest: &[ManifestRow], profile: Option<&str>) -> BenchTime {
    let plan = profile.and_then(|t| toml::from_str::<Plan>(t).ok());
    let preflight_rows: Vec<&ManifestRow> =
        manifest.iter().filter(|r| r.stage == PREFLIGHT).collect();
    // Included configs: the plan's (else every config with a launch), less those whose last
    // pre-flight decision skipped them.
    let mut decided: BTreeMap<&str, &ManifestRow> = BTreeMap::new();
    for r in &preflight_rows {
        decided.insert(r.config.as_str(), r);
    }
    // Configs that pre-flight included beyond the plan's list (added with `--configs`, e.g.
    // the NHD variants) are part of the bench that measured them.
    let listed: Vec<String> = match &plan {
        Some(p) => {
            let mut c = p.configs.clone();
            for r in &preflight_rows {
                if !c.contains(&r.config) {
                    c.push(r.config.clone());
                }
            }
            c
        }
        None => {
            let mut c: Vec<String> = manifest
                .iter()
                .filter(|r| r.stage != PREFLIGHT)
                .map(|r| r.config.clone())
                .collect();
            c.sort();
            c.dedup();
            c
        }
    };
    let configs: Vec<String> = listed
        .into_iter()
        .filter(|c| {
            decided
                .get(c.as_str())
                .is_none_or(|r| r.status != RowStatus::Skip)
        })
        .collect();
    let preflight_s: f64 = configs
        .iter()
        .filter_map(|c| decided.get(c.as_str()))
        .map(|r| r.duration_s)
        .sum();
    let planned: Vec<&'static str> = match &plan {
        Some(p) if p.phase_b.is_some() => vec![STAGE_A, STAGE_B],
        Some(_) => vec![STAGE_A],
        None => [STAGE_A, STAGE_B]
            .into_iter()
            .filter(|s| manifest.iter().any(|r| r.stage == *s))
            .collect(),
    };
    let mut stages = Vec::new();
    let mut missing_stages = Vec::new();
    for stage in planned {
        match stage_time(manifest, stage, &configs) {
            Some(t) => stages.push(t),
            None => missing_stages.push(stage),
        }
    }
    let launches = plan.as_ref().map_or(1, |p| p.launches);
    let total_s = preflight_s + f64::from(launches) * stages.iter().map(|s| s.round_s).sum::<f64>();
    BenchTime {
        from_profile: plan.is_some(),
        launches,
        configs,
        preflight_s,
        stages,
        missing_stages,
        total_s,
        archive_s: manifest.iter().map(|r| r.duration_s).sum(),
        rows: manifest.len(),
    }
}

/// One launch of every config in `stage`, or `None` when no config has a launch there.
fn stage_time(
    manifest: &[ManifestRow],
    stage: &'static str,
    configs: &[String],
) -> Option<StageTime> {
    // Per config, per launch directory: the attempts' durations summed (a resumed launch adds
    // an attempt in its directory) and whether its last attempt completed.
    let mut dirs: BTreeMap<(&str, &str), (f64, RowStatus)> = BTreeMap::new();
    for r in manifest.iter().filter(|r| r.stage == stage) {
        let Some(dir) = r.run_dir.as_deref() else {
            continue;
        };
        let e = dirs
            .entry((r.config.as_str(), dir))
            .or_insert((0.0, r.status));
        e.0 += r.duration_s;
        e.1 = r.status;
    }
    let launches_read = dirs.len();
    let mut medians: BTreeMap<&str, f64> = BTreeMap::new();
    for c in configs {
        let of = |ok_only: bool| -> Vec<f64> {
            dirs.iter()
                .filter(|((cfg, _), (_, st))| {
                    *cfg == c.as_str() && (!ok_only || *st == RowStatus::Ok)
                })
                .map(|(_, (d, _))| *d)
                .collect()
        };
        // Complete launches; a config that never completed one costs what its attempts took
        // (a bench spends that much before giving up on it).
        let ok = of(true);
        let durations = if ok.is_empty() { of(false) } else { ok };
        if let Some(m) = quantile(&durations, 0.5) {
            medians.insert(c.as_str(), m);
        }
    }
    let per_config: Vec<f64> = medians.values().copied().collect();
    let fill = quantile(&per_config, 0.5)?;
    let mut measured = Vec::new();
    let mut extrapolated = Vec::new();
    let mut round_s = 0.0;
    for c in configs {
        match medians.get(c.as_str()) {
            Some(m) => {
                round_s += m;
                measured.push(c.clone());
            }
            None => {
                round_s += fill;
                extrapolated.push(c.clone());
            }
        }
    }
    Some(StageTime {
        stage,
        round_s,
        measured,
        extrapolated,
        launches_read,
    })
}

impl BenchTime {
    pub(crate) fn hours(&self) -> f64 {
        self.total_s / 3600.0
    }

    /// The estimate's terms in words, for SC7's reason.
    pub(crate) fn describe(&self) -> String {
        let min = |s: f64| format!("{:.0} min", s / 60.0);
        let source = if self.from_profile {
            format!(
                "one bench as profile.toml plans it ({} configs, {} launch{} each), one launch after another on one GPU",
                self.configs.len(),
                self.launches,
                if self.launches == 1 { "" } else { "es" }
            )
        } else {
            format!(
                "one bench without profile.toml: the manifest's {} configs, one launch each, one after another",
                self.configs.len()
            )
        };
        let mut terms = vec![format!("pre-flight {}", min(self.preflight_s))];
        for s in &self.stages {
            let name = s
                .stage
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ');
            let mut t = format!(
                "{} x {name} {} (median launch per config over {} launch{}",
                self.launches,
                min(s.round_s),
                s.launches_read,
                if s.launches_read == 1 { "" } else { "es" }
            );
            if !s.extrapolated.is_empty() {
                t.push_str(&format!(
                    "; {} of {} configs without a launch of their own ({}) at the median of the {} that ran",
                    s.extrapolated.len(),
                    self.configs.len(),
                    s.extrapolated.join(", "),
                    s.measured.len()
                ));
            }
            t.push(')');
            terms.push(t);
        }
        let mut out = format!("{source}: {} = {:.2} h", terms.join(" + "), self.hours());
        if !self.missing_stages.is_empty() {
            let names: Vec<&str> = self
                .missing_stages
                .iter()
                .map(|s| s.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' '))
                .collect();
            out.push_str(&format!(
                "; not estimated: {} (planned, no launch yet)",
                names.join(", ")
            ));
        }
        out.push_str(&format!(
            "; the archive's own launches add up to {:.2} h over {} manifest rows",
            self.archive_s / 3600.0,
            self.rows
        ));
        if self.archive_s > self.total_s {
            out.push_str(" (it holds launches beyond one bench: replicates, anchors, reruns)");
        }
        out
    }
}

/// A manifest row for tests: `dir` empty for a pre-flight row.
#[cfg(test)]
pub(super) fn row(stage: &str, config: &str, dir: &str, status: RowStatus, s: f64) -> ManifestRow {
    ManifestRow {
        date_utc: String::new(),
        stage: stage.into(),
        config: config.into(),
        launch: 0,
        run_dir: (!dir.is_empty()).then(|| dir.to_string()),
        status,
        reason: None,
        vllm_version: None,
        vllm_git_sha: None,
        connector_versions: Default::default(),
        gpu: None,
        launch_command: None,
        step_timing_active: None,
        started_unix_ms: 0,
        duration_s: s,
        host: None,
        placement: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = "name = \"t\"\nconfigs = [\"plain\", \"a\", \"b\", \"gone\"]\nseed = 1\nlaunches = 2\n[phase_b]\nshapes = [[512, 64]]\n";

    /// Hand calculation. Pre-flight: plain 10 s, a 20 s, b 30 s, extra 5 s (not in the
    /// profile's list, included by pre-flight), gone skipped (40 s, not counted): 65 s.
    /// Phase A: plain launches of 300, 500 and 400 s (median 400); a: 200 + 100 s in one
    /// directory (a resumed launch: 300) and a failed 50 s launch (not complete, ignored beside
    /// the complete one), median 300; b: only a failed launch of 90 s (median 90); extra 100 s.
    /// Round A = 400 + 300 + 90 + 100 = 890 s. Phase B: plain 600 s; a, b, extra none:
    /// extrapolated at the median of {600} = 600 each; round B = 2400 s.
    /// Total = 65 + 2 x (890 + 2400) = 6645 s. The archive: every row summed, 2445 s.
    #[test]
    fn one_bench_by_hand() {
        let m = vec![
            row(PREFLIGHT, "plain", "", RowStatus::Include, 10.0),
            row(PREFLIGHT, "a", "", RowStatus::Include, 20.0),
            row(PREFLIGHT, "b", "", RowStatus::Include, 30.0),
            row(PREFLIGHT, "gone", "", RowStatus::Skip, 40.0),
            row(PREFLIGHT, "extra", "", RowStatus::Include, 5.0),
            row(STAGE_A, "extra", "e0", RowStatus::Ok, 100.0),
            row(STAGE_A, "plain", "p0", RowStatus::Ok, 300.0),
            row(STAGE_A, "plain", "p1", RowStatus::Ok, 500.0),
            row(STAGE_A, "plain", "p2", RowStatus::Ok, 400.0),
            row(STAGE_A, "a", "a0", RowStatus::Interrupted, 200.0),
            row(STAGE_A, "a", "a0", RowStatus::Ok, 100.0),
            row(STAGE_A, "a", "a1", RowStatus::Failed, 50.0),
            row(STAGE_A, "b", "b0", RowStatus::Failed, 90.0),
            row(STAGE_B, "plain", "pb0", RowStatus::Ok, 600.0),
        ];
        let t = one_bench(&m, Some(PROFILE));
        assert!(t.from_profile);
        assert_eq!(t.configs, ["plain", "a", "b", "extra"]);
        assert_eq!(t.preflight_s, 65.0);
        assert_eq!(t.stages.len(), 2);
        assert_eq!(t.stages[0].round_s, 890.0);
        assert!(t.stages[0].extrapolated.is_empty());
        assert_eq!(t.stages[1].round_s, 2400.0);
        assert_eq!(t.stages[1].extrapolated, ["a", "b", "extra"]);
        assert_eq!(t.total_s, 6645.0);
        assert_eq!(t.archive_s, 2445.0);
        let d = t.describe();
        assert!(d.contains("2 x Phase B 40 min"), "{d}");
        assert!(
            d.contains("3 of 4 configs without a launch of their own (a, b, extra)"),
            "{d}"
        );
    }

    /// Replicates do not add up: ten launches of plain of 360 s each cost one median launch
    /// per planned launch (2 x 360 s), while the archive holds 3600 s.
    #[test]
    fn replicates_are_not_the_bench() {
        let m: Vec<ManifestRow> = (0..10)
            .map(|i| row(STAGE_A, "plain", &format!("p{i}"), RowStatus::Ok, 360.0))
            .collect();
        let profile = "configs = [\"plain\"]\nlaunches = 2\n";
        let t = one_bench(&m, Some(profile));
        assert_eq!(t.total_s, 720.0);
        assert_eq!(t.archive_s, 3600.0);
        assert!(t.missing_stages.is_empty());
    }

    /// A planned Phase B without a single launch is named, not guessed; without a profile
    /// the manifest's stages and configs are the plan, one launch each.
    #[test]
    fn a_planned_stage_without_launches_is_not_estimated() {
        let m = vec![row(STAGE_A, "plain", "p0", RowStatus::Ok, 300.0)];
        let t = one_bench(&m, Some(PROFILE));
        assert_eq!(t.missing_stages, [STAGE_B]);
        assert!(t.describe().contains("not estimated: Phase B"));
        let t = one_bench(&m, None);
        assert!(!t.from_profile);
        assert!(t.missing_stages.is_empty());
        assert_eq!(t.total_s, 300.0);
    }
}
