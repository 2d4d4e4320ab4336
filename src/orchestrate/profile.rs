//! Sweep profiles (`launch/profiles/<name>.toml`): every number `ctax run` uses. The profile
//! is copied into the results root as `profile.toml`, so a results root says how it was made.
//!
//! String values may use `${REPO}` (the checkout) and `${NAME}` (any environment variable;
//! `${NAME:-default}` gives a default).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ctax_schema::Arrival;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Configs in canonical order; the run order is a seeded permutation.
    pub configs: Vec<String>,
    /// Seeds the config order and every cell's arrivals/prompts.
    pub seed: u64,
    /// Launches per config and phase, interleaved (launch 0 of every config, then launch 1 …).
    #[serde(default = "one")]
    pub launches: u32,
    /// Seconds of warm-up at the start of every launch: the first cell a fresh server measures
    /// flags at least this long as warm-up (kept, excluded from the statistics). A cold vLLM
    /// server JIT-compiles kernels while it serves its first requests and keeps getting faster
    /// (DESIGN.md §4.3); the same extension for every config keeps taxes comparable.
    #[serde(default)]
    pub launch_warmup_s: f64,
    pub server: Server,
    pub collector: Collector,
    pub preflight: Preflight,
    pub phase_a: PhaseA,
    pub phase_b: Option<PhaseB>,
    pub phase_bp: Option<PhaseBp>,
    /// GPU slots on one host (`ctax run --gpus` overrides `slots.gpus`).
    #[serde(default)]
    pub slots: Slots,
    /// Every machine that runs a non-plain launch of a phase also runs a plain launch of that
    /// phase (an *anchor*, added first when neither the root nor the plan has one here): machines
    /// differ by more than launches do, and the analysis compares a config with plain on the
    /// same machine ([`super::anchor`]).
    #[serde(default = "yes")]
    pub plain_on_every_machine: bool,
}

fn one() -> u32 {
    1
}

/// Several launches at once on one host: one per GPU slot, each with its own
/// `CUDA_VISIBLE_DEVICES`, ports, CPU set and collector (see `orchestrate::slots`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Slots {
    /// One entry per slot: the `CUDA_VISIBLE_DEVICES` value (an index or a UUID). Empty: one
    /// slot and `CUDA_VISIBLE_DEVICES` left as it is.
    #[serde(default, deserialize_with = "gpu_list")]
    pub gpus: Vec<String>,
    /// Slot s owns every base port + s × port_stride.
    #[serde(default = "default_stride")]
    pub port_stride: u16,
    /// First port of slot 0's range for vLLM's internal ports (`VLLM_PORT`; vLLM scans upward
    /// from it).
    #[serde(default = "default_vllm_port")]
    pub vllm_port: u16,
    /// CPU set per slot (cpulist syntax, `0-7`); default: the CPUs this process may run on,
    /// split into equal contiguous parts.
    #[serde(default)]
    pub cpusets: Vec<String>,
    /// Phase A starts with a calibration round: plain on every slot at the same time (the
    /// analysis compares plain between GPUs).
    #[serde(default)]
    pub plain_on_every_slot: bool,
}

impl Default for Slots {
    fn default() -> Self {
        Slots {
            gpus: Vec::new(),
            port_stride: default_stride(),
            vllm_port: default_vllm_port(),
            cpusets: Vec::new(),
            plain_on_every_slot: false,
        }
    }
}

fn default_stride() -> u16 {
    100
}

fn default_vllm_port() -> u16 {
    21000
}

