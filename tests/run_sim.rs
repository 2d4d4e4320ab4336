//! `ctax run` end to end against the simulated engine (ctax-sim): stages, artifacts, resume,
//! Ctrl-C, a busy port, a server that fails to start. Real vLLM: tests/run_smoke_vllm.rs.

mod ports;
use ports::free_port;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ctax_schema::{ManifestRow, RowStatus, RunSummary};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shipped sim profile with a free port and optional text substitutions.
fn profile(dir: &Path, port: u16, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("launch/profiles/sim.toml")).unwrap();
    text = text.replace("port = 18432", &format!("port = {port}"));
    for (a, b) in edits {
        assert!(text.contains(a), "profile edit target `{a}` not found");
        text = text.replace(a, b);
    }
    let p = dir.join("profile.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn ctax(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ctax"));
    c.args(args).arg("--repo").arg(repo());
    c
}

fn run(profile: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut c = ctax(&[
        "run",
        "--profile",
        profile.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    c.args(extra);
    c.output().unwrap()
}

fn manifest(out: &Path) -> Vec<ManifestRow> {
    std::fs::read_to_string(out.join("manifest.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("config.json").exists())
        .collect();
    v.sort();
    v
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Rewrites `summary.json` at `path` so that cell `key` ended incomplete with `reason`.
fn mark_incomplete(path: &Path, key: &str, reason: &str) {
    let mut s: RunSummary = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let h = s.cells.get_mut(key).unwrap();
    h.complete = false;
    h.incomplete_reason = Some(reason.to_owned());
    std::fs::write(path, serde_json::to_vec(&s).unwrap()).unwrap();
}

/// Whole sweep: every stage runs, every seed artifact exists, the report is rendered, and a
/// second run of the same command resumes with nothing left to do.
#[test]
fn sim_sweep_produces_every_artifact_and_resume_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let o = run(&p, &out, &[]);
    assert!(o.status.success(), "ctax run failed: {}", stderr(&o));
    for f in [
        "MANIFEST.md",
        "manifest.jsonl",
        "profile.toml",
        "reference_rates.json",
        "preflight/preflight_status.json",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let dirs = run_dirs(&out);
    // 3 configs × (Phase A + Phase B) launches.
    assert_eq!(dirs.len(), 6, "{dirs:?}");
    for d in &dirs {
        for f in [
            "config.json",
            "launch.sh",
            "vllm_stdout.log",
            "vllm_stderr.log",
            "env.txt",
            "summary.json",
        ] {
            assert!(d.join(f).exists(), "{}/{f} missing", d.display());
        }
        let s: RunSummary =
            serde_json::from_slice(&std::fs::read(d.join("summary.json")).unwrap()).unwrap();
        assert!(
            !s.cells.is_empty() && s.cells.values().all(|h| h.complete),
            "{}",
            d.display()
        );
        assert_eq!(s.stats.len(), s.cells.len(), "per-cell statistics written");
        // The launch warm-up (profile: 2 s) covers the first cell the fresh server measured;
        // the other cells keep their own 1 s.
        let mut by_start: Vec<_> = s.cells.values().collect();
        by_start.sort_by_key(|h| h.t_start_ns);
        let warm = |h: &ctax_schema::CellHealth| (h.t_warmup_end_ns - h.t_start_ns) as f64 / 1e9;
        assert!((warm(by_start[0]) - 2.0).abs() < 1e-6, "{}", d.display());
        assert!(by_start[1..].iter().all(|h| (warm(h) - 1.0).abs() < 1e-6));
        for key in s.cells.keys() {
            let (phase, cell) = key.split_once('/').unwrap();
            for kind in ["requests", "metrics", "engine_step"] {
                let f = d.join(format!("{kind}_{phase}_{cell}.jsonl"));
                assert!(
                    std::fs::metadata(&f).map(|m| m.len() > 0).unwrap_or(false),
                    "{} empty/missing",
                    f.display()
                );
            }
        }
    }
    let rows = manifest(&out);
    assert_eq!(
        rows.iter().filter(|r| r.stage.starts_with('0')).count(),
        3,
        "one pre-flight row per config"
    );
    assert_eq!(
        rows.iter()
            .filter(|r| r.status == RowStatus::Ok && !r.stage.starts_with('0'))
            .count(),
        6
    );
    let md = std::fs::read_to_string(out.join("MANIFEST.md")).unwrap();
    assert!(
        md.contains("| 1 Phase A | plain |") && md.contains("| 3 Phase B | mooncake_both |"),
        "{md}"
    );
    assert!(
        out.join("analysis/summary.json").exists() && out.join("analysis/verdicts.json").exists()
    );
    assert!(out.join("analysis/requests.parquet").exists());
    // Stage 4 is the pipeline behind `ctax analyze` and `ctax report`: the report carries the
    // data it was drawn from, byte for byte what analysis/ holds.
    for f in ["summary.json", "verdicts.json"] {
        assert_eq!(
            std::fs::read(out.join("analysis").join(f)).unwrap(),
            std::fs::read(out.join("report/data").join(f)).unwrap(),
            "{f}"
        );
    }
    let html = std::fs::read_to_string(out.join("report/index.html")).unwrap();
    assert!(
        html.to_lowercase().contains("simulated"),
        "the report says the data is simulated"
    );

    // Resume: everything complete → no launch at all.
    let o = run(&p, &out, &["--skip-stage", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        manifest(&out).len(),
        rows.len(),
        "no new manifest row on a complete root"
    );
    assert!(
        stderr(&o).contains("all 3 cells complete, skipped"),
        "{}",
        stderr(&o)
    );
}

/// A cell that `max_cell_s` stopped (an overload) is kept on resume, and the launch is skipped
/// with a line saying so; `--rerun-capped` reruns it, alone, in the same run directory.
#[test]
fn resume_keeps_capped_cells_unless_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let args = [
        "--configs",
        "plain",
        "--skip-stage",
        "3",
        "--skip-stage",
        "4",
    ];
    let o = run(&p, &out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = run_dirs(&out).pop().unwrap();
    let path = dir.join("summary.json");
    // The collector's words for a cell its cap stopped while draining.
    mark_incomplete(
        &path,
        "A/r8_i512_o32",
        &format!(
            "{}150s reached while draining; 3 in-flight requests cancelled",
            ctax_schema::CAPPED_PREFIX
        ),
    );

    let o = run(&p, &out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("skipped: 2 of 3 cells complete, 1 stopped by max_cell_s"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("superseded").exists(), "nothing rerun");
    let s: RunSummary = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(s.cells["A/r8_i512_o32"].capped());

    let mut rerun = args.to_vec();
    rerun.push("--rerun-capped");
    let o = run(&p, &out, &rerun);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming 1 of 3 cells"),
        "{}",
        stderr(&o)
    );
    assert_eq!(run_dirs(&out).len(), 1, "same run directory reused");
    let s: RunSummary = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(s.cells["A/r8_i512_o32"].complete);
}

/// An incomplete cell is rerun, alone, in the same run directory; its old files are kept
/// under superseded/.
#[test]
fn resume_reruns_only_incomplete_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let o = run(&p, &out, &PLAIN_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = run_dirs(&out).pop().unwrap();
    let path = dir.join("summary.json");
    mark_incomplete(
        &path,
        "A/r8_i512_o32",
        "server died: test: pretend the server died",
    );
    let before = std::fs::read(dir.join("requests_A_r4_i512_o32.jsonl")).unwrap();

    let o = run(&p, &out, &PLAIN_A);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming 1 of 3 cells"),
        "{}",
        stderr(&o)
    );
    assert_eq!(run_dirs(&out).len(), 1, "same run directory reused");
    assert_eq!(
        std::fs::read(dir.join("requests_A_r4_i512_o32.jsonl")).unwrap(),
        before,
        "complete cell untouched"
    );
    let s: RunSummary = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(s.cells["A/r8_i512_o32"].complete);
    let superseded: Vec<_> = std::fs::read_dir(dir.join("superseded"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(superseded.len(), 1);
    assert!(
        superseded[0]
            .path()
            .join("requests_A_r8_i512_o32.jsonl")
            .exists()
    );
    assert_eq!(
        manifest(&out)
            .iter()
            .filter(|r| r.stage == "1 Phase A")
            .count(),
        2
    );
}

/// A port that is already taken stops the sweep with a clear error before anything launches.
#[test]
fn busy_port_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let p = profile(tmp.path(), port, &[]);
    let o = run(&p, &out, &["--configs", "plain"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("port {port} is already in use")),
        "{}",
        stderr(&o)
    );
    drop(l);
}

/// A server that cannot start: its launch is recorded as failed with the log tail, the sweep
/// goes on with the other configs, and the exit status says not everything ran.
#[test]
fn failed_launch_is_recorded_and_the_sweep_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(
        tmp.path(),
        free_port(),
        &[(
            "noop_connector = [\"--seed\", \"2\", \"--connector-step-us\", \"30\"]",
            "noop_connector = [\"--no-such-flag\"]",
        )],
    );
    let o = run(
        &p,
        &out,
        &["--configs", "plain,noop_connector", "--skip-stage", "4"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let rows = manifest(&out);
    let failed: Vec<_> = rows
        .iter()
        .filter(|r| r.status == RowStatus::Failed)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].config, "noop_connector");
    assert!(
        failed[0]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("exited during startup"),
        "{:?}",
        failed[0].reason
    );
    assert!(
        rows.iter()
            .any(|r| r.config == "plain" && r.stage == "1 Phase A" && r.status == RowStatus::Ok)
    );
    assert!(
        rows.iter()
            .any(|r| r.config == "plain" && r.stage == "3 Phase B"),
        "Phase B still ran for plain"
    );
    assert!(
        !rows
            .iter()
            .any(|r| r.config == "noop_connector" && r.stage == "3 Phase B"),
        "no Phase B for a failed config"
    );
}

/// Ctrl-C in the middle of a launch: the server is stopped (its port is free again), the files
/// written so far are kept, the exit status is 130, and the same command resumes.
#[test]
fn ctrl_c_stops_the_server_keeps_partial_results_and_resume_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(
        tmp.path(),
        port,
        &[(
            "duration_s = 3\nwarmup_s = 1\nmin_completed = 20",
            "duration_s = 8\nwarmup_s = 1\nmin_completed = 20",
        )],
    );
    let mut child = ctax(&[
        "run",
        "--profile",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--configs",
        "plain",
    ])
    .args(["--skip-stage", "3", "--skip-stage", "4"])
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // Wait until the first cell's requests are being written, then interrupt.
    let t0 = Instant::now();
    loop {
        let started = run_dirs(&out)
            .first()
            .is_some_and(|d| d.join("requests_A_r4_i512_o32.jsonl").exists());
        if started {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the sweep never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "the server was stopped"
    );
    let dir = run_dirs(&out).pop().unwrap();
    assert!(
        std::fs::metadata(dir.join("requests_A_r4_i512_o32.jsonl"))
            .unwrap()
            .len()
            > 0,
        "partial data kept"
    );
    let rows = manifest(&out);
    assert_eq!(rows.last().unwrap().status, RowStatus::Interrupted);

    let o = run(&p, &out, &PLAIN_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s.cells.len(), 3);
    assert!(s.cells.values().all(|h| h.complete));
}

/// This machine's boot id: what `ctax run` records as `placement.machine_id`.
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_owned()
}

/// Rewrites the `placement.machine_id` of the run directory `dir` (None: removes it).
fn set_machine(dir: &Path, id: Option<&str>) {
    let path = dir.join("config.json");
    let mut rc: ctax_schema::RunConfig =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    rc.placement.as_mut().unwrap().machine_id = id.map(str::to_owned);
    std::fs::write(&path, serde_json::to_vec(&rc).unwrap()).unwrap();
}

fn config_of(dir: &Path) -> ctax_schema::RunConfig {
    serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap()
}

/// A run directory's cells as its summary.json has them, in the order they started: each
/// cell's key and its warm-up in seconds.
fn cells_by_start(dir: &Path) -> Vec<(String, f64)> {
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let mut by_start: Vec<(&String, &ctax_schema::CellHealth)> = s.cells.iter().collect();
    by_start.sort_by_key(|(_, h)| h.t_start_ns);
    by_start
        .into_iter()
        .map(|(k, h)| (k.clone(), (h.t_warmup_end_ns - h.t_start_ns) as f64 / 1e9))
        .collect()
}

/// Phase A only, plain alone.
const PLAIN_A: [&str; 6] = [
    "--configs",
    "plain",
    "--skip-stage",
    "3",
    "--skip-stage",
    "4",
];

/// Phase A only, plain and one other config.
const PLAIN_NOOP_A: [&str; 6] = [
    "--configs",
    "plain,noop_connector",
    "--skip-stage",
    "3",
    "--skip-stage",
    "4",
];

/// Plain alone in Phase A (the root's plain launch l0 is then recorded on this machine).
fn plain_only(p: &Path, out: &Path) -> PathBuf {
    let o = run(p, out, &PLAIN_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let dirs = run_dirs(out);
    assert_eq!(dirs.len(), 1);
    assert_eq!(
        config_of(&dirs[0]).placement.unwrap().machine_id,
        Some(boot_id()),
        "the launch records this machine's boot id"
    );
    dirs[0].clone()
}

/// A new root (under `dir`) whose only plain launch, l0, is recorded on another machine: the
/// profile and the root.
fn root_with_plain_elsewhere(dir: &Path) -> (PathBuf, PathBuf) {
    let out = dir.join("res");
    let p = profile(dir, free_port(), &[]);
    let plain0 = plain_only(&p, &out);
    set_machine(&plain0, Some("0ther-machine-boot-id"));
    (p, out)
}

/// The Phase A manifest rows of `out`, and each as (config, launch, status).
fn phase_a_rows(out: &Path) -> (Vec<ManifestRow>, Vec<(String, u32, RowStatus)>) {
    let rows: Vec<ManifestRow> = manifest(out)
        .into_iter()
        .filter(|r| r.stage == "1 Phase A")
        .collect();
    let ids = rows
        .iter()
        .map(|r| (r.config.clone(), r.launch, r.status))
        .collect();
    (rows, ids)
}

/// The run directory of plain's launch `launch`, after asserting it was recorded on this
/// machine.
fn plain_launch_here(out: &Path, launch: u32) -> PathBuf {
    let d = run_dirs(out)
        .into_iter()
        .find(|d| config_of(d).config == "plain" && config_of(d).launch == launch)
        .unwrap();
    assert_eq!(config_of(&d).placement.unwrap().machine_id, Some(boot_id()));
    d
}

/// Every file under `root` with its bytes, sorted by path.
fn tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                v.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    v.sort();
    v
}

/// `--plain-last`: on a machine without plain, plain brackets the new launch — the anchor (l1)
/// first, noop_connector, then the closing plain launch (l2, the next free index) — each
/// recorded on this machine and named in the manifest; running again adds nothing. `--dry-run`
/// first lists exactly those launches in that order (plain l0, complete, skipped) and leaves
/// every file of the root as it was.
#[test]
fn plain_last_brackets_a_machine_s_launches_with_plain() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, out) = root_with_plain_elsewhere(tmp.path());
    let mut args: Vec<&str> = PLAIN_NOOP_A.to_vec();
    args.push("--plain-last");
    let before = tree(&out);
    let mut dry_args = args.clone();
    dry_args.push("--dry-run");
    let o = run(&p, &out, &dry_args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tree(&out) == before, "a dry run writes nothing");
    let listed: Vec<(String, u32, String)> = stderr(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("[ctax] dry run: stage A, "))
        .map(|l| {
            let (_, rest) = l.split_once(": ").unwrap();
            let (unit, what) = rest.split_once(": ").unwrap();
            let (config, launch) = unit.rsplit_once(" l").unwrap();
            (config.to_owned(), launch.parse().unwrap(), what.to_owned())
        })
        .collect();
    let would: Vec<(String, u32)> = listed
        .iter()
        .filter(|(_, _, w)| w.starts_with("would launch"))
        .map(|(c, l, _)| (c.clone(), *l))
        .collect();
    assert_eq!(
        would,
        vec![
            ("plain".into(), 1),
            ("noop_connector".into(), 0),
            ("plain".into(), 2)
        ],
        "{}",
        stderr(&o)
    );
    assert!(
        listed
            .iter()
            .any(|(c, l, w)| c == "plain" && *l == 0 && w == "complete, skipped"),
        "{}",
        stderr(&o)
    );
    let o = run(&p, &out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let boot: String = boot_id().chars().take(8).collect();
    let line = format!(
        "plain l2 stage A: closing plain for this machine (boot {boot}): after Phase A's other launches here (--plain-last)"
    );
    assert!(stderr(&o).contains(&line), "{}", stderr(&o));
    let (rows, ids) = phase_a_rows(&out);
    assert_eq!(
        ids,
        vec![
            ("plain".into(), 0, RowStatus::Ok),
            ("plain".into(), 1, RowStatus::Ok),
            ("noop_connector".into(), 0, RowStatus::Ok),
            ("plain".into(), 2, RowStatus::Ok)
        ],
        "plain before and after the new launch"
    );
    let ran: Vec<(String, u32)> = ids[1..].iter().map(|(c, l, _)| (c.clone(), *l)).collect();
    assert_eq!(ran, would, "the run did what the dry run said");
    // With --reference-rates a real run copies the file into the root; a dry run only reads it.
    let mut rr: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("reference_rates.json")).unwrap()).unwrap();
    rr["notes"]
        .as_array_mut()
        .unwrap()
        .push("a note only the --reference-rates file has".into());
    let other = tmp.path().join("rr.json");
    std::fs::write(&other, serde_json::to_vec(&rr).unwrap()).unwrap();
    assert_ne!(
        std::fs::read(&other).unwrap(),
        std::fs::read(out.join("reference_rates.json")).unwrap(),
        "the test needs a file whose content differs from the root's"
    );
    let before = tree(&out);
    let o = run(
        &p,
        &out,
        &[
            "--configs",
            "plain,noop_connector",
            "--skip-stage",
            "1",
            "--reference-rates",
            other.to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("dry run: stage B"), "{}", stderr(&o));
    assert!(
        tree(&out) == before,
        "a dry run with --reference-rates writes nothing"
    );
    for w in rows[1..].windows(2) {
        assert!(
            w[1].started_unix_ms as f64 >= w[0].started_unix_ms as f64 + w[0].duration_s * 1e3,
            "one after the other"
        );
    }
    assert!(
        rows[3]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("closing plain")
    );
    for l in [1, 2] {
        plain_launch_here(&out, l);
    }
    let n = manifest(&out).len();
    let o = run(&p, &out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("anchor"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("closing"), "{}", stderr(&o));
    assert_eq!(manifest(&out).len(), n, "no new row");
}

/// A root whose only plain launch ran on another machine: adding noop_connector here first runs
/// an anchor plain launch (index 1 = the launch count, the next free one), recorded on this
/// machine and named in the manifest; running again adds no second anchor, and an interrupted
/// anchor is resumed, not replaced.
#[test]
fn a_machine_without_plain_runs_an_anchor_plain_launch_first() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, out) = root_with_plain_elsewhere(tmp.path());
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let boot: String = boot_id().chars().take(8).collect();
    let line = format!(
        "plain l1 stage A: anchor for this machine (boot {boot}): no plain launch of Phase A here measured this sweep's cells yet"
    );
    assert!(stderr(&o).contains(&line), "{}", stderr(&o));
    let (rows, ids) = phase_a_rows(&out);
    assert_eq!(
        ids,
        vec![
            ("plain".into(), 0, RowStatus::Ok),
            ("plain".into(), 1, RowStatus::Ok),
            ("noop_connector".into(), 0, RowStatus::Ok)
        ],
        "the anchor runs before the new non-plain launch"
    );
    assert!(
        rows[2].started_unix_ms as f64 >= rows[1].started_unix_ms as f64 + rows[1].duration_s * 1e3
    );
    let reason = rows[1].reason.as_deref().unwrap_or("");
    assert!(reason.contains("anchor for this machine"), "{reason}");
    assert!(rows[2].reason.is_none(), "{:?}", rows[2].reason);
    let anchor = plain_launch_here(&out, 1);
    let md = std::fs::read_to_string(out.join("MANIFEST.md")).unwrap();
    assert!(md.contains("anchor for this machine"), "{md}");

    // The same command again on this machine: everything is complete, no second anchor.
    let n = manifest(&out).len();
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("anchor"), "{}", stderr(&o));
    assert_eq!(manifest(&out).len(), n, "no new row");

    // The anchor was interrupted here: it is resumed (its incomplete cell only), not replaced.
    mark_incomplete(
        &anchor.join("summary.json"),
        "A/r8_i512_o32",
        "server died: test: pretend the server died",
    );
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("plain l1 stage A: resuming 1 of 3 cells"), "{e}");
    assert!(!e.contains("plain l2"), "{e}");
    assert_eq!(run_dirs(&out).len(), 3, "no new run directory");
}

