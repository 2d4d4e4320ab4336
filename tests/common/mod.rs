//! Report fixtures built by the real code: a synthetic results root ([`connector_tax::synth`])
//! with known taxes is dressed like a real run (manifest, env.txt facts, profile, engine
//! settings) and goes through the same pipeline as `ctax report` (ingest → analysis →
//! verdicts). Saturation, detection, conventions, taxes and every verdict therefore come from
//! the production definitions; nothing here decides a threshold. Degraded variants are other
//! archives (skipped configs, no step timing, an incomplete cell); only the hostile variants
//! edit strings after the analysis, to test escaping.
//!
//! Truth injected (TTFT / TPOT multipliers vs plain, capacity in req/s): mooncake_both 1.40 /
//! 1.15 (a 40% TTFT tax), nixl_both 1.33, noop_connector 1.03, lmcache_only 1.10 and
//! multi_mooncake_lmcache 2.60 (super-additive: 160% against 40% + 10%); the multi config
//! saturates first (capacity 7), so ref_safe = 4 req/s and ref_load = 8 req/s.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use connector_tax::analysis::AnalyzeOptions;
use connector_tax::analysis::model::AnalysisResult;
use connector_tax::report::{self, RenderedReport};
use connector_tax::synth::{SynthConfig, SynthSpec};
use connector_tax::verdicts::Verdicts;
use ctax_schema::{
    Cell, CellKey, ManifestRow, Phase, PreflightStatus, RowStatus, RunConfig, RunSummary,
};

/// What a report is rendered from.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub analysis: AnalysisResult,
    pub verdicts: Verdicts,
}

impl Fixture {
    pub fn render(&self, out: &Path) -> RenderedReport {
        report::render(&self.analysis, &self.verdicts, out).expect("render")
    }

    /// The dataset root as the report prints it.
    pub fn root(&self) -> &str {
        &self.analysis.summary.dataset.root
    }
}

/// The eight configs of the seed: (name, TTFT ×, TPOT ×, capacity req/s, callbacks µs/step).
const CONFIGS: [(&str, f64, f64, f64, f64); 8] = [
    ("plain", 1.0, 1.0, 9.0, 0.0),
    ("noop_connector", 1.03, 1.01, 9.0, 15.0),
    ("mooncake_producer", 1.15, 1.08, 8.5, 60.0),
    ("mooncake_consumer", 1.12, 1.06, 8.5, 55.0),
    ("mooncake_both", 1.40, 1.15, 8.0, 90.0),
    ("nixl_both", 1.33, 1.10, 8.0, 70.0),
    ("lmcache_only", 1.10, 1.05, 8.5, 40.0),
    ("multi_mooncake_lmcache", 2.60, 1.22, 7.0, 130.0),
];

/// How an archive differs from the full demo.
#[derive(Debug, Clone, Default)]
struct Variant {
    /// Configs skipped by the pre-flight, with the reason it recorded.
    skipped: Vec<(&'static str, &'static str)>,
    no_step_timing: bool,
    /// Leave config.json saying `simulated: true`, as synth writes it.
    simulated: bool,
    /// (config, reason): the config's first Phase B cell made incomplete in the collector's
    /// summary.
    incomplete: Option<(&'static str, &'static str)>,
    /// Only these configs (default: all eight), each launched this many times (default 1).
    only: Option<&'static [&'static str]>,
    launches: Option<u32>,
    /// (config, GPU model): that config's launches' env.txt names this GPU instead.
    other_gpu: Option<(&'static str, &'static str)>,
}

pub const STEP_TIMING_REASON: &str =
    "patch did not apply: Scheduler.update_from_output moved (marker not found)";

