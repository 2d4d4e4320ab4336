//! The Provenance section: where the numbers come from (dataset, dates, hosts, manifest,
//! environments, engine settings, profile, pre-flight decisions, reference rates).

use crate::analysis::model::AnalysisResult;
use crate::report::fmt;
use crate::verdicts::Verdicts;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Provenance {
    pub root: String,
    pub tool_version: String,
    pub schema_version: String,
    pub command: String,
    pub dates: String,
    pub hosts: String,
    pub manifest: Vec<ManifestView>,
    pub environments: Vec<Group>,
    pub run_configs: Vec<Group>,
    pub profile: Option<String>,
    pub preflight: Vec<[String; 4]>,
    pub step_timing: String,
    pub reference: Vec<(String, String)>,
    pub reference_notes: Vec<String>,
    pub saturation_rates: Vec<(String, String)>,
    /// Per launch, from its vLLM log: config, launch dir, connectors created, engine changes,
    /// warning groups (count: first message).
    pub engine: Vec<[String; 5]>,
}

/// The Engine table: what each launch's log says the connector changed.
fn engine_rows(d: &crate::analysis::model::DatasetInfo) -> Vec<[String; 5]> {
    let mut rows: Vec<[String; 5]> = d
        .engine
        .iter()
        .map(|(dir, f)| {
            let config = d
                .run_configs
                .get(dir)
                .and_then(|v| v.get("config"))
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned();
            let warnings = f
                .warnings
                .iter()
                .map(|(k, g)| format!("{k} ×{}: {}", g.count, g.first))
                .collect::<Vec<_>>()
                .join(" | ");
            [
                config,
                dir.clone(),
                if f.connectors.is_empty() {
                    "none".into()
                } else {
                    f.connectors.join(", ")
                },
                f.summary(),
                if warnings.is_empty() {
                    "none".into()
                } else {
                    warnings
                },
            ]
        })
        .collect();
    rows.sort_by(|a, b| {
        (crate::analysis::model::config_order(&a[0]), &a[1])
            .cmp(&(crate::analysis::model::config_order(&b[0]), &b[1]))
    });
    rows
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ManifestView {
    pub date: String,
    pub stage: String,
    pub config: String,
    pub launch: String,
    pub status: String,
    pub reason: String,
    pub run_dir: String,
    pub vllm: String,
    pub connectors: String,
    pub gpu: String,
    pub step_timing: String,
    pub duration: String,
    pub command: String,
}

/// Runs that share identical facts, shown once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    pub runs: Vec<String>,
    pub facts: Vec<(String, String)>,
    /// Pretty JSON (run configs), when the facts are a document rather than key/values.
    pub text: Option<String>,
}