/// `gpus = [0, 1]` or `gpus = ["0", "GPU-…"]`.
fn gpu_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        N(u32),
        S(String),
    }
    let v: Vec<Id> = Vec::deserialize(d)?;
    Ok(v.into_iter()
        .map(|i| match i {
            Id::N(n) => n.to_string(),
            Id::S(s) => s,
        })
        .collect())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Server {
    /// `vllm` (launch/launch_<config>.sh) or `sim` (ctax-sim; the results say simulated).
    #[serde(default = "default_kind")]
    pub kind: String,
    /// `cuda` or `cpu` (CTAX_DEVICE for the launch scripts).
    pub device: String,
    /// vLLM executable (CTAX_VLLM).
    pub vllm: String,
    /// Model directory (CTAX_MODEL); created with `make_model` when missing.
    pub model: String,
    /// Command that writes the model directory if it does not exist (`{model}` is replaced).
    #[serde(default)]
    pub make_model: Option<String>,
    pub served_name: String,
    #[serde(default = "default_host")]
    pub host: String,
    pub port: u16,
    pub startup_timeout_s: f64,
    /// SIGINT to the server's process group, then SIGKILL after this many seconds.
    pub stop_grace_s: f64,
    /// After stopping: wait until the GPU holds none of the server's processes (at most this long).
    pub gpu_release_wait_s: f64,
    /// Extra environment for the launch scripts (CTAX_MAX_MODEL_LEN, CTAX_EXTRA_ARGS, …).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Python interpreter of the vLLM install (for the plugin and env capture); default: the
    /// interpreter in the `vllm` script's first line.
    #[serde(default)]
    pub python: Option<String>,
    /// Install the step-timing plugin for the sweep (stage 0) and remove it at stage 4.
    #[serde(default = "yes")]
    pub step_timing: bool,
    /// `--target DIR` for `patches/apply.sh` (e.g. /tmp/site on the GPU box).
    #[serde(default)]
    pub plugin_target: Option<String>,
    /// kind = "sim": ctax-sim arguments per config (e.g. an injected connector cost).
    #[serde(default)]
    pub sim_args: BTreeMap<String, Vec<String>>,
}

fn default_kind() -> String {
    "vllm".into()
}

