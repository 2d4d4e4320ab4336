//! Ingest: a results root on disk → typed rows grouped by run and cell, plus polars frames
//! ([`frames`]) and a Parquet export. Missing files make a cell (or part of it) missing with a
//! warning, never a panic; malformed lines are errors naming file, line and field.

pub mod engine_log;
pub mod env;
pub mod frames;
pub mod jsonl;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ctax_schema::{
    CellHealth, FileKind, ManifestRow, MetricsSample, Phase, Placement, PreflightStatus,
    ReferenceRates, RequestRecord, RunConfig, RunSummary, StepRecord, parse_file_name,
};
use rayon::prelude::*;

pub use jsonl::IngestError;

/// Raw data of one cell of one run (launch).
#[derive(Debug, Default, Clone)]
pub struct RunCell {
    pub requests: Vec<RequestRecord>,
    pub metrics: Vec<MetricsSample>,
    pub steps: Vec<StepRecord>,
    pub health: Option<CellHealth>,
    /// Where the cell was measured (GPU slot, GPU index/UUID, CPU set): `summary.json`'s
    /// per-cell placement, else the run's; `None` for runs made before slots existed.
    pub placement: Option<Placement>,
    /// Which raw files were present.
    pub has_requests: bool,
    pub has_metrics: bool,
    pub has_steps: bool,
}

/// One run directory = one server launch of one config.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir_name: String,
    pub path: PathBuf,
    pub config: String,
    pub launch: u32,
    pub run_config: Option<RunConfig>,
    pub summary: Option<RunSummary>,
    /// Facts parsed from env.txt (see [`env::parse_env_txt`]).
    pub env: BTreeMap<String, String>,
    /// Keyed by (phase, cell name).
    pub cells: BTreeMap<(Phase, String), RunCell>,
    /// Which of the seed's per-run artifacts exist.
    pub artifacts: BTreeMap<String, bool>,
}

impl Run {
    pub fn simulated(&self) -> bool {
        self.run_config.as_ref().is_some_and(|c| c.simulated)
    }

    /// Where the (latest) launch in this directory ran; `None` before slots existed.
    pub fn placement(&self) -> Option<&Placement> {
        self.run_config.as_ref().and_then(|c| c.placement.as_ref())
    }

    /// A launch of the GPU-to-GPU calibration round (plain on every slot at once).
    pub fn is_calibration(&self) -> bool {
        self.placement().is_some_and(|p| p.calibration)
    }
}

/// A whole results root.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub root: PathBuf,
    /// Every run that counts in the statistics and taxes.
    /// Every launch, the calibration round's included: those are plain's own launches (run on
    /// every GPU slot at once; [`Run::is_calibration`]), pooled like any other and also compared
    /// between GPUs by the analysis.
    pub runs: Vec<Run>,
    pub preflight: Option<PreflightStatus>,
    pub reference_rates: Option<ReferenceRates>,
    pub manifest: Vec<ManifestRow>,
    pub profile: Option<String>,
    pub warnings: Vec<String>,
}

/// The seed's per-run artifacts that are single files.
pub const RUN_FILES: [&str; 6] = [
    "config.json",
    "launch.sh",
    "vllm_stdout.log",
    "vllm_stderr.log",
    "summary.json",
    "env.txt",
];

/// Loads everything under `root`.
pub fn load(root: &Path) -> anyhow::Result<Dataset> {
    anyhow::ensure!(root.is_dir(), "{}: not a directory", root.display());
    let mut warnings = Vec::new();
    let mut run_dirs = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(root)
        .with_context(|| format!("reading {}", root.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", root.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.path().is_dir()
            || matches!(name.as_str(), "preflight" | "analysis")
            || name.starts_with('.')
        {
            continue;
        }
        if looks_like_run(&e.path()) {
            run_dirs.push(e.path());
        }
    }
    let loaded: Vec<Result<(Run, Vec<String>), anyhow::Error>> =
        run_dirs.par_iter().map(|p| load_run(p)).collect();
    let mut runs = Vec::new();
    for r in loaded {
        let (run, w) = r?;
        warnings.extend(w);
        runs.push(run);
    }
    runs.sort_by(|a, b| a.dir_name.cmp(&b.dir_name));

    let preflight = read_json_opt::<PreflightStatus>(
        &root.join("preflight/preflight_status.json"),
        &mut warnings,
    )?;
    let reference_rates =
        read_json_opt::<ReferenceRates>(&root.join("reference_rates.json"), &mut warnings)?;
    let manifest_path = root.join("manifest.jsonl");
    let manifest = if manifest_path.exists() {
        let l = jsonl::read_jsonl::<ManifestRow>(&manifest_path)?;
        warnings.extend(l.warnings);
        l.rows
    } else {
        Vec::new()
    };
    let profile = jsonl::read_regular(&root.join("profile.toml"), 64 << 20)
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    Ok(Dataset {
        root: root.to_path_buf(),
        runs,
        preflight,
        reference_rates,
        manifest,
        profile,
        warnings,
    })
}

fn looks_like_run(dir: &Path) -> bool {
    dir.join("config.json").exists()
        || std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| parse_file_name(&e.file_name().to_string_lossy()).is_some())
            })
            .unwrap_or(false)
}

