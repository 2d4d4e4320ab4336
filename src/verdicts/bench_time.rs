//! SC7's estimate: how long ONE bench takes, as the results root's profile plans it, from the
//! launch durations its manifest recorded.
//!
//! The archive is not one bench: it grew over many GPU sessions that added launches beyond the
//! profile's `launches` (replicates, anchors, repeated configs), so the sum of its manifest
//! durations measures the archive, not the bench, and passes 6 h as soon as enough replicates
//! land. One bench is: every included config's pre-flight once, then, per planned stage
//! (Phase A always, Phase B when the profile has it), `launches` launches of every included
//! config, one after another on one GPU. A launch costs the median duration of that (stage,
//! config)'s launches in the manifest; a (stage, config) pair the archive has no launch of costs
//! the median of the stage's other configs (*extrapolated*, and said so; in Phase B, of those
//! whose launches did not also run B' cells, when any: the extrapolated config's own B' is
//! costed as B' below); a planned stage with no launch at all cannot be estimated. Phase A's
//! medians read only launches that planned every Phase A rate of the profile (a
//! `--phase-a-rates` subset, or a rung added later, is not a bench's launch: one rate of four
//! takes a third of the time); a launch directory whose plan is not known is read.
//!
//! Phase B' (the profile's `[phase_bp]`, due when ref_load differs from Phase B's rate:
//! `phase_b.rate_override`, else ref_safe) runs inside Phase B's launches in a bench. Phase B's medians read only launches that planned every Phase B shape
//! of the profile (a `--phase-b-shapes` subset is not a bench's launch); for a config with B'
//! due, only those of them that also carried its B' cells when it has any (its B' is then
//! costed there). A root that added B' later ran it in Phase B launches of their own (`ctax run
//! --phase-b-shapes none`): for the configs without a Phase B launch that carried B', those
//! cost B' as a part of its own, server start included (an over-estimate, said so); without
//! any, B' is a planned part not estimated (B' that ran inside a launch of a shape subset is read
//! nowhere). Configs that get no B' cells by rule (saturated at or below ref_load:
//! `orchestrate::plan::bp_rate`) or whose every Phase A launch failed cost nothing there.

use std::collections::{BTreeMap, BTreeSet};

use ctax_schema::STAGE_PREFLIGHT as PREFLIGHT;
use ctax_schema::{ManifestRow, RowStatus, STAGE_A, STAGE_B};
use serde::Deserialize;

use crate::stats::percentile::quantile;

/// What SC7 reads from `profile.toml` (other fields ignored).
#[derive(Deserialize)]
struct Plan {
    configs: Vec<String>,
    #[serde(default = "one")]
    launches: u32,
    #[serde(default)]
    phase_a: Option<PlanA>,
    #[serde(default)]
    phase_b: Option<PlanB>,
    #[serde(default)]
    phase_bp: Option<PlanBp>,
    #[serde(default)]
    slots: Option<SlotsPlan>,
}

/// `[phase_a]`: its rates (other keys ignored).
#[derive(Deserialize)]
struct PlanA {
    #[serde(default)]
    rates: Vec<f64>,
}

/// `[phase_b]`: its shapes and rate override (other keys ignored).
#[derive(Deserialize)]
struct PlanB {
    #[serde(default)]
    shapes: Vec<(u32, u32)>,
    #[serde(default)]
    rate_override: Option<f64>,
}

/// `[phase_bp]`: the configs B' runs for.
#[derive(Deserialize)]
struct PlanBp {
    configs: Vec<String>,
}

/// What SC7 needs to know beyond the manifest (read by `criteria::sc7` from the run
/// directories and reference_rates.json): what each launch planned, and when Phase B' is due.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanFacts {
    /// The root's reference rates: B' is due when ref_load differs from Phase B's rate
    /// (`phase_b.rate_override`, else ref_safe), as `ctax run` decides.
    pub ref_safe: Option<f64>,
    pub ref_load: Option<f64>,
    /// What each launch directory planned (its `config.json`): directories not listed are read
    /// as full Phase A and Phase B launches without B'.
    pub dirs: BTreeMap<String, PlannedLaunch>,
    /// Configs with no B' cells by rule: each saturates at or below ref_load.
    pub saturated: Vec<String>,
}

/// A launch directory's plan as SC7 reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlannedLaunch {
    /// The Phase A rates it planned (empty: none, or not known; read as a full launch).
    pub a_rates: Vec<f64>,
    /// The Phase B shapes it planned.
    pub shapes: BTreeSet<(u32, u32)>,
    /// It planned B' cells.
    pub bp: bool,
}

/// The stage name of B' launches of their own (the manifest records them as Phase B's).
pub(crate) const STAGE_BP: &str = "3 Phase B'";