fn spec(v: &Variant) -> SynthSpec {
    let configs = CONFIGS
        .iter()
        .filter(|(n, ..)| !v.skipped.iter().any(|(s, _)| s == n))
        .filter(|(n, ..)| v.only.is_none_or(|o| o.contains(n)))
        .map(|&(name, ttft, tpot, cap, cb)| SynthConfig {
            capacity_rps: cap,
            step_extra_us: cb * 1.3,
            callback_us: (name != "plain").then_some(cb),
            ..SynthConfig::new(name, ttft, tpot)
        })
        .collect();
    SynthSpec {
        configs,
        // Two launches by default: with one per config the launch-to-launch variance is unknown
        // and no tax can be detected (analysis::launch_noise).
        launches: v.launches.unwrap_or(2),
        // Launch-to-launch level shifts only where there are launches to tell apart, so the
        // single-launch taxes are the injected ones (plus sampling noise).
        launch_sigma: if v.launches.unwrap_or(2) > 1 {
            0.05
        } else {
            0.0
        },
        phase_a_rates: vec![1.0, 2.0, 4.0, 8.0, 16.0],
        phase_b_shapes: [512, 4096, 32768]
            .iter()
            .flat_map(|&i| [64, 256, 1024].map(|o| (i, o)))
            .collect(),
        phase_b_rate: 4.0,
        requests_per_cell: 150,
        warmup_requests: 5,
        max_events: Some(8),
        with_steps: !v.no_step_timing,
        step_gap_ms: 150.0,
        seed: 7,
        skipped: v
            .skipped
            .iter()
            .map(|(c, r)| ((*c).to_owned(), (*r).to_owned()))
            .collect(),
        ..SynthSpec::default()
    }
}

fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> T {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn write_json<T: serde::Serialize>(p: &Path, v: &T) {
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

const T0_MS: u64 = 1_763_633_700_000; // 2025-11-20 10:15:00 UTC

/// Adds what a real sweep leaves besides the raw data: manifest rows, env.txt facts, engine
/// settings, the profile; applies the variant's pre-flight and collector edits.
fn dress(root: &Path, v: &Variant, spec: &SynthSpec) {
    let step_timing = !v.no_step_timing;
    let mut manifest = Vec::new();
    let row = |stage: &str, config: &str, start: u64, status: RowStatus| ManifestRow {
        date_utc: String::new(),
        stage: stage.to_owned(),
        config: config.to_owned(),
        launch: 0,
        run_dir: None,
        status,
        reason: None,
        vllm_version: Some("0.11.2".to_owned()),
        vllm_git_sha: Some("9c3fe1d2a7".to_owned()),
        connector_versions: BTreeMap::new(),
        gpu: Some("NVIDIA H20 96GB (GPU 0)".to_owned()),
        launch_command: Some(format!("bash tools/verify_config.sh {config}")),
        step_timing_active: None,
        started_unix_ms: start,
        duration_s: 40.0,
        host: Some("dash0".to_owned()),
        placement: None,
    };
    for (k, (c, ..)) in CONFIGS.iter().enumerate() {
        if v.only.is_some_and(|o| !o.contains(c)) {
            continue;
        }
        let skip = v.skipped.iter().find(|(s, _)| s == c);
        let mut r = row(
            "0 pre-flight",
            c,
            T0_MS + k as u64 * 60_000,
            if skip.is_some() {
                RowStatus::Skip
            } else {
                RowStatus::Include
            },
        );
        r.reason = skip.map(|(_, why)| (*why).to_owned());
        manifest.push(r);
    }
    let mut start = T0_MS + 15 * 60_000;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("config.json").exists())
        .collect();
    dirs.sort();
    for dir in &dirs {
        let rc_path = dir.join("config.json");
        let mut rc: RunConfig = read_json(&rc_path);
        rc.simulated = v.simulated;
        rc.model = "Qwen/Qwen3-Coder-30B-A3B-Instruct".to_owned();
        rc.extra = serde_json::json!({
            "stage": "A",
            "max_model_len": 200000,
            "enable_prefix_caching": true,
            "max_num_batched_tokens": 8192,
            "kv_connector": rc.config,
        });
        write_json(&rc_path, &rc);
        let gpu = match v.other_gpu {
            Some((c, model)) if c == rc.config => model,
            _ => "NVIDIA H20 96GB",
        };
        std::fs::write(
            dir.join("env.txt"),
            format!(
                "== vllm\nversion: 0.11.2\ngit_sha: 9c3fe1d2a7\n\n== gpu\ngpu_0: {gpu}\n\
                 driver: 570.124.06\n\n== pip freeze\nvllm==0.11.2\nmooncake-transfer-engine==0.3.7.post2\n"
            ),
        )
        .unwrap();
        let mut r = row("1 Phase A", &rc.config, start, RowStatus::Ok);
        r.run_dir = Some(rc.run_dir.clone());
        r.launch = rc.launch;
        r.step_timing_active = Some(step_timing);
        r.duration_s = 1_160.0;
        r.launch_command = Some(format!("bash launch/launch_{}.sh --port 8100", rc.config));
        if rc.config.contains("mooncake") {
            r.connector_versions.insert(
                "mooncake-transfer-engine".to_owned(),
                "0.3.7.post2".to_owned(),
            );
        }
        manifest.push(r);
        start += 1_220_000;
        if let Some((config, reason)) = v.incomplete
            && rc.config == config
        {
            let path = dir.join("summary.json");
            let mut s: RunSummary = read_json(&path);
            let (i, o) = spec.phase_b_shapes[0];
            let key = CellKey::new(
                Phase::B,
                Cell {
                    rate: spec.phase_b_rate,
                    input_len: i,
                    output_len: o,
                },
            );
            let h = s.cells.get_mut(&key.to_string()).expect("phase B cell");
            h.complete = false;
            h.incomplete_reason = Some(reason.to_owned());
            h.errors = 17;
            write_json(&path, &s);
        }
    }
    for r in manifest.iter_mut() {
        r.date_utc = connector_tax::report::fmt::unix_ms(r.started_unix_ms)
            .replace(" UTC", "Z")
            .replace(' ', "T");
    }
    let lines: String = manifest
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    std::fs::write(root.join("manifest.jsonl"), lines).unwrap();
    std::fs::write(
        root.join("profile.toml"),
        "# profile: the fixture's sweep\nname = \"fixture\"\nrates_a = [1, 2, 4, 8, 16]\n\
         min_completed = 200\nlaunches = 1\n",
    )
    .unwrap();
    if v.no_step_timing {
        let path = root.join("preflight/preflight_status.json");
        let mut p: PreflightStatus = read_json(&path);
        p.step_timing_available = Some(false);
        p.step_timing_reason = Some(STEP_TIMING_REASON.to_owned());
        write_json(&path, &p);
    }
}

/// Generates, dresses and analyses one archive (the default `ctax report` options).
fn build(v: Variant) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&v);
    connector_tax::synth::generate(&spec, dir.path()).unwrap();
    dress(dir.path(), &v, &spec);
    let ds = connector_tax::ingest::load(dir.path()).unwrap();
    let (analysis, verdicts) =
        connector_tax::pipeline::evaluate(&ds, &AnalyzeOptions::default()).unwrap();
    Fixture { analysis, verdicts }
}

