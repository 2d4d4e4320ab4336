//! `tools/gpu_run.sh snapshot` and `fetch` bring back what a GPU stretch wrote (the files newer
//! than `OUT.stamp`), and `snapshot` leaves the results root exactly as it was while a sweep may
//! still append to it.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn gpu_run(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo().join("tools/gpu_run.sh"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "gpu_run.sh {args:?} failed:\n{text}");
    text
}

fn set_mtime(p: &Path, t: SystemTime) {
    fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// `(path inside the tar, bytes)` of every file of `dest/results.tgz` (joined from its parts).
fn untar(dest: &Path) -> Vec<(String, Vec<u8>)> {
    let mut parts: Vec<PathBuf> = fs::read_dir(dest)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("results.tgz")
        })
        .collect();
    parts.sort();
    let x = dest.join("x");
    fs::create_dir_all(&x).unwrap();
    let cat = parts
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let st = Command::new("bash")
        .arg("-c")
        .arg(format!("cat {cat} | tar xzf - -C {}", x.display()))
        .status()
        .unwrap();
    assert!(st.success());
    let mut files: Vec<(String, Vec<u8>)> = files_under(&x)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&x).unwrap().display().to_string();
            (rel, fs::read(&p).unwrap())
        })
        .collect();
    // By name as a string ("h200x2.log" before "h200x2/…"), as the tests list them.
    files.sort();
    files
}

/// A root carried in from the archive (old files) and a stretch that added a launch, appended
/// to the manifest and still holds a raw file open.
struct Stretch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    open_raw: fs::File,
}

fn stretch() -> Stretch {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("h200x2");
    let old_run = root.join("20261130-205621_plain_l0");
    fs::create_dir_all(&old_run).unwrap();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for (p, text) in [
        (old_run.join("summary.json"), "{}\n"),
        (root.join("profile.toml"), "name = \"x\"\n"),
        (root.join("manifest.jsonl"), "{\"launch\":0}\n"),
    ] {
        fs::write(&p, text).unwrap();
        set_mtime(&p, hour_ago);
    }
    fs::write(tmp.path().join("h200x2.stamp"), "").unwrap();
    set_mtime(
        &tmp.path().join("h200x2.stamp"),
        SystemTime::now() - Duration::from_secs(60),
    );
    fs::write(tmp.path().join("h200x2.log"), "[ctax] sweep\n").unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(root.join("manifest.jsonl"))
        .unwrap()
        .write_all(b"{\"launch\":4}\n")
        .unwrap();
    let new_run = root.join("20261202-174216_plain_l4");
    fs::create_dir_all(&new_run).unwrap();
    let mut open_raw = fs::File::create(new_run.join("requests_A_r2_i4096_o256.jsonl")).unwrap();
    for i in 0..2000 {
        writeln!(
            open_raw,
            "{{\"request_id\":{i},\"ttft_ms\":{}.5}}",
            100 + i % 7
        )
        .unwrap();
    }
    open_raw.flush().unwrap();
    Stretch {
        _tmp: tmp,
        root,
        open_raw,
    }
}

/// Every file under `dir` (recursively), sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// Every file under `dir` with its bytes and modification time.
fn snapshot_of(dir: &Path) -> Vec<(String, Vec<u8>, SystemTime)> {
    files_under(dir)
        .into_iter()
        .map(|p| {
            let m = fs::metadata(&p).unwrap().modified().unwrap();
            (p.display().to_string(), fs::read(&p).unwrap(), m)
        })
        .collect()
}

