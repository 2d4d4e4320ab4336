//! `ctax run --end-by WHEN`: start no launch that is not expected to end by WHEN.
//!
//! A GPU lease, a Slurm allocation or a device budget ends at a known time, and a launch cut
//! off there is lost whole (its server start included) and leaves an `interrupted` row. With
//! `--end-by`, before each launch starts, `ctax run` estimates how long it will take from what
//! the root has already measured ([`LaunchTimes`]) and starts it only when it is expected to
//! end by then; once one launch is held back the sweep starts no other (its order stays what
//! the plan says: anchors first, plain last) and exits [`EXIT_CODE`]. `--dry-run` prints each
//! launch's estimate and where the deadline falls, which is how a stretch is planned.
//!
//! The estimate is deliberately pessimistic, since a launch cut off costs more than one held
//! back: the root's slowest launch overhead (server start, step-log cut, stop: a launch's
//! manifest duration less its cells' own time) plus, per cell, its planned warm-up (the
//! launch's warm-up for the first) and the longest time that cell took after its warm-up in
//! any launch of the root; a cell never run there takes its warm-up, then max(duration floor,
//! min_completed / rate), then the root's longest drain; a cell at most its `max_cell_s` plus
//! the collector's cancel grace; 15 s between launches. Without any launch in the root the
//! overhead is the profile's `startup_timeout_s + stop_grace_s`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use ctax_schema::{PlannedCell, RowStatus};

use super::{Ctx, manifest, resume};

/// `ctax run`'s exit status when `--end-by` held a launch back (the collector's codes are
/// 0–4 and 130, [`ctax_schema::Exit`]).
pub(crate) const EXIT_CODE: u8 = 5;

/// The deadline in unix ms: `+25m`, `+1h30m`, `+1500s` or `+1500` (seconds) after `now_ms`;
/// `@1796459400` (unix seconds); `2026-12-05T15:10:00Z` (UTC).
pub(crate) fn parse(s: &str, now_ms: u64) -> anyhow::Result<u64> {
    let bad = || {
        format!(
            "--end-by `{s}`: expected +DURATION (`+25m`, `+1h30m`, `+1500s`), @UNIX_SECONDS or \
             YYYY-MM-DDTHH:MM:SSZ"
        )
    };
    // Unix ms of `secs` after `base`, or the error (a number too large for any deadline).
    let after = |base: u64, secs: u64| {
        secs.checked_mul(1000)
            .and_then(|ms| base.checked_add(ms))
            .with_context(|| format!("{}: out of range", bad()))
    };
    if let Some(d) = s.strip_prefix('+') {
        return after(now_ms, parse_duration_s(d).with_context(bad)?);
    }
    if let Some(t) = s.strip_prefix('@') {
        anyhow::ensure!(
            !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()),
            "{}",
            bad()
        );
        return after(0, t.parse().with_context(bad)?);
    }
    let b = s.as_bytes();
    let shape_ok = b.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z';
    if !shape_ok {
        bail!("{}", bad());
    }
    // `YYYYMMDD-HHMMSS`, the run directories' stamp, which manifest::stamp_ms reads.
    let stamp = format!(
        "{}{}{}-{}{}{}",
        &s[0..4],
        &s[5..7],
        &s[8..10],
        &s[11..13],
        &s[14..16],
        &s[17..19]
    );
    // Read back: a date that does not exist (February 31, second 60) does not round-trip.
    manifest::stamp_ms(&stamp)
        .filter(|&ms| manifest::stamp(ms) == stamp)
        .with_context(bad)
}

/// `25m`, `1h30m`, `1500s`, `1500` → seconds (at least one digit per unit, units h > m > s).
fn parse_duration_s(d: &str) -> anyhow::Result<u64> {
    if d.is_empty() {
        bail!("empty duration");
    }
    if d.bytes().all(|c| c.is_ascii_digit()) {
        return Ok(d.parse()?);
    }
    let (mut total, mut num, mut last_unit) = (0u64, String::new(), 0u8);
    for c in d.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let (rank, mult) = match c {
            'h' => (3, 3600),
            'm' => (2, 60),
            's' => (1, 1),
            _ => bail!("unknown unit `{c}`"),
        };
        if num.is_empty() || (last_unit != 0 && rank >= last_unit) {
            bail!("malformed duration");
        }
        total = num
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(mult))
            .and_then(|n| n.checked_add(total))
            .context("out of range")?;
        num.clear();
        last_unit = rank;
    }
    if !num.is_empty() {
        bail!("a number without a unit after another unit");
    }
    Ok(total)
}