/// `[slots]`: how many GPUs the bench spreads its launches over.
#[derive(Deserialize)]
struct SlotsPlan {
    #[serde(default)]
    gpus: Vec<toml::Value>,
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
    /// Configs without: costed at the median of the measured configs' medians (in Phase B,
    /// of those without B' inside their launches, when any: an extrapolated config's B' is
    /// costed in B' of its own).
    pub extrapolated: Vec<String>,
    /// Phase B: every measured config carried B' inside its launches, so the extrapolated
    /// configs' fill includes B' cells (an over-estimate, said so).
    pub fill_with_bp: bool,
    /// How many measured configs' medians the fill read: all of them, or in Phase B those
    /// without B' inside their launches (`describe` names the fewer).
    pub fill_read: usize,
    /// Configs the bench would not run in this stage: every Phase A launch of theirs failed
    /// (`ctax run` drops them from Phase B).
    pub dropped: Vec<String>,
    /// Launch directories the medians read (each directory's attempts summed).
    pub launches_read: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BenchTime {
    /// `profile.toml` was read (else: the manifest's configs and stages, one launch each).
    pub from_profile: bool,
    /// Why `profile.toml` could not be read, when it is there.
    pub profile_error: Option<String>,
    pub launches: u32,
    /// GPU slots the profile spreads launches over (1 without `[slots]`).
    pub gpus: usize,
    pub configs: Vec<String>,
    pub preflight_s: f64,
    pub stages: Vec<StageTime>,
    /// Planned stages without any launch in the manifest: not in the estimate.
    pub missing_stages: Vec<&'static str>,
    /// The profile's Phase A rates, and how many Phase A launches planned only some of them
    /// (not read; counted as the median would read them: not stopped by hand, of a config the
    /// bench runs).
    pub a_rates: Vec<f64>,
    pub a_subsets: usize,
    /// `[phase_bp]`'s configs that get no B' cells by rule (saturated at or below ref_load),
    /// when B' is planned.
    pub bp_by_rule: Vec<String>,
    /// Configs whose B' is costed inside their Phase B launches (launches that carried it).
    pub bp_inside: Vec<String>,
    /// Total seconds of one bench, one launch after another on one GPU.
    pub total_s: f64,
    /// The least it can take on `gpus` GPUs: pre-flight + the launches perfectly packed.
    pub packed_s: f64,
    /// Every manifest row's duration summed (the archive, for comparison).
    pub archive_s: f64,
    pub rows: usize,
}

/// One bench's duration from `manifest` and the root's profile text.
pub(crate) fn one_bench(
    manifest: &[ManifestRow],
    profile: Option<&str>,
    plan_facts: &PlanFacts,
) -> BenchTime {
    let (plan, profile_error) = match profile.map(toml::from_str::<Plan>) {
        Some(Ok(p)) => (Some(p), None),
        Some(Err(e)) => (None, Some(e.message().to_string())),
        None => (None, None),
    };
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
    let mut planned: Vec<&'static str> = match &plan {
        Some(p) if p.phase_b.is_some() => vec![STAGE_A, STAGE_B],
        Some(_) => vec![STAGE_A],
        None => [STAGE_A, STAGE_B]
            .into_iter()
            .filter(|s| manifest.iter().any(|r| r.stage == *s))
            .collect(),
    };
    let mut phase_a = launches_of(manifest, STAGE_A);
    // A config whose every Phase A launch failed is not run in Phase B (`ctax run`).
    let failed_in_a: Vec<String> = configs
        .iter()
        .filter(|c| {
            let mine: Vec<RowStatus> = phase_a
                .iter()
                .filter(|((cfg, _), _)| cfg == c)
                .map(|(_, (_, st))| *st)
                .collect();
            mine.contains(&RowStatus::Failed) && !mine.contains(&RowStatus::Ok)
        })
        .cloned()
        .collect();
    let b_rate = plan
        .as_ref()
        .and_then(|p| p.phase_b.as_ref())
        .and_then(|b| b.rate_override)
        .or(plan_facts.ref_safe);
    let due = matches!((b_rate, plan_facts.ref_load), (Some(b), Some(l)) if (b - l).abs() > 1e-9);
    // `[phase_bp]`'s configs, when B' is due: those that saturate at or below ref_load get no
    // B' cells by rule; the others run B' unless every Phase A launch of theirs failed.
    let (bp_by_rule, bp_configs): (Vec<String>, Vec<String>) = match &plan {
        Some(Plan {
            phase_b: Some(_),
            phase_bp: Some(b),
            ..
        }) if due => configs
            .iter()
            .filter(|c| b.configs.contains(c))
            .cloned()
            .partition(|c| plan_facts.saturated.contains(c)),
        _ => Default::default(),
    };
    let bp_configs: Vec<String> = bp_configs
        .into_iter()
        .filter(|c| !failed_in_a.contains(c))
        .collect();
    // Which Phase B launches a bench's Phase B reads, and which configs carried B' in them.
    let plan_shapes: BTreeSet<(u32, u32)> = plan
        .as_ref()
        .and_then(|p| p.phase_b.as_ref())
        .map(|b| b.shapes.iter().copied().collect())
        .unwrap_or_default();
    let facts = |dir: &str| plan_facts.dirs.get(dir);
    let bp_only = |dir: &str| facts(dir).is_some_and(|f| f.bp && f.shapes.is_empty());
    let full_b =
        |dir: &str| !bp_only(dir) && facts(dir).is_none_or(|f| plan_shapes.is_subset(&f.shapes));
    let carries_bp = |dir: &str| facts(dir).is_some_and(|f| f.bp);
    let plan_rates: Vec<f64> = plan
        .as_ref()
        .and_then(|p| p.phase_a.as_ref())
        .map(|a| a.rates.clone())
        .unwrap_or_default();
    let full_a = |dir: &str| {
        facts(dir).is_none_or(|f| {
            f.a_rates.is_empty()
                || plan_rates
                    .iter()
                    .all(|r| f.a_rates.iter().any(|x| (x - r).abs() < 1e-9))
        })
    };
    let bp_inside: Vec<String> = {
        let stage_b = launches_of(manifest, STAGE_B);
        bp_configs
            .iter()
            .filter(|c| {
                stage_b.iter().any(|((cfg, dir), (_, st))| {
                    cfg == c && *st != RowStatus::Interrupted && full_b(dir) && carries_bp(dir)
                })
            })
            .cloned()
            .collect()
    };
    let bp_needed: Vec<String> = bp_configs
        .iter()
        .filter(|c| !bp_inside.contains(c))
        .cloned()
        .collect();
    if !bp_needed.is_empty() {
        planned.push(STAGE_BP);
    }
    let mut stages = Vec::new();
    let mut missing_stages = Vec::new();
    let mut a_subsets = 0;
    for stage in planned {
        let of_stage = if stage == STAGE_BP {
            &bp_needed
        } else {
            &configs
        };
        let (run, dropped): (Vec<String>, Vec<String>) = of_stage
            .iter()
            .cloned()
            .partition(|c| stage == STAGE_A || !failed_in_a.contains(c));
        // Phase A's launches are read once: for the failures above and for its time here.
        let mut dirs = if stage == STAGE_A {
            std::mem::take(&mut phase_a)
        } else {
            launches_of(manifest, STAGE_B)
        };
        // Phase A: launches of every planned rate; Phase B: full launches only, and those that
        // carried B' for a config costed so; B': the launches of its own.
        if stage == STAGE_A {
            a_subsets = dirs
                .iter()
                .filter(|((cfg, dir), (_, st))| !full_a(dir) && median_reads(cfg, *st, &run))
                .count();
            dirs.retain(|(_, dir), _| full_a(dir));
        } else if stage == STAGE_B {
            dirs.retain(|(cfg, dir), _| {
                full_b(dir) && (!bp_inside.iter().any(|c| c == cfg) || carries_bp(dir))
            });
        } else if stage == STAGE_BP {
            dirs.retain(|(_, dir), _| bp_only(dir));
        }
        let inside: &[String] = if stage == STAGE_B { &bp_inside } else { &[] };
        match stage_time(dirs, stage, &run, inside) {
            Some(mut t) => {
                t.dropped = dropped;
                stages.push(t)
            }
            None => missing_stages.push(stage),
        }
    }
    let launches = plan.as_ref().map_or(1, |p| p.launches);
    let gpus = plan
        .as_ref()
        .and_then(|p| p.slots.as_ref())
        .map_or(1, |s| s.gpus.len().max(1));
    let launch_s = f64::from(launches) * stages.iter().map(|s| s.round_s).sum::<f64>();
    let total_s = preflight_s + launch_s;
    BenchTime {
        from_profile: plan.is_some(),
        profile_error,
        launches,
        gpus,
        packed_s: preflight_s + launch_s / gpus as f64,
        configs,
        preflight_s,
        stages,
        missing_stages,
        a_rates: plan_rates,
        a_subsets,
        bp_by_rule,
        bp_inside,
        total_s,
        archive_s: manifest.iter().map(|r| r.duration_s).sum(),
        rows: manifest.len(),
    }
}