#[test]
fn snapshot_brings_back_only_the_stretch_s_files_and_touches_nothing() {
    let mut s = stretch();
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    let before = snapshot_of(&s.root);
    let msg = gpu_run(&["snapshot", s.root.to_str().unwrap(), dest.to_str().unwrap()]);
    assert!(
        msg.contains("3 files written since the stretch began"),
        "{msg}"
    );
    assert_eq!(
        snapshot_of(&s.root),
        before,
        "snapshot changed the results root"
    );
    let got = untar(&dest);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "h200x2.log",
            "h200x2/20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl",
            "h200x2/manifest.jsonl",
        ],
        "the sweep's log and the files newer than the stamp (the old launch and profile stay behind)"
    );
    let raw_now = fs::read(
        s.root
            .join("20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl"),
    )
    .unwrap();
    assert_eq!(got[1].1, raw_now, "the raw file as it is on disk");
    assert_eq!(got[2].1, b"{\"launch\":0}\n{\"launch\":4}\n");
    // The collector keeps appending to the same file after the snapshot: nothing was lost.
    writeln!(s.open_raw, "{{\"request_id\":2000,\"ttft_ms\":1.5}}").unwrap();
    s.open_raw.flush().unwrap();
    let after = fs::read_to_string(
        s.root
            .join("20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl"),
    )
    .unwrap();
    assert_eq!(after.lines().count(), 2001);
}

#[test]
fn fetch_compresses_the_stretch_s_raw_files_and_keeps_every_byte() {
    let s = stretch();
    let raw = s
        .root
        .join("20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl");
    let raw_bytes = fs::read(&raw).unwrap();
    drop(s.open_raw);
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    gpu_run(&["fetch", s.root.to_str().unwrap(), dest.to_str().unwrap()]);
    let got = untar(&dest);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    // `ctax archive` took the root's lock, which created .ctax/run.lock: no data, left behind.
    assert!(s.root.join(".ctax/run.lock").is_file());
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], "h200x2.log");
    assert_eq!(
        names[1],
        "h200x2/20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl.zst"
    );
    assert!(names[2].starts_with("h200x2/ctax_run_") && names[2].ends_with(".log"));
    assert_eq!(names[3], "h200x2/manifest.jsonl");
    let mut decoded = Vec::new();
    zstd::stream::read::Decoder::new(&got[1].1[..])
        .unwrap()
        .read_to_end(&mut decoded)
        .unwrap();
    assert_eq!(decoded, raw_bytes, "the archive decodes to the raw file");
}

#[test]
fn without_a_stamp_everything_comes_back() {
    let s = stretch();
    fs::remove_file(s.root.parent().unwrap().join("h200x2.stamp")).unwrap();
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    gpu_run(&["snapshot", s.root.to_str().unwrap(), dest.to_str().unwrap()]);
    let names: Vec<String> = untar(&dest).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.contains(&"h200x2/profile.toml".to_owned()));
    assert!(names.contains(&"h200x2/20261130-205621_plain_l0/summary.json".to_owned()));
}

/// `wait SECONDS OUT DEST` on a sweep that has ended fetches into DEST in the same call (a
/// separate fetch call can come after the device has given the machine back).
#[test]
fn a_wait_that_sees_the_sweep_end_fetches() {
    let s = stretch();
    drop(s.open_raw);
    let parent = s.root.parent().unwrap();
    // No such process: the sweep has ended.
    fs::write(parent.join("h200x2.pid"), "999999999\n").unwrap();
    let dest = parent.join("dest");
    fs::create_dir_all(&dest).unwrap();
    let msg = gpu_run(&[
        "wait",
        "5",
        s.root.to_str().unwrap(),
        dest.to_str().unwrap(),
    ]);
    assert!(msg.contains("FINISHED"), "{msg}");
    let names: Vec<String> = untar(&dest).into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(
            &"h200x2/20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl.zst".to_owned()
        ),
        "{names:?}"
    );
}