/// Generates and analyses `spec` as it is (no dressing; ITL skipped).
pub fn from_spec(spec: &SynthSpec) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    connector_tax::synth::generate(spec, dir.path()).unwrap();
    let ds = connector_tax::ingest::load(dir.path()).unwrap();
    let (analysis, verdicts) = connector_tax::pipeline::evaluate(
        &ds,
        &AnalyzeOptions {
            skip_itl: true,
            ..Default::default()
        },
    )
    .unwrap();
    Fixture { analysis, verdicts }
}

static DEMO: LazyLock<Fixture> = LazyLock::new(|| build(Variant::default()));
static DEGRADED: LazyLock<Fixture> = LazyLock::new(|| {
    build(Variant {
        skipped: vec![
            (
                "noop_connector",
                "verify_noop_connector: ImportError: cannot import name 'KVConnectorBase_V1' (<module 'vllm.distributed'>)",
            ),
            (
                "mooncake_consumer",
                "verify_kv_consumer: /v1/models did not answer 200 within 300 s",
            ),
        ],
        no_step_timing: true,
        incomplete: Some((
            "nixl_both",
            "17 requests failed: HTTP 500 <html><body>Internal Server Error</body></html>",
        )),
        ..Variant::default()
    })
});

/// All eight configs, Phase A + B, step timing, real-looking provenance.
pub fn demo() -> Fixture {
    DEMO.clone()
}

/// The demo data as `ctax-sim` would label it.
pub fn simulated() -> Fixture {
    build(Variant {
        simulated: true,
        ..Variant::default()
    })
}

/// The step-timing plugin produced nothing (figures 6 and 7 become notes).
pub fn without_step_timing() -> Fixture {
    build(Variant {
        no_step_timing: true,
        ..Variant::default()
    })
}