/// Per (config, launch directory) of `stage`: the attempts' durations summed (a resumed launch
/// adds an attempt in its directory) and its last attempt's status.
fn launches_of<'a>(
    manifest: &'a [ManifestRow],
    stage: &str,
) -> BTreeMap<(&'a str, &'a str), (f64, RowStatus)> {
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
    dirs
}

/// Whether a stage's median reads a launch of `config` with status `st`: not stopped by hand
/// (interrupted), of a config the stage costs.
fn median_reads(config: &str, st: RowStatus, configs: &[String]) -> bool {
    st != RowStatus::Interrupted && configs.iter().any(|c| c == config)
}

/// One launch of every config in `stage` from its launch directories ([`launches_of`]), or
/// `None` when no config has a launch there.
/// A launch costs what its complete launches took (median); a config without one, what its
/// failed or incomplete launches took (a bench spends that much on it); a launch stopped by
/// hand (interrupted) says nothing about a launch's length and is not read. A config with no
/// launch at all costs the median of the others' medians, leaving out those of `bp_inside`
/// (their launches also ran B' cells) unless every measured config is one of them.
fn stage_time(
    mut dirs: BTreeMap<(&str, &str), (f64, RowStatus)>,
    stage: &'static str,
    configs: &[String],
    bp_inside: &[String],
) -> Option<StageTime> {
    dirs.retain(|(cfg, _), (_, st)| median_reads(cfg, *st, configs));
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
        let ok = of(true);
        let durations = if ok.is_empty() { of(false) } else { ok };
        if let Some(m) = quantile(&durations, 0.5) {
            medians.insert(c.as_str(), m);
        }
    }
    let without_bp: Vec<f64> = medians
        .iter()
        .filter(|(c, _)| !bp_inside.iter().any(|b| b == *c))
        .map(|(_, m)| *m)
        .collect();
    let fill_with_bp = without_bp.is_empty();
    let per_config: Vec<f64> = if fill_with_bp {
        medians.values().copied().collect()
    } else {
        without_bp
    };
    let fill = quantile(&per_config, 0.5)?;
    let fill_read = per_config.len();
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
        fill_with_bp: fill_with_bp && !extrapolated.is_empty(),
        fill_read,
        extrapolated,
        dropped: Vec::new(),
        launches_read,
    })
}