/// The root's plain launch was recorded on this machine (its boot id): no anchor.
#[test]
fn plain_on_this_machine_needs_no_anchor() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let plain0 = plain_only(&p, &out);
    set_machine(&plain0, Some(&boot_id()));
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("anchor"), "{}", stderr(&o));
    let launches: Vec<(String, u32)> = run_dirs(&out)
        .iter()
        .map(|d| (config_of(d).config, config_of(d).launch))
        .collect();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert!(launches.contains(&("noop_connector".into(), 0)));
}

/// `--phase-b-first 256/64`: every Phase B launch runs that shape first, right after the
/// launch's warm-up (2 s in the sim profile, the other cells 1 s), the others in the profile's
/// order (256/32, 1024/32); `config.json` lists the cells in the order they ran. A shape the
/// profile lacks is refused before anything starts.
#[test]
fn phase_b_first_runs_that_shape_first_after_the_launch_warm_up() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let o = run(
        &p,
        &out,
        &[
            "--configs",
            "plain",
            "--skip-stage",
            "4",
            "--phase-b-first",
            "4096/256",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not one of the profile's Phase B shapes"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("manifest.jsonl").exists(), "nothing started");
    let o = run(
        &p,
        &out,
        &[
            "--configs",
            "plain",
            "--skip-stage",
            "4",
            "--phase-b-first",
            "256/64",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("256/64 first in every launch"),
        "{}",
        stderr(&o)
    );
    let b = run_dirs(&out)
        .into_iter()
        .find(|d| config_of(d).phases.contains(&ctax_schema::Phase::B))
        .expect("a Phase B launch");
    let planned: Vec<(u32, u32)> = config_of(&b)
        .cells
        .iter()
        .map(|c| (c.cell.input_len, c.cell.output_len))
        .collect();
    assert_eq!(planned, [(256, 64), (256, 32), (1024, 32)]);
    let ran = cells_by_start(&b);
    assert_eq!(ran.len(), 3);
    assert!(
        ran[0].0.ends_with("_i256_o64") && ran[1].0.ends_with("_i256_o32"),
        "{ran:?}"
    );
    assert!(
        (ran[0].1 - 2.0).abs() < 1e-6,
        "launch warm-up on the first cell"
    );
}

/// `--phase-a-order 8,16,4`: every Phase A launch runs the rates in that order, the first
/// (8 req/s) with the launch's warm-up (2 s in the sim profile, the other cells 1 s), and
/// `config.json` lists them so; an order that leaves a rate out is refused before anything
/// starts.
#[test]
fn phase_a_order_runs_the_rates_in_that_order() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let o = run(
        &p,
        &out,
        &[&PLAIN_A[..], &["--phase-a-order", "8,4"]].concat(),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("leaves out 16"), "{}", stderr(&o));
    assert!(!out.join("manifest.jsonl").exists(), "nothing started");
    let o = run(
        &p,
        &out,
        &[&PLAIN_A[..], &["--phase-a-order", "8,16,4"]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rates in the order 8, 16, 4 in every launch"),
        "{}",
        stderr(&o)
    );
    let a = run_dirs(&out)
        .into_iter()
        .find(|d| config_of(d).phases.contains(&ctax_schema::Phase::A))
        .expect("a Phase A launch");
    let planned: Vec<f64> = config_of(&a).cells.iter().map(|c| c.cell.rate).collect();
    assert_eq!(planned, [8.0, 16.0, 4.0]);
    let ran = cells_by_start(&a);
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert!(
        ran[0].0.starts_with("A/r8_")
            && ran[1].0.starts_with("A/r16_")
            && ran[2].0.starts_with("A/r4_"),
        "{ran:?}"
    );
    assert!(
        (ran[0].1 - 2.0).abs() < 1e-6,
        "launch warm-up on the first cell"
    );
    assert!(
        (ran[2].1 - 1.0).abs() < 1e-6,
        "the cell warm-up on 4 req/s, now last"
    );
}

/// The ladder grows in new launches: a root measured at 4, 8, 16 req/s, then the profile with
/// 2 req/s added (`--force-profile`); a resume of a cell l0 owes (`--phase-a-rates 8,16`) keeps
/// l0's own plan in its config.json; then `--phase-a-rates 2 --launches 2`: plain l1 and
/// noop_connector l1 run the 2 req/s cell alone, and l0 of both stay byte for byte as they ran
/// (never extended: nothing superseded). The same command without `--phase-a-rates` then has
/// nothing left: each launch is complete in its own plan. A rate outside the profile is refused
/// before anything starts.
#[test]
fn the_ladder_grows_in_new_launches_and_old_ones_are_never_extended() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(tmp.path(), port, &[]);
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = run_dirs(&out);
    assert_eq!(first.len(), 2);
    let wider_dir = tmp.path().join("wider");
    std::fs::create_dir_all(&wider_dir).unwrap();
    let wider = profile(
        &wider_dir,
        port,
        &[("rates = [4, 8, 16]", "rates = [2, 4, 8, 16]")],
    );
    let extra = |more: &[&str]| -> Vec<String> {
        PLAIN_NOOP_A
            .iter()
            .chain(["--force-profile", "--launches", "2"].iter())
            .chain(more.iter())
            .map(|s| (*s).to_owned())
            .collect()
    };
    let args = |v: &[String]| -> Output {
        run(
            &wider,
            &out,
            &v.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };
    let o = args(&extra(&["--phase-a-rates", "2,3"]));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("3 is not one of the profile's Phase A rates (2, 4, 8, 16)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(run_dirs(&out), first, "nothing started");
    // A resume keeps the launch's own plan: noop_connector l0's 8 req/s cell, made incomplete,
    // is resumed by a sweep of 8 and 16 req/s alone, and its config.json still plans 4, 8, 16
    // (were it narrowed to 8, 16, a later sweep would never rerun a 4 req/s cell it owed).
    let noop0 = first
        .iter()
        .find(|d| config_of(d).config == "noop_connector")
        .unwrap()
        .clone();
    mark_incomplete(
        &noop0.join("summary.json"),
        "A/r8_i512_o32",
        "test: cut short",
    );
    let rates_of =
        |d: &Path| -> Vec<f64> { config_of(d).cells.iter().map(|c| c.cell.rate).collect() };
    let o = args(
        &[
            PLAIN_NOOP_A
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>(),
            [
                "--force-profile",
                "--launches",
                "1",
                "--phase-a-rates",
                "8,16",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("noop_connector l0 stage A: resuming 1 of 2 cells"),
        "{}",
        stderr(&o)
    );
    assert_eq!(rates_of(&noop0), [4.0, 8.0, 16.0]);
    assert_eq!(run_dirs(&out), first, "no new launch");
    let before: Vec<_> = first.iter().map(|d| tree(d)).collect();
    let o = args(&extra(&["--phase-a-rates", "2"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("only the rates 2 in this sweep's launches"),
        "{e}"
    );
    for c in ["plain", "noop_connector"] {
        assert!(
            e.contains(&format!(
                "{c} l0 stage A: skipped: its own plan holds none of this sweep's 1 cells"
            )),
            "{e}"
        );
    }
    let after: Vec<_> = first.iter().map(|d| tree(d)).collect();
    assert!(before == after, "the first launches are untouched");
    let dirs = run_dirs(&out);
    assert_eq!(dirs.len(), 4, "{dirs:?}");
    for d in dirs.iter().filter(|d| !first.contains(d)) {
        let rc = config_of(d);
        assert_eq!(rc.launch, 1, "{d:?}");
        let planned: Vec<f64> = rc.cells.iter().map(|c| c.cell.rate).collect();
        assert_eq!(planned, [2.0]);
        let ran: Vec<String> = cells_by_start(d).into_iter().map(|(k, _)| k).collect();
        assert_eq!(ran, ["A/r2_i512_o32"], "{d:?}");
    }
    // Nothing superseded by the ladder (noop_connector l0's superseded/ is its resume's, and its
    // tree is unchanged since).
    for d in dirs.iter().filter(|d| **d != noop0) {
        assert!(!d.join("superseded").exists(), "{d:?}");
    }
    let snapshot: Vec<_> = dirs.iter().map(|d| tree(d)).collect();
    let o = args(&extra(&[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("noop_connector l0 stage A: all 3 cells complete, skipped"),
        "{}",
        stderr(&o)
    );
    assert_eq!(run_dirs(&out), dirs, "no new launch");
    let again: Vec<_> = dirs.iter().map(|d| tree(d)).collect();
    assert!(snapshot == again, "nothing reran");
}

/// `plain_on_every_machine = false`: a root whose plain launch has no recorded machine (another
/// machine, for the rule) gets no anchor.
#[test]
fn plain_on_every_machine_false_adds_no_anchor() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(
        tmp.path(),
        free_port(),
        &[(
            "launches = 1\n",
            "launches = 1\nplain_on_every_machine = false\n",
        )],
    );
    let plain0 = plain_only(&p, &out);
    set_machine(&plain0, None);
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("anchor"), "{}", stderr(&o));
    assert_eq!(run_dirs(&out).len(), 2);
    assert!(
        !manifest(&out)
            .iter()
            .any(|r| r.config == "plain" && r.launch != 0)
    );
}

/// Every process of session `sid` (from /proc/*/stat), then SIGKILL to each.
fn kill_session(sid: i32) {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Fields after the command name `(…)`: state ppid pgrp session …
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        if rest.split_whitespace().nth(3) == Some(&sid.to_string()) {
            pids.push(pid);
        }
    }
    for pid in pids {
        // SAFETY: signalling processes of the test's own session.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// A launch killed hard mid-cell (SIGKILL to ctax, its collector and its server: what a GPU
/// machine given back does) leaves no manifest row, no per-cell placement and a plain raw step
/// log. `ctax archive --finish-killed` writes the row (incomplete, naming the unfinished cell),
/// gives the complete cells their placement and step files, and compresses the log; a resume on
/// another machine (the killed launch's id is set to another one) reruns only the unfinished
/// cells, and the kept cells keep their machine and their steps.
#[test]
fn a_launch_killed_hard_is_finished_by_archive_then_resumed_elsewhere() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(
        tmp.path(),
        free_port(),
        &[(
            "duration_s = 3\nwarmup_s = 1\nmin_completed = 20",
            "duration_s = 4\nwarmup_s = 1\nmin_completed = 20",
        )],
    );
    let mut cmd = ctax(&[
        "run",
        "--profile",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    cmd.args(PLAIN_A).stderr(std::process::Stdio::null());
    // SAFETY: setsid in the child before exec (async-signal-safe).
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // Kill once the first cell is in summary.json and the second one is being measured.
    let t0 = Instant::now();
    let dir = loop {
        let d = run_dirs(&out).into_iter().next();
        let second_running = d.as_ref().is_some_and(|d| {
            let s: RunSummary = std::fs::read(d.join("summary.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            s.cells.len() == 1
                && std::fs::read_dir(d).unwrap().flatten().any(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("requests_")
                        && !s.cells.keys().any(|k| n.contains(&k.replace('/', "_")))
                        && e.metadata().is_ok_and(|m| m.len() > 0)
                })
        });
        if second_running {
            break d.unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "no second cell");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(500));
    kill_session(child.id() as i32);
    child.wait().unwrap();
    let run_dir = config_of(&dir).run_dir;
    assert!(
        !manifest(&out)
            .iter()
            .any(|r| r.run_dir.as_deref() == Some(&run_dir)),
        "a killed launch writes no row"
    );
    let plain_logs = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("engine_step_raw.") && n.ends_with(".jsonl")
            })
            .count()
    };
    assert!(
        plain_logs(&dir) > 0,
        "the killed launch's step log is still plain"
    );
    let before: RunSummary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert!(before.placement.is_empty());
    let kept: Vec<String> = before.cells.keys().cloned().collect();
    assert_eq!(kept.len(), 1);
    set_machine(&dir, Some("k1lled-machine-boot-id"));

    // A live launch looks just like this killed one, so while a sweep holds the root (its
    // shared lock, taken here as `ctax run` takes it) the archive is refused and changes
    // nothing: no row, the step log still plain.
    {
        use connector_tax::orchestrate::root_lock::{Holder, lock};
        let sweep = lock(&out, Holder::Sweep).unwrap();
        assert!(sweep.is_some());
        let o = finish_killed(&out);
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("is in use: a `ctax run`")
                && stderr(&o).contains("archive once it has ended; nothing changed"),
            "{}",
            stderr(&o)
        );
        assert!(
            plain_logs(&dir) > 0
                && manifest(&out)
                    .iter()
                    .all(|r| r.run_dir.as_deref() != Some(&run_dir))
        );
    }

    let o = finish_killed(&out);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{said}{}", stderr(&o));
    assert!(
        said.contains("1 of 3 cells complete") && said.contains("manifest row added"),
        "{said}"
    );
    let row = manifest(&out)
        .into_iter()
        .find(|r| r.run_dir.as_deref() == Some(&run_dir))
        .expect("row added");
    assert_eq!(row.status, RowStatus::Incomplete);
    let reason = row.reason.unwrap();
    assert!(reason.contains("never finished: A/"), "{reason}");
    assert!(row.duration_s > 1.0, "{}", row.duration_s);
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        s.placement[&kept[0]].machine_id.as_deref(),
        Some("k1lled-machine-boot-id")
    );
    assert!(
        s.stats.contains_key(&kept[0]),
        "the kept cell's statistics written"
    );
    assert_eq!(plain_logs(&dir), 0, "the raw step log compressed");
    let step_file = dir.join(format!(
        "engine_step_{}.jsonl.zst",
        kept[0].replace('/', "_")
    ));
    let steps = std::fs::read(&step_file).expect("the kept cell's step file");
    assert!(!zstd::decode_all(&steps[..]).unwrap().is_empty());

    // A resumed attempt killed hard in turn (emulated: it rewrote config.json as it started and
    // left its raw step log plain, one record outside every cell): a second row, its own.
    std::thread::sleep(Duration::from_millis(1100));
    let cfg = std::fs::read(dir.join("config.json")).unwrap();
    std::fs::write(dir.join("config.json"), &cfg).unwrap();
    let resumed_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let rec = serde_json::json!({"t_ns": 1u64, "step_id": 1u64, "pid": 424242u32,
        "step_duration_us": 10.0});
    std::fs::write(dir.join("engine_step_raw.424242.jsonl"), format!("{rec}\n")).unwrap();
    let o = finish_killed(&out);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{said}{}", stderr(&o));
    assert!(said.contains("a resumed attempt"), "{said}");
    let rows: Vec<ManifestRow> = manifest(&out)
        .into_iter()
        .filter(|r| r.run_dir.as_deref() == Some(&run_dir))
        .collect();
    assert_eq!(rows.len(), 2, "the resumed attempt has its row");
    assert!(
        rows[1]
            .reason
            .as_deref()
            .unwrap()
            .contains("a resumed attempt")
    );
    assert!(
        rows[1].started_unix_ms.abs_diff(resumed_ms) < 1000
            && rows[1].started_unix_ms > rows[0].started_unix_ms,
        "started when config.json was written: {} vs {resumed_ms}",
        rows[1].started_unix_ms
    );
    assert_eq!(plain_logs(&dir), 0, "its raw step log compressed");

    // Resumed on this machine, which is not the killed launch's.
    let o = run(&p, &out, &PLAIN_A);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming 2 of 3 cells"),
        "{}",
        stderr(&o)
    );
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert!(s.cells.len() == 3 && s.cells.values().all(|h| h.complete));
    assert_eq!(s.placement.len(), 3, "every cell has its placement");
    for (k, pl) in &s.placement {
        let want = if *k == kept[0] {
            "k1lled-machine-boot-id".to_owned()
        } else {
            boot_id()
        };
        assert_eq!(pl.machine_id.as_deref(), Some(want.as_str()), "{k}");
    }
    assert_eq!(
        std::fs::read(&step_file).unwrap(),
        steps,
        "kept steps untouched"
    );
    // Nothing left to finish: the resumed launch wrote its own row.
    let o = finish_killed(&out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("finished "));
}

/// `ctax archive OUT --finish-killed`.
fn finish_killed(out: &Path) -> Output {
    ctax_plain(&["archive", out.to_str().unwrap(), "--finish-killed"])
}

/// `ctax` without `--repo` (the commands that read a root only).
fn ctax_plain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctax"))
        .args(args)
        .output()
        .unwrap()
}

/// The `[ctax] dry run:` lines of a dry run on `out`, with `out` written as ROOT.
/// `ctax report ROOT --out SITE`, which must succeed; its report.md.
fn report_md(root: &Path, site: &Path) -> String {
    let o = ctax_plain(&[
        "report",
        root.to_str().unwrap(),
        "--out",
        site.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read_to_string(site.join("report.md")).unwrap()
}

fn dry_lines(p: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = extra.to_vec();
    args.push("--dry-run");
    let o = run(p, out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
        .lines()
        .filter(|l| l.starts_with("[ctax] dry run:"))
        .map(|l| l.replace(out.to_str().unwrap(), "ROOT"))
        .collect()
}

/// `ctax skeleton`: the skeleton of a root (no raw records of its finished launches) plans the
/// same launches as the root (same dry run), refuses stages 2 and 4 without the flags (nothing
/// written) and any analysis, and a sweep on it adds only new run directories; brought back
/// into the full root with the manifest, the root's report reads the old and the new launches.
#[test]
fn a_skeleton_resumes_like_its_root_and_its_new_runs_join_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let sk = tmp.path().join("sk");
    let o = ctax_plain(&["skeleton", out.to_str().unwrap(), sk.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("2 run directories without their raw records, 0 whole"),
        "{said}"
    );
    let raw_in_sk: Vec<PathBuf> = tree(&sk)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("requests_") || n.starts_with("metrics_") || n.starts_with("vllm_")
        })
        .collect();
    assert!(raw_in_sk.is_empty(), "{raw_in_sk:?}");

    let more = [
        "--configs",
        "plain,noop_connector",
        "--launches",
        "2",
        "--skip-stage",
        "3",
        "--skip-stage",
        "4",
    ];
    let mut flagged = more.to_vec();
    flagged.extend(["--skip-stage", "2"]);
    let (full, skel) = (dry_lines(&p, &out, &flagged), dry_lines(&p, &sk, &flagged));
    assert_eq!(full, skel);
    assert_eq!(
        skel.iter().filter(|l| l.contains("would launch")).count(),
        2,
        "{skel:?}"
    );

    let before = tree(&sk);
    let o = run(&p, &sk, &more);
    // A usage error (exit 2): a `gpu_run.sh` chain whose later sweep forgot these flags is
    // refused before its first sweep starts (2026-12-04's chain lost that sweep).
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a skeleton of"), "{}", stderr(&o));
    assert_eq!(tree(&sk), before, "a refused run writes nothing");
    // Phase A and Phase B in one sweep: Phase B's rates would predate the new Phase A.
    let o = run(
        &p,
        &sk,
        &[
            "--configs",
            "plain,noop_connector",
            "--launches",
            "2",
            "--skip-stage",
            "2",
            "--skip-stage",
            "4",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not both"), "{}", stderr(&o));
    assert_eq!(tree(&sk), before, "a refused run writes nothing");
    // A profile without Phase B gives stage 3 nothing to run: that rule does not refuse it
    // (the sweep then stops at the profile that differs from the root's).
    let nob_dir = tmp.path().join("nob");
    std::fs::create_dir_all(&nob_dir).unwrap();
    let no_b = profile(
        &nob_dir,
        free_port(),
        &[(
            "[phase_b]\nshapes = [[256, 32], [1024, 32], [256, 64]]\nduration_s = 3\nwarmup_s = 1\nmin_completed = 20\nmax_cell_s = 30\n",
            "",
        )],
    );
    let o = run(
        &no_b,
        &sk,
        &[
            "--configs",
            "plain,noop_connector",
            "--skip-stage",
            "2",
            "--skip-stage",
            "4",
            "--dry-run",
        ],
    );
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("not both"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("different profile.toml"),
        "{}",
        stderr(&o)
    );
    assert_eq!(tree(&sk), before, "a refused run writes nothing");
    let o = ctax_plain(&["report", sk.to_str().unwrap(), "--out", "/dev/null/x"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot be analysed"), "{}", stderr(&o));
    // A `gpu_run.sh` chain of this Phase A sweep and then a Phase B sweep on the skeleton: each
    // dry run passes on the skeleton as it is, but at its turn Phase B's rates would predate
    // the new Phase A launches. The chain reads that from the real dry runs' lines and refuses.
    let r = repo().display().to_string();
    let mut two = vec!["--repo", r.as_str()];
    two.extend(flagged.iter().copied());
    two.extend([
        "--then",
        "--repo",
        r.as_str(),
        "--configs",
        "plain,noop_connector",
        "--skip-stage",
        "1",
        "--skip-stage",
        "2",
        "--skip-stage",
        "4",
    ]);
    let o = Command::new("bash")
        .arg(repo().join("tools/gpu_run.sh"))
        .arg("chain")
        .arg(&p)
        .arg(&sk)
        .args(&two)
        .env("CTAX_BIN", env!("CARGO_BIN_EXE_ctax"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "sweep 2 runs Phase B at {}'s reference rates as they are after sweep 1 adds Phase A \
             launches, so the rates would predate them and sweep 2 would fail at its turn (a \
             skeleton: recompute them on the full root",
            sk.display()
        )),
        "{}",
        stderr(&o)
    );
    assert_eq!(tree(&sk), before, "a refused chain writes nothing");

    let old = run_dirs(&sk);
    let o = run(&p, &sk, &flagged);
    assert!(o.status.success(), "{}", stderr(&o));
    let new: Vec<PathBuf> = run_dirs(&sk)
        .into_iter()
        .filter(|d| !old.contains(d))
        .collect();
    assert_eq!(new.len(), 2, "{new:?}");
    // The skeletal run directories are as they were (only the manifest and plans grow).
    for (p, bytes) in before
        .iter()
        .filter(|(p, _)| old.iter().any(|d| p.starts_with(d)))
    {
        assert!(
            std::fs::read(p).unwrap() == *bytes,
            "{} changed",
            p.display()
        );
    }
    // Bring back: `ctax rejoin` copies the new run directories in, leaves the skeletal ones
    // (their raw files stay in the root) and continues the manifest.
    let o = ctax_plain(&["rejoin", sk.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("2 new run directories") && said.contains("2 unchanged"),
        "{said}"
    );
    assert!(said.contains("2 Phase A rows added"), "{said}");
    // Both launches ended there (each has its row): nothing to seal as killed.
    assert!(
        said.contains("next: `ctax archive") && !said.contains("--finish-killed"),
        "{said}"
    );
    for d in &new {
        assert!(
            out.join(d.file_name().unwrap())
                .join("summary.json")
                .is_file()
        );
    }
    let (_, ids) = phase_a_rows(&out);
    for (config, launch) in [
        ("plain", 0),
        ("noop_connector", 0),
        ("plain", 1),
        ("noop_connector", 1),
    ] {
        assert!(
            ids.contains(&(config.into(), launch, RowStatus::Ok)),
            "{config} l{launch}: {ids:?}"
        );
    }
    let md = report_md(&out, &tmp.path().join("rep"));
    assert!(
        md.contains("| A l1 |"),
        "the new launches are in the report"
    );
    // The root's reference rates predate the two launches just brought back: Phase B at them
    // is refused (dry run included) until they are recomputed.
    let phase_b = [
        "--configs",
        "plain,noop_connector",
        "--skip-stage",
        "1",
        "--skip-stage",
        "2",
        "--skip-stage",
        "4",
        "--dry-run",
    ];
    let o = run(&p, &out, &phase_b);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("predates 2 of the root's Phase A launch attempts"),
        "{}",
        stderr(&o)
    );
    // Phase A and Phase B in one sweep with stage 2 skipped: refused before anything starts.
    let o = run(
        &p,
        &out,
        &[
            "--configs",
            "plain,noop_connector",
            "--skip-stage",
            "2",
            "--skip-stage",
            "4",
            "--dry-run",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("would have no say"), "{}", stderr(&o));
    let o = ctax_plain(&["reference-rates", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&p, &out, &phase_b);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("stage 3: Phase B"), "{}", stderr(&o));
}

/// `--configs` without plain is a usage error (exit 2, clap's code for a misspelt flag), so
/// `gpu_run.sh chain`, which dry-runs every sweep of a chain first, refuses the chain instead of
/// reaching that sweep after the others spent their GPU time (2026-12-04: a chain's second
/// sweep `--configs mooncake_producer` failed only when its turn came). Nothing is written.
#[test]
fn configs_without_plain_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = profile(tmp.path(), free_port(), &[]);
    let out = tmp.path().join("out");
    for extra in [
        &["--configs", "noop_connector", "--dry-run"][..],
        &["--configs", "noop_connector,mooncake_both"][..],
    ] {
        let o = run(&p, &out, extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--configs must include plain"),
            "{}",
            stderr(&o)
        );
        assert!(!out.exists(), "{extra:?} wrote {}", out.display());
    }
}

/// `--end-by`: a launch not expected to end by the deadline (estimated from the root's own
/// launches) is not started, nor is any after it, nothing is written for them and `ctax run`
/// exits 5; the dry run says so, and with a deadline far enough away the same launches run. A
/// malformed deadline is a usage error before anything starts.
#[test]
fn end_by_holds_back_launches_that_would_end_too_late() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows_before = manifest(&out).len();
    let dirs_before = run_dirs(&out);
    assert_eq!(dirs_before.len(), 2);
    let mut two = PLAIN_NOOP_A.to_vec();
    two.extend(["--launches", "2"]);

    // A sim launch takes seconds: one second is not enough for either new launch.
    let mut soon = two.clone();
    soon.extend(["--end-by", "+1s"]);
    let dry = dry_lines(&p, &out, &soon);
    let held: Vec<&String> = dry
        .iter()
        .filter(|l| l.contains("would not start"))
        .collect();
    assert_eq!(held.len(), 2, "{dry:#?}");
    let o = run(&p, &out, &soon);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(err.contains("plain l1 stage A: not started: ~"), "{err}");
    assert!(
        err.contains("noop_connector l1 stage A: not started (--end-by")
            && err.contains("an earlier launch was held back"),
        "{err}"
    );
    assert!(err.contains("2 launch(es) not started"), "{err}");
    assert_eq!(
        run_dirs(&out),
        dirs_before,
        "no run directory for a launch held back"
    );
    assert_eq!(manifest(&out).len(), rows_before, "no manifest row either");

    // An hour is: the dry run gives each launch's estimate, and the launches run.
    let mut later = two.clone();
    later.extend(["--end-by", "+1h"]);
    let dry = dry_lines(&p, &out, &later);
    let timed: Vec<&String> = dry
        .iter()
        .filter(|l| l.contains("would launch (3 cells, ~") && l.contains(" expected, ends by "))
        .collect();
    assert_eq!(timed.len(), 2, "{dry:#?}");
    let o = run(&p, &out, &later);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(run_dirs(&out).len(), 4);

    for bad in ["25m", "+25x", "2026-12-05 15:10"] {
        let o = run(&p, &out, &["--end-by", bad, "--dry-run"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--end-by"), "{}", stderr(&o));
    }
}

/// B' in new launches (`--phase-b-shapes none`): a root whose Phase B ran before its profile
/// had `[phase_bp]` gets B' alone in new launches — plain l1 and noop_connector l1 run the two
/// B' cells at ref_load (8 req/s here) and nothing else, and the l0 launches stay byte for byte
/// as they ran. A config that saturates at or below ref_load gets no B' cells and, with no Phase
/// B shape either, no launch; `--phase-b-shapes 1024/32` plans that shape and the B' cells.
/// Malformed lists are refused before anything starts. The analysis reads the root with its
/// B'-only launches (`ctax report`).
#[test]
fn phase_b_prime_runs_alone_in_new_launches() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(tmp.path(), port, &[]);
    let o = run(&p, &out, &PLAIN_NOOP_A);
    assert!(o.status.success(), "{}", stderr(&o));
    // The sim's own rates may coincide; the test sets ref_safe 4 and ref_load 8 (Phase A's
    // launches as the root's file lists them, so Phase B accepts the file).
    let rates = |sat_noop: f64| -> PathBuf {
        let mut rr: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("reference_rates.json")).unwrap())
                .unwrap();
        rr["ref_safe"] = 4.0.into();
        rr["ref_load"] = 8.0.into();
        rr["saturation_rate"] = serde_json::json!({"plain": 16.0, "noop_connector": sat_noop});
        let f = tmp.path().join(format!("rr_{sat_noop}.json"));
        std::fs::write(&f, serde_json::to_vec(&rr).unwrap()).unwrap();
        f
    };
    let rr = rates(16.0);
    let phase_b = |p: &Path, rr: &Path, more: &[&str]| -> Output {
        let mut a = vec![
            "--configs",
            "plain,noop_connector",
            "--skip-stage",
            "1",
            "--skip-stage",
            "4",
            "--reference-rates",
            rr.to_str().unwrap(),
        ];
        a.extend_from_slice(more);
        run(p, &out, &a)
    };
    let o = phase_b(&p, &rr, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = run_dirs(&out);
    assert_eq!(first.len(), 4, "{first:?}");
    let first_trees: Vec<_> = first.iter().map(|d| tree(d)).collect();
    let b0: Vec<PathBuf> = first
        .iter()
        .filter(|d| config_of(d).phases.contains(&ctax_schema::Phase::B))
        .cloned()
        .collect();
    assert_eq!(b0.len(), 2);
    let with_bp_dir = tmp.path().join("with_bp");
    std::fs::create_dir_all(&with_bp_dir).unwrap();
    let with_bp = profile(
        &with_bp_dir,
        port,
        &[(
            "[phase_b]",
            "[phase_bp]\nconfigs = [\"plain\", \"noop_connector\"]\nshapes = [[256, 32], [1024, \
             32]]\nduration_s = 3\nwarmup_s = 1\nmin_completed = 20\nmax_cell_s = 30\n\n[phase_b]",
        )],
    );
    // A sweep with the `[phase_bp]` profile (--force-profile) adding launch 1 of each config.
    let bp_sweep = |rr: &Path, more: &[&str]| -> Output {
        let mut a = vec!["--force-profile", "--launches", "2"];
        a.extend_from_slice(more);
        phase_b(&with_bp, rr, &a)
    };
    // Refused before anything starts.
    let before = tree(&out);
    for (prof, args, says) in [
        (
            &with_bp,
            vec!["--phase-b-shapes", "4096/256"],
            "--phase-b-shapes 4096/256: not one of the profile's Phase B shapes (256/32, 1024/32, 256/64)",
        ),
        (
            &with_bp,
            vec!["--phase-b-shapes", "none,256/32"],
            "`none` stands alone",
        ),
        (
            &p,
            vec!["--phase-b-shapes", "none"],
            "the profile has no [phase_bp] section",
        ),
        (
            &with_bp,
            vec!["--phase-b-shapes", "none", "--phase-b-first", "256/32"],
            "cannot be used with",
        ),
        (
            &with_bp,
            vec!["--phase-bp-first", "256/64"],
            "--phase-bp-first 256/64: not one of the profile's B' shapes (256/32, 1024/32)",
        ),
        (
            &p,
            vec!["--phase-bp-first", "256/32"],
            "--phase-bp-first 256/32: the profile has no [phase_bp] section",
        ),
    ] {
        let mut a = vec!["--force-profile", "--launches", "2"];
        a.extend(args.iter().copied());
        let o = phase_b(prof, &rr, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        // Each one before the root is touched (--force-profile would replace profile.toml).
        assert!(tree(&out) == before, "{args:?}: nothing written");
    }
    // B' not due (ref_load = Phase B's rate): said, and nothing to run (dry run).
    let same = tmp.path().join("rr_same.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&rr).unwrap()).unwrap();
    v["ref_load"] = 4.0.into();
    std::fs::write(&same, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = bp_sweep(
        &same,
        &[
            "--phase-b-shapes",
            "none",
            "--phase-bp-first",
            "1024/32",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("B' is not due: ref_load is 4 req/s and Phase B runs at 4 req/s"),
        "{e}"
    );
    assert!(!e.contains("would launch"), "{e}");
    // The stage-3 line names the B' order only where some config has B' cells.
    assert!(e.contains("[ctax] stage 3: Phase B at 4 req/s"), "{e}");
    assert!(!e.contains("first among each launch's B' cells"), "{e}");

    // A config saturated at ref_load: no B' cells, no launch (dry run).
    let o = bp_sweep(&rates(8.0), &["--phase-b-shapes", "none", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("no B' cells for noop_connector: it saturates at 8 req/s, at or below ref_load (8 req/s)"),
        "{e}"
    );
    assert!(e.contains("noop_connector left out"), "{e}");
    assert!(e.contains("plain l1: would launch (2 cells"), "{e}");
    assert!(!e.contains("noop_connector l1"), "{e}");
    // A shape and the B' cells (dry run).
    let o = bp_sweep(&rr, &["--phase-b-shapes", "1024/32", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("only the shapes 1024/32 in this sweep's launches"),
        "{e}"
    );
    for c in ["plain", "noop_connector"] {
        assert!(e.contains(&format!("{c} l1: would launch (3 cells")), "{e}");
    }
    assert!(tree(&out) == before, "dry runs write nothing");

    // B' alone in new launches.
    let o = bp_sweep(&rr, &["--phase-b-shapes", "none"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no Phase B shape in this sweep's launches: only their B' cells"),
        "{}",
        stderr(&o)
    );
    let dirs = run_dirs(&out);
    let new: Vec<&PathBuf> = dirs.iter().filter(|d| !first.contains(d)).collect();
    assert_eq!(new.len(), 2, "plain l1 and noop_connector l1 only: {new:?}");
    for d in &new {
        let rc = config_of(d);
        assert_eq!(rc.launch, 1, "{d:?}");
        let planned: Vec<(ctax_schema::Phase, f64, u32, u32)> = rc
            .cells
            .iter()
            .map(|c| (c.phase, c.cell.rate, c.cell.input_len, c.cell.output_len))
            .collect();
        assert_eq!(
            planned,
            [
                (ctax_schema::Phase::Bp, 8.0, 256, 32),
                (ctax_schema::Phase::Bp, 8.0, 1024, 32)
            ],
            "{d:?}"
        );
        let ran: Vec<String> = cells_by_start(d).into_iter().map(|(k, _)| k).collect();
        assert_eq!(ran, ["Bp/r8_i256_o32", "Bp/r8_i1024_o32"], "{d:?}");
    }
    // `--phase-bp-first`: launch 2 of each config runs the profile's second B' shape first,
    // and the launches that exist are not touched.
    let before_l2: Vec<_> = dirs.iter().map(|d| tree(d)).collect();
    let o = phase_b(
        &with_bp,
        &rr,
        &[
            "--launches",
            "3",
            "--phase-b-shapes",
            "none",
            "--phase-bp-first",
            "1024/32",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("; B' 1024/32 first among each launch's B' cells"),
        "{}",
        stderr(&o)
    );
    let l2: Vec<PathBuf> = run_dirs(&out)
        .into_iter()
        .filter(|d| !dirs.contains(d))
        .collect();
    assert_eq!(l2.len(), 2, "plain l2 and noop_connector l2 only: {l2:?}");
    for d in &l2 {
        let rc = config_of(d);
        assert_eq!(rc.launch, 2, "{d:?}");
        let planned: Vec<(u32, u32)> = rc
            .cells
            .iter()
            .map(|c| (c.cell.input_len, c.cell.output_len))
            .collect();
        assert_eq!(
            planned,
            [(1024, 32), (256, 32)],
            "{d:?}: config.json in run order"
        );
        let ran = cells_by_start(d);
        let keys: Vec<&str> = ran.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["Bp/r8_i1024_o32", "Bp/r8_i256_o32"], "{d:?}");
        // The launch warm-up (2 s in the sim profile) on the first, B′'s own (1 s) on the other.
        assert!((ran[0].1 - 2.0).abs() < 1e-6, "{d:?}: {ran:?}");
        assert!((ran[1].1 - 1.0).abs() < 1e-6, "{d:?}: {ran:?}");
    }
    // With a Phase B shape in the sweep, the B' cells stay after it, in the flag's order.
    let before_l3 = run_dirs(&out);
    let o = phase_b(
        &with_bp,
        &rr,
        &[
            "--launches",
            "4",
            "--phase-b-shapes",
            "256/64",
            "--phase-bp-first",
            "1024/32",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let l3: Vec<PathBuf> = run_dirs(&out)
        .into_iter()
        .filter(|d| !before_l3.contains(d))
        .collect();
    assert_eq!(l3.len(), 2, "plain l3 and noop_connector l3 only: {l3:?}");
    for d in &l3 {
        let keys: Vec<String> = cells_by_start(d).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            ["B/r4_i256_o64", "Bp/r8_i1024_o32", "Bp/r8_i256_o32"],
            "{d:?}"
        );
    }
    for (d, t) in dirs.iter().zip(&before_l2) {
        assert!(tree(d) == *t, "{d:?} untouched");
    }
    for (d, t) in first.iter().zip(&first_trees) {
        assert!(tree(d) == *t, "{d:?} untouched");
    }
    // The analysis reads B'-only launches.
    let md = report_md(&out, &tmp.path().join("site"));
    assert!(md.contains("| noop_connector | B' | 8 | 256/32 |"), "{md}");
}