/// `config` skipped by the pre-flight with `reason`.
pub fn without_config(config: &'static str, reason: &'static str) -> Fixture {
    build(Variant {
        skipped: vec![(config, reason)],
        ..Variant::default()
    })
}

/// The degraded dataset the seed plans for: no step timing, noop_connector and
/// mooncake_consumer skipped by the pre-flight, one incomplete cell whose server error text
/// contains HTML.
pub fn degraded() -> Fixture {
    DEGRADED.clone()
}

/// plain and noop_connector, two launches each (per-launch rows, hierarchical CIs).
pub fn two_launches() -> Fixture {
    build(Variant {
        only: Some(&["plain", "noop_connector"]),
        launches: Some(2),
        ..Variant::default()
    })
}

/// plain and mooncake_both, one launch each (every tax rests on a single pair).
pub fn one_launch() -> Fixture {
    build(Variant {
        only: Some(&["plain", "mooncake_both"]),
        launches: Some(1),
        ..Variant::default()
    })
}

/// plain and mooncake_both, two launches each, mooncake_both's on another GPU model (a root
/// that mixes GPU models).
pub fn mixed_gpus() -> Fixture {
    build(Variant {
        only: Some(&["plain", "mooncake_both"]),
        launches: Some(2),
        other_gpu: Some(("mooncake_both", "NVIDIA H100 80GB HBM3")),
        ..Variant::default()
    })
}

/// A config name and error texts built to break naive escaping.
pub const HOSTILE_NAME: &str = "<script>alert(1)</script>&\"x|y";

/// Renames a config everywhere the report reads config names.
pub fn rename_config(f: &mut Fixture, old: &str, new: &str) {
    let s = &mut f.analysis.summary;
    for c in s.cells.iter_mut().chain(s.per_launch.iter_mut()) {
        if c.key.config == old {
            c.key.config = new.to_owned();
        }
    }
    for t in s.taxes.iter_mut().filter(|t| t.config == old) {
        t.config = new.to_owned();
    }
    for c in s.dataset.configs.iter_mut().filter(|c| *c == old) {
        *c = new.to_owned();
    }
    for m in s.dataset.manifest.iter_mut().filter(|m| m.config == old) {
        m.config = new.to_owned();
    }
    let rr = &mut s.reference_rates;
    if let Some(v) = rr.saturation_rate.remove(old) {
        rr.saturation_rate.insert(new.to_owned(), v);
    }
    for c in rr.configs_considered.iter_mut().filter(|c| *c == old) {
        *c = new.to_owned();
    }
    if let Some(v) = f.analysis.step_ecdf.remove(old) {
        f.analysis.step_ecdf.insert(new.to_owned(), v);
    }
}

/// The demo with `lmcache_only` renamed to [`HOSTILE_NAME`], HTML in error texts and
/// Markdown control characters in reasons, commands, the profile and a verdict reason.
pub fn hostile() -> Fixture {
    let mut f = demo();
    rename_config(&mut f, "lmcache_only", HOSTILE_NAME);
    let s = &mut f.analysis.summary;
    for c in s.cells.iter_mut().filter(|c| c.key.config == HOSTILE_NAME) {
        c.complete = false;
        c.incomplete_reasons
            .push("<img src=x onerror=alert(2)> | **bold** `tick`".to_owned());
    }
    for m in s
        .dataset
        .manifest
        .iter_mut()
        .filter(|m| m.config == HOSTILE_NAME)
    {
        m.launch_command = Some(format!("bash launch/x.sh '{HOSTILE_NAME}' ``` </pre>"));
        m.reason = Some("</td><script>alert(3)</script>".to_owned());
    }
    s.dataset.skipped.insert(
        "nixl_both<b>".to_owned(),
        "HTTP 502 <html><script>alert(4)</script></html> | [link](javascript:alert(5))".to_owned(),
    );
    s.dataset.profile = Some(format!(
        "name = \"{HOSTILE_NAME}\"\n```\n</pre><script>alert(6)</script>\n"
    ));
    s.warnings.push(format!(
        "server said: <script>alert(7)</script> for {HOSTILE_NAME}"
    ));
    for v in f.verdicts.hypotheses.iter_mut().filter(|v| v.id == "h4") {
        v.reason = format!("{} <script>alert(8)</script>", v.reason);
    }
    f
}
