//! The GPU's own state during a launch: `gpu_telemetry_<stamp>.csv`, one row a second from
//! `nvidia-smi --query-gpu=… --format=csv -lms 1000` (written by `orchestrate::gpu_telemetry`
//! from before the server starts until it stopped), and its sidecar `gpu_telemetry_<stamp>.json`
//! (the fields in query order, the UTC offset of nvidia-smi's local timestamps). One pair per
//! launch attempt (`<stamp>` = the attempt's start), so a resume never rewrites an earlier
//! attempt's file.
//!
//! Read by `ctax diagnose`: the SM clock, power, temperature, utilisation and active clock-event
//! reasons inside each cell's measurement window, beside the engine's step p50, so a launch whose
//! server ran slow can be told apart from one whose GPU clocked down. Nothing here feeds a
//! statistic, a tax or a verdict.

use std::path::Path;

use anyhow::Context;

use super::civil::days_from_civil;

/// File names: `gpu_telemetry_<stamp>.csv` and `.json`.
pub(crate) const PREFIX: &str = "gpu_telemetry_";

/// The fields sampled, in this order; the last one is whichever name of the active clock-event
/// reasons the driver accepts ([`REASON_FIELDS`]), or absent when it accepts neither.
pub(crate) const FIELDS: [&str; 9] = [
    "timestamp",
    "clocks.sm",
    "clocks.mem",
    "power.draw",
    "temperature.gpu",
    "utilization.gpu",
    "utilization.memory",
    "pstate",
    "clocks.max.sm",
];

/// The bit mask of active clock-event reasons: its name since driver 535, then the older one.
pub(crate) const REASON_FIELDS: [&str; 2] = [
    "clocks_event_reasons.active",
    "clocks_throttle_reasons.active",
];

/// NVML's clock-event (throttle) reason bits (`nvmlClocksEventReasons`).
const REASON_BITS: [(u64, &str); 9] = [
    (0x1, "idle"),
    (0x2, "app clocks"),
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal"),
    (0x40, "HW thermal"),
    (0x80, "HW power brake"),
    (0x100, "display clocks"),
];

/// The sidecar of one telemetry file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TelemetryMeta {
    /// The queried fields, in the CSV's column order.
    pub fields: Vec<String>,
    pub period_ms: u32,
    /// Seconds east of UTC of the local time nvidia-smi stamps its rows with.
    pub utc_offset_s: i64,
    pub started_unix_ms: u64,
    /// The GPU sampled (UUID or index, as passed to `--id`).
    pub gpu: String,
}

/// One row.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub unix_ms: i64,
    pub sm_mhz: Option<f64>,
    pub mem_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub util_pct: Option<f64>,
    pub max_sm_mhz: Option<f64>,
    pub pstate: Option<String>,
    /// `None` when the driver has no reasons field or the row says N/A.
    pub reasons: Option<u64>,
}

/// The GPU during one window (a cell's measurement window).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Window {
    pub samples: usize,
    pub sm_mhz_p50: Option<f64>,
    pub sm_mhz_min: Option<f64>,
    pub max_sm_mhz: Option<f64>,
    pub mem_mhz_p50: Option<f64>,
    pub power_w_p50: Option<f64>,
    pub temp_c_max: Option<f64>,
    pub util_pct_p50: Option<f64>,
    /// Each clock-event reason seen, with the share of the window's samples it was active in.
    pub reasons: Vec<(String, f64)>,
    /// Samples whose reasons field was read (the share's denominator).
    pub reason_samples: usize,
}

/// Every telemetry sample of a run directory (all attempts, in time order); `Ok(None)` when it
/// has no telemetry file. Errors name the file, line and field.
pub fn read_run(dir: &Path) -> anyhow::Result<Option<Vec<Sample>>> {
    let mut csvs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(PREFIX) && n.ends_with(".csv")
            })
        })
        .collect();
    if csvs.is_empty() {
        return Ok(None);
    }
    csvs.sort();
    let mut out = Vec::new();
    for csv in csvs {
        let meta_path = csv.with_extension("json");
        let meta: TelemetryMeta = serde_json::from_slice(
            &std::fs::read(&meta_path)
                .with_context(|| format!("reading {}", meta_path.display()))?,
        )
        .with_context(|| format!("{}: not a telemetry sidecar", meta_path.display()))?;
        let text =
            std::fs::read_to_string(&csv).with_context(|| format!("reading {}", csv.display()))?;
        out.extend(parse(&meta, &text).map_err(|e| anyhow::anyhow!("{}:{e}", csv.display()))?);
    }
    out.sort_by_key(|s| s.unix_ms);
    Ok(Some(out))
}

