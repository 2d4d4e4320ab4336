//! The GPU sampler beside a launch: `nvidia-smi` logging the launch's GPU once a second into the
//! run directory's `gpu_telemetry_<stamp>.csv` (the fields and file layout:
//! `ingest::gpu_telemetry`), from before the server starts until after it stopped. Its own
//! process, started and stopped by the orchestrator: neither the collector's timing threads nor
//! anything else of ctax touches it while the cells run. Without nvidia-smi, or when the driver
//! refuses the query, the launch runs without it and says so.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ingest::gpu_telemetry::{FIELDS, PREFIX, REASON_FIELDS, TelemetryMeta};

const PERIOD_MS: u32 = 1000;

/// A running sampler; dropping it stops nvidia-smi (SIGINT, then SIGKILL after 3 s).
pub(crate) struct Sampler {
    child: Child,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fields this driver answers: [`FIELDS`] plus the first of [`REASON_FIELDS`] it accepts
/// (one `nvidia-smi` query each, before the server starts); `Err` with nvidia-smi's words when it
/// refuses even [`FIELDS`].
fn accepted_fields(smi: &Path, gpu: &str) -> Result<Vec<String>, String> {
    let query = |fields: &[&str]| -> Result<(), String> {
        let out = query_gpu(smi, gpu, &fields.join(","))
            .arg("--format=csv,noheader")
            .output()
            .map_err(|e| format!("{}: {e}", smi.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            let why = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            Err(why.trim().to_owned())
        }
    };
    for reason in REASON_FIELDS {
        let mut f = FIELDS.to_vec();
        f.push(reason);
        if query(&f).is_ok() {
            return Ok(f.into_iter().map(str::to_owned).collect());
        }
    }
    query(&FIELDS)?;
    Ok(FIELDS.iter().map(|f| (*f).to_owned()).collect())
}

/// `nvidia-smi --id=GPU --query-gpu=FIELDS` (comma-joined), stdin closed: the command both the
/// probe and the sampler run, each adding its own format and output.
fn query_gpu(smi: &Path, gpu: &str, fields: &str) -> Command {
    let mut cmd = Command::new(smi);
    cmd.arg(format!("--id={gpu}"))
        .arg(format!("--query-gpu={fields}"))
        .stdin(Stdio::null());
    cmd
}

/// Seconds east of UTC of this process's local time (nvidia-smi, our child, stamps its rows in
/// the same zone).
fn utc_offset_s() -> i64 {
    // SAFETY: time(NULL) and localtime_r into a zeroed struct we own.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff
        }
    }
}

/// Starts sampling `gpu` (UUID or index) into `dir` with the `nvidia-smi` found as `smi`;
/// `stamp` names the attempt's files. `None` (with a warning naming `label`) when it cannot.
pub(crate) fn start(
    smi: &Path,
    dir: &Path,
    gpu: &str,
    stamp: &str,
    label: &str,
) -> Option<Sampler> {
    let fields = match accepted_fields(smi, gpu) {
        Ok(f) => f,
        Err(why) => {
            eprintln!("[ctax] warning: {label}: no GPU telemetry (nvidia-smi: {why})");
            return None;
        }
    };
    let csv = dir.join(format!("{PREFIX}{stamp}.csv"));
    let joined = fields.join(",");
    let meta = TelemetryMeta {
        fields,
        period_ms: PERIOD_MS,
        utc_offset_s: utc_offset_s(),
        started_unix_ms: super::server::unix_ms(),
        gpu: gpu.to_owned(),
    };
    if let Err(e) = crate::fsutil::write_json_atomic(&csv.with_extension("json"), &meta) {
        eprintln!("[ctax] warning: {label}: no GPU telemetry (writing its sidecar: {e})");
        return None;
    }
    let mut cmd = query_gpu(smi, gpu, &joined);
    // SAFETY: prctl only, async-signal-safe: the sampler stops if ctax dies before dropping it.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
            Ok(())
        });
    }
    let child = cmd
        .arg("--format=csv")
        .arg(format!("--loop-ms={PERIOD_MS}"))
        .arg(format!("--filename={}", csv.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(child) => Some(Sampler { child }),
        Err(e) => {
            eprintln!(
                "[ctax] warning: {label}: no GPU telemetry ({}: {e})",
                smi.display()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in nvidia-smi (a shell script) that refuses `clocks_event_reasons.active` as an
    /// old driver does, accepts the older name, and in loop mode writes the header and a row a
    /// tick to `--filename` until SIGINT: the sampler picks the older field, writes the sidecar,
    /// and stops the loop when dropped.
    #[test]
    fn picks_the_reason_field_the_driver_accepts_and_stops_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let smi = dir.path().join("nvidia-smi");
        std::fs::write(
            &smi,
            r#"#!/bin/bash
q=""; f=""; loop=0
for a in "$@"; do
  case "$a" in
    --query-gpu=*) q="${a#--query-gpu=}" ;;
    --filename=*) f="${a#--filename=}" ;;
    --loop-ms=*) loop=1 ;;
  esac
done
case "$q" in *clocks_event_reasons*) echo "Field \"clocks_event_reasons.active\" is not a valid field to query."; exit 2 ;; esac
[ "$loop" = 1 ] || { echo "one row"; exit 0; }
trap 'echo stopped >> "$f.stop"; exit 0' INT
echo "$q" > "$f"
while :; do echo "2026/12/07 23:29:09.123, 1980 MHz" >> "$f"; sleep 0.05; done
"#,
        )
        .unwrap();
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let s = start(&smi, &run, "GPU-x", "20261207-232441", "plain l0").unwrap();
        let csv = run.join("gpu_telemetry_20261207-232441.csv");
        std::thread::sleep(Duration::from_millis(400));
        drop(s);
        let text = std::fs::read_to_string(&csv).unwrap();
        assert!(text.starts_with("timestamp,clocks.sm,"), "{text}");
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with(",clocks_throttle_reasons.active")
        );
        assert!(text.lines().count() >= 2, "{text}");
        assert!(
            std::fs::read_to_string(csv.with_extension("csv.stop")).is_ok(),
            "not stopped by SIGINT"
        );
        let meta: TelemetryMeta =
            serde_json::from_slice(&std::fs::read(csv.with_extension("json")).unwrap()).unwrap();
        assert_eq!(
            meta.fields.last().unwrap(),
            "clocks_throttle_reasons.active"
        );
        assert_eq!(meta.gpu, "GPU-x");
        assert_eq!(meta.period_ms, 1000);
    }

    /// A driver that refuses every query leaves the launch without telemetry, and no file.
    #[test]
    fn a_refusing_driver_gives_none() {
        let dir = tempfile::tempdir().unwrap();
        let smi = dir.path().join("nvidia-smi");
        std::fs::write(&smi, "#!/bin/bash\necho 'No devices were found'; exit 6\n").unwrap();
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(start(&smi, dir.path(), "0", "s", "plain l0").is_none());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