/// `wait SECONDS OUT DEST` while the sweep runs brings a snapshot back and leaves the root as
/// it was.
#[test]
fn a_wait_while_the_sweep_runs_snapshots() {
    let s = stretch();
    let parent = s.root.parent().unwrap();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    fs::write(parent.join("h200x2.pid"), format!("{}\n", sleeper.id())).unwrap();
    let dest = parent.join("dest");
    fs::create_dir_all(&dest).unwrap();
    let before = snapshot_of(&s.root);
    let msg = gpu_run(&[
        "wait",
        "1",
        s.root.to_str().unwrap(),
        dest.to_str().unwrap(),
    ]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(msg.contains("STILL RUNNING"), "{msg}");
    assert_eq!(
        snapshot_of(&s.root),
        before,
        "the root is untouched while running"
    );
    let names: Vec<String> = untar(&dest).into_iter().map(|(n, _)| n).collect();
    assert!(
        names
            .contains(&"h200x2/20261202-174216_plain_l4/requests_A_r2_i4096_o256.jsonl".to_owned()),
        "{names:?}"
    );
}

/// Mid-sweep, an archive beside the raw file it is being made from (a step log compressed at a
/// launch's end) and a temp file of an atomic write are left out of a snapshot: the plain file
/// holds everything, and the pair must not land together.
#[test]
fn a_snapshot_leaves_out_half_made_archives_and_temp_files() {
    let s = stretch();
    let run = s.root.join("20261202-174216_plain_l4");
    fs::write(run.join("engine_step_raw.77.jsonl"), "{\"step\":1}\n").unwrap();
    fs::write(run.join("engine_step_raw.77.jsonl.zst"), "partial").unwrap();
    fs::write(run.join(".summary.json.tmp.123"), "{").unwrap();
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    gpu_run(&["snapshot", s.root.to_str().unwrap(), dest.to_str().unwrap()]);
    let names: Vec<String> = untar(&dest).into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"h200x2/20261202-174216_plain_l4/engine_step_raw.77.jsonl".to_owned()));
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(".zst") || n.contains(".tmp.")),
        "{names:?}"
    );
}

/// On a machine without the sweep (the device gave the old one back), `wait` says so and
/// exits 3 instead of fetching nothing.
#[test]
fn a_wait_without_a_sweep_says_so() {
    let s = stretch();
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    let out = Command::new("bash")
        .arg(repo().join("tools/gpu_run.sh"))
        .args([
            "wait",
            "1",
            s.root.to_str().unwrap(),
            dest.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("NO SWEEP HERE"));
    assert_eq!(fs::read_dir(&dest).unwrap().count(), 0, "nothing fetched");
}

/// A skeleton's marker (`ctax skeleton`) newer than the stamp (the GPU machine's clock behind
/// this one's) stays behind: copied into the full root it would make ingest refuse the root. A
/// plan the sweep wrote beside it in `.ctax/` comes back.
#[test]
fn a_skeleton_s_marker_never_comes_back() {
    let s = stretch();
    let ctax_dir = s.root.join(".ctax");
    fs::create_dir_all(&ctax_dir).unwrap();
    fs::write(ctax_dir.join("skeleton.json"), "{}\n").unwrap();
    fs::write(ctax_dir.join("plan_20261202-174216_plain_l4.json"), "{}\n").unwrap();
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    gpu_run(&["snapshot", s.root.to_str().unwrap(), dest.to_str().unwrap()]);
    let got = untar(&dest);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"h200x2/.ctax/plan_20261202-174216_plain_l4.json"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.ends_with("skeleton.json")),
        "{names:?}"
    );
}