/// A launch's time outside its manifest row's span (the run directory, `config.json` and
/// `env.txt` before, the step-log cut and statistics after): 4.5-10.6 s between consecutive
/// launches of one sweep on the H200 root (36 pairs), 6.2-7.2 s on the H100 root.
const BETWEEN_LAUNCHES_S: f64 = 15.0;

/// How long past `max_cell_s` a cell may run: the collector's grace for cancelled streams
/// (0.5 s), rounded up.
const CANCEL_GRACE_S: f64 = 1.0;

/// What the root has measured of launch and cell times, for [`LaunchTimes::estimate_s`].
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct LaunchTimes {
    /// Per cell key (`A/r2_i4096_o256`): the longest it took after its warm-up in any launch
    /// (end of warm-up to drain end; the warm-up itself is the plan's, which a launch's first
    /// cell raises to the launch warm-up).
    pub cell_s: BTreeMap<String, f64>,
    /// The longest drain (last intended send to drain end) of any cell.
    pub drain_s: Option<f64>,
    /// The largest launch overhead: an `ok` manifest row's duration less its cells' time.
    pub overhead_s: Option<f64>,
}

impl LaunchTimes {
    /// Read from `root`'s run directories (`summary.json`) and `manifest.jsonl`; what is
    /// missing or unreadable is simply not known.
    pub(crate) fn of_root(root: &Path) -> LaunchTimes {
        let mut t = LaunchTimes::default();
        let max_in = |slot: &mut Option<f64>, v: f64| *slot = Some(slot.map_or(v, |o| o.max(v)));
        // Per run directory: (wall start in unix ms, whole seconds) of each cell.
        let mut cells_of_run: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
        for (dir, _) in resume::runs(root) {
            let summary = resume::read_summary(&dir);
            let mut cells = Vec::new();
            for (key, h) in &summary.cells {
                let secs = |from: u64| h.t_end_ns.saturating_sub(from) as f64 / 1e9;
                cells.push((h.wall_start_unix_ms, secs(h.t_start_ns)));
                // A cell cut short (interrupted, its server dead) says nothing of how long it
                // takes: only complete cells and those max_cell_s stopped teach a time.
                if !(h.complete || h.capped()) {
                    continue;
                }
                let after_warmup = secs(h.t_warmup_end_ns);
                let e = t.cell_s.entry(key.clone()).or_insert(after_warmup);
                *e = e.max(after_warmup);
                max_in(&mut t.drain_s, secs(h.t_last_send_ns));
            }
            let name = dir.file_name().unwrap_or_default().to_string_lossy();
            cells_of_run.insert(name.into_owned(), cells);
        }
        for row in manifest::read(root).unwrap_or_default() {
            let (RowStatus::Ok, Some(dir)) = (row.status, row.run_dir.as_deref()) else {
                continue;
            };
            // The cells this row's attempt ran: a resumed launch's summary also holds the
            // cells an earlier attempt completed, outside the row's span.
            let end_ms = row.started_unix_ms + (row.duration_s * 1000.0) as u64;
            let ran: Vec<f64> = cells_of_run
                .get(dir)
                .into_iter()
                .flatten()
                .filter(|(start, _)| (row.started_unix_ms..=end_ms).contains(start))
                .map(|&(_, secs)| secs)
                .collect();
            if !ran.is_empty() {
                max_in(
                    &mut t.overhead_s,
                    (row.duration_s - ran.iter().sum::<f64>()).max(0.0),
                );
            }
        }
        t
    }

    /// Seconds a launch running `cells` (in this order) is expected to take, and how many of
    /// them the root never ran. `launch_warmup_s` is the profile's warm-up of a launch's first
    /// cell; `no_launch_s` the overhead when the root has no launch to learn it from.
    pub(crate) fn estimate_s(
        &self,
        cells: &[PlannedCell],
        launch_warmup_s: f64,
        no_launch_s: f64,
    ) -> (f64, usize) {
        let mut total = BETWEEN_LAUNCHES_S + self.overhead_s.unwrap_or(no_launch_s);
        let mut unseen = 0;
        for (i, c) in cells.iter().enumerate() {
            // The first cell carries the launch's warm-up (launch::run raises its warm-up so).
            let warmup = if i == 0 {
                c.warmup_s.max(launch_warmup_s)
            } else {
                c.warmup_s
            };
            let rest = match self.cell_s.get(&resume::key(c)) {
                Some(&s) => s,
                None => {
                    unseen += 1;
                    let send = c.duration_s.max(c.min_completed as f64 / c.cell.rate);
                    send + self.drain_s.unwrap_or(c.max_cell_s)
                }
            };
            total += (warmup + rest).min(c.max_cell_s + CANCEL_GRACE_S);
        }
        (total, unseen)
    }
}