fn read_json_opt<T: serde::de::DeserializeOwned>(
    path: &Path,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<T>> {
    // Regular files only, at most 64 MiB: a FIFO or device named config.json must not hang.
    match jsonl::read_regular(path, 64 << 20) {
        Ok(bytes) => {
            let de = &mut serde_json::Deserializer::from_slice(&bytes);
            let v = serde_path_to_error::deserialize(de).map_err(|e| {
                let field = e.path().to_string();
                anyhow::Error::new(e.into_inner())
                    .context(format!("{}: field `{field}`", path.display()))
            })?;
            Ok(Some(v))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let _ = warnings;
            Ok(None)
        }
        Err(e) => Err(anyhow::Error::new(e).context(path.display().to_string())),
    }
}

/// `<date>_<config>_l<k>` → (config, k). Falls back to (everything after the first `_`, 0).
pub fn parse_run_dir_name(name: &str) -> (String, u32) {
    let rest = name.split_once('_').map_or(name, |(_, r)| r);
    if let Some((cfg, l)) = rest.rsplit_once("_l")
        && let Ok(k) = l.parse::<u32>()
    {
        return (cfg.to_owned(), k);
    }
    (rest.to_owned(), 0)
}

/// Loads one run directory (with the warnings met).
pub fn load_run(path: &Path) -> anyhow::Result<(Run, Vec<String>)> {
    let dir_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut warnings = Vec::new();
    let run_config = read_json_opt::<RunConfig>(&path.join("config.json"), &mut warnings)?;
    let summary = read_json_opt::<RunSummary>(&path.join("summary.json"), &mut warnings)?;
    let (config, launch) = match &run_config {
        Some(c) => (c.config.clone(), c.launch),
        None => {
            warnings.push(format!(
                "{}: no config.json; config and launch taken from the directory name",
                path.display()
            ));
            parse_run_dir_name(&dir_name)
        }
    };
    let env = jsonl::read_regular(&path.join("env.txt"), 64 << 20)
        .map(|t| env::parse_env_txt(&String::from_utf8_lossy(&t)))
        .unwrap_or_default();
    let mut artifacts = BTreeMap::new();
    for f in RUN_FILES {
        artifacts.insert(f.to_owned(), path.join(f).exists());
    }

    let mut files: Vec<(FileKind, Phase, String, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((kind, phase, cell)) = parse_file_name(&name) {
            if phase == Phase::Preflight {
                continue;
            }
            files.push((kind, phase, cell, e.path()));
        }
    }
    // A cell may exist as both .jsonl and .jsonl.zst (archiving in progress): prefer the plain one.
    files.sort_by(|a, b| (a.1, &a.2, a.0 as u8, &a.3).cmp(&(b.1, &b.2, b.0 as u8, &b.3)));
    files.dedup_by(|later, earlier| {
        later.0 == earlier.0 && later.1 == earlier.1 && later.2 == earlier.2
    });

    let parsed: Vec<anyhow::Result<ParsedFile>> = files
        .par_iter()
        .map(|(kind, phase, cell, p)| {
            let (parsed, w) = match kind {
                FileKind::Requests => {
                    let l = jsonl::read_jsonl::<RequestRecord>(p)?;
                    (Parsed::Requests(l.rows), l.warnings)
                }
                FileKind::Metrics => {
                    let l = jsonl::read_jsonl::<MetricsSample>(p)?;
                    (Parsed::Metrics(l.rows), l.warnings)
                }
                FileKind::EngineStep => {
                    let l = jsonl::read_jsonl::<StepRecord>(p)?;
                    (Parsed::Steps(l.rows), l.warnings)
                }
            };
            Ok((*kind, *phase, cell.clone(), parsed, w))
        })
        .collect();

    let mut cells: BTreeMap<(Phase, String), RunCell> = BTreeMap::new();
    for r in parsed {
        let (_, phase, cell, parsed, w) = r?;
        warnings.extend(w);
        let rc = cells.entry((phase, cell)).or_default();
        match parsed {
            Parsed::Requests(v) => {
                rc.requests = v;
                rc.has_requests = true;
            }
            Parsed::Metrics(v) => {
                rc.metrics = v;
                rc.has_metrics = true;
            }
            Parsed::Steps(v) => {
                rc.steps = v;
                rc.has_steps = true;
            }
        }
    }
    if let Some(s) = &summary {
        for h in s.cells.values() {
            if let Some(rc) = cells.get_mut(&(h.phase, h.cell.clone())) {
                rc.health = Some(h.clone());
            }
        }
    }
    let run_placement = run_config.as_ref().and_then(|c| c.placement.clone());
    for ((phase, cell), rc) in cells.iter_mut() {
        rc.placement = summary
            .as_ref()
            .and_then(|s| s.placement.get(&format!("{phase}/{cell}")).cloned())
            .or_else(|| run_placement.clone());
    }
    for ((phase, cell), rc) in &cells {
        if !rc.has_requests {
            warnings.push(format!(
                "{}: {phase}/{cell}: requests file missing; cell has no latency data",
                path.display()
            ));
        }
        if !rc.has_metrics && rc.has_requests {
            warnings.push(format!(
                "{}: {phase}/{cell}: metrics file missing; queue criterion not evaluable",
                path.display()
            ));
        }
        if rc.health.is_none() && rc.has_requests {
            warnings.push(format!(
                "{}: {phase}/{cell}: no collector summary; window taken from the request schedule",
                path.display()
            ));
        }
        for r in rc.requests.iter().take(1) {
            if r.config != config {
                warnings.push(format!(
                    "{}: {phase}/{cell}: records say config `{}`, config.json says `{config}`; using config.json",
                    path.display(),
                    r.config
                ));
            }
        }
    }
    Ok((
        Run {
            dir_name,
            path: path.to_path_buf(),
            config,
            launch,
            run_config,
            summary,
            env,
            cells,
            artifacts,
        },
        warnings,
    ))
}

/// One parsed raw file: (kind, phase, cell, rows, warnings).
type ParsedFile = (FileKind, Phase, String, Parsed, Vec<String>);

enum Parsed {
    Requests(Vec<RequestRecord>),
    Metrics(Vec<MetricsSample>),
    Steps(Vec<StepRecord>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell rerun on another slot keeps its own placement (summary.json's, per cell); the
    /// others fall back to config.json's; calibration launches are plain launches like any other.
    #[test]
    fn placement_per_cell_and_calibration_runs_pooled() {
        use ctax_schema::{Phase, Status};
        let tmp = tempfile::tempdir().unwrap();
        let place = |slot: u32, calibration: bool| Placement {
            slot,
            slots: 2,
            calibration,
            ..Default::default()
        };
        for (name, cal) in [
            ("20260101-000000_plain_l0", false),
            ("20260101-000001_plain_l1", true),
        ] {
            let d = tmp.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            let rc = RunConfig {
                schema_version: 1,
                config: "plain".into(),
                launch: u32::from(cal),
                run_dir: name.into(),
                phases: vec![Phase::A],
                cells: vec![],
                model: "m".into(),
                served_model_name: "m".into(),
                port: 1,
                extra: serde_json::json!({"stage": "A"}),
                simulated: true,
                placement: Some(place(0, cal)),
            };
            std::fs::write(d.join("config.json"), serde_json::to_vec(&rc).unwrap()).unwrap();
            let mut summary = RunSummary::default();
            summary.placement.insert("A/r4_i8_o8".into(), place(1, cal));
            std::fs::write(
                d.join("summary.json"),
                serde_json::to_vec(&summary).unwrap(),
            )
            .unwrap();
            for cell in ["r4_i8_o8", "r8_i8_o8"] {
                let r = RequestRecord {
                    request_id: ctax_schema::request_id("plain", rc.launch, Phase::A, cell, 0),
                    config: "plain".into(),
                    launch: rc.launch,
                    phase: Phase::A,
                    cell: cell.into(),
                    rate: 4.0,
                    input_len: 8,
                    output_len: 8,
                    seq: 0,
                    t_intended_ns: 1,
                    t_send_ns: Some(1),
                    t_first_token_ns: Some(2),
                    t_last_token_ns: Some(3),
                    t_end_ns: Some(3),
                    events: vec![],
                    prompt_tokens: Some(8),
                    completion_tokens: Some(8),
                    inflight_at_send: 0,
                    warmup: false,
                    status: Status::Ok,
                    http_status: Some(200),
                    error: None,
                };
                let mut line = serde_json::to_vec(&r).unwrap();
                line.push(b'\n');
                std::fs::write(d.join(format!("requests_A_{cell}.jsonl")), line).unwrap();
            }
        }
        let ds = load(tmp.path()).unwrap();
        assert_eq!(ds.runs.len(), 2);
        assert_eq!(
            ds.runs.iter().map(Run::is_calibration).collect::<Vec<_>>(),
            vec![false, true]
        );
        let run = &ds.runs[0];
        let slot_of = |cell: &str| {
            run.cells[&(Phase::A, cell.to_owned())]
                .placement
                .as_ref()
                .map(|p| p.slot)
        };
        assert_eq!(
            slot_of("r4_i8_o8"),
            Some(1),
            "summary.json's per-cell placement"
        );
        assert_eq!(slot_of("r8_i8_o8"), Some(0), "config.json's");
        let df = frames::requests_frame(&ds, false).unwrap();
        let slots: Vec<Option<u32>> = df.column("slot").unwrap().u32().unwrap().iter().collect();
        assert_eq!(df.height(), 4, "calibration requests are in the table too");
        assert_eq!(
            slots.into_iter().collect::<std::collections::BTreeSet<_>>(),
            [Some(0), Some(1)].into_iter().collect()
        );
    }

    #[test]
    fn run_dir_names() {
        assert_eq!(
            parse_run_dir_name("20261129-101500_mooncake_both_l1"),
            ("mooncake_both".into(), 1)
        );
        assert_eq!(parse_run_dir_name("2026-11-29_plain"), ("plain".into(), 0));
    }
}