/// The rows of one file. A last line without its newline (the sampler stopped mid-write) is
/// left out; any other bad line is an error `LINE: field NAME: …`.
pub(crate) fn parse(meta: &TelemetryMeta, text: &str) -> Result<Vec<Sample>, String> {
    let col = |name: &str| meta.fields.iter().position(|f| f == name);
    let reasons_col = meta
        .fields
        .iter()
        .position(|f| REASON_FIELDS.contains(&f.as_str()));
    let Some(ts_col) = col("timestamp") else {
        return Err(" the sidecar lists no timestamp field".into());
    };
    let mut lines: Vec<&str> = text.split('\n').collect();
    // After the last newline: empty, or a row cut short.
    lines.pop();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let no = i + 1;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() != meta.fields.len() {
            return Err(format!(
                "{no}: {} columns, the sidecar names {} fields",
                cells.len(),
                meta.fields.len()
            ));
        }
        // The header repeats the field names (some with units: `clocks.current.sm [MHz]`).
        if cells[ts_col] == "timestamp" {
            continue;
        }
        let field_err = |c: usize, why: &str| format!("{no}: field {}: {why}", meta.fields[c]);
        let unix_ms = local_ms(cells[ts_col]).ok_or_else(|| {
            field_err(
                ts_col,
                &format!("not YYYY/MM/DD HH:MM:SS.mmm: {:?}", cells[ts_col]),
            )
        })? - meta.utc_offset_s * 1000;
        let num = |name: &str| -> Result<Option<f64>, String> {
            let Some(c) = col(name) else { return Ok(None) };
            number(cells[c]).map_err(|v| field_err(c, &format!("not a number: {v:?}")))
        };
        let reasons = match reasons_col {
            Some(c) if !missing(cells[c]) => {
                let v = cells[c];
                let hex = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X"));
                Some(
                    hex.and_then(|h| u64::from_str_radix(h, 16).ok())
                        .ok_or_else(|| field_err(c, &format!("not a hex bit mask: {v:?}")))?,
                )
            }
            _ => None,
        };
        out.push(Sample {
            unix_ms,
            sm_mhz: num("clocks.sm")?,
            mem_mhz: num("clocks.mem")?,
            power_w: num("power.draw")?,
            temp_c: num("temperature.gpu")?,
            util_pct: num("utilization.gpu")?,
            max_sm_mhz: num("clocks.max.sm")?,
            pstate: col("pstate")
                .map(|c| cells[c])
                .filter(|v| !missing(v))
                .map(str::to_owned),
            reasons,
        });
    }
    Ok(out)
}

/// nvidia-smi's "not available" spellings: `[N/A]`, `N/A`, `[Not Supported]`, `[Unknown Error]`.
fn missing(v: &str) -> bool {
    v.is_empty() || v == "N/A" || (v.starts_with('[') && v.ends_with(']'))
}

/// `1980 MHz`, `312.45 W`, `87 %`, `45` → the number; N/A → `None`.
fn number(v: &str) -> Result<Option<f64>, &str> {
    if missing(v) {
        return Ok(None);
    }
    let head = v.split_whitespace().next().unwrap_or("");
    head.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .map(Some)
        .ok_or(v)
}

/// `2026/12/07 23:29:09.123` (nvidia-smi's `timestamp`, local time) → ms since the epoch as if
/// it were UTC.
fn local_ms(v: &str) -> Option<i64> {
    let (date, time) = v.split_once(' ')?;
    let mut d = date.split('/').map(|x| x.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (h, mi) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&da)
        || h > 23
        || mi > 59
        || !(0.0..61.0).contains(&sec)
    {
        return None;
    }
    let days = days_from_civil(y, mo, da);
    Some(((days * 86_400 + h * 3600 + mi * 60) * 1000) + (sec * 1000.0).round() as i64)
}