/// The sweep's `--end-by`: the deadline and whether a launch was held back (then no later one
/// starts, on any slot).
#[derive(Debug)]
pub(crate) struct EndBy {
    pub unix_ms: Option<u64>,
    held_back: std::sync::atomic::AtomicUsize,
    /// `--dry-run`: when the launches listed so far would end (unix ms; `ctax run`'s start
    /// before any).
    dry_clock_ms: std::sync::atomic::AtomicU64,
}

/// What `--end-by` says of a launch that would start at some time.
pub(crate) enum Weighed {
    /// It starts; it is expected to end at this unix ms.
    Starts(u64),
    /// Held back: an earlier launch was.
    AfterHeld,
    /// Held back: it would end at this unix ms, after the deadline.
    TooLate(u64),
}

impl EndBy {
    pub(crate) fn new(unix_ms: Option<u64>) -> EndBy {
        EndBy {
            unix_ms,
            held_back: Default::default(),
            dry_clock_ms: super::server::unix_ms().into(),
        }
    }

    /// The one rule, for a run and its dry run alike: a launch starting at `start_ms` and
    /// expected to take `secs` starts unless a launch was held back before it or it would end
    /// after the deadline; a launch held back is counted.
    pub(crate) fn weigh(&self, start_ms: u64, secs: f64) -> Weighed {
        use std::sync::atomic::Ordering::SeqCst;
        let ends = start_ms + (secs * 1000.0) as u64;
        let verdict = if self.held_back() > 0 {
            Weighed::AfterHeld
        } else if self.unix_ms.is_some_and(|d| ends > d) {
            Weighed::TooLate(ends)
        } else {
            return Weighed::Starts(ends);
        };
        self.held_back.fetch_add(1, SeqCst);
        verdict
    }

