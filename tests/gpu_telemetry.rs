//! `ctax diagnose`'s GPU table: a launch's `gpu_telemetry_<stamp>.csv` read back inside each
//! cell's measurement window, beside the engine's step p50 there. A synthetic root (known
//! windows and steps) gets a telemetry file written around one cell's window by hand: the rows
//! inside it, and only those, make the table's numbers; a damaged row names file, line and
//! field without hiding the other launches.

use std::path::{Path, PathBuf};

use connector_tax::diagnose::{gpu_cells, gpu_markdown};
use connector_tax::ingest::gpu_telemetry::TelemetryMeta;
use connector_tax::synth::{SynthConfig, SynthSpec};
use ctax_schema::{Phase, RunSummary};

fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let spec = SynthSpec {
        configs: vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig::new("mooncake_both", 1.1, 1.0),
        ],
        phase_a_rates: vec![2.0, 4.0],
        requests_per_cell: 60,
        warmup_requests: 5,
        with_steps: true,
        ..SynthSpec::default()
    };
    connector_tax::synth::generate(&spec, d.path()).unwrap();
    d
}

fn run_dir(root: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().ends_with(suffix))
        .unwrap()
}

/// nvidia-smi's `timestamp` (local time; the sidecar below says UTC) of a unix ms.
fn stamp(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    // Hinnant's civil_from_days, written out again here as the test's own reference.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}.{:03}",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

fn write_telemetry(dir: &Path, rows: &[(i64, u32, &str)]) {
    let fields = [
        "timestamp",
        "clocks.sm",
        "clocks.mem",
        "power.draw",
        "temperature.gpu",
        "utilization.gpu",
        "utilization.memory",
        "pstate",
        "clocks.max.sm",
        "clocks_event_reasons.active",
    ];
    let meta = TelemetryMeta {
        fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        period_ms: 1000,
        utc_offset_s: 0,
        started_unix_ms: 0,
        gpu: "GPU-test".into(),
    };
    std::fs::write(
        dir.join("gpu_telemetry_20261208-000000.json"),
        serde_json::to_vec(&meta).unwrap(),
    )
    .unwrap();
    let mut csv = String::from(
        "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, utilization.gpu [%], utilization.memory [%], pstate, clocks.max.sm [MHz], clocks_event_reasons.active\n",
    );
    for (ms, sm, reasons) in rows {
        csv += &format!(
            "{}, {sm} MHz, 2619 MHz, 400.00 W, 50, 90 %, 40 %, P0, 1980 MHz, {reasons}\n",
            stamp(*ms)
        );
    }
    std::fs::write(dir.join("gpu_telemetry_20261208-000000.csv"), csv).unwrap();
}

#[test]
fn the_window_takes_the_rows_inside_the_cell_and_a_bad_row_is_named() {
    let root = root();
    let dir = run_dir(root.path(), "_mooncake_both_l0");
    let summary: RunSummary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let h = summary
        .cells
        .values()
        .find(|c| c.phase == Phase::A && c.cell == "r2_i4096_o256")
        .expect("the 2 req/s cell");
    let at = |t: u64| h.wall_start_unix_ms as i64 + (t as i64 - h.t_start_ns as i64) / 1_000_000;
    let (from, to) = (at(h.t_warmup_end_ns), at(h.t_last_send_ns));
    assert!(to - from > 3000, "window {from}..{to}");
    // Two rows before the window, three inside (1410, 1980, 1755 MHz; SW power cap in one),
    // one after it.
    write_telemetry(
        &dir,
        &[
            (from - 2000, 300, "0x0000000000000001"),
            (from - 10, 310, "0x0000000000000001"),
            (from + 500, 1410, "0x0000000000000004"),
            (from + 1500, 1980, "0x0000000000000000"),
            (to - 1, 1755, "0x0000000000000000"),
            (to + 1000, 320, "0x0000000000000001"),
        ],
    );
    let ds = connector_tax::ingest::load(root.path()).unwrap();
    let (rows, errors) = gpu_cells(&ds);
    assert!(errors.is_empty(), "{errors:?}");
    // Only mooncake_both l0 has telemetry: its two cells.
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.run.ends_with("_mooncake_both_l0")));
    let r = rows.iter().find(|r| r.cell == "r2_i4096_o256").unwrap();
    let g = r.gpu.as_ref().unwrap();
    // By hand: 1410, 1755, 1980 → p50 1755 (numpy linear, the middle of three), min 1410.
    assert_eq!(g.samples, 3);
    assert_eq!(g.sm_mhz_p50, Some(1755.0));
    assert_eq!(g.sm_mhz_min, Some(1410.0));
    assert_eq!(g.max_sm_mhz, Some(1980.0));
    assert_eq!(g.reasons, vec![("SW power cap".to_owned(), 1.0 / 3.0)]);
    // The step p50 of the steps that began inside the window, by hand from the raw records.
    let ds_run = ds.runs.iter().find(|x| x.dir_name == r.run).unwrap();
    let mut steps: Vec<f64> = ds_run.cells[&(Phase::A, "r2_i4096_o256".to_owned())]
        .steps
        .iter()
        .filter(|s| (h.t_warmup_end_ns..=h.t_last_send_ns).contains(&s.t_ns))
        .filter_map(|s| s.step_duration_us)
        .collect();
    assert!(steps.len() > 10);
    steps.sort_by(f64::total_cmp);
    let n = steps.len();
    let p50 = if n % 2 == 1 {
        steps[n / 2]
    } else {
        (steps[n / 2 - 1] + steps[n / 2]) / 2.0
    };
    assert!((r.step_p50_ms.unwrap() - p50 / 1000.0).abs() < 1e-9);
    // The 4 req/s cell ran after the telemetry's last row: no sample in its window.
    let other = rows.iter().find(|r| r.cell == "r4_i4096_o256").unwrap();
    assert!(other.gpu.is_none());
    let md = gpu_markdown(&rows, &errors);
    assert!(md.contains("| 3 | 1755 / 1410 (1980) |"), "{md}");
    assert!(md.contains("SW power cap 33%"), "{md}");
    assert!(md.contains("no sample in the window"), "{md}");

    // A damaged row: the error names the file, its line and the field; plain's launches are
    // still read (none has telemetry, so the table is empty and says so).
    let csv = dir.join("gpu_telemetry_20261208-000000.csv");
    let text = std::fs::read_to_string(&csv)
        .unwrap()
        .replacen("1980 MHz, 0x", "fast MHz, 0x", 1);
    std::fs::write(&csv, text).unwrap();
    let (rows, errors) = gpu_cells(&ds);
    assert!(rows.is_empty());
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains(
            "gpu_telemetry_20261208-000000.csv:2: field clocks.max.sm: not a number: \"fast MHz\""
        ),
        "{}",
        errors[0]
    );
    let md = gpu_markdown(&rows, &errors);
    assert!(md.starts_with("GPU telemetry unreadable: "), "{md}");
    assert!(
        md.contains("No launch of this root recorded GPU telemetry"),
        "{md}"
    );
}
