//! Ingest: a results root on disk → typed rows grouped by run and cell, plus polars frames
//! ([`frames`]) and a Parquet export. Missing files make a cell (or part of it) missing with a
//! warning, never a panic; malformed lines are errors naming file, line and field.
//!
//! Which directories are runs and which file feeds which cell: [`names`]. What happens to each
//! request record (kept, rejected by a rule, duplicate, identity mismatch) and whether a cell's
//! data is whole: [`accounting`].
//!
//! Length: 497 lines of code; the rest of the file is its unit tests (kept next to the rules).

pub mod accounting;
pub(crate) mod civil;
/// The archive's columns encodings live in the raw-data contract (`ctax_schema`), where the fuzz
/// targets reach them without polars.
pub(crate) use ctax_schema::{columns, number_columns, request_columns};
pub(crate) mod engine_log;
pub(crate) mod env;
pub mod frames;
pub(crate) mod gpu_model;
pub mod gpu_telemetry;
pub(crate) mod jsonl;
pub(crate) mod machine;
pub(crate) mod names;
pub(crate) mod step_slices;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context;
use ctax_schema::{
    CellHealth, CellKey, FileKind, ManifestRow, MetricsSample, Phase, Placement, PreflightStatus,
    ReferenceRates, RequestRecord, RunConfig, RunSummary, StepRecord,
};
use rayon::prelude::*;
use serde::de::DeserializeOwned;

pub use accounting::{AccountRow, CellAccount};
pub(crate) use jsonl::IngestError;
pub(crate) use names::NotLoaded;

/// Raw data of one cell of one run (launch).
#[derive(Debug, Default, Clone)]
pub struct RunCell {
    /// The kept request records (see [`accounting`]): the only ones any statistic reads.
    pub requests: Vec<RequestRecord>,
    pub metrics: Vec<MetricsSample>,
    pub steps: Vec<StepRecord>,
    /// The collector's record of the cell (`summary.json`), when present and consistent.
    pub health: Option<CellHealth>,
    /// Where the cell was measured (GPU slot, GPU index/UUID, CPU set): `summary.json`'s
    /// per-cell placement, else the run's; `None` for runs made before slots existed.
    pub placement: Option<Placement>,
    /// What happened to every record of the requests file, and whether the data is whole.
    pub account: CellAccount,
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
    /// Keyed by (phase, canonical cell name `r<rate>_i<in>_o<out>`).
    pub cells: BTreeMap<(Phase, String), RunCell>,
    /// Which of the seed's per-run artifacts exist.
    pub artifacts: BTreeMap<String, bool>,
}

impl Run {
    pub(crate) fn simulated(&self) -> bool {
        self.run_config.as_ref().is_some_and(|c| c.simulated)
    }

    /// Where the (latest) launch in this directory ran; `None` before slots existed.
    pub(crate) fn placement(&self) -> Option<&Placement> {
        self.run_config.as_ref().and_then(|c| c.placement.as_ref())
    }

    /// A launch of the GPU-to-GPU calibration round (plain on every slot at once).
    pub fn is_calibration(&self) -> bool {
        self.placement().is_some_and(|p| p.calibration)
    }

    /// The accounting row of each cell with a requests file.
    fn account_rows(&self) -> impl Iterator<Item = AccountRow> + '_ {
        self.cells
            .iter()
            .filter(|(_, rc)| rc.has_requests)
            .map(|((phase, cell), rc)| AccountRow {
                run: self.dir_name.clone(),
                config: self.config.clone(),
                launch: self.launch,
                phase: *phase,
                cell: cell.clone(),
                account: rc.account.clone(),
            })
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
    /// One row per (run, cell) with a requests file, calibration launches included.
    pub accounting: Vec<AccountRow>,
    /// Entries of the root that look like runs but were not loaded (copies, links,
    /// unreadable directories, config.json disagreeing with the name).
    pub not_loaded: Vec<NotLoaded>,
    pub warnings: Vec<String>,
    /// What each real run's server logs say about its engine, read on first use
    /// ([`Dataset::engine_facts`]) and kept: an analysis run twice (the verdicts' sensitivity
    /// pass) reads the logs once. Never refreshed: `runs` is not changed after loading.
    engine: OnceLock<BTreeMap<String, engine_log::EngineFacts>>,
}