    /// The dry run's clock: when `ctax run` began, then where the last listed stage ended.
    pub(crate) fn dry_clock_ms(&self) -> u64 {
        self.dry_clock_ms.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn set_dry_clock_ms(&self, ms: u64) {
        self.dry_clock_ms
            .store(ms, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn held_back(&self) -> usize {
        self.held_back.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The expected seconds of a launch running `cells` under `ctx`'s profile, and how many of
/// them the root never ran.
pub(super) fn expected_s(ctx: &Ctx, cells: &[PlannedCell]) -> (f64, usize) {
    expected_s_from(&LaunchTimes::of_root(&ctx.root), ctx, cells)
}

/// [`expected_s`] from times already read.
pub(super) fn expected_s_from(
    times: &LaunchTimes,
    ctx: &Ctx,
    cells: &[PlannedCell],
) -> (f64, usize) {
    let s = &ctx.profile.server;
    times.estimate_s(
        cells,
        ctx.profile.launch_warmup_s,
        s.startup_timeout_s + s.stop_grace_s,
    )
}

/// `~7.3 min expected`, `~95 s expected (1 cell never run in this root: its time is a guess)`.
pub(crate) fn expected_text((secs, unseen): (f64, usize)) -> String {
    let unseen = match unseen {
        0 => String::new(),
        1 => " (1 cell never run in this root: its time is a guess)".to_owned(),
        n => format!(" ({n} cells never run in this root: their time is a guess)"),
    };
    format!("~{} expected{unseen}", secs_text(secs))
}

/// Before `what` (`plain l3 stage A`) starts with `cells` left: `true` (and a log line) when
/// `--end-by` holds it back, because an earlier launch was held back or because it is not
/// expected to end by the deadline.
pub(super) fn hold_back(ctx: &Ctx, what: &str, cells: &[PlannedCell]) -> bool {
    use crate::report::fmt::unix_ms as utc;
    let Some(deadline) = ctx.end_by.unix_ms else {
        return false;
    };
    let est = expected_s(ctx, cells);
    match ctx.end_by.weigh(super::server::unix_ms(), est.0) {
        Weighed::Starts(ends) => {
            eprintln!(
                "[ctax] {what}: {}, ends by {} (--end-by {})",
                expected_text(est),
                utc(ends),
                utc(deadline)
            );
            false
        }
        Weighed::TooLate(ends) => {
            eprintln!(
                "[ctax] {what}: not started: {}, it would end at {}, after --end-by {}; no \
                 later launch of this sweep starts",
                expected_text(est),
                utc(ends),
                utc(deadline)
            );
            true
        }
        Weighed::AfterHeld => {
            eprintln!(
                "[ctax] {what}: not started (--end-by {}: an earlier launch was held back)",
                utc(deadline)
            );
            true
        }
    }
}

/// `95 s`, `7.3 min`.
pub(crate) fn secs_text(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else {
        format!("{:.1} min", s / 60.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctax_schema::{Arrival, Cell, CellHealth, Phase, RunSummary};

    #[test]
    fn deadlines_parse_in_every_form() {
        let now = 1_000_000;
        assert_eq!(parse("+25m", now).unwrap(), now + 1_500_000);
        assert_eq!(parse("+1h30m", now).unwrap(), now + 5_400_000);
        assert_eq!(parse("+1h2m3s", now).unwrap(), now + 3_723_000);
        assert_eq!(parse("+1500s", now).unwrap(), now + 1_500_000);
        assert_eq!(parse("+1500", now).unwrap(), now + 1_500_000);
        assert_eq!(parse("@1796459400", now).unwrap(), 1_796_459_400_000);
        // `date -u -d 2026-12-05T15:10:00Z +%s` = 1796483400.
        assert_eq!(
            parse("2026-12-05T15:10:00Z", now).unwrap(),
            1_796_483_400_000
        );
        for bad in [
            "",
            "+",
            "+m",
            "+25x",
            "+30m1h",
            "+5m5m",
            "+1h30",
            "@",
            "@x",
            "25m",
            "2026-12-05 15:10:00Z",
            "2026-12-05T15:10:00",
            "2026-13-05T15:10:00Z",
            // Dates that do not exist, signs, and numbers too large for a deadline.
            "2026-02-31T00:00:00Z",
            "2026-12-05T15:10:60Z",
            "@+123",
            "@-1",
            "+99999999999999999s",
            "+5124095576030431h",
            "@18446744073709552",
            "@99999999999999999999",
        ] {
            let e = parse(bad, now).expect_err(bad).to_string();
            assert!(
                e.contains("--end-by") && e.contains("+DURATION"),
                "{bad}: {e}"
            );
        }
    }

    fn cell(rate: f64, warmup_s: f64) -> PlannedCell {
        PlannedCell {
            phase: Phase::A,
            cell: Cell {
                rate,
                input_len: 4096,
                output_len: 256,
            },
            arrival: Arrival::default(),
            duration_s: 40.0,
            warmup_s,
            min_completed: 80,
            max_cell_s: 300.0,
            inflight_cap: 256,
            seed: 1,
        }
    }

    fn health(rate: f64, start_s: f64, last_send_s: f64, end_s: f64) -> CellHealth {
        let ns = |s: f64| (s * 1e9) as u64;
        CellHealth {
            phase: Phase::A,
            cell: Cell {
                rate,
                input_len: 4096,
                output_len: 256,
            }
            .name(),
            rate,
            input_len: 4096,
            output_len: 256,
            arrival: Arrival::default(),
            seed: 1,
            t_start_ns: ns(start_s),
            t_warmup_end_ns: ns(start_s + 10.0),
            t_last_send_ns: ns(last_send_s),
            t_end_ns: ns(end_s),
            wall_start_unix_ms: 0,
            scheduled: 1,
            sent: 1,
            dropped: 0,
            ok: 1,
            errors: 0,
            cancelled: 0,
            completed_measured: 1,
            complete: true,
            incomplete_reason: None,
            lateness_us_p50: 0.0,
            lateness_us_p99: 0.0,
            lateness_us_max: 0.0,
            client_cpu_pct: 0.0,
            scrapes: 0,
            scrape_failures: 0,
        }
    }

    /// A run directory with `cells` and its manifest row (`span`: start in unix ms, seconds).
    fn add_run(root: &Path, name: &str, status: RowStatus, span: (u64, f64), cells: &[CellHealth]) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let rc = ctax_schema::RunConfig {
            schema_version: 1,
            config: "plain".into(),
            launch: 0,
            run_dir: name.into(),
            phases: vec![Phase::A],
            cells: Vec::new(),
            model: "m".into(),
            served_model_name: "m".into(),
            port: 8000,
            extra: serde_json::json!({"stage": "A"}),
            simulated: true,
            placement: None,
        };
        std::fs::write(dir.join("config.json"), serde_json::to_vec(&rc).unwrap()).unwrap();
        let mut s = RunSummary::default();
        for h in cells {
            s.cells.insert(format!("A/{}", h.cell), h.clone());
        }
        std::fs::write(dir.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
        let mut row = manifest::row("1 Phase A", "plain", 0, span.0);
        row.run_dir = Some(name.to_owned());
        row.status = status;
        row.duration_s = span.1;
        manifest::append(root, &row).unwrap();
    }

    /// Expected values by hand from the fixture's times.
    #[test]
    fn a_launch_is_estimated_from_the_root_s_slowest_overhead_and_cells() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Every cell's warm-up ends 10 s after its start; rows start at unix 0 unless said.
        // Launch 1: r2 took 60 s (50 after warm-up, drain 5), r4 80 s (70, drain 20); 200 s in
        // all → overhead 60.
        add_run(
            root,
            "20261205-100000_plain_l0",
            RowStatus::Ok,
            (0, 200.0),
            &[
                health(2.0, 0.0, 55.0, 60.0),
                health(4.0, 100.0, 160.0, 180.0),
            ],
        );
        // Launch 2: r2 took 70 s (60 after warm-up, drain 8); 160 s in all → overhead 90.
        add_run(
            root,
            "20261205-110000_plain_l1",
            RowStatus::Ok,
            (0, 160.0),
            &[health(2.0, 0.0, 62.0, 70.0)],
        );
        // A resumed launch: its row (unix 1000 s, 200 s) reran r4 (80 s), while its summary
        // also holds the r2 of the attempt before (wall start 0, 70 s): overhead 200 - 80 =
        // 120, the largest (not 200 - 150).
        let mut rerun = health(4.0, 0.0, 60.0, 80.0);
        rerun.wall_start_unix_ms = 1_010_000;
        add_run(
            root,
            "20261205-120000_plain_l2",
            RowStatus::Ok,
            (1_000_000, 200.0),
            &[health(2.0, 0.0, 62.0, 70.0), rerun],
        );
        // An interrupted launch's row teaches no overhead, but its complete cell's time counts
        // (r4 95 s, 85 after warm-up), and its cell cut short (r2, 200 s after warm-up, the
        // server dead) does not.
        let mut cut = health(2.0, 0.0, 150.0, 210.0);
        cut.complete = false;
        cut.incomplete_reason = Some("server died".into());
        add_run(
            root,
            "20261205-130000_plain_l3",
            RowStatus::Interrupted,
            (0, 5.0),
            &[health(4.0, 0.0, 90.0, 95.0), cut],
        );
        let t = LaunchTimes::of_root(root);
        assert_eq!(t.overhead_s, Some(120.0));
        assert_eq!(t.drain_s, Some(20.0));
        assert_eq!(t.cell_s.get("A/r2_i4096_o256"), Some(&60.0));
        assert_eq!(t.cell_s.get("A/r4_i4096_o256"), Some(&85.0));
        // 15 between launches + overhead 120; r2 first: the launch warm-up 30 (its own is 10)
        // + 60; r4: 10 + 85; r1, never run: 10 + max(40, 80 / 1) + 20 drain.
        // 135 + 90 + 95 + 110 = 430.
        let cells = [cell(2.0, 10.0), cell(4.0, 10.0), cell(1.0, 10.0)];
        assert_eq!(t.estimate_s(&cells, 30.0, 999.0), (430.0, 1));
        // r4 first instead: 135 + (30 + 85) + (10 + 60) = 320.
        let swapped = [cell(4.0, 10.0), cell(2.0, 10.0)];
        assert_eq!(t.estimate_s(&swapped, 30.0, 999.0), (320.0, 0));
        // A cell never run is capped at its max_cell_s + 1 s: rate 0.1 → 10 + 800 + 20 > 301.
        assert_eq!(t.estimate_s(&[cell(0.1, 10.0)], 0.0, 999.0), (436.0, 1));
        // An empty root: the fallback overhead, and unseen cells without a drain take their cap.
        let empty = LaunchTimes::of_root(&root.join("none"));
        assert_eq!(empty, LaunchTimes::default());
        assert_eq!(empty.estimate_s(&[cell(2.0, 10.0)], 0.0, 100.0), (416.0, 1));
    }

    /// The rule a run and its dry run share, with a deadline at 10 s.
    #[test]
    fn a_launch_starts_unless_it_ends_late_or_follows_one_held_back() {
        let e = EndBy::new(Some(10_000));
        assert!(
            matches!(e.weigh(0, 10.0), Weighed::Starts(10_000)),
            "ends on the deadline"
        );
        assert_eq!(e.held_back(), 0);
        assert!(matches!(e.weigh(6_000, 5.0), Weighed::TooLate(11_000)));
        assert!(
            matches!(e.weigh(0, 1.0), Weighed::AfterHeld),
            "short, but after one held"
        );
        assert_eq!(e.held_back(), 2);
        let none = EndBy::new(None);
        assert!(matches!(none.weigh(u64::MAX / 2, 1e9), Weighed::Starts(_)));
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(secs_text(95.4), "95 s");
        assert_eq!(secs_text(438.0), "7.3 min");
    }
}
