//! Stage 0 pre-flight: run each config's verify script (tools/verify_*.sh), read its decision
//! (the last stdout line is a JSON object), and write `preflight/preflight_status.json`.
//! A config in `profile.preflight.no_verify` is included without a verify launch.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use ctax_schema::{Decision, ManifestRow, PreflightEntry, PreflightStatus, SCHEMA_VERSION};
use serde::Deserialize;

use super::manifest;
use super::server::unix_ms;

/// The verify script's last line. `decision` is `include`, `skip` or `error` (not a verdict).
#[derive(Debug, Deserialize)]
struct ScriptDecision {
    decision: String,
    reason: Option<String>,
    log: Option<String>,
}

impl ScriptDecision {
    /// `None` for `error` (or anything else): the script could not decide.
    fn verdict(&self) -> Option<Decision> {
        match self.decision.as_str() {
            "include" => Some(Decision::Include),
            "skip" => Some(Decision::Skip),
            _ => None,
        }
    }
}

/// Parses the verify script's last non-empty stdout line.
fn parse_decision(stdout: &str) -> Option<ScriptDecision> {
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty())?;
    serde_json::from_str(last.trim()).ok()
}

/// Runs the pre-flight for every config of the profile; returns the status (also written).
pub(crate) fn run(
    root: &Path,
    repo: &Path,
    profile: &super::profile::Profile,
    env: &[(String, String)],
    existing: Option<PreflightStatus>,
) -> anyhow::Result<PreflightStatus> {
    let dir = root.join("preflight");
    std::fs::create_dir_all(&dir)?;
    let mut status = existing.unwrap_or(PreflightStatus {
        schema_version: SCHEMA_VERSION,
        ..Default::default()
    });
    for config in &profile.configs {
        if super::signals::interrupted() {
            anyhow::bail!("interrupted during pre-flight");
        }
        if status.configs.contains_key(config) {
            eprintln!(
                "[ctax] pre-flight {config}: already decided ({}), kept",
                status.configs[config].decision
            );
            continue;
        }
        let t0 = Instant::now();
        let started = unix_ms();
        let entry = if profile.preflight.no_verify.contains(config) {
            PreflightEntry {
                decision: Decision::Include,
                reason: Some(
                    "included without a verify launch (profile preflight.no_verify)".into(),
                ),
                log: None,
                checked_unix_ms: Some(started),
            }
        } else {
            let script = profile
                .preflight
                .scripts
                .get(config)
                .map(|s| repo.join(s))
                .unwrap_or_else(|| repo.join("tools/verify_config.sh"));
            let mut cmd = Command::new("timeout");
            cmd.arg(format!("{}", profile.preflight.timeout_s.ceil() as u64))
                .arg("bash")
                .arg(&script);
            if !profile.preflight.scripts.contains_key(config) {
                cmd.arg(config);
            }
            eprintln!("[ctax] pre-flight {config}: {}", script.display());
            let out = cmd
                .envs(env.iter().map(|(k, v)| (k, v)))
                .env("CTAX_PREFLIGHT_DIR", &dir)
                .env(
                    "CTAX_VERIFY_STARTUP_TIMEOUT",
                    format!("{}", profile.server.startup_timeout_s),
                )
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let parsed = parse_decision(&stdout);
            match parsed.as_ref().map(|d| (d, d.verdict())) {
                Some((d, Some(decision))) => PreflightEntry {
                    decision,
                    reason: d.reason.clone(),
                    log: d.log.clone(),
                    checked_unix_ms: Some(started),
                },
                Some((d, None)) => anyhow::bail!(
                    "pre-flight {config}: {} did not give a verdict ({}: {})",
                    script.display(),
                    d.decision,
                    d.reason.as_deref().unwrap_or_default()
                ),
                None => PreflightEntry {
                    decision: Decision::Skip,
                    reason: Some(format!(
                        "verify script exited {} without a decision line (timeout {} s?); stdout tail: {}",
                        out.status,
                        profile.preflight.timeout_s,
                        stdout.lines().rev().take(3).collect::<Vec<_>>().join(" / ")
                    )),
                    log: None,
                    checked_unix_ms: Some(started),
                },
            }
        };
        eprintln!(
            "[ctax] pre-flight {config}: {} {}",
            entry.decision,
            entry.reason.as_deref().unwrap_or("")
        );
        manifest::append(
            root,
            &ManifestRow {
                run_dir: entry.log.as_ref().map(|l| format!("preflight/{l}")),
                status: entry.decision.into(),
                reason: entry.reason.clone(),
                duration_s: t0.elapsed().as_secs_f64(),
                ..manifest::row(ctax_schema::STAGE_PREFLIGHT, config, 0, started)
            },
        )?;
        status.configs.insert(config.clone(), entry);
        crate::fsutil::write_json_atomic(&dir.join("preflight_status.json"), &status)?;
    }
    crate::fsutil::write_json_atomic(&dir.join("preflight_status.json"), &status)?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_is_the_last_json_line() {
        let d = parse_decision("noise\n{\"config\":\"x\",\"decision\":\"skip\",\"reason\":\"No module named 'nixl'\",\"log\":\"verify_x.log\",\"seconds\":0.1}\n\n").unwrap();
        assert_eq!(d.decision, "skip");
        assert_eq!(d.reason.as_deref(), Some("No module named 'nixl'"));
        assert!(parse_decision("no json here").is_none());
    }
}