impl Dataset {
    /// [`engine_log::read_run`] of every run that is not simulated, keyed by run directory;
    /// read in parallel on first call (decompressing and parsing the logs is seconds on the
    /// archive), then kept.
    pub(crate) fn engine_facts(&self) -> &BTreeMap<String, engine_log::EngineFacts> {
        self.engine.get_or_init(|| {
            self.runs
                .par_iter()
                .filter(|r| !r.simulated())
                .filter_map(|r| engine_log::read_run(&r.path).map(|f| (r.dir_name.clone(), f)))
                .collect()
        })
    }

    /// A dataset of the given runs alone (no pre-flight, manifest or profile): e.g. one run
    /// directory's quick statistics after its launch.
    pub(crate) fn of_runs(root: &Path, runs: Vec<Run>, warnings: Vec<String>) -> Dataset {
        Dataset {
            root: root.to_path_buf(),
            accounting: runs.iter().flat_map(Run::account_rows).collect(),
            runs,
            preflight: None,
            reference_rates: None,
            manifest: Vec::new(),
            profile: None,
            not_loaded: Vec::new(),
            warnings,
            engine: OnceLock::new(),
        }
    }
}

/// The seed's per-run artifacts that are single files.
const RUN_FILES: [&str; 6] = [
    "config.json",
    "launch.sh",
    "vllm_stdout.log",
    "vllm_stderr.log",
    "summary.json",
    "env.txt",
];

/// The marker of a results root's skeleton (`ctax skeleton`, `orchestrate::skeleton`): a root
/// holding it lacks the raw records of its finished launches, so it is never loaded as a dataset.
pub const SKELETON_MARKER: &str = ".ctax/skeleton.json";

/// `ctax cat FILE`: writes a raw file's bytes as the collector wrote them, whatever its stored
/// form (plain, `.zst`, columns `.cols`).
pub fn cat(path: &Path, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    let f = jsonl::open_regular(path).with_context(|| format!("opening {}", path.display()))?;
    let mut r = jsonl::decoded(path, f).with_context(|| format!("decoding {}", path.display()))?;
    std::io::copy(&mut r, out).with_context(|| format!("reading {}", path.display()))?;
    Ok(())
}

/// Loads everything under `root`.
pub fn load(root: &Path) -> anyhow::Result<Dataset> {
    anyhow::ensure!(root.is_dir(), "{}: not a directory", root.display());
    anyhow::ensure!(
        !root.join(SKELETON_MARKER).exists(),
        "{}: a skeleton of a results root (`ctax skeleton`; {SKELETON_MARKER} names the full \
         root): the raw records of its finished launches are not here, so it cannot be \
         analysed; analyse the full root",
        root.display()
    );
    let mut warnings = Vec::new();
    let (candidates, mut not_loaded) =
        names::run_dirs(root).with_context(|| format!("reading {}", root.display()))?;
    let run_dirs = agreeing_runs(candidates, &mut not_loaded)?;
    for n in &not_loaded {
        warnings.push(format!(
            "{}: NOT LOADED: {}",
            root.join(&n.name).display(),
            n.reason
        ));
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
    let accounting: Vec<AccountRow> = runs.iter().flat_map(Run::account_rows).collect();

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
        accounting,
        not_loaded,
        warnings,
        engine: OnceLock::new(),
    })
}