pub(super) fn provenance(r: &AnalysisResult, verdicts: &Verdicts) -> Provenance {
    let s = &r.summary;
    let d = &s.dataset;
    let mut manifest: Vec<&ctax_schema::ManifestRow> = d.manifest.iter().collect();
    manifest.sort_by(|a, b| {
        a.started_unix_ms
            .cmp(&b.started_unix_ms)
            .then(a.stage.cmp(&b.stage))
            .then(a.config.cmp(&b.config))
    });
    let first = manifest
        .iter()
        .map(|m| m.started_unix_ms)
        .filter(|t| *t > 0)
        .min();
    let last = manifest
        .iter()
        .map(|m| m.started_unix_ms + (m.duration_s.max(0.0) * 1000.0) as u64)
        .filter(|t| *t > 0)
        .max();
    let dates = match (first, last) {
        (Some(a), Some(b)) => format!("{} to {}", fmt::unix_ms(a), fmt::unix_ms(b)),
        _ => fmt::NA.to_owned(),
    };
    let mut hosts: Vec<String> = manifest.iter().filter_map(|m| m.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    let manifest_rows = manifest
        .iter()
        .map(|m| ManifestView {
            date: m.date_utc.clone(),
            stage: m.stage.clone(),
            config: m.config.clone(),
            launch: m.launch.to_string(),
            status: m.status.as_str().to_owned(),
            reason: m.reason.clone().unwrap_or_default(),
            run_dir: m.run_dir.clone().unwrap_or_default(),
            vllm: match (&m.vllm_version, &m.vllm_git_sha) {
                (Some(v), Some(s)) => format!("{v} ({s})"),
                (Some(v), None) => v.clone(),
                (None, Some(s)) => s.clone(),
                (None, None) => String::new(),
            },
            connectors: m
                .connector_versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            gpu: m.gpu.clone().unwrap_or_default(),
            step_timing: match m.step_timing_active {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => String::new(),
            },
            duration: format!("{} s", fmt::fixed(m.duration_s, 0)),
            command: m.launch_command.clone().unwrap_or_default(),
        })
        .collect();

    // Group runs with identical environments / configs.
    let mut env_groups: Vec<Group> = Vec::new();
    for (run, facts) in &d.environments {
        let facts: Vec<(String, String)> =
            facts.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        match env_groups.iter_mut().find(|g| g.facts == facts) {
            Some(g) => g.runs.push(run.clone()),
            None => env_groups.push(Group {
                runs: vec![run.clone()],
                facts,
                text: None,
            }),
        }
    }
    let mut cfg_groups: Vec<Group> = Vec::new();
    for (run, v) in &d.run_configs {
        let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        match cfg_groups
            .iter_mut()
            .find(|g| g.text.as_deref() == Some(text.as_str()))
        {
            Some(g) => g.runs.push(run.clone()),
            None => cfg_groups.push(Group {
                runs: vec![run.clone()],
                facts: vec![],
                text: Some(text),
            }),
        }
    }

    let preflight: Vec<[String; 4]> = d
        .preflight
        .as_ref()
        .map(|p| {
            let mut v: Vec<[String; 4]> = p
                .configs
                .iter()
                .map(|(c, e)| {
                    [
                        c.clone(),
                        e.decision.as_str().to_owned(),
                        e.reason.clone().unwrap_or_default(),
                        e.log.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            v.sort_by_key(|row| crate::report::config_rank(&row[0]));
            v
        })
        .unwrap_or_default();
    let step_timing = match (
        d.step_timing_available,
        d.preflight
            .as_ref()
            .and_then(|p| p.step_timing_reason.clone()),
    ) {
        (true, _) => "available (step-timing plugin records present)".to_owned(),
        (false, Some(r)) => format!("unavailable: {r}"),
        (false, None) => "unavailable".to_owned(),
    };
    let rr = &s.reference_rates;
    let mut saturation_rates: Vec<(String, String)> = rr
        .saturation_rate
        .iter()
        .map(|(c, v)| {
            let pooled = v.map_or_else(
                || not_saturated(c, &s.launch_saturation),
                |v| fmt::with_unit(v, "rps"),
            );
            let own = own_saturation(c, *v, &s.launch_saturation);
            (c.clone(), format!("{pooled}{own}"))
        })
        .collect();
    saturation_rates.sort_by_key(|(c, _)| crate::report::config_rank(c));
    let root = d.root.clone();
    Provenance {
        command: format!("ctax report {} --out site/", shell_word(&root)),
        root,
        tool_version: s.tool_version.clone(),
        schema_version: format!(
            "summary {}, verdicts {}",
            s.schema_version, verdicts.schema_version
        ),
        dates,
        hosts: if hosts.is_empty() {
            fmt::NA.to_owned()
        } else {
            hosts.join(", ")
        },
        manifest: manifest_rows,
        environments: env_groups,
        run_configs: cfg_groups,
        profile: d.profile.clone(),
        preflight,
        step_timing,
        reference: vec![
            ("ref_safe".to_owned(), fmt::opt(rr.ref_safe, "rps")),
            ("ref_load".to_owned(), fmt::opt(rr.ref_load, "rps")),
            (
                "configs considered".to_owned(),
                rr.configs_considered.join(", "),
            ),
        ],
        reference_notes: rr.notes.clone(),
        saturation_rates,
        engine: engine_rows(d),
    }
}

/// One launch's own saturation, as the Reference rates table groups launches: saturated from a
/// rate, or at none of the rates it measured (the highest of them; `None`: no whole cell).
/// The derived order is the table's: saturated groups first by rate, then unsaturated ones by
/// how far they measured (`None` first). Rates are finite (the profile checks them).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum OwnRate {
    From(f64),
    NotUpTo(Option<f64>),
}

/// A config whose pooled cells saturate at no rate: how far its launches measured (the
/// highest rate any of them has whole data at), so "not saturated" is not read as "at any load".
fn not_saturated(
    config: &str,
    launches: &[crate::analysis::saturation::LaunchSaturation],
) -> String {
    let top = launches
        .iter()
        .filter(|l| l.config == config)
        .flat_map(|l| l.rates.iter().copied())
        .max_by(f64::total_cmp);
    not_saturated_up_to(top)
}

/// "not saturated up to R" (R: the highest rate measured with whole data), or "no whole
/// Phase A cell": for a config's pooled cells and for one launch alike.
fn not_saturated_up_to(top: Option<f64>) -> String {
    top.map_or_else(
        || "not saturated (no whole Phase A cell)".to_owned(),
        |top| format!("not saturated up to {}", fmt::with_unit(top, "rps")),
    )
}

/// Each launch's own saturation rate after its config's pooled one, when the config ran
/// several launches: "; every launch on its own too" when they agree, else the launches
/// grouped by their own rate. A launch that saturated at none of its rates reads "not
/// saturated up to R", R the highest rate it measured with whole data: a launch that measured
/// a shorter ladder (`--phase-a-rates`) says how far it went.
fn own_saturation(
    config: &str,
    pooled: Option<f64>,
    launches: &[crate::analysis::saturation::LaunchSaturation],
) -> String {
    let mine: Vec<_> = launches.iter().filter(|l| l.config == config).collect();
    if mine.len() < 2 {
        return String::new();
    }
    if mine.iter().all(|l| l.rate == pooled) {
        return "; every launch on its own too".to_owned();
    }
    let mut groups: Vec<(OwnRate, Vec<String>)> = Vec::new();
    for l in &mine {
        let name = format!("l{}", l.launch);
        let k = match l.rate {
            Some(r) => OwnRate::From(r),
            None => OwnRate::NotUpTo(l.rates.iter().copied().max_by(f64::total_cmp)),
        };
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(name),
            None => groups.push((k, vec![name])),
        }
    }
    groups.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    let parts: Vec<String> = groups
        .into_iter()
        .map(|(k, v)| {
            let at = match k {
                OwnRate::From(r) => fmt::with_unit(r, "rps"),
                OwnRate::NotUpTo(top) => not_saturated_up_to(top),
            };
            format!("{} {at}", v.join(", "))
        })
        .collect();
    format!("; launches on their own: {}", parts.join("; "))
}

/// Quotes a path for a copy-pasteable command line when it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::{not_saturated, own_saturation};
    use crate::analysis::saturation::LaunchSaturation;

    fn launch(n: u32, rate: Option<f64>, rates: &[f64]) -> LaunchSaturation {
        LaunchSaturation {
            config: "nixl_both".to_owned(),
            launch: n,
            rate,
            cell: String::new(),
            criteria: String::new(),
            rates: rates.to_vec(),
        }
    }

    /// Launches that saturated at none of their rates are grouped by how far they measured:
    /// l1 went up to 4 req/s, l2 only to 2 (a shorter `--phase-a-rates` ladder), l3 has no
    /// whole cell. Saturated groups come first, then the unsaturated ones by their highest rate.
    #[test]
    fn an_unsaturated_launch_says_how_far_it_measured() {
        let ls = [
            launch(0, Some(4.0), &[1.0, 2.0, 4.0]),
            launch(1, None, &[1.0, 2.0, 4.0]),
            launch(2, None, &[1.0, 2.0]),
            launch(3, None, &[]),
            launch(4, None, &[2.0, 4.0]),
        ];
        assert_eq!(
            own_saturation("nixl_both", Some(4.0), &ls),
            "; launches on their own: l0 4 req/s; l3 not saturated (no whole Phase A cell); \
             l2 not saturated up to 2 req/s; l1, l4 not saturated up to 4 req/s"
        );
        // Launches of another config are not counted: a config with fewer than two says nothing.
        assert_eq!(own_saturation("plain", None, &ls), "");
        let agree = [
            launch(0, None, &[1.0, 2.0]),
            launch(1, None, &[1.0, 2.0, 4.0]),
        ];
        assert_eq!(
            own_saturation("nixl_both", None, &agree),
            "; every launch on its own too"
        );
    }

    /// The pooled "not saturated" names the highest rate any of the config's launches measured
    /// (l1's 4 req/s, not l0's 2, and not another config's 8); a config with no whole cell says so.
    #[test]
    fn an_unsaturated_config_says_how_far_its_launches_measured() {
        let mut other = launch(0, None, &[8.0]);
        other.config = "plain".to_owned();
        let ls = [
            launch(0, None, &[1.0, 2.0]),
            launch(1, None, &[2.0, 4.0]),
            other,
        ];
        assert_eq!(
            not_saturated("nixl_both", &ls),
            "not saturated up to 4 req/s"
        );
        assert_eq!(not_saturated("plain", &ls), "not saturated up to 8 req/s");
        assert_eq!(
            not_saturated("lmcache_only", &ls),
            "not saturated (no whole Phase A cell)"
        );
    }
}
