//! The shipped Slurm scripts (launch/slurm/) for real: a private single-node Slurm cluster on
//! localhost (munged + slurmctld + slurmd, Debian's `slurm-wlm` and `munge`, own ports, own
//! state directory, own munge key) runs `submit.sh` with the sim profile as 2 shards: Phase A
//! array job, reference-rates barrier job, Phase B array job, merge + report job. Needs the
//! daemons (tools/setup.sh installs them); skipped without them unless CTAX_REQUIRE_SLURM=1.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ctax_schema::RunConfig;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The daemons this test started; stopped (SIGTERM to each recorded pid) when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn pid(&self, name: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn cmd(&self, bin: &Path) -> Command {
        let mut c = Command::new(bin);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for f in ["slurmctld.log", "slurmd.log", "munged.log"] {
            let t = std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
            let tail: Vec<&str> = t.lines().rev().take(15).collect();
            s.push_str(&format!("--- {f}\n"));
            for l in tail.into_iter().rev() {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for name in ["slurmd", "slurmctld", "munged"] {
            if let Some(pid) = self.pid(name) {
                // SAFETY: SIGTERM to a daemon this test started (pid from its own pid file).
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn start_cluster(dir: &Path) -> Result<Cluster, String> {
    let bins: Vec<Option<PathBuf>> = ["munged", "slurmctld", "slurmd"]
        .iter()
        .map(|b| which(b))
        .collect();
    let (Some(munged), Some(slurmctld), Some(slurmd)) =
        (bins[0].clone(), bins[1].clone(), bins[2].clone())
    else {
        return Err(
            "munged/slurmctld/slurmd not installed (tools/setup.sh installs slurm-wlm and munge)"
                .into(),
        );
    };
    for d in ["state", "spool"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    // A private munge key (1 KiB of randomness, readable by its owner only).
    let mut key = vec![0u8; 1024];
    let mut f = std::fs::File::open("/dev/urandom").unwrap();
    std::io::Read::read_exact(&mut f, &mut key).unwrap();
    let key_path = dir.join("munge.key");
    std::fs::write(&key_path, key).unwrap();
    std::fs::set_permissions(
        &key_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let host = String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let d = dir.display();
    let conf = dir.join("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=ctaxtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser={user}\nSlurmdUser={user}\n\
             SlurmctldPort={}\nSlurmdPort={}\nAuthType=auth/munge\nCredType=cred/munge\n\
             AuthInfo=socket={d}/munge.sock\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n\
             ReturnToService=2\nSchedulerType=sched/builtin\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\nJobCompType=jobcomp/none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nMinJobAge=600\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port()
        ),
    )
    .unwrap();
    let cluster = Cluster {
        dir: dir.to_path_buf(),
        conf: conf.clone(),
    };
    let st = Command::new(&munged)
        .arg(format!("--socket={d}/munge.sock"))
        .arg(format!("--pid-file={d}/munged.pid"))
        .arg(format!("--log-file={d}/munged.log"))
        .arg(format!("--seed-file={d}/munge.seed"))
        .arg(format!("--key-file={}", key_path.display()))
        .arg("--force")
        .status()
        .map_err(|e| format!("munged: {e}"))?;
    if !st.success() {
        return Err(format!("munged failed ({st}):\n{}", cluster.logs()));
    }
    for (bin, args) in [(&slurmctld, vec!["-c", "-i"]), (&slurmd, vec![])] {
        let st = cluster
            .cmd(bin)
            .args(args)
            .status()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        if !st.success() {
            return Err(format!(
                "{} failed ({st}):\n{}",
                bin.display(),
                cluster.logs()
            ));
        }
    }
    let sinfo = which("sinfo").ok_or("sinfo not installed")?;
    let t0 = Instant::now();
    loop {
        let o = cluster
            .cmd(&sinfo)
            .args(["-h", "-o", "%T"])
            .output()
            .map_err(|e| e.to_string())?;
        if String::from_utf8_lossy(&o.stdout).trim() == "idle" {
            return Ok(cluster);
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "the node never became idle ({}):\n{}",
                String::from_utf8_lossy(&o.stdout).trim(),
                cluster.logs()
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn runs(root: &Path) -> Vec<RunConfig> {
    let mut v: Vec<RunConfig> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("config.json")).ok())
        .map(|b| serde_json::from_slice(&b).unwrap())
        .collect();
    v.sort_by(|a, b| a.run_dir.cmp(&b.run_dir));
    v
}

fn identities(root: &Path) -> BTreeSet<(String, u32, String)> {
    runs(root)
        .into_iter()
        .map(|rc| {
            (
                rc.config.clone(),
                rc.launch,
                rc.extra["stage"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn shipped_sbatch_scripts_run_a_sharded_sim_sweep_on_a_local_cluster() {
    let required = std::env::var("CTAX_REQUIRE_SLURM").is_ok_and(|v| v == "1");
    let tmp = tempfile::tempdir().unwrap();
    let cluster = match start_cluster(&tmp.path().join("slurm")) {
        Ok(c) => c,
        Err(e) if !required => {
            eprintln!("SKIPPED (set CTAX_REQUIRE_SLURM=1 to fail instead): {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    // The sim profile, a free port, two launches of two configs, short cells.
    let mut text = std::fs::read_to_string(repo().join("launch/profiles/sim.toml")).unwrap();
    text = text
        .replace("port = 18432", &format!("port = {}", free_port()))
        .replace("launches = 1", "launches = 2")
        .replace(
            "duration_s = 3\nwarmup_s = 1\nmin_completed = 20",
            "duration_s = 2\nwarmup_s = 1\nmin_completed = 10",
        )
        // A fixed Phase B rate: ref_safe from 2-second cells on a loaded machine can be
        // undefined; this test is about the jobs and the barrier.
        .replace(
            "shapes = [[256, 32], [1024, 32], [256, 64]]",
            "shapes = [[256, 32], [1024, 32], [256, 64]]\nrate_override = 8",
        );
    let profile = tmp.path().join("sim.toml");
    std::fs::write(&profile, text).unwrap();
    let root = tmp.path().join("sweep");
    let o = cluster
        .cmd(Path::new("bash"))
        .arg(repo().join("launch/slurm/submit.sh"))
        .args(["--profile", profile.to_str().unwrap()])
        .args(["--root", root.to_str().unwrap(), "--shards", "2"])
        .args(["--run-args", "--configs plain,noop_connector"])
        .arg("--cpus-per-task=1")
        .env("CTAX_BIN", env!("CARGO_BIN_EXE_ctax"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "submit.sh: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ids = String::from_utf8(o.stdout).unwrap();
    assert_eq!(ids.lines().count(), 4, "{ids}");
    let squeue = which("squeue").unwrap();
    let t0 = Instant::now();
    let slurm_logs = || {
        let mut s = String::new();
        for e in std::fs::read_dir(root.join("slurm"))
            .into_iter()
            .flatten()
            .flatten()
        {
            s.push_str(&format!(
                "--- {}\n{}\n",
                e.file_name().to_string_lossy(),
                std::fs::read_to_string(e.path()).unwrap_or_default()
            ));
        }
        s
    };
    loop {
        let q = cluster
            .cmd(&squeue)
            .args(["-h", "-o", "%i %j %T %r"])
            .output()
            .unwrap();
        let q = String::from_utf8_lossy(&q.stdout).into_owned();
        if q.trim().is_empty() {
            break;
        }
        assert!(
            !q.contains("DependencyNeverSatisfied"),
            "a job failed:\n{q}\n{}",
            slurm_logs()
        );
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "jobs still queued after 10 min:\n{q}\n{}\n{}",
            slurm_logs(),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    let merged = root.join("merged");
    assert!(
        merged.join("report/index.html").exists(),
        "no report:\n{}",
        slurm_logs()
    );
    assert!(merged.join("analysis/summary.json").exists());
    assert!(root.join("phase_a/reference_rates.json").exists());
    // The shards ran disjoint parts that together are the whole plan: 2 configs x 2 launches
    // x (Phase A, Phase B).
    let (s1, s2) = (
        identities(&root.join("shard_1")),
        identities(&root.join("shard_2")),
    );
    assert!(s1.is_disjoint(&s2) && !s1.is_empty() && !s2.is_empty());
    let all = identities(&merged);
    assert_eq!(all, s1.union(&s2).cloned().collect());
    let want: BTreeSet<(String, u32, String)> = ["plain", "noop_connector"]
        .iter()
        .flat_map(|c| {
            (0..2u32).flat_map(move |l| {
                ["A", "B"]
                    .iter()
                    .map(move |s| ((*c).to_owned(), l, (*s).to_owned()))
            })
        })
        .collect();
    assert_eq!(all, want);
    // The barrier held: the reference rates were computed from both shards' Phase A after
    // every Phase A launch ended, and every Phase B launch started after that; each Phase B
    // shard adopted exactly that file.
    let refs_file = root.join("phase_a/reference_rates.json");
    let refs_ms = std::fs::metadata(&refs_file)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    let rows: Vec<ctax_schema::ManifestRow> =
        std::fs::read_to_string(merged.join("manifest.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let refs: ctax_schema::ReferenceRates =
        serde_json::from_slice(&std::fs::read(&refs_file).unwrap()).unwrap();
    assert_eq!(
        refs.configs_considered
            .iter()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        ["noop_connector", "plain"].into_iter().collect(),
        "computed from both shards' Phase A"
    );
    for r in &rows {
        let end = r.started_unix_ms as f64 + r.duration_s * 1000.0;
        match r.stage.as_str() {
            "1 Phase A" => assert!(end <= refs_ms + 1.0, "{r:?}"),
            "3 Phase B" => assert!((r.started_unix_ms as f64) >= refs_ms - 1.0, "{r:?}"),
            _ => {}
        }
    }
    assert_eq!(rows.iter().filter(|r| r.stage == "3 Phase B").count(), 4);
    for k in 1..=2 {
        assert_eq!(
            std::fs::read(root.join(format!("shard_{k}/reference_rates.json"))).unwrap(),
            std::fs::read(&refs_file).unwrap()
        );
    }
    drop(cluster);
}