/// The candidate run directories whose `config.json` agrees with their name, and only the
/// first (in name order) of several that claim the same (config, launch, stage); the others
/// go to `not_loaded`.
fn agreeing_runs(
    candidates: Vec<PathBuf>,
    not_loaded: &mut Vec<NotLoaded>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut seen: BTreeMap<(String, u32, String), String> = BTreeMap::new();
    let mut out = Vec::new();
    for dir in candidates {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rc = read_json_opt::<RunConfig>(&dir.join("config.json"), &mut Vec::new())?;
        if let Some(why) = rc
            .as_ref()
            .and_then(|rc| names::config_disagrees(&name, rc))
        {
            not_loaded.push(NotLoaded { name, reason: why });
            continue;
        }
        let key = match &rc {
            Some(rc) => (
                rc.config.clone(),
                rc.launch,
                rc.extra
                    .get("stage")
                    .and_then(|s| s.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            ),
            None => {
                let n = names::parse_run_dir_name(&name).expect("run_dirs checked the name");
                (n.config, n.launch, String::new())
            }
        };
        if let Some(first) = seen.get(&key) {
            not_loaded.push(NotLoaded {
                name,
                reason: format!(
                    "the same config, launch and stage ({} l{}{}) as {first}: a copy of a run is \
                     not another launch",
                    key.0,
                    key.1,
                    if key.2.is_empty() {
                        String::new()
                    } else {
                        format!(" stage {}", key.2)
                    }
                ),
            });
            continue;
        }
        seen.insert(key, name);
        out.push(dir);
    }
    not_loaded.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
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

/// Reads every file of one raw stream and resolves copies ([`names::choose`]).
fn read_stream<T: DeserializeOwned + PartialEq>(
    s: &names::RawStream,
) -> anyhow::Result<(PathBuf, jsonl::Lines<T>, Option<String>)> {
    let parsed = s
        .files
        .iter()
        .map(|p| Ok((p.clone(), jsonl::read_jsonl::<T>(p)?)))
        .collect::<Result<Vec<_>, IngestError>>()?;
    names::choose(parsed)
}

/// Loads one run directory (with the warnings met).
pub(crate) fn load_run(path: &Path) -> anyhow::Result<(Run, Vec<String>)> {
    let dir_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut warnings = Vec::new();
    let run_config = read_json_opt::<RunConfig>(&path.join("config.json"), &mut warnings)?;
    let summary = read_json_opt::<RunSummary>(&path.join("summary.json"), &mut warnings)?;
    let (config, launch) = match (&run_config, names::parse_run_dir_name(&dir_name)) {
        (Some(c), _) => (c.config.clone(), c.launch),
        (None, Some(n)) => {
            warnings.push(format!(
                "{}: no config.json; config and launch taken from the directory name",
                path.display()
            ));
            (n.config, n.launch)
        }
        (None, None) => anyhow::bail!(
            "{}: no config.json and not named `<YYYYMMDD-HHMMSS>_<config>_l<k>`: cannot tell \
             which config and launch it holds",
            path.display()
        ),
    };
    let env = jsonl::read_regular(&path.join("env.txt"), 64 << 20)
        .map(|t| env::parse_env_txt(&String::from_utf8_lossy(&t)))
        .unwrap_or_default();
    let mut artifacts = BTreeMap::new();
    for f in RUN_FILES {
        // `ctax archive` compresses a large server log to `X.log.zst`: still present.
        let present = path.join(f).exists() || path.join(format!("{f}.zst")).exists();
        artifacts.insert(f.to_owned(), present);
    }

    // The collector's record and the placement of each cell, by typed cell key.
    let mut health: BTreeMap<(Phase, String), &CellHealth> = BTreeMap::new();
    let mut placement: BTreeMap<(Phase, String), &Placement> = BTreeMap::new();
    if let Some(s) = &summary {
        for (k, h) in &s.cells {
            match CellKey::parse(k) {
                Some(key) => {
                    health.insert((key.phase, key.cell.name()), h);
                }
                None => warnings.push(format!(
                    "{}: summary.json: cell key `{k}` is not `<phase>/r<rate>_i<in>_o<out>`; \
                     ignored",
                    path.display()
                )),
            }
        }
        for (k, p) in &s.placement {
            if let Some(key) = CellKey::parse(k) {
                placement.insert((key.phase, key.cell.name()), p);
            }
        }
    }

    let (streams, w) =
        names::raw_streams(path).with_context(|| format!("reading {}", path.display()))?;
    warnings.extend(w);
    let parsed: Vec<anyhow::Result<ParsedStream>> = streams
        .par_iter()
        .map(|s| {
            let key = (s.phase, s.cell_name());
            let (file, parsed, cut_short, mut w) = match s.kind {
                FileKind::Requests => {
                    let (file, lines, chosen) = read_stream::<RequestRecord>(s)?;
                    let mut w = lines.warnings.clone();
                    w.extend(chosen);
                    let cut_short = lines.cut_short.clone();
                    let state = match health.get(&key) {
                        Some(h) => match accounting::health_problem(h) {
                            None => Ok(*h),
                            Some(p) => Err(p),
                        },
                        None if summary.is_none() => Err("no summary.json in the run directory \
                             (the collector was killed before it finished a cell?)"
                            .to_owned()),
                        None => Err("no entry for this cell in summary.json (the collector was \
                                     killed during it?)"
                            .to_owned()),
                    };
                    let id = accounting::Identity {
                        config: &config,
                        launch,
                        phase: s.phase,
                        cell: &s.cell,
                    };
                    let a = accounting::account_requests(&file, lines, &id, state);
                    w.extend(a.warnings);
                    (file, Parsed::Requests(a.kept, a.account), cut_short, w)
                }
                FileKind::Metrics => {
                    let (file, l, chosen) = read_stream::<MetricsSample>(s)?;
                    let mut w = l.warnings;
                    w.extend(chosen);
                    (file, Parsed::Metrics(l.rows), l.cut_short, w)
                }
                FileKind::EngineStep => {
                    let (file, l, chosen) = read_stream::<StepRecord>(s)?;
                    let mut w = l.warnings;
                    w.extend(chosen);
                    (file, Parsed::Steps(l.rows), l.cut_short, w)
                }
            };
            // A stream cut short loses records: the cell's data is not whole.
            let cut_short = cut_short.map(|c| {
                let name = file
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                let why = c
                    .strip_prefix(&file.display().to_string())
                    .unwrap_or(&c)
                    .trim_start_matches(':')
                    .trim();
                format!("`{name}` is cut short: {why}")
            });
            w.shrink_to_fit();
            Ok((key, parsed, cut_short, w))
        })
        .collect();

    let mut cells: BTreeMap<(Phase, String), RunCell> = BTreeMap::new();
    for r in parsed {
        let (key, parsed, cut_short, w) = r?;
        warnings.extend(w);
        let rc = cells.entry(key).or_default();
        match parsed {
            Parsed::Requests(v, account) => {
                rc.requests = v;
                rc.account = account;
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
        rc.account.incomplete.extend(cut_short);
    }
    // A cell whose per-cell step file `ctax archive --slim-steps` removed (listed in
    // steps_slimmed.json) is cut from the raw logs, if they still hold what it was verified
    // against; otherwise it stays without steps, with a warning.
    match step_slices::SlimMarker::read(path) {
        Err(e) => warnings.push(format!("{e:#}; no step records are cut from the raw logs")),
        Ok(None) => {}
        Ok(Some(marker)) => {
            let unsliced: Vec<_> = health
                .iter()
                .filter(|(k, _)| !cells.get(*k).is_some_and(|rc| rc.has_steps))
                .filter(|((phase, cell), _)| marker.lists(*phase, cell))
                .collect();
            if !unsliced.is_empty() {
                match marker.verified_logs(path) {
                    Err(why) => warnings.push(format!(
                        "{}: {why}: the {} slimmed cells have no step records",
                        path.display(),
                        unsliced.len()
                    )),
                    Ok(l) => {
                        for (k, h) in unsliced {
                            let rc = cells.entry(k.clone()).or_default();
                            rc.steps = l.of_cell(h).to_vec();
                            rc.has_steps = true;
                        }
                    }
                }
            }
        }
    }
    let run_placement = run_config.as_ref().and_then(|c| c.placement.clone());
    for (key, rc) in cells.iter_mut() {
        rc.health = health
            .get(key)
            .filter(|h| accounting::health_problem(h).is_none())
            .map(|h| (*h).clone());
        rc.placement = placement
            .get(key)
            .map(|p| (*p).clone())
            .or_else(|| run_placement.clone());
    }
    for ((phase, cell), rc) in &cells {
        if !rc.has_requests {
            warnings.push(format!(
                "{}: {phase}/{cell}: requests file missing; cell has no latency data",
                path.display()
            ));
            continue;
        }
        if !rc.has_metrics {
            warnings.push(format!(
                "{}: {phase}/{cell}: metrics file missing; queue criterion not evaluable",
                path.display()
            ));
        }
        for why in &rc.account.incomplete {
            warnings.push(format!(
                "{}: {phase}/{cell}: data incomplete: {why}",
                path.display()
            ));
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

/// One parsed raw stream: (phase, cell), rows, why it is cut short, warnings.
type ParsedStream = ((Phase, String), Parsed, Option<String>, Vec<String>);

enum Parsed {
    Requests(Vec<RequestRecord>, CellAccount),
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
                    rate: ctax_schema::Cell::parse(cell).unwrap().rate,
                    input_len: 8,
                    output_len: 8,
                    seq: 0,
                    t_intended_ns: 1,
                    t_send_ns: Some(1),
                    t_first_token_ns: Some(2),
                    t_last_token_ns: Some(3),
                    t_end_ns: Some(3),
                    events: vec![ctax_schema::Event(2, 1), ctax_schema::Event(3, 7)],
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
}