fn default_host() -> String {
    "127.0.0.1".into()
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Collector {
    pub vocab_lo: u32,
    pub vocab_hi: u32,
    pub inflight_cap: u32,
    pub request_timeout_s: f64,
    #[serde(default)]
    pub arrival: Arrival,
    /// Extra arguments for ctax-collect.
    #[serde(default)]
    pub extra_args: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Preflight {
    /// Configs included without a verify launch (the baseline, or to save GPU time); their
    /// packages are still import-checked.
    #[serde(default)]
    pub no_verify: Vec<String>,
    /// Per-config verify script (default `tools/verify_config.sh <config>`).
    #[serde(default)]
    pub scripts: BTreeMap<String, String>,
    pub timeout_s: f64,
}

/// Cell timing shared by the phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Timing {
    pub duration_s: f64,
    pub warmup_s: f64,
    pub min_completed: u64,
    pub max_cell_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PhaseA {
    pub rates: Vec<f64>,
    pub shape: (u32, u32),
    #[serde(flatten)]
    pub timing: Timing,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PhaseB {
    pub shapes: Vec<(u32, u32)>,
    #[serde(flatten)]
    pub timing: Timing,
    /// Use this rate instead of the computed ref_safe (e.g. when Phase A is not in this root).
    #[serde(default)]
    pub rate_override: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PhaseBp {
    pub configs: Vec<String>,
    pub shapes: Vec<(u32, u32)>,
    #[serde(flatten)]
    pub timing: Timing,
}

/// Where a profile came from and its text (copied into the results root).
pub(crate) struct Loaded {
    pub profile: Profile,
    pub text: String,
    pub path: PathBuf,
}

/// Loads `name_or_path`: a file path, or `<repo>/launch/profiles/<name>.toml`.
pub(crate) fn load(name_or_path: &str, repo: &Path) -> anyhow::Result<Loaded> {
    let p = Path::new(name_or_path);
    let path = if p.exists() {
        p.to_path_buf()
    } else {
        repo.join("launch/profiles")
            .join(format!("{name_or_path}.toml"))
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading profile {}", path.display()))?;
    let profile = parse(&text).with_context(|| format!("profile {}", path.display()))?;
    Ok(Loaded {
        profile,
        text,
        path,
    })
}

fn parse(text: &str) -> anyhow::Result<Profile> {
    let p: Profile = toml::from_str(text)?;
    anyhow::ensure!(!p.configs.is_empty(), "configs is empty");
    anyhow::ensure!(
        p.configs.iter().any(|c| c == "plain"),
        "configs must include the baseline `plain`"
    );
    anyhow::ensure!(p.launches >= 1, "launches must be >= 1");
    anyhow::ensure!(
        p.launch_warmup_s.is_finite() && (0.0..=3600.0).contains(&p.launch_warmup_s),
        "launch_warmup_s must be between 0 and 3600 seconds"
    );
    anyhow::ensure!(!p.phase_a.rates.is_empty(), "phase_a.rates is empty");
    anyhow::ensure!(
        p.phase_a.rates.iter().all(|r| r.is_finite() && *r > 0.0),
        "phase_a.rates must be > 0"
    );
    anyhow::ensure!(
        p.collector.vocab_hi > p.collector.vocab_lo,
        "collector.vocab_hi must exceed vocab_lo"
    );
    anyhow::ensure!(
        matches!(p.server.kind.as_str(), "vllm" | "sim"),
        "server.kind must be \"vllm\" or \"sim\""
    );
    anyhow::ensure!(
        p.slots.cpusets.is_empty() || p.slots.cpusets.len() == p.slots.gpus.len(),
        "slots.cpusets needs one entry per slots.gpus entry"
    );
    Ok(p)
}

/// Expands `${REPO}`, `${NAME}` and `${NAME:-default}`.
pub(crate) fn expand(s: &str, repo: &Path) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        // The matching `}` (defaults may nest `${...}`).
        let mut depth = 1usize;
        let mut close = None;
        let bytes = after.as_bytes();
        let mut k = 0;
        while k < bytes.len() {
            if bytes[k] == b'$' && bytes.get(k + 1) == Some(&b'{') {
                depth += 1;
                k += 2;
                continue;
            }
            if bytes[k] == b'}' {
                depth -= 1;
                if depth == 0 {
                    close = Some(k);
                    break;
                }
            }
            k += 1;
        }
        let Some(j) = close else {
            out.push_str(&rest[i..]);
            return out;
        };
        let inner = &after[..j];
        let (name, default) = inner
            .split_once(":-")
            .map_or((inner, None), |(n, d)| (n, Some(d)));
        let value = if name == "REPO" {
            Some(repo.display().to_string())
        } else {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        };
        out.push_str(
            &value.unwrap_or_else(|| default.map(|d| expand(d, repo)).unwrap_or_default()),
        );
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_parse() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for name in ["seed", "smoke", "h200", "h200x2", "h100", "sim"] {
            let l = load(name, repo).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(l.profile.name, name);
        }
        let seed = load("seed", repo).unwrap().profile;
        assert_eq!(
            seed.phase_a.rates,
            vec![0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
        );
        assert_eq!(seed.phase_a.shape, (4096, 256));
        assert_eq!(seed.phase_a.timing.min_completed, 200);
        assert_eq!(seed.configs.len(), 8);
    }

    #[test]
    fn expansion() {
        let repo = Path::new("/r");
        // SAFETY: test-only environment mutation of a variable no other test reads.
        unsafe { std::env::set_var("CTAX_TEST_EXPAND", "x") };
        assert_eq!(expand("${REPO}/a/${CTAX_TEST_EXPAND}", repo), "/r/a/x");
        assert_eq!(expand("${CTAX_TEST_UNSET_VAR:-${REPO}/d}", repo), "/r/d");
        assert_eq!(expand("plain ${", repo), "plain ${");
    }

    #[test]
    fn bad_profiles_are_rejected() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(repo.join("launch/profiles/smoke.toml")).unwrap();
        assert!(
            parse(&text.replace("\"plain\", ", ""))
                .unwrap_err()
                .to_string()
                .contains("plain")
        );
        assert!(parse(&format!("{text}\nbogus = 1\n")).is_err());
    }
}