/// `Phase A` of the manifest's `1 Phase A`.
fn stage_name(stage: &str) -> &str {
    stage.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ')
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
            let why = match &self.profile_error {
                Some(e) => format!("profile.toml unreadable ({e})"),
                None => "no profile.toml".to_string(),
            };
            format!(
                "{why}: at least one launch of each of the manifest's {} configs per stage that ran, one after another",
                self.configs.len()
            )
        };
        let mut terms = vec![format!("pre-flight {}", min(self.preflight_s))];
        for s in &self.stages {
            let name = stage_name(s.stage);
            let mut t = format!(
                "{} x {name} {} (median launch per config over {} launch{}",
                self.launches,
                min(s.round_s),
                s.launches_read,
                if s.launches_read == 1 { "" } else { "es" }
            );
            if !s.extrapolated.is_empty() {
                let of = if s.fill_with_bp {
                    format!(
                        "the {} that ran, all with B' cells inside (an over-estimate)",
                        s.measured.len()
                    )
                } else if s.fill_read < s.measured.len() {
                    format!("the {} that ran without B' cells inside", s.fill_read)
                } else {
                    format!("the {} that ran", s.measured.len())
                };
                t.push_str(&format!(
                    "; {} of {} configs without a launch of their own ({}) at the median of {of}",
                    s.extrapolated.len(),
                    s.extrapolated.len() + s.measured.len(),
                    s.extrapolated.join(", "),
                ));
            }
            if s.stage == STAGE_A && self.a_subsets > 0 {
                t.push_str(&format!("; not read: {}", self.subsets_text()));
            }
            if !s.dropped.is_empty() {
                t.push_str(&format!(
                    "; not run: {} (every Phase A launch failed)",
                    s.dropped.join(", ")
                ));
            }
            if s.stage == STAGE_B && !self.bp_inside.is_empty() {
                t.push_str(&format!(
                    "; with their B' cells for {}",
                    self.bp_inside.join(", ")
                ));
            }
            if s.stage == STAGE_BP {
                t.push_str(
                    "; B' launches of their own, server start included: an over-estimate, since a \
                     bench runs B' inside Phase B's launches",
                );
            }
            t.push(')');
            terms.push(t);
        }
        let mut out = format!("{source}: {} = {:.2} h", terms.join(" + "), self.hours());
        if self.gpus > 1 {
            out.push_str(&format!(
                "; the profile spreads launches over {} GPUs, so its wall clock lies between {:.2} h (perfectly packed) and {:.2} h",
                self.gpus,
                self.packed_s / 3600.0,
                self.hours()
            ));
        }
        if !self.bp_by_rule.is_empty() {
            out.push_str(&format!(
                "; no B' cells by rule for {} (saturated at or below ref_load)",
                self.bp_by_rule.join(", ")
            ));
        }
        if !self.missing_stages.is_empty() {
            out.push_str(&format!("; {}", self.missing_text()));
        }
        out.push_str(&format!(
            "; the archive's own launches add up to {:.2} h over {} manifest rows",
            self.archive_s / 3600.0,
            self.rows
        ));
        // More launch directories in a stage than the plan runs there: replicates, anchors.
        let beyond = self.stages.iter().any(|s| {
            s.launches_read > self.launches as usize * (s.measured.len() + s.extrapolated.len())
        });
        if beyond {
            out.push_str(" (it holds launches beyond one bench: replicates, anchors, reruns)");
        }
        out
    }

    /// `not estimated: Phase A (planned; …), Phase B (planned, no launch yet)`: the planned
    /// stages without a launch the estimate can read.
    pub(crate) fn missing_text(&self) -> String {
        let names: Vec<String> = self
            .missing_stages
            .iter()
            .map(|s| {
                if *s == STAGE_A && self.a_subsets > 0 {
                    format!("{} (planned; {})", stage_name(s), self.subsets_text())
                } else {
                    format!("{} (planned, no launch yet)", stage_name(s))
                }
            })
            .collect();
        format!("not estimated: {}", names.join(", "))
    }

    /// `2 launches of a subset of the profile's Phase A rates (2, 4, 6, 8), not a bench's launch`.
    fn subsets_text(&self) -> String {
        let rates: Vec<String> = self.a_rates.iter().map(|r| format!("{r}")).collect();
        format!(
            "{} launch{} of a subset of the profile's Phase A rates ({}), not a bench's launch",
            self.a_subsets,
            if self.a_subsets == 1 { "" } else { "es" },
            rates.join(", ")
        )
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
    /// the complete one), median 300; b: only a failed launch of 90 s (median 90); extra 100 s;
    /// plain's launch p3 stopped by hand after 10 s is not read. Round A = 400 + 300 + 90 + 100
    /// = 890 s. Phase B: b is not run (its only Phase A launch failed); plain 600 s; a, extra
    /// none: extrapolated at the median of {600} = 600 each; round B = 1800 s.
    /// Total = 65 + 2 x (890 + 1800) = 5445 s. The archive: every row summed, 2455 s.
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
            row(STAGE_A, "plain", "p3", RowStatus::Interrupted, 10.0),
            row(STAGE_A, "a", "a0", RowStatus::Interrupted, 200.0),
            row(STAGE_A, "a", "a0", RowStatus::Ok, 100.0),
            row(STAGE_A, "a", "a1", RowStatus::Failed, 50.0),
            row(STAGE_A, "b", "b0", RowStatus::Failed, 90.0),
            row(STAGE_B, "plain", "pb0", RowStatus::Ok, 600.0),
        ];
        let t = one_bench(&m, Some(PROFILE), &PlanFacts::default());
        assert!(t.from_profile);
        assert_eq!(t.configs, ["plain", "a", "b", "extra"]);
        assert_eq!(t.preflight_s, 65.0);
        assert_eq!(t.stages.len(), 2);
        assert_eq!(t.stages[0].round_s, 890.0);
        assert!(t.stages[0].extrapolated.is_empty());
        assert_eq!(t.stages[0].launches_read, 7, "p3 (interrupted) not read");
        assert_eq!(t.stages[1].round_s, 1800.0);
        assert_eq!(t.stages[1].extrapolated, ["a", "extra"]);
        assert_eq!(t.stages[1].dropped, ["b"]);
        assert_eq!(t.total_s, 5445.0);
        assert_eq!(t.packed_s, 5445.0, "one GPU");
        assert_eq!(t.archive_s, 2455.0);
        let d = t.describe();
        assert!(d.contains("2 x Phase B 30 min"), "{d}");
        assert!(
            d.contains("2 of 3 configs without a launch of their own (a, extra)"),
            "{d}"
        );
        assert!(
            d.contains("not run: b (every Phase A launch failed)"),
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
        let t = one_bench(&m, Some(profile), &PlanFacts::default());
        assert_eq!(t.total_s, 720.0);
        assert_eq!(t.archive_s, 3600.0);
        assert!(
            t.describe().contains("beyond one bench"),
            "{}",
            t.describe()
        );
        assert!(t.missing_stages.is_empty());
    }

    /// A Phase A launch of a subset of the profile's rates (`--phase-a-rates`) is not a bench's
    /// launch, as a Phase B launch of a subset of shapes is not. Profile rates 2, 4, 6, 8.
    /// plain: full launches of 700 and 900 s and a 2-req/s-only launch of 240 s; with it the
    /// median would be 700 s, without it (900 + 700)/2 = 800 s. x: only a 2, 4 launch of 300 s,
    /// so x is extrapolated. y: a launch whose plan is unknown (no facts), 500 s, read; z: one
    /// that planned every rate in another order (8, 2, 4, 6) plus 10 (a rung beyond the
    /// profile), 1000 s, read. x costs the median of {800, 500, 1000} = 800 s. Round A = 800 +
    /// 800 + 500 + 1000 = 3100 s; 4 launches read. Subsets named: p2 and x0, not plain's p3
    /// (a subset stopped by hand) nor g0 (a subset of a config outside the profile).
    /// Without a [phase_a] table nothing is left out: plain 700, x 300, y 500, z 1000 = 2500 s.
    #[test]
    fn a_phase_a_launch_of_some_rates_is_not_a_bench_launch() {
        let profile =
            "configs = [\"plain\", \"x\", \"y\", \"z\"]\n[phase_a]\nrates = [2, 4, 6, 8]\n";
        let m = vec![
            row(STAGE_A, "plain", "p0", RowStatus::Ok, 700.0),
            row(STAGE_A, "plain", "p1", RowStatus::Ok, 900.0),
            row(STAGE_A, "plain", "p2", RowStatus::Ok, 240.0),
            row(STAGE_A, "x", "x0", RowStatus::Ok, 300.0),
            row(STAGE_A, "y", "y0", RowStatus::Ok, 500.0),
            row(STAGE_A, "z", "z0", RowStatus::Ok, 1000.0),
            row(STAGE_A, "plain", "p3", RowStatus::Interrupted, 30.0),
            row(STAGE_A, "gone", "g0", RowStatus::Ok, 60.0),
        ];
        let rates = |r: &[f64]| PlannedLaunch {
            a_rates: r.to_vec(),
            ..Default::default()
        };
        let facts = PlanFacts {
            dirs: [
                ("p0", rates(&[2.0, 4.0, 6.0, 8.0])),
                ("p1", rates(&[2.0, 4.0, 6.0, 8.0])),
                ("p2", rates(&[2.0])),
                ("x0", rates(&[2.0, 4.0])),
                ("p3", rates(&[2.0])),
                ("g0", rates(&[2.0])),
                ("z0", rates(&[8.0, 2.0, 4.0, 6.0, 10.0])),
            ]
            .into_iter()
            .map(|(d, p)| (d.to_string(), p))
            .collect(),
            ..Default::default()
        };
        let t = one_bench(&m, Some(profile), &facts);
        let a = &t.stages[0];
        assert_eq!(a.round_s, 3100.0);
        assert_eq!(a.extrapolated, ["x"]);
        assert_eq!(a.launches_read, 4, "p0, p1, y0, z0");
        assert_eq!(
            t.a_subsets, 2,
            "p2, x0; not p3 (stopped by hand) or g0 (not a config)"
        );
        let d = t.describe();
        assert!(
            d.contains("not read: 2 launches of a subset of the profile's Phase A rates (2, 4, 6, 8), not a bench's launch)"),
            "{d}"
        );
        // Every launch a subset: Phase A is not estimated, and says why.
        let only_some: Vec<ManifestRow> = m
            .iter()
            .filter(|r| matches!(r.run_dir.as_deref(), Some("p2" | "x0")))
            .cloned()
            .collect();
        let t = one_bench(&only_some, Some(profile), &facts);
        assert!(t.stages.is_empty());
        assert_eq!(t.missing_stages, [STAGE_A]);
        assert_eq!(
            t.missing_text(),
            "not estimated: Phase A (planned; 2 launches of a subset of the profile's Phase A \
             rates (2, 4, 6, 8), not a bench's launch)"
        );
        let t = one_bench(
            &m,
            Some("configs = [\"plain\", \"x\", \"y\", \"z\"]\n"),
            &facts,
        );
        assert_eq!(t.stages[0].round_s, 2500.0);
        assert!(t.stages[0].extrapolated.is_empty());
    }

    /// A planned Phase B without a single launch is named, not guessed; without a profile
    /// the manifest's stages and configs are the plan, one launch each.
    #[test]
    fn a_planned_stage_without_launches_is_not_estimated() {
        let m = vec![row(STAGE_A, "plain", "p0", RowStatus::Ok, 300.0)];
        let t = one_bench(&m, Some(PROFILE), &PlanFacts::default());
        assert_eq!(t.missing_stages, [STAGE_B]);
        assert!(t.describe().contains("not estimated: Phase B"));
        let t = one_bench(&m, None, &PlanFacts::default());
        assert!(!t.from_profile);
        assert!(t.missing_stages.is_empty());
        assert_eq!(t.total_s, 300.0);
    }

    /// An incomplete launch (a cell hit its cap) stands in where a config has no complete one;
    /// a launch stopped by hand never does: a config with only that costs the stage's median.
    /// Phase A: plain 300 s; a incomplete 500 s; b interrupted 20 s, so b at the median of
    /// {300, 500} = 400. Round = 1200 s, one launch planned.
    #[test]
    fn incomplete_stands_in_and_interrupted_does_not() {
        let m = vec![
            row(STAGE_A, "plain", "p0", RowStatus::Ok, 300.0),
            row(STAGE_A, "a", "a0", RowStatus::Incomplete, 500.0),
            row(STAGE_A, "b", "b0", RowStatus::Interrupted, 20.0),
        ];
        let t = one_bench(
            &m,
            Some("configs = [\"plain\", \"a\", \"b\"]\n"),
            &PlanFacts::default(),
        );
        assert_eq!(t.stages[0].round_s, 1200.0);
        assert_eq!(t.stages[0].extrapolated, ["b"]);
        assert!(t.stages[0].dropped.is_empty());
    }

    /// Two GPU slots: the launches can at best be packed onto both, so the least wall clock is
    /// pre-flight + half the launches: 10 + 2 x 600 / 2 = 610 s against 1210 s one by one.
    #[test]
    fn several_gpus_give_a_packed_lower_bound() {
        let m = vec![
            row(PREFLIGHT, "plain", "", RowStatus::Include, 10.0),
            row(STAGE_A, "plain", "p0", RowStatus::Ok, 600.0),
        ];
        let profile = "configs = [\"plain\"]\nlaunches = 2\n[slots]\ngpus = [0, 1]\n";
        let t = one_bench(&m, Some(profile), &PlanFacts::default());
        assert_eq!(t.gpus, 2);
        assert_eq!(t.total_s, 1210.0);
        assert_eq!(t.packed_s, 610.0);
        assert!(t.describe().contains("over 2 GPUs"), "{}", t.describe());
        assert!(
            !t.describe().contains("beyond one bench"),
            "1 launch of 2 planned"
        );
    }

    /// Phase B' by hand. Profile: configs plain, a, sat; one launch each; Phase B shapes
    /// 512/64 and 512/256; `[phase_bp]` for all three. Phase A: 100 s each (round 300). Full
    /// Phase B launches without B': plain p0 600 s, a a0 700 s, sat none; B'-only launches:
    /// plain p1 200 s, a a1 300 s. sat saturates at or below ref_load: no B' cells by rule.
    /// Phase B round: 600 + 700 + sat extrapolated at the median of {600, 700} = 650 → 1950 s;
    /// B' round: 200 + 300 = 500 s; total 300 + 1950 + 500 = 2750 s. Not due: B' not planned,
    /// 2250 s. Due without any B' launch: B' is a planned part not estimated.
    /// Then plain p2, a full Phase B launch that carried B' (900 s), and a a2, a launch of one
    /// shape only (100 s): plain's Phase B is p2 alone (900, its B' inside), a's is a0 (a2 is
    /// not a bench's launch), sat at the median of the configs without B' inside, {700} (not
    /// {900, 700}: sat has no B' cells, and a config without a Phase B launch would cost its B'
    /// as B' of its own) = 700 → 2300 s; B' for a alone (300 s); total 300 + 2300 + 300 =
    /// 2900 s.
    #[test]
    fn phase_b_prime_by_hand() {
        let profile = "configs = [\"plain\", \"a\", \"sat\"]\n[phase_b]\n\
                       shapes = [[512, 64], [512, 256]]\n[phase_bp]\n\
                       configs = [\"plain\", \"a\", \"sat\"]\nshapes = [[512, 256]]\n";
        let full: BTreeSet<(u32, u32)> = [(512, 64), (512, 256)].into();
        let planned = |shapes: &BTreeSet<(u32, u32)>, bp: bool| PlannedLaunch {
            shapes: shapes.clone(),
            bp,
            ..Default::default()
        };
        let mut m = vec![
            row(STAGE_A, "plain", "pa", RowStatus::Ok, 100.0),
            row(STAGE_A, "a", "aa", RowStatus::Ok, 100.0),
            row(STAGE_A, "sat", "sa", RowStatus::Ok, 100.0),
            row(STAGE_B, "plain", "p0", RowStatus::Ok, 600.0),
            row(STAGE_B, "a", "a0", RowStatus::Ok, 700.0),
        ];
        let mut due = PlanFacts {
            ref_safe: Some(2.0),
            ref_load: Some(6.0),
            dirs: [
                ("pa", planned(&BTreeSet::new(), false)),
                ("aa", planned(&BTreeSet::new(), false)),
                ("sa", planned(&BTreeSet::new(), false)),
                ("p0", planned(&full, false)),
                ("a0", planned(&full, false)),
                ("p1", planned(&BTreeSet::new(), true)),
                ("a1", planned(&BTreeSet::new(), true)),
            ]
            .into_iter()
            .map(|(d, p)| (d.to_string(), p))
            .collect(),
            saturated: vec!["sat".into()],
        };
        let t = one_bench(&m, Some(profile), &due);
        assert_eq!(t.missing_stages, vec![STAGE_BP], "due, no B' launch yet");
        assert_eq!(t.total_s, 2250.0);
        assert!(
            t.describe()
                .contains("not estimated: Phase B' (planned, no launch yet)"),
            "{}",
            t.describe()
        );
        m.push(row(STAGE_B, "plain", "p1", RowStatus::Ok, 200.0));
        m.push(row(STAGE_B, "a", "a1", RowStatus::Ok, 300.0));
        let t = one_bench(&m, Some(profile), &due);
        assert!(t.missing_stages.is_empty());
        let b = t.stages.iter().find(|s| s.stage == STAGE_B).unwrap();
        assert_eq!(b.round_s, 1950.0);
        assert_eq!(b.extrapolated, vec!["sat".to_string()]);
        assert_eq!(b.launches_read, 2);
        let bp = t.stages.iter().find(|s| s.stage == STAGE_BP).unwrap();
        assert_eq!(bp.round_s, 500.0);
        assert_eq!(bp.measured, vec!["plain".to_string(), "a".to_string()]);
        assert_eq!(t.total_s, 2750.0);
        assert_eq!(t.bp_by_rule, vec!["sat".to_string()]);
        let d = t.describe();
        assert!(d.contains("1 x Phase B' 8 min"), "{d}");
        assert!(d.contains("an over-estimate"), "{d}");
        assert!(d.contains("no B' cells by rule for sat"), "{d}");
        let not_due = PlanFacts {
            ref_load: Some(2.0),
            ..due.clone()
        };
        let t = one_bench(&m, Some(profile), &not_due);
        assert_eq!(t.total_s, 2250.0);
        // Phase B at an overridden rate: B' is due against that rate, not ref_safe.
        let overridden = profile.replace(
            "shapes = [[512, 64], [512, 256]]",
            "shapes = [[512, 64], [512, 256]]\nrate_override = 4.0",
        );
        let t = one_bench(&m, Some(&overridden), &not_due);
        assert_eq!(
            t.total_s, 2750.0,
            "ref_load 2 differs from Phase B's 4 req/s"
        );
        let t = one_bench(&m, Some(profile), &not_due);
        assert_eq!(t.total_s, 2250.0);
        assert!(t.stages.iter().all(|s| s.stage != STAGE_BP));
        // B' inside a full Phase B launch, and a launch of one shape.
        m.push(row(STAGE_B, "plain", "p2", RowStatus::Ok, 900.0));
        m.push(row(STAGE_B, "a", "a2", RowStatus::Ok, 100.0));
        due.dirs.insert("p2".into(), planned(&full, true));
        due.dirs
            .insert("a2".into(), planned(&[(512, 64)].into(), false));
        let t = one_bench(&m, Some(profile), &due);
        let b = t.stages.iter().find(|s| s.stage == STAGE_B).unwrap();
        assert_eq!(b.round_s, 2300.0);
        assert!(!b.fill_with_bp);
        assert_eq!(b.launches_read, 2, "p2 and a0");
        let bp = t.stages.iter().find(|s| s.stage == STAGE_BP).unwrap();
        assert_eq!(bp.measured, vec!["a".to_string()]);
        assert_eq!(bp.round_s, 300.0);
        assert_eq!(
            bp.launches_read, 1,
            "a1 only: p1 is plain's, costed inside p2"
        );
        let a = t.stages.iter().find(|s| s.stage == STAGE_A).unwrap();
        assert_eq!(a.launches_read, 3, "Phase A never filtered by shape");
        assert_eq!(t.total_s, 2900.0);
        assert_eq!(t.bp_inside, vec!["plain".to_string()]);
        let d = t.describe();
        assert!(d.contains("with their B' cells for plain"), "{d}");
        assert!(
            d.contains("(sat) at the median of the 1 that ran without B' cells inside"),
            "{d}"
        );
    }

    /// B' due (ref_safe 2, ref_load 6 req/s) and one Phase B launch, plain's `p0`: the
    /// profile's one shape 512/64 with its B' cells inside.
    fn plain_p0_with_bp_inside() -> PlanFacts {
        PlanFacts {
            ref_safe: Some(2.0),
            ref_load: Some(6.0),
            dirs: [(
                "p0".to_string(),
                PlannedLaunch {
                    shapes: [(512, 64)].into(),
                    bp: true,
                    ..Default::default()
                },
            )]
            .into(),
            saturated: Vec::new(),
        }
    }

    /// When every config with a Phase B launch carried B' inside it, the fill has nothing
    /// else to read: it reads them, and says it over-estimates. Profile: plain and x, one
    /// launch, B' for plain only. Phase A 100 s each; Phase B: plain p0 (every shape and its
    /// B', 900 s), x none: x at 900 → round B 1800 s; total 200 + 1800 = 2000 s.
    #[test]
    fn a_fill_from_launches_with_b_prime_inside_is_named() {
        let profile = "configs = [\"plain\", \"x\"]\n[phase_b]\nshapes = [[512, 64]]\n\
                       [phase_bp]\nconfigs = [\"plain\"]\nshapes = [[512, 256]]\n";
        let m = vec![
            row(STAGE_A, "plain", "pa", RowStatus::Ok, 100.0),
            row(STAGE_A, "x", "xa", RowStatus::Ok, 100.0),
            row(STAGE_B, "plain", "p0", RowStatus::Ok, 900.0),
        ];
        let facts = plain_p0_with_bp_inside();
        let t = one_bench(&m, Some(profile), &facts);
        let b = t.stages.iter().find(|s| s.stage == STAGE_B).unwrap();
        assert_eq!(b.extrapolated, vec!["x".to_string()]);
        assert!(b.fill_with_bp);
        assert_eq!(b.round_s, 1800.0);
        assert_eq!(t.total_s, 2000.0);
        assert!(t.missing_stages.is_empty(), "plain's B' is inside p0");
        let d = t.describe();
        assert!(
            d.contains(
                "(x) at the median of the 1 that ran, all with B' cells inside (an over-estimate)"
            ),
            "{d}"
        );
    }

    /// A config whose every Phase A launch failed runs no Phase B, so no B' either: with plain's
    /// B' inside its Phase B launch and the other B' config failed, B' is not a part of its own
    /// and the estimate is whole (300 s of Phase A: plain 100 + f 200 failed; Phase B: plain 900).
    #[test]
    fn a_config_failed_in_phase_a_needs_no_b_prime() {
        let profile = "configs = [\"plain\", \"f\"]\n[phase_b]\nshapes = [[512, 64]]\n\
                       [phase_bp]\nconfigs = [\"plain\", \"f\"]\nshapes = [[512, 256]]\n";
        let m = vec![
            row(STAGE_A, "plain", "pa", RowStatus::Ok, 100.0),
            row(STAGE_A, "f", "fa", RowStatus::Failed, 200.0),
            row(STAGE_B, "plain", "p0", RowStatus::Ok, 900.0),
        ];
        let facts = plain_p0_with_bp_inside();
        let t = one_bench(&m, Some(profile), &facts);
        assert!(t.missing_stages.is_empty(), "{:?}", t.missing_stages);
        assert!(t.stages.iter().all(|s| s.stage != STAGE_BP));
        assert_eq!(t.total_s, 1200.0);
        assert_eq!(t.bp_inside, vec!["plain".to_string()]);
    }

    /// A profile that does not parse is named with its error, not silently ignored.
    #[test]
    fn an_unreadable_profile_is_named() {
        let m = vec![row(STAGE_A, "plain", "p0", RowStatus::Ok, 300.0)];
        let t = one_bench(&m, Some("configs = 3\n"), &PlanFacts::default());
        assert!(!t.from_profile);
        assert!(t.profile_error.is_some());
        assert!(
            t.describe().starts_with("profile.toml unreadable ("),
            "{}",
            t.describe()
        );
    }
}