/// A launch resumed in an archived run directory (a file there newer than the stamp) brings
/// the whole directory back, its old files too, so that the copy back replaces the directory;
/// an untouched archived directory stays behind.
#[test]
fn a_resumed_run_directory_comes_back_whole() {
    let s = stretch();
    let old_run = s.root.join("20261130-205621_plain_l0");
    let untouched = s.root.join("20261130-205621_noop_connector_l0");
    fs::create_dir_all(&untouched).unwrap();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for d in [&old_run, &untouched] {
        fs::write(d.join("config.json"), "{}\n").unwrap();
        set_mtime(&d.join("config.json"), hour_ago);
    }
    fs::create_dir_all(old_run.join("superseded/20261203-000000")).unwrap();
    let moved = old_run.join("superseded/20261203-000000/requests_A_r2_i4096_o256.jsonl.zst");
    fs::write(&moved, "old attempt").unwrap();
    set_mtime(&moved, hour_ago);
    fs::write(
        old_run.join("requests_A_r2_i4096_o256.jsonl"),
        "new attempt\n",
    )
    .unwrap();
    let dest = s.root.parent().unwrap().join("dest");
    fs::create_dir_all(&dest).unwrap();
    gpu_run(&["snapshot", s.root.to_str().unwrap(), dest.to_str().unwrap()]);
    let got = untar(&dest);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    for n in [
        "h200x2/20261130-205621_plain_l0/config.json",
        "h200x2/20261130-205621_plain_l0/summary.json",
        "h200x2/20261130-205621_plain_l0/requests_A_r2_i4096_o256.jsonl",
        "h200x2/20261130-205621_plain_l0/superseded/20261203-000000/requests_A_r2_i4096_o256.jsonl.zst",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.contains("noop_connector_l0")),
        "{names:?}"
    );
    assert!(!names.contains(&"h200x2/profile.toml"), "{names:?}");
}

