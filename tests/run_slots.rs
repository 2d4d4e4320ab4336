//! `ctax run --gpus` (several launches at once, one per GPU slot) and `--shard K/N` + `ctax
//! merge` against the simulated engine (ctax-sim): exact request counts per launch, configs
//! balanced over slots, disjoint ports, one slot's server killed mid-cell then resumed, Ctrl-C
//! stopping every slot, shards that together run exactly the unsharded plan, and a merged root
//! whose analysis equals that of the same run directories gathered by hand.

mod ports;
use ports::free_port;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ctax_schema::{
    ManifestRow, Placement, RequestRecord, RowStatus, RunConfig, RunSummary, StepRecord,
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shipped sim profile with a free port, shorter cells and text edits.
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

const SHORT: (&str, &str) = (
    "duration_s = 3\nwarmup_s = 1\nmin_completed = 20",
    "duration_s = 2\nwarmup_s = 1\nmin_completed = 10",
);

fn ctax(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ctax"));
    c.args(args);
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
    c.args(extra).arg("--repo").arg(repo());
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn manifest(out: &Path) -> Vec<ManifestRow> {
    std::fs::read_to_string(out.join("manifest.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn runs(out: &Path) -> Vec<(PathBuf, RunConfig)> {
    let Ok(rd) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut v: Vec<(PathBuf, RunConfig)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("config.json").exists())
        .map(|p| {
            let rc =
                serde_json::from_slice(&std::fs::read(p.join("config.json")).unwrap()).unwrap();
            (p, rc)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn summary(dir: &Path) -> RunSummary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

fn jsonl<T: serde::de::DeserializeOwned>(p: &Path) -> Vec<T> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stage(rc: &RunConfig) -> String {
    rc.extra["stage"].as_str().unwrap().to_owned()
}

/// Every planned cell of every launch is complete and exactly accounted for: one record per
/// scheduled request (seq 0..n-1), all ok, the records' identity is the launch's, at least
/// `min_completed` measured; and the launch's own server did the work: the prompt tokens its
/// step log prefilled in the cell's window equal the prompt tokens of the cell's requests (a
/// collector talking to another slot's server would leave its own server idle).
fn check_launches_exact(out: &Path, min_completed: u64) {
    for (dir, rc) in runs(out) {
        let s = summary(&dir);
        assert_eq!(s.cells.len(), rc.cells.len(), "{}", dir.display());
        for (key, h) in &s.cells {
            assert!(h.complete, "{}: {key} incomplete", dir.display());
            let (phase, cell) = key.split_once('/').unwrap();
            let reqs: Vec<RequestRecord> =
                jsonl(&dir.join(format!("requests_{phase}_{cell}.jsonl")));
            assert_eq!(reqs.len() as u64, h.scheduled, "{}: {key}", dir.display());
            let seqs: BTreeSet<u64> = reqs.iter().map(|r| r.seq).collect();
            assert_eq!(seqs, (0..h.scheduled).collect(), "{}: {key}", dir.display());
            assert!(reqs.iter().all(|r| r.status == ctax_schema::Status::Ok
                && r.config == rc.config
                && r.launch == rc.launch));
            assert!(h.completed_measured >= min_completed);
            let steps: Vec<StepRecord> =
                jsonl(&dir.join(format!("engine_step_{phase}_{cell}.jsonl")));
            let prefilled: u64 = steps
                .iter()
                .map(|s| u64::from(s.prefill_tokens.unwrap_or(0)))
                .sum();
            let prompts: u64 = reqs
                .iter()
                .map(|r| u64::from(r.prompt_tokens.unwrap()))
                .sum();
            assert_eq!(
                prefilled,
                prompts,
                "{}: {key}: the launch's own server served its requests",
                dir.display()
            );
            assert_eq!(
                s.placement.get(key),
                rc.placement.as_ref(),
                "{}: {key}: where the cell ran",
                dir.display()
            );
        }
    }
}

/// (start, end) in unix ms of a manifest row.
fn span(r: &ManifestRow) -> (f64, f64) {
    let s = r.started_unix_ms as f64;
    (s, s + r.duration_s * 1000.0)
}

fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Two slots: a calibration round (plain's two launches, on both slots at once), then noop once
/// on each slot, side by side, every port disjoint, request counts exact.
#[test]
fn two_slots_run_side_by_side_balanced_with_disjoint_ports() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(
        tmp.path(),
        port,
        &[
            SHORT,
            (
                "launches = 1",
                "launches = 2\n\n[slots]\nplain_on_every_slot = true",
            ),
        ],
    );
    let o = run(
        &p,
        &out,
        &[
            "--gpus",
            "0,1",
            "--configs",
            "plain,noop_connector",
            "--skip-stage",
            "3",
            "--skip-stage",
            "4",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let all = runs(&out);
    assert_eq!(
        all.len(),
        4,
        "2 launches per config; plain's are the calibration round"
    );
    let place = |rc: &RunConfig| -> Placement { rc.placement.clone().unwrap() };

    // Calibration: plain's own launches 0 and 1, one per slot.
    let cal: Vec<&(PathBuf, RunConfig)> =
        all.iter().filter(|(_, rc)| place(rc).calibration).collect();
    assert_eq!(
        cal.iter()
            .map(|(_, rc)| (rc.config.as_str(), rc.launch, place(rc).slot))
            .collect::<BTreeSet<_>>(),
        [("plain", 0, 0), ("plain", 1, 1)].into_iter().collect()
    );
    // Each config exactly once on each slot.
    let mut per: BTreeMap<(String, u32), u32> = BTreeMap::new();
    for (_, rc) in &all {
        *per.entry((rc.config.clone(), place(rc).slot)).or_default() += 1;
    }
    assert_eq!(
        per,
        [
            (("noop_connector".to_owned(), 0), 1),
            (("noop_connector".to_owned(), 1), 1),
            (("plain".to_owned(), 0), 1),
            (("plain".to_owned(), 1), 1),
        ]
        .into_iter()
        .collect()
    );
    // The slot's own GPU, API port and ports; no two slots share a port.
    let mut ports_of: BTreeMap<u32, BTreeSet<u16>> = BTreeMap::new();
    for (_, rc) in &all {
        let pl = place(rc);
        assert_eq!(pl.slots, 2);
        assert_eq!(pl.cuda_visible_devices, Some(pl.slot.to_string()));
        assert_eq!(rc.port, port + 100 * pl.slot as u16);
        assert_eq!(pl.ports["api"], rc.port);
        assert!(pl.cpuset.is_some());
        ports_of
            .entry(pl.slot)
            .or_default()
            .extend(pl.ports.values().copied());
    }
    assert!(ports_of[&0].is_disjoint(&ports_of[&1]), "{ports_of:?}");
    // The slot's values reach the server's environment (the simulated server's launch.sh
    // records its command line: its port is the slot's).
    let s1 = all.iter().find(|(_, rc)| place(rc).slot == 1).unwrap();
    let launch_sh = std::fs::read_to_string(s1.0.join("launch.sh")).unwrap();
    assert!(
        launch_sh.contains(&format!("--port {}", port + 100)),
        "{launch_sh}"
    );
    // Side by side: the calibration launches overlap in time, and so do the two slots' first
    // regular launches.
    let rows: Vec<ManifestRow> = manifest(&out)
        .into_iter()
        .filter(|r| r.placement.is_some())
        .collect();
    assert_eq!(rows.len(), 4);
    let cal_rows: Vec<&ManifestRow> = rows
        .iter()
        .filter(|r| r.placement.as_ref().unwrap().calibration)
        .collect();
    assert!(overlap(span(cal_rows[0]), span(cal_rows[1])));
    let first_on = |s: u32| {
        rows.iter()
            .find(|r| {
                let p = r.placement.as_ref().unwrap();
                p.slot == s && !p.calibration
            })
            .unwrap()
    };
    assert!(overlap(span(first_on(0)), span(first_on(1))));
    let md = std::fs::read_to_string(out.join("MANIFEST.md")).unwrap();
    assert!(md.contains("| slot |") && md.contains("(CUDA_VISIBLE_DEVICES=1)"));
    check_launches_exact(&out, 10);

    // The analysis pools the calibration launches into plain's cells (they are plain's launches)
    // and compares them between the GPUs; the report's Cells table says where each launch ran.
    let ds = connector_tax::ingest::load(&out).unwrap();
    assert_eq!(ds.runs.len(), 4);
    assert_eq!(ds.runs.iter().filter(|r| r.is_calibration()).count(), 2);
    let opts = connector_tax::analysis::AnalyzeOptions {
        bootstrap: connector_tax::stats::BootstrapConfig {
            resamples: 200,
            ..Default::default()
        },
        skip_itl: true,
    };
    let (res, verdicts) = connector_tax::pipeline::evaluate(&ds, &opts).unwrap();
    let plain_a = res
        .summary
        .cells
        .iter()
        .find(|c| c.key.config == "plain" && c.launch.is_none())
        .unwrap();
    assert_eq!(plain_a.launches, vec![0, 1]);
    assert_eq!(
        plain_a
            .gpus
            .iter()
            .map(|g| (g.launch, g.slot))
            .collect::<BTreeSet<_>>(),
        [(0, 0), (1, 1)].into_iter().collect()
    );
    // The calibration round gives one plain-vs-plain row per Phase A rate: slot 1 against slot 0.
    let cal = &res.summary.calibration;
    assert_eq!(
        cal.iter().map(|r| r.cell.as_str()).collect::<BTreeSet<_>>(),
        ["r16_i512_o32", "r4_i512_o32", "r8_i512_o32"]
            .into_iter()
            .collect()
    );
    for r in cal {
        assert_eq!((r.reference[0].slot, r.other[0].slot), (0, 1));
        assert_eq!((r.reference[0].launch, r.other[0].launch), (0, 1));
        assert!(r.n_reference >= 10 && r.n_other >= 10);
        assert!(r.ttft_p90.value.lo.is_some() && r.ttft_p90.value.hi.is_some());
    }
    let report = tmp.path().join("report");
    connector_tax::report::render(&res, &verdicts, &report).unwrap();
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("id=\"taxes-calibration\""));
    assert!(html.contains("<th>GPU</th>"));
    assert!(
        html.contains("<td>slot 0, device 0, slot 1, device 1</td>"),
        "pooled row"
    );
    assert!(html.contains("<td>slot 1, device 1</td>"), "a launch row");
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("| Problems | GPU |"));
}

fn find_sim_pid(port: u16) -> Option<i32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.ends_with("ctax-sim"))
            && args
                .windows(2)
                .any(|w| w[0] == "--port" && w[1] == port.to_string())
        {
            return Some(pid);
        }
    }
    None
}

/// One slot's server dies in the middle of a cell: that launch is recorded as failed, the
/// other slot finishes its work, and the same command reruns only the incomplete cells of
/// the crashed launch.
#[test]
fn a_slot_killed_mid_cell_reruns_only_its_incomplete_launch() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(
        tmp.path(),
        port,
        &[(
            "duration_s = 3\nwarmup_s = 1\nmin_completed = 20",
            "duration_s = 4\nwarmup_s = 1\nmin_completed = 10",
        )],
    );
    let args = [
        "--gpus",
        "0,1",
        "--configs",
        "plain,noop_connector",
        "--skip-stage",
        "3",
        "--skip-stage",
        "4",
    ];
    let child = ctax(&["run", "--profile", p.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .args(args)
        .arg("--repo")
        .arg(repo())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // noop_connector l0 runs on slot 1 (plan: rank 1, launch 0). Kill its server once its first
    // cell is being written.
    let t0 = Instant::now();
    let killed = loop {
        let started = runs(&out).iter().any(|(d, rc)| {
            rc.config == "noop_connector" && d.join("requests_A_r4_i512_o32.jsonl").exists()
        });
        if started && let Some(pid) = find_sim_pid(port + 100) {
            std::thread::sleep(Duration::from_millis(1500));
            // SAFETY: SIGKILL to the simulated server this test's sweep started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            break pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "slot 1 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{killed}: {}", stderr(&o));
    let rows = manifest(&out);
    let failed: Vec<&ManifestRow> = rows
        .iter()
        .filter(|r| r.status == RowStatus::Failed)
        .collect();
    assert_eq!(failed.len(), 1, "{rows:?}");
    assert_eq!(failed[0].config, "noop_connector");
    assert_eq!(failed[0].placement.as_ref().unwrap().slot, 1);
    assert!(
        failed[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("server died during the cells")
    );
    assert!(
        rows.iter()
            .any(|r| r.config == "plain" && r.status == RowStatus::Ok && r.placement.is_some()),
        "slot 0 finished its launch"
    );
    let noop_dir = runs(&out)
        .into_iter()
        .find(|(_, rc)| rc.config == "noop_connector")
        .unwrap()
        .0;
    let incomplete = summary(&noop_dir)
        .cells
        .values()
        .filter(|h| !h.complete)
        .count();
    let missing = 3 - summary(&noop_dir).cells.len();
    let left = incomplete + missing;
    assert!(left >= 1);

    let o = run(&p, &out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "noop_connector l0 stage A: resuming {left} of 3 cells"
        )),
        "{e}"
    );
    assert!(
        e.contains("plain l0 stage A: all 3 cells complete, skipped"),
        "{e}"
    );
    assert_eq!(runs(&out).len(), 2, "same run directories");
    assert!(
        noop_dir.join("superseded").is_dir(),
        "the partial cell is kept"
    );
    check_launches_exact(&out, 10);
}

/// Ctrl-C stops every slot's server (both API ports free again), keeps the data, exits 130;
/// the same command then completes the sweep.
#[test]
fn ctrl_c_stops_every_slot_and_resume_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(
        tmp.path(),
        port,
        &[(
            "duration_s = 3\nwarmup_s = 1\nmin_completed = 20",
            "duration_s = 8\nwarmup_s = 1\nmin_completed = 10",
        )],
    );
    let args = [
        "--gpus",
        "0,1",
        "--configs",
        "plain,noop_connector",
        "--skip-stage",
        "3",
        "--skip-stage",
        "4",
    ];
    let mut child = ctax(&["run", "--profile", p.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .args(args)
        .arg("--repo")
        .arg(repo())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let n = runs(&out)
            .iter()
            .filter(|(d, _)| d.join("requests_A_r4_i512_o32.jsonl").exists())
            .count();
        if n == 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "the slots never both started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    for s in 0..2u16 {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port + 100 * s)).is_ok(),
            "slot {s}'s server was stopped"
        );
        assert!(find_sim_pid(port + 100 * s).is_none());
    }
    let rows = manifest(&out);
    assert_eq!(
        rows.iter()
            .filter(|r| r.status == RowStatus::Interrupted)
            .count(),
        2,
        "{rows:?}"
    );
    for (d, _) in runs(&out) {
        assert!(
            std::fs::metadata(d.join("requests_A_r4_i512_o32.jsonl"))
                .unwrap()
                .len()
                > 0,
            "partial data kept"
        );
    }
    let o = run(&p, &out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    check_launches_exact(&out, 10);
}

/// (config, launch, stage, cells) of every launch of a root: what was planned and run.
fn launches(out: &Path) -> BTreeSet<(String, u32, String, String)> {
    runs(out)
        .into_iter()
        .map(|(_, rc)| {
            (
                rc.config.clone(),
                rc.launch,
                stage(&rc),
                serde_json::to_string(&rc.cells).unwrap(),
            )
        })
        .collect()
}

fn analysis_json(root: &Path, file: &str) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("analysis").join(file)).unwrap()).unwrap();
    // The one field that names the directory analysed.
    if let Some(d) = v.get_mut("dataset").and_then(|d| d.as_object_mut()) {
        d.remove("root");
    }
    v
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
}

/// Shards 1/2 and 2/2 (Phase A, merge, reference rates, Phase B with those rates, merge) run
/// exactly the launches and cells of the unsharded sweep with the same profile, seed and
/// reference rates; `ctax analyze` of the merged root equals, byte for byte apart from the
/// root's path, the analysis of the same run directories gathered by hand.
#[test]
fn shards_run_the_unsharded_plan_and_merge_equals_gathering_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let port = free_port();
    // Phase B at a fixed rate: ref_safe from 2-second cells on a loaded 2-core machine can
    // come out undefined, and the test is about which launches run, not where the knee is.
    let p = profile(
        t,
        port,
        &[
            SHORT,
            ("launches = 1", "launches = 2"),
            (
                "shapes = [[256, 32], [1024, 32], [256, 64]]",
                "shapes = [[256, 32], [1024, 32], [256, 64]]\nrate_override = 8",
            ),
        ],
    );
    let configs = ["--configs", "plain,noop_connector"];
    let shard_root = |k: u32| t.join(format!("shard_{k}"));
    // Phase A of both shards at once (a host each; here one host, ports moved apart).
    let spawn = |k: u32, extra: &[&str]| {
        let offset = ((k - 1) * 1000).to_string();
        ctax(&["run", "--profile", p.to_str().unwrap()])
            .args(["--out", shard_root(k).to_str().unwrap()])
            .args(["--shard", &format!("{k}/2"), "--port-offset", &offset])
            .args(configs)
            .args(extra)
            .arg("--repo")
            .arg(repo())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let wait_all = |children: Vec<std::process::Child>| {
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
        }
    };
    wait_all(vec![spawn(1, &[]), spawn(2, &[])]);
    for k in 1..=2 {
        assert!(!shard_root(k).join("reference_rates.json").exists());
        assert!(
            !shard_root(k).join("analysis").exists(),
            "no analysis on a shard"
        );
    }
    let merged_a = t.join("merged_a");
    let o = ctax(&["merge"])
        .args([shard_root(1), shard_root(2)])
        .arg("--out")
        .arg(&merged_a)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ctax(&["reference-rates", merged_a.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let refs = merged_a.join("reference_rates.json");
    let refs_s = refs.to_str().unwrap().to_owned();
    wait_all(vec![
        spawn(1, &["--reference-rates", &refs_s, "--skip-stage", "4"]),
        spawn(2, &["--reference-rates", &refs_s, "--skip-stage", "4"]),
    ]);
    let merged = t.join("merged");
    let o = ctax(&["merge"])
        .args([shard_root(1), shard_root(2)])
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));

    // The unsharded sweep with the same rates.
    let whole = t.join("whole");
    let o = run(
        &p,
        &whole,
        &[
            configs[0],
            configs[1],
            "--port-offset",
            "2000",
            "--reference-rates",
            &refs_s,
            "--skip-stage",
            "4",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (ws, ms) = (launches(&whole), launches(&merged));
    assert_eq!(ws.len(), 8, "2 configs x 2 launches x (A, B)");
    assert_eq!(ms, ws, "the shards together ran exactly the unsharded plan");
    let (s1, s2) = (launches(&shard_root(1)), launches(&shard_root(2)));
    assert!(s1.is_disjoint(&s2) && !s1.is_empty() && !s2.is_empty());
    check_launches_exact(&merged, 10);
    for (_, rc) in runs(&merged) {
        let k = rc.placement.unwrap().shard.unwrap();
        assert!(k == "1/2" || k == "2/2");
    }

    // The same run directories gathered by hand.
    let hand = t.join("hand");
    std::fs::create_dir_all(&hand).unwrap();
    for k in 1..=2 {
        for (d, _) in runs(&shard_root(k)) {
            copy_tree(&d, &hand.join(d.file_name().unwrap()));
        }
    }
    std::fs::copy(
        shard_root(1).join("profile.toml"),
        hand.join("profile.toml"),
    )
    .unwrap();
    std::fs::copy(refs, hand.join("reference_rates.json")).unwrap();
    copy_tree(&shard_root(1).join("preflight"), &hand.join("preflight"));
    let mut rows = std::fs::read(shard_root(1).join("manifest.jsonl")).unwrap();
    rows.extend(std::fs::read(shard_root(2).join("manifest.jsonl")).unwrap());
    std::fs::write(hand.join("manifest.jsonl"), rows).unwrap();
    for root in [&merged, &hand] {
        let o = ctax(&["analyze", root.to_str().unwrap(), "--resamples", "500"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    for f in ["summary.json", "verdicts.json"] {
        assert_eq!(
            analysis_json(&merged, f),
            analysis_json(&hand, f),
            "analysis/{f} of the merged root"
        );
    }
}

/// `ctax merge` refuses roots of different profiles and roots holding the same launch.
#[test]
fn merge_refuses_mismatched_profiles_and_overlapping_launches() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mk = |name: &str, profile: &str, launches: &[(&str, u32)]| -> PathBuf {
        let r = t.join(name);
        std::fs::create_dir_all(&r).unwrap();
        std::fs::write(r.join("profile.toml"), profile).unwrap();
        for (i, (c, l)) in launches.iter().enumerate() {
            let d = r.join(format!("2026010{i}-000000_{c}_l{l}_{name}"));
            std::fs::create_dir_all(&d).unwrap();
            let rc = serde_json::json!({"schema_version": 1, "config": c, "launch": l,
                "run_dir": d.file_name().unwrap().to_string_lossy(), "phases": ["A"], "cells": [],
                "model": "m", "served_model_name": "m", "port": 1, "extra": {"stage": "A"}});
            std::fs::write(d.join("config.json"), rc.to_string()).unwrap();
        }
        r
    };
    let a = mk("a", "name = \"x\"\n", &[("plain", 0)]);
    let b = mk("b", "name = \"y\"\n", &[("plain", 1)]);
    let c = mk(
        "c",
        "name = \"x\"\n",
        &[("plain", 0), ("noop_connector", 0)],
    );
    let d = mk("d", "name = \"x\"\n", &[("plain", 1)]);
    let merge = |roots: &[&Path], out: &str| {
        ctax(&["merge"])
            .args(roots)
            .arg("--out")
            .arg(t.join(out))
            .output()
            .unwrap()
    };
    let o = merge(&[&a, &b], "o1");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("different profile.toml"),
        "{}",
        stderr(&o)
    );
    let o = merge(&[&a, &c], "o2");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("overlapping launches: plain l0 stage A"),
        "{}",
        stderr(&o)
    );
    assert!(!t.join("o2").exists(), "nothing written when refused");
    let o = merge(&[&a, &d], "o3");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(runs(&t.join("o3")).len(), 2);
    // Not into a non-empty directory.
    let o = merge(&[&a, &d], "o3");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
    // Not shards that ran on different GPU models (env.txt as nvidia-smi -L wrote it).
    let gpu = |root: &Path, model: &str| {
        for (dir, _) in runs(root) {
            let env = format!("== gpu\nGPU 0: {model} (UUID: GPU-0000)\n");
            std::fs::write(dir.join("env.txt"), env).unwrap();
        }
    };
    gpu(&a, "NVIDIA H200");
    gpu(&d, "NVIDIA H100 80GB HBM3");
    let o = merge(&[&a, &d], "o4");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!(
            "different GPU models (NVIDIA H100 80GB HBM3 in {}; NVIDIA H200 in {})",
            d.display(),
            a.display()
        )),
        "{}",
        stderr(&o)
    );
    assert!(!t.join("o4").exists(), "nothing written when refused");
    gpu(&d, "NVIDIA H200");
    let o = merge(&[&a, &d], "o5");
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Two slots on a machine where plain never ran (the root's plain launch is recorded on another
/// machine): one anchor for the machine, not one per slot, at the head of a slot's queue, so it
/// runs while the other slot runs its first launch.
#[test]
fn one_anchor_per_machine_whatever_the_slots() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let port = free_port();
    let p = profile(tmp.path(), port, &[SHORT]);
    let a_only = ["--skip-stage", "3", "--skip-stage", "4"];
    let o = run(&p, &out, &[&["--configs", "plain"][..], &a_only].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let (plain0, mut rc) = runs(&out).pop().unwrap();
    rc.placement.as_mut().unwrap().machine_id = Some("another-machine".into());
    std::fs::write(plain0.join("config.json"), serde_json::to_vec(&rc).unwrap()).unwrap();
    let mut s = summary(&plain0);
    for pl in s.placement.values_mut() {
        pl.machine_id = Some("another-machine".into());
    }
    std::fs::write(plain0.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();

    let o = run(
        &p,
        &out,
        &[
            &[
                "--gpus",
                "0,1",
                "--configs",
                "plain,noop_connector,mooncake_both",
            ][..],
            &a_only,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.matches("anchor for this machine").count(), 1, "{e}");
    let rows: Vec<ManifestRow> = manifest(&out)
        .into_iter()
        .filter(|r| r.stage == "1 Phase A" && r.placement.as_ref().unwrap().slots == 2)
        .collect();
    let anchors: Vec<&ManifestRow> = rows
        .iter()
        .filter(|r| r.reason.as_deref().is_some_and(|s| s.contains("anchor")))
        .collect();
    assert_eq!(anchors.len(), 1, "{rows:?}");
    assert_eq!(
        (anchors[0].config.as_str(), anchors[0].launch),
        ("plain", 1)
    );
    let slot = anchors[0].placement.as_ref().unwrap().slot;
    // First on its slot, side by side with the other slot's first launch.
    let on = |s: u32| -> Vec<&ManifestRow> {
        rows.iter()
            .filter(|r| r.placement.as_ref().unwrap().slot == s)
            .collect()
    };
    assert_eq!(on(slot)[0].launch, 1);
    assert_eq!(on(slot)[0].config, "plain");
    assert!(overlap(span(anchors[0]), span(on(1 - slot)[0])));
    assert_eq!(
        rows.len(),
        3,
        "the anchor and the two new configs: {rows:?}"
    );
    check_launches_exact(&out, 10);
}

/// `ctax run` on a host whose GPUs are another model than the root's launches is refused before
/// the root is touched, `--force-profile` too (its profile.toml would be overwritten first):
/// nvidia-smi is a stand-in on PATH that lists one H100; the root holds an H200 launch.
#[test]
fn a_sweep_on_another_gpu_model_is_refused_before_the_root_is_touched() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\ncase \"$*\" in\n  *index,name*) echo '0, NVIDIA H100 80GB HBM3' ;;\n  \
         *index,uuid*) echo '0, GPU-8818c3c2-41a2-2428-a37f-65602e189ec8' ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = tmp.path().join("root");
    let d = root.join("20261130-205621_plain_l0");
    std::fs::create_dir_all(&d).unwrap();
    let rc = serde_json::json!({"schema_version": 1, "config": "plain", "launch": 0,
        "run_dir": "20261130-205621_plain_l0", "phases": ["A"], "cells": [], "model": "m",
        "served_model_name": "m", "port": 1, "extra": {"stage": "A"},
        "placement": {"slot": 0, "slots": 1, "gpu_index": 0}});
    std::fs::write(d.join("config.json"), rc.to_string()).unwrap();
    std::fs::write(
        d.join("env.txt"),
        "== gpu\nGPU 0: NVIDIA H200 (UUID: GPU-13eae37f-8099-b03a-c45f-13729ad30e2f)\n",
    )
    .unwrap();
    std::fs::write(root.join("profile.toml"), "name = \"h200x2\"\n").unwrap();
    let listing = |r: &Path| {
        let mut v: Vec<(PathBuf, Vec<u8>)> = walk(r)
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap_or_default();
                (p, bytes)
            })
            .collect();
        v.sort();
        v
    };
    let before = listing(&root);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for force in [false, true] {
        let mut c = ctax(&["run", "--profile"]);
        c.arg(repo().join("launch/profiles/h100.toml"))
            .arg("--out")
            .arg(&root)
            .args(["--gpus", "0", "--repo"])
            .arg(repo())
            .env("PATH", &path);
        if force {
            c.arg("--force-profile");
        }
        let o = c.output().unwrap();
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(
            e.contains("holds launches on NVIDIA H200 (20261130-205621_plain_l0)")
                && e.contains("this sweep would add launches on NVIDIA H100 80GB HBM3 (GPU 0)"),
            "{e}"
        );
        assert_eq!(listing(&root), before, "nothing written (force {force})");
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `--end-by` in a dry run over two slots weighs the launches in the order they would start,
/// as a real run holds them back: with a deadline between one and two launch times from now,
/// each slot's first launch (both start now) would start and slot 0's second would not, even
/// though slot 0's queue is listed first.
#[test]
fn end_by_dry_run_weighs_launches_in_start_order_across_slots() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("res");
    let p = profile(tmp.path(), free_port(), &[]);
    let dry = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "--gpus",
            "0,1",
            "--skip-stage",
            "3",
            "--skip-stage",
            "4",
            "--dry-run",
        ];
        args.extend(extra);
        let o = run(&p, &out, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
            .lines()
            .filter(|l| l.starts_with("[ctax] dry run: stage A"))
            .map(str::to_owned)
            .collect()
    };
    let plain = dry(&[]);
    assert_eq!(plain.len(), 3, "{plain:#?}");
    // Every launch of an empty root gets the same estimate, `~2.4 min expected`.
    let minutes: f64 = plain[0]
        .split("~")
        .nth(1)
        .and_then(|r| r.split(" min expected").next())
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("no estimate in minutes: {}", plain[0]));
    let deadline = format!("+{:.0}s", minutes * 60.0 * 1.5);
    let lines = dry(&["--end-by", &deadline]);
    let says = |slot: &str, n: u32, what: &str| {
        lines
            .iter()
            .any(|l| l.contains(&format!("{slot} #{n}: ")) && l.contains(what))
    };
    assert!(says("slot 0 (GPU 0)", 1, "would launch"), "{lines:#?}");
    assert!(says("slot 1 (GPU 1)", 1, "would launch"), "{lines:#?}");
    assert!(says("slot 0 (GPU 0)", 2, "would not start"), "{lines:#?}");
    assert!(!out.exists(), "a dry run writes nothing");
}
