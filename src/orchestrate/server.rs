//! One server launch: start it in its own process group through `launch/launch_<config>.sh`
//! (or `ctax-sim` for simulated sweeps), wait for `/v1/models` 200, stop the whole group
//! (SIGINT, then SIGKILL), wait for the GPU and the port to be released.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http;
use super::signals;

/// How to start the server.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// `bash <repo>/launch/launch_<config>.sh` with the launch contract's environment.
    Vllm,
    /// `ctax-sim --port P <args>` (simulated; every run says so).
    Sim { bin: PathBuf, args: Vec<String> },
}

#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub kind: Kind,
    pub repo: PathBuf,
    pub config: String,
    pub run_dir: PathBuf,
    pub env: Vec<(String, String)>,
    pub host: String,
    pub port: u16,
    /// CPUs the whole process group runs on (set before exec, inherited by every child).
    pub cpus: Option<Vec<usize>>,
    /// The GPU (UUID or index) whose release `stop` waits for; `None`: every GPU.
    pub gpu: Option<String>,
    pub startup_timeout: Duration,
    pub stop_grace: Duration,
    pub gpu_release_wait: Duration,
}

pub(crate) struct Server {
    child: Child,
    pgid: i32,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub started: Instant,
}

/// A launch that did not become ready.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    #[error(
        "port {0} is already in use on {1}: another server is running there; stop it or pick another port"
    )]
    PortBusy(u16, String),
    #[error("{config}: the server exited during startup ({status}); last log lines:\n{tail}")]
    Died {
        config: String,
        status: String,
        tail: String,
    },
    #[error(
        "{config}: not ready after {secs:.0} s (GET /v1/models never returned 200); last log lines:\n{tail}"
    )]
    Timeout {
        config: String,
        secs: f64,
        tail: String,
    },
    #[error("interrupted during startup")]
    Interrupted,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Server {
    /// Starts the server; output is appended to the run directory's vllm_stdout/stderr.log.
    pub(crate) fn launch(spec: &Spec) -> Result<Server, LaunchError> {
        if !http::port_free(&spec.host, spec.port) {
            return Err(LaunchError::PortBusy(spec.port, spec.host.clone()));
        }
        std::fs::create_dir_all(&spec.run_dir)?;
        let stdout = spec.run_dir.join("vllm_stdout.log");
        let stderr = spec.run_dir.join("vllm_stderr.log");
        let open = |p: &Path| -> std::io::Result<std::fs::File> {
            let mut f = OpenOptions::new().create(true).append(true).open(p)?;
            writeln!(
                f,
                "==== ctax: launch of {} at unix {} ====",
                spec.config,
                unix_ms()
            )?;
            Ok(f)
        };
        let mut cmd = match &spec.kind {
            Kind::Vllm => {
                let mut c = Command::new("bash");
                c.arg(
                    spec.repo
                        .join("launch")
                        .join(format!("launch_{}.sh", spec.config)),
                );
                c
            }
            Kind::Sim { bin, args } => {
                let mut c = Command::new(bin);
                c.args(["--host", &spec.host, "--port", &spec.port.to_string()])
                    .args(args);
                let line = format!(
                    "#!/usr/bin/env bash\n# simulated server (ctax-sim)\nexec {} {}\n",
                    bin.display(),
                    c.get_args()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                std::fs::write(spec.run_dir.join("launch.sh"), line)?;
                c
            }
        };
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("CTAX_RUN_DIR", &spec.run_dir)
            .env("CTAX_HOST", &spec.host)
            .env("CTAX_PORT", spec.port.to_string())
            .stdin(Stdio::null())
            .stdout(open(&stdout)?)
            .stderr(open(&stderr)?)
            .process_group(0);
        if let Some(cpus) = &spec.cpus {
            super::slots::pin_on_exec(&mut cmd, super::slots::cpu_set(cpus));
        }
        let child = cmd.spawn()?;
        let pgid = child.id() as i32;
        Ok(Server {
            child,
            pgid,
            stdout,
            stderr,
            started: Instant::now(),
        })
    }

    /// Polls `/v1/models` until 200. Returns seconds to ready.
    pub(crate) fn wait_ready(&mut self, spec: &Spec) -> Result<f64, LaunchError> {
        let deadline = self.started + spec.startup_timeout;
        loop {
            if signals::interrupted() {
                return Err(LaunchError::Interrupted);
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(LaunchError::Died {
                    config: spec.config.clone(),
                    status: status.to_string(),
                    tail: self.tail(40),
                });
            }
            if let Ok((200, _)) =
                http::get(&spec.host, spec.port, "/v1/models", Duration::from_secs(5))
            {
                return Ok(self.started.elapsed().as_secs_f64());
            }
            if Instant::now() > deadline {
                return Err(LaunchError::Timeout {
                    config: spec.config.clone(),
                    secs: spec.startup_timeout.as_secs_f64(),
                    tail: self.tail(40),
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Last `n` lines of stderr then stdout.
    fn tail(&self, n: usize) -> String {
        let mut out = log_tail(&self.stderr, n);
        let so = log_tail(&self.stdout, n / 2);
        if !so.trim().is_empty() {
            out.push_str("\n--- stdout ---\n");
            out.push_str(&so);
        }
        out
    }

    /// SIGINT to the whole process group, SIGKILL after `grace`, then waits for the port and
    /// (when a GPU exists) for the GPU to hold no compute process. Returns seconds taken.
    pub(crate) fn stop(mut self, spec: &Spec) -> f64 {
        let t0 = Instant::now();
        // SAFETY: plain kill(2) on our own child's process group.
        unsafe { libc::kill(-self.pgid, libc::SIGINT) };
        let deadline = t0 + spec.stop_grace;
        while Instant::now() < deadline {
            // Reap our direct child first: a zombie still counts as a member of the group.
            let _ = self.child.try_wait();
            if group_gone(self.pgid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.try_wait();
        if !group_gone(self.pgid) {
            // SAFETY: as above.
            unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
        let port_deadline = Instant::now() + Duration::from_secs(30);
        while !http::port_free(&spec.host, spec.port) && Instant::now() < port_deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        wait_gpu_release(spec.gpu_release_wait, spec.gpu.as_deref());
        t0.elapsed().as_secs_f64()
    }
}

/// True when no process of the group is left (kill(-pgid, 0) fails with ESRCH).
fn group_gone(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(-pgid, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Waits until `nvidia-smi` lists no compute process on `gpu` (a UUID or an index; `None`:
/// on any GPU), at most `max`: the slot is the GPU's only user. Without nvidia-smi (CPU runs)
/// it returns at once.
fn wait_gpu_release(max: Duration, gpu: Option<&str>) {
    if max.is_zero() {
        return;
    }
    let deadline = Instant::now() + max;
    loop {
        let mut cmd = Command::new("nvidia-smi");
        if let Some(g) = gpu {
            cmd.arg(format!("--id={g}"));
        }
        let out = cmd
            .args(["--query-compute-apps=pid", "--format=csv,noheader"])
            .output();
        match out {
            Ok(o) if o.status.success() && String::from_utf8_lossy(&o.stdout).trim().is_empty() => {
                return;
            }
            Ok(o) if o.status.success() => {}
            _ => return,
        }
        if Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The last `n` lines of a (possibly large) log file.
pub(crate) fn log_tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let _ = f.seek(SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