/// A stand-in for `ctax` (`CTAX_BIN`): appends its arguments, each in brackets (so an argument
/// with a space shows as one), and a line when it ends to `calls.txt`; `--fail` exits 7,
/// `--slow` sleeps until SIGTERM comes (then writes `interrupted` and exits 5: the chain must
/// still end as stopped, whatever status the sweep ends with). A dry run (`--dry-run`) goes to
/// `dry.txt` instead and ends at once: with `--typo` as a usage error (exit 2, as clap exits),
/// with `--dry-fail` as a plan that fails on the root as it is now (exit 1); `--adds-a` prints
/// the line `ctax run --dry-run` prints for a Phase A launch it would start, `--runs-b` and
/// `--b-done` those for a Phase B at the root's reference rates as they are with a launch it
/// would resume or with every launch done, `--b-file` those for Phase B with --reference-rates,
/// `--b-stage2` those for Phase B after stage 2, which a real run would let recompute the rates.
fn fake_ctax(dir: &Path) -> PathBuf {
    let bin = dir.join("fake_ctax");
    let calls = dir.join("calls.txt");
    fs::write(
        &bin,
        format!(
            "#!/usr/bin/env bash\n\
             if [[ \" $* \" == *\" --dry-run \"* ]]; then\n\
               printf '[%s]' \"$@\" >> {dir}/dry.txt; echo >> {dir}/dry.txt\n\
               for a in \"$@\"; do\n\
                 [[ $a == --typo ]] && {{ echo \"error: unexpected argument '--typo' found\" >&2; exit 2; }}\n\
                 [[ $a == --dry-fail ]] && {{ echo 'error: no reference rates in this root yet' >&2; exit 1; }}\n\
                 [[ $a == --adds-a ]] && echo '[ctax] dry run: stage A, launches, slot 0 (GPU 0) #1: plain l13: would launch (4 cells) (anchor)' >&2\n\
                 [[ $a == --runs-b || $a == --b-done ]] && echo '[ctax] stage 2 skipped: Phase B takes its rates from /r/reference_rates.json as it is (ref_safe Some(2.0), ref_load Some(6.0))' >&2\n\
                 [[ $a == --runs-b ]] && echo '[ctax] dry run: stage B, launches, slot 0 (GPU 0) #2: plain l7: would resume 2 cells in 20261204-000000_plain_l7' >&2\n\
                 [[ $a == --b-done ]] && echo '[ctax] dry run: stage B, launches, slot 0 (GPU 0) #1: plain l6: complete, skipped' >&2\n\
                 [[ $a == --b-stage2 ]] && printf '%s\\n' '[ctax] stage 2 not run (dry run): Phase B below uses /r/reference_rates.json as it is now (a real run recomputes it after Phase A)' '[ctax] dry run: stage B, launches, slot 0 (GPU 0) #1: plain l6: would launch (6 cells)' >&2\n\
                 [[ $a == --b-file ]] && printf '%s\\n' '[ctax] stage 2: reference rates from /f/reference_rates.json (ref_safe Some(2.0), ref_load Some(6.0))' '[ctax] dry run: stage B, launches, slot 0 (GPU 0) #1: plain l6: would launch (6 cells)' >&2\n\
               done\n\
               exit 0\n\
             fi\n\
             printf '[%s]' \"$@\" >> {calls}; echo >> {calls}\n\
             trap 'echo interrupted >> {calls}; exit 5' TERM\n\
             for a in \"$@\"; do\n\
               [[ $a == --fail ]] && exit 7\n\
               if [[ $a == --slow ]]; then touch {dir}/slow.started; for _ in $(seq 1 200); do sleep 0.05; done; fi\n\
             done\n\
             echo ended >> {calls}\n",
            calls = calls.display(),
            dir = dir.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&bin).status().unwrap();
    bin
}

fn chain(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(repo().join("tools/gpu_run.sh"))
        .arg("chain")
        .arg("P.toml")
        .arg(dir.join("out"))
        .args(args)
        .env("CTAX_BIN", fake_ctax(dir))
        .output()
        .unwrap()
}

fn lines(dir: &Path, name: &str) -> Vec<String> {
    fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn calls(dir: &Path) -> Vec<String> {
    lines(dir, "calls.txt")
}

/// `start P OUT a --then b` runs `ctax run` twice, one after the other, each with the profile,
/// the root and its own arguments (an argument with a space stays one argument).
#[test]
fn chained_sweeps_run_in_order_with_their_own_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = chain(
        d,
        &[
            "--launches",
            "6",
            "--then",
            "--launches",
            "7",
            "--phase-a-order",
            "4,6,8,2",
            "--note",
            "two words",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let root = d.join("out").display().to_string();
    assert_eq!(
        calls(d),
        vec![
            format!("[run][--profile][P.toml][--out][{root}][--launches][6]"),
            "ended".to_owned(),
            format!(
                "[run][--profile][P.toml][--out][{root}][--launches][7][--phase-a-order][4,6,8,2][--note][two words]"
            ),
            "ended".to_owned(),
        ]
    );
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("sweep 2 of 2"), "{log}");
    // Each sweep was dry-run first, with its own arguments.
    assert_eq!(
        lines(d, "dry.txt"),
        vec![
            format!("[run][--profile][P.toml][--out][{root}][--launches][6][--dry-run]"),
            format!(
                "[run][--profile][P.toml][--out][{root}][--launches][7][--phase-a-order][4,6,8,2][--note][two words][--dry-run]"
            ),
        ]
    );
    // One sweep, no `--then`: one call, no dry run (the sweep itself fails at once on a bad
    // argument), no chain chatter in the log.
    let tmp1 = tempfile::tempdir().unwrap();
    let one = chain(tmp1.path(), &["--launches", "2"]);
    assert!(one.status.success());
    assert_eq!(calls(tmp1.path()).len(), 2);
    assert!(lines(tmp1.path(), "dry.txt").is_empty());
    assert!(!String::from_utf8_lossy(&one.stdout).contains("sweep 1"));
}

/// A usage error in any sweep of a chain (an argument `ctax run` refuses, exit 2) refuses the
/// whole chain before anything starts, naming the sweep and showing ctax's message: without
/// the dry runs the first sweep would run for minutes and the typo show only when sweep 3's
/// turn came. A later sweep whose dry run fails otherwise (its plan may need what the sweeps
/// before it add) is reported and the chain runs.
#[test]
fn a_typo_in_a_later_sweep_refuses_the_chain_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = chain(d, &["--a", "--then", "--b", "--then", "--typo"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sweep 3's arguments are refused"), "{err}");
    assert!(err.contains("unexpected argument '--typo'"), "{err}");
    assert!(calls(d).is_empty(), "nothing ran: {:?}", calls(d));
    assert_eq!(lines(d, "dry.txt").len(), 3);

    let tmp2 = tempfile::tempdir().unwrap();
    let d2 = tmp2.path();
    let out = chain(d2, &["--a", "--then", "--dry-fail"]);
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("sweep 2's dry run on the root as it is now failed (exit 1")
            && log.contains("no reference rates in this root yet"),
        "{log}"
    );
    let c = calls(d2);
    assert_eq!(c.len(), 4, "both sweeps ran: {c:?}");
    assert!(c[2].ends_with("[--dry-fail]"));
}

/// A sweep that takes Phase B's rates from the root's reference_rates.json as it is
/// (--skip-stage 2), after a sweep that adds Phase A launches, refuses the chain before anything
/// starts: at its turn the rates would predate them, and `ctax run` checks that even when every
/// Phase B launch is done (stop 34's review; stop 35's review found the first version, which
/// read only Phase B launches to run, let that case through). That holds on a full root as on a
/// skeleton (`.ctax/skeleton.json`; stop 35's first version refused it only there), whose
/// message also says where the rates are recomputed. Phase B first, Phase B with
/// --reference-rates, and Phase B letting stage 2 recompute the rates all run.
#[test]
fn a_phase_b_after_a_phase_a_at_the_roots_rates_refuses_the_chain() {
    let skeleton = |d: &Path| {
        fs::create_dir_all(d.join("out/.ctax")).unwrap();
        fs::write(d.join("out/.ctax/skeleton.json"), "{}").unwrap();
    };
    for (args, refused, skel) in [
        (
            &["--adds-a", "--then", "--x", "--then", "--runs-b"][..],
            "sweep 3",
            true,
        ),
        (&["--adds-a", "--then", "--b-done"], "sweep 2", true),
        (&["--adds-a", "--then", "--runs-b"], "sweep 2", false),
        (&["--adds-a", "--then", "--b-done"], "sweep 2", false),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        if skel {
            skeleton(d);
        }
        let out = chain(d, args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} (skeleton {skel}): {out:?}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "{refused} runs Phase B at {}'s reference rates as they are after sweep 1 adds Phase A launches",
                d.join("out").display()
            )) && err.contains("the chain is refused, nothing started"),
            "{args:?} (skeleton {skel}): {err}"
        );
        assert_eq!(
            err.contains("(a skeleton: recompute them on the full root"),
            skel,
            "{args:?} (skeleton {skel}): {err}"
        );
        assert!(calls(d).is_empty(), "{args:?}: nothing ran: {:?}", calls(d));
    }

    for (args, skel) in [
        (&["--runs-b", "--then", "--adds-a"][..], true),
        (&["--adds-a", "--then", "--b-file"], true),
        (&["--runs-b", "--then", "--adds-a"], false),
        (&["--adds-a", "--then", "--b-stage2"], false),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        if skel {
            skeleton(d);
        }
        let out = chain(d, args);
        assert!(out.status.success(), "{args:?} (skeleton {skel}): {out:?}");
        assert_eq!(calls(d).len(), 4, "{args:?}: both sweeps ran");
    }
}