/// The samples with `from_ms <= unix_ms <= to_ms`, summarised (linear-interpolation p50s, as
/// every percentile of this tool); `None` without a sample in the window.
pub fn window(samples: &[Sample], from_ms: i64, to_ms: i64) -> Option<Window> {
    let w: Vec<&Sample> = samples
        .iter()
        .filter(|s| (from_ms..=to_ms).contains(&s.unix_ms))
        .collect();
    if w.is_empty() {
        return None;
    }
    let vals =
        |f: fn(&Sample) -> Option<f64>| -> Vec<f64> { w.iter().filter_map(|s| f(s)).collect() };
    let p50 = |v: Vec<f64>| crate::stats::quantile(&v, 0.5);
    let fold = |v: Vec<f64>, pick: fn(f64, f64) -> f64| v.into_iter().reduce(pick);
    let with_reasons: Vec<u64> = w.iter().filter_map(|s| s.reasons).collect();
    let mut reasons = Vec::new();
    for (bit, name) in REASON_BITS {
        let n = with_reasons.iter().filter(|m| *m & bit != 0).count();
        if n > 0 {
            reasons.push((name.to_owned(), n as f64 / with_reasons.len() as f64));
        }
    }
    let known: u64 = REASON_BITS.iter().map(|(b, _)| b).sum();
    let unknown = with_reasons.iter().fold(0, |acc, m| acc | (m & !known));
    if unknown != 0 {
        let n = with_reasons.iter().filter(|m| *m & unknown != 0).count();
        reasons.push((
            format!("{unknown:#x}"),
            n as f64 / with_reasons.len() as f64,
        ));
    }
    Some(Window {
        samples: w.len(),
        sm_mhz_p50: p50(vals(|s| s.sm_mhz)),
        sm_mhz_min: fold(vals(|s| s.sm_mhz), f64::min),
        max_sm_mhz: fold(vals(|s| s.max_sm_mhz), f64::max),
        mem_mhz_p50: p50(vals(|s| s.mem_mhz)),
        power_w_p50: p50(vals(|s| s.power_w)),
        temp_c_max: fold(vals(|s| s.temp_c), f64::max),
        util_pct_p50: p50(vals(|s| s.util_pct)),
        reasons,
        reason_samples: with_reasons.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(fields: &[&str], offset: i64) -> TelemetryMeta {
        TelemetryMeta {
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            period_ms: 1000,
            utc_offset_s: offset,
            started_unix_ms: 0,
            gpu: "0".into(),
        }
    }

    fn all_fields() -> Vec<&'static str> {
        let mut f = FIELDS.to_vec();
        f.push(REASON_FIELDS[0]);
        f
    }

    /// nvidia-smi's CSV as its manual and users' pasted output show it (`--format=csv`: a header
    /// of long names with units, then values with units), written by hand for this test; the
    /// first real file comes from the next GPU stretch.
    const CSV: &str = "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, utilization.gpu [%], utilization.memory [%], pstate, clocks.max.sm [MHz], clocks_event_reasons.active\n\
2026/12/07 23:29:09.123, 1980 MHz, 2619 MHz, 312.45 W, 45, 87 %, 40 %, P0, 1980 MHz, 0x0000000000000000\n\
2026/12/07 23:29:10.125, 1755 MHz, 2619 MHz, 699.80 W, 47, 95 %, 52 %, P0, 1980 MHz, 0x0000000000000004\n\
2026/12/07 23:29:11.127, 1410 MHz, 2619 MHz, [N/A], 48, 96 %, 53 %, P0, 1980 MHz, 0x0000000000000024\n\
2026/12/07 23:29:12.1";

    /// By hand: 2026-12-07 is day 20,794 since 1970-01-01 (days_from_civil); 23:29:09.123 is
    /// 84,549.123 s into it, so 1,796,686,149,123 ms as UTC; with the clock 1 h east of UTC,
    /// 3,600,000 ms earlier. The cut last line is left out; N/A power is `None`.
    #[test]
    fn rows_parse_with_units_na_and_the_utc_offset() {
        let s = parse(&meta(&all_fields(), 3600), CSV).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(days_from_civil(2026, 12, 7), 20_794);
        assert_eq!(s[0].unix_ms, 20_794 * 86_400_000 + 84_549_123 - 3_600_000);
        assert_eq!(s[1].unix_ms - s[0].unix_ms, 1002);
        assert_eq!(s[0].sm_mhz, Some(1980.0));
        assert_eq!(s[1].power_w, Some(699.8));
        assert_eq!(s[2].power_w, None);
        assert_eq!(s[2].temp_c, Some(48.0));
        assert_eq!(s[0].pstate.as_deref(), Some("P0"));
        assert_eq!(s[2].reasons, Some(0x24));
    }

    /// A bad value names its line and field; a row of the wrong width names its line.
    #[test]
    fn bad_rows_name_line_and_field() {
        let m = meta(&all_fields(), 0);
        let bad = CSV.replace("1755 MHz", "fast MHz");
        assert_eq!(
            parse(&m, &bad).unwrap_err(),
            "3: field clocks.sm: not a number: \"fast MHz\""
        );
        let bad = CSV.replace("0x0000000000000004", "4");
        assert_eq!(
            parse(&m, &bad).unwrap_err(),
            "3: field clocks_event_reasons.active: not a hex bit mask: \"4\""
        );
        let bad = CSV.replace("2026/12/07 23:29:11.127", "yesterday");
        assert!(
            parse(&m, &bad)
                .unwrap_err()
                .starts_with("4: field timestamp: not YYYY/MM/DD")
        );
        let bad = CSV.replace(", P0, 1980 MHz, 0x0000000000000000", ", P0");
        assert_eq!(
            parse(&m, &bad).unwrap_err(),
            "2: 8 columns, the sidecar names 10 fields"
        );
    }

    /// Without the reasons field (a driver that knows neither name) the rows still parse.
    #[test]
    fn no_reasons_field() {
        let text: String = CSV
            .lines()
            .take(4)
            .map(|l| format!("{}\n", &l[..l.rfind(',').unwrap()]))
            .collect();
        let s = parse(&meta(&FIELDS, 0), &text).unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|x| x.reasons.is_none()));
        let w = window(&s, i64::MIN, i64::MAX).unwrap();
        assert!(w.reasons.is_empty());
        assert_eq!(w.reason_samples, 0);
    }

    /// By hand over rows 2–3 (the window leaves row 1 out): SM clocks 1755, 1410 → p50 1582.5
    /// (numpy linear: midpoint of two), min 1410; power p50 699.8 (one value; N/A left out);
    /// temperature max 48; SW power cap active in both rows, SW thermal in one of two.
    #[test]
    fn window_by_hand() {
        let s = parse(&meta(&all_fields(), 0), CSV).unwrap();
        let w = window(&s, s[1].unix_ms, s[2].unix_ms).unwrap();
        assert_eq!(w.samples, 2);
        assert_eq!(w.sm_mhz_p50, Some(1582.5));
        assert_eq!(w.sm_mhz_min, Some(1410.0));
        assert_eq!(w.max_sm_mhz, Some(1980.0));
        assert_eq!(w.power_w_p50, Some(699.8));
        assert_eq!(w.temp_c_max, Some(48.0));
        assert_eq!(w.util_pct_p50, Some(95.5));
        assert_eq!(
            w.reasons,
            vec![
                ("SW power cap".to_owned(), 1.0),
                ("SW thermal".to_owned(), 0.5)
            ]
        );
        assert!(window(&s, 0, 1).is_none());
        // A bit NVML does not name is kept, as hex.
        let mut odd = s.clone();
        odd[0].reasons = Some(0x1001);
        let w = window(&odd, s[0].unix_ms, s[1].unix_ms).unwrap();
        assert_eq!(
            w.reasons,
            vec![
                ("idle".to_owned(), 0.5),
                ("SW power cap".to_owned(), 0.5),
                ("0x1000".to_owned(), 0.5)
            ]
        );
    }

    /// Two attempts' files in one run directory are read together, in time order; a directory
    /// without one reads `None`; a file without its sidecar is an error naming the sidecar.
    #[test]
    fn read_run_joins_attempts() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_run(dir.path()).unwrap().is_none());
        let m = meta(&all_fields(), 0);
        let later: String = CSV.replace("23:29:", "23:40:");
        for (stamp, text) in [
            ("20261207-234000", &later),
            ("20261207-232900", &CSV.to_owned()),
        ] {
            std::fs::write(dir.path().join(format!("{PREFIX}{stamp}.csv")), text).unwrap();
            std::fs::write(
                dir.path().join(format!("{PREFIX}{stamp}.json")),
                serde_json::to_vec(&m).unwrap(),
            )
            .unwrap();
        }
        let s = read_run(dir.path()).unwrap().unwrap();
        assert_eq!(s.len(), 6);
        assert!(s.windows(2).all(|p| p[0].unix_ms <= p[1].unix_ms));
        std::fs::remove_file(dir.path().join(format!("{PREFIX}20261207-234000.json"))).unwrap();
        let e = format!("{:#}", read_run(dir.path()).unwrap_err());
        assert!(e.contains("gpu_telemetry_20261207-234000.json"), "{e}");
    }
}