/// A sweep that fails ends the chain with its exit status; the sweeps after it never start.
/// An empty sweep (`--then` first, last or twice in a row), which `ctax run` would take as the
/// profile's whole default sweep, is refused before anything starts.
#[test]
fn a_failed_sweep_ends_the_chain_and_an_empty_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = chain(d, &["--a", "--then", "--fail", "--then", "--c"]);
    assert_eq!(out.status.code(), Some(7));
    let c = calls(d);
    assert_eq!(c.len(), 3, "{c:?}");
    assert!(c[2].ends_with("[--fail]"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sweep 2 exited 7: sweeps 3-3 not started")
    );
    for args in [
        &["--a", "--then"][..],
        &["--then", "--a"],
        &["--a", "--then", "--then", "--b"],
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = chain(tmp.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("an empty sweep"));
        assert!(calls(tmp.path()).is_empty(), "{args:?}: nothing runs");
    }
}

/// `stop` on a chain detached as `start` detaches it (from a shell without job control, so it
/// starts with SIGINT ignored: a signal it cannot trap) reaches the running sweep, which ends as
/// interrupted; the chain says it stopped, its next sweep never starts and nothing is left
/// running.
#[test]
fn a_stop_reaches_the_running_sweep_and_ends_the_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = d.join("out");
    let st = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "setsid nohup bash {script} chain P.toml {out} --slow --then --c > {out}.log 2>&1 < /dev/null & echo $! > {out}.pid",
            script = repo().join("tools/gpu_run.sh").display(),
            out = out.display()
        ))
        .env("CTAX_BIN", fake_ctax(d))
        .status()
        .unwrap();
    assert!(st.success());
    for _ in 0..200 {
        if d.join("slow.started").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        d.join("slow.started").exists(),
        "the first sweep never started"
    );
    let log = gpu_run(&["stop", out.to_str().unwrap()]);
    assert!(log.contains("[gpu_run] stopped"), "{log}");
    let c = calls(d);
    assert_eq!(c.len(), 2, "{c:?}");
    assert!(c[0].ends_with("[--slow]"));
    assert_eq!(c[1], "interrupted");
    let pid = fs::read_to_string(d.join("out.pid")).unwrap();
    let alive = Command::new("kill")
        .args(["-0", pid.trim()])
        .status()
        .unwrap();
    assert!(!alive.success(), "the chain is gone");
}

/// Two `start`s in one stretch (a second sweep after the first ended, as on 2026-12-04) append
/// to the one sweep log, and `fetch` brings both back in the stretch's `ctax_run_<stamp>.log`:
/// the second `start` used to truncate OUT.log, losing the first sweep's lines. `start` runs
/// with CTAX_SKIP_SETUP (no vLLM install, no binaries unpacked) and the stand-in ctax.
#[test]
fn a_second_start_keeps_the_first_sweep_s_log() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = d.join("out");
    let fake = fake_ctax(d);
    let start = |arg: &str| {
        let o = Command::new("bash")
            .arg(repo().join("tools/gpu_run.sh"))
            .args(["start", "P.toml", out.to_str().unwrap(), arg])
            .env("CTAX_BIN", &fake)
            .env("CTAX_SKIP_SETUP", "1")
            .env("CTAX_START_SETTLE_S", "0")
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let w = gpu_run(&["wait", "60", out.to_str().unwrap()]);
        assert!(w.contains("FINISHED"), "{w}");
    };
    start("--first");
    start("--second");
    let root = out.display();
    assert_eq!(
        calls(d),
        [
            format!("[run][--profile][P.toml][--out][{root}][--first]"),
            "ended".into(),
            format!("[run][--profile][P.toml][--out][{root}][--second]"),
            "ended".into(),
        ]
    );
    let dest = d.join("back");
    fs::create_dir_all(&dest).unwrap();
    gpu_run(&["fetch", out.to_str().unwrap(), dest.to_str().unwrap()]);
    let logs: Vec<String> = untar(&dest)
        .into_iter()
        .filter(|(p, _)| p.contains("/ctax_run_") && p.ends_with(".log"))
        .map(|(_, b)| String::from_utf8(b).unwrap())
        .collect();
    assert_eq!(logs.len(), 1, "one log per stretch");
    let starts: Vec<&str> = logs[0]
        .lines()
        .filter(|l| l.starts_with("[gpu_run] start "))
        .collect();
    assert_eq!(starts.len(), 2, "{}", logs[0]);
    assert!(starts[0].ends_with(": --first"), "{}", starts[0]);
    assert!(starts[1].ends_with(": --second"), "{}", starts[1]);
}
